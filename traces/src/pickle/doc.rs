//! The parsed document: an arena of containers plus string and byte arenas,
//! and the borrowed read API over it ([`ValueRef`], [`ListRef`],
//! [`DictRef`], [`SetRef`], [`View`]).

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::fmt;

use super::bigint::{self, BigInt};
use super::keys::{KeyIndex, Keys};

/// A range in one of the document's arenas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: u32,
    pub(crate) len: u32,
}

impl Span {
    fn range(self) -> std::ops::Range<usize> {
        let start = self.start as usize;
        start..start + self.len as usize
    }
}

/// One value as the pickle machine's stack and the containers hold it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Slot {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// Text in [`PickleDoc::strings`].
    Str(Span),
    /// Bytes in [`PickleDoc::bytes`].
    Bytes(Span),
    /// Shortest two's complement little-endian bytes in
    /// [`PickleDoc::bytes`]; only for values outside `i64`.
    BigInt(Span),
    /// A container (or bytearray) in [`PickleDoc::nodes`].
    Node(u32),
}

/// A tuple: immutable, hashable when all its elements are.
#[derive(Debug)]
pub(crate) struct TupleNode {
    pub(crate) items: Vec<Slot>,
    pub(crate) hashable: bool,
    /// Cached [`PickleDoc::key_hash`], computed when first used as a key.
    pub(crate) hash: Cell<Option<u64>>,
}

/// A dict: `[key, value]` entries in insertion order, keys unique.
#[derive(Debug, Default)]
pub(crate) struct DictNode {
    pub(crate) entries: Vec<[Slot; 2]>,
    pub(crate) index: Option<Box<KeyIndex>>,
}

/// A set or frozenset: elements in insertion order, unique.
#[derive(Debug, Default)]
pub(crate) struct SetNode {
    pub(crate) items: Vec<Slot>,
    pub(crate) index: Option<Box<KeyIndex>>,
    /// Hash of a frozenset (unused for sets).
    pub(crate) hash: u64,
}

/// A container: what memo references share.
#[derive(Debug)]
pub(crate) enum Node {
    List(Vec<Slot>),
    Tuple(TupleNode),
    Dict(DictNode),
    Set(SetNode),
    FrozenSet(SetNode),
    ByteArray(Span),
}

/// Limits for [`PickleDoc::from_slice_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    /// Deepest container nesting accepted in the returned value (a scalar
    /// has depth 0, a list of scalars depth 1). Documents that pass this
    /// check can be walked recursively by consumers without risk of stack
    /// overflow. Default 1000 (Python's default recursion limit).
    pub max_depth: usize,
    /// Largest input accepted, in bytes. Default and maximum 1 GiB (the
    /// arenas use 32-bit offsets); larger values are clamped.
    pub max_input_len: usize,
}

/// The hard cap on [`ReadOptions::max_input_len`].
pub const MAX_INPUT_LEN: usize = 1 << 30;

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            max_depth: 1000,
            max_input_len: MAX_INPUT_LEN,
        }
    }
}

/// A parsed pickle: every container lives once in an arena, so objects the
/// pickle shares through its memo (PyTorch's stack frames) stay shared, and
/// memory is proportional to the input.
///
/// Read it through [`PickleDoc::root`]. The document is immutable, acyclic
/// and no deeper than [`ReadOptions::max_depth`].
///
/// ```
/// use vramlab_traces::pickle::PickleDoc;
/// // pickle.dumps({'a': [1, 2]}, protocol=2)
/// let doc = PickleDoc::from_slice(b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01]q\x02(K\x01K\x02es.")?;
/// let a = doc.root().get("a").and_then(|v| v.as_list()).unwrap();
/// assert_eq!(a.iter().filter_map(|v| v.as_i64()).sum::<i64>(), 3);
/// # Ok::<(), vramlab_traces::pickle::PickleError>(())
/// ```
pub struct PickleDoc {
    pub(crate) strings: String,
    pub(crate) bytes: Vec<u8>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: Slot,
    pub(crate) hasher: RandomState,
    pub(crate) protocol: Option<u8>,
    pub(crate) bytes_read: usize,
}

impl PickleDoc {
    pub(crate) fn empty() -> PickleDoc {
        PickleDoc {
            strings: String::new(),
            bytes: Vec::new(),
            nodes: Vec::new(),
            root: Slot::None,
            hasher: RandomState::new(),
            protocol: None,
            bytes_read: 0,
        }
    }

    /// The value the pickle returns (the argument of `pickle.dump`).
    pub fn root(&self) -> ValueRef<'_> {
        ValueRef {
            doc: self,
            slot: self.root,
        }
    }

    /// Number of containers in the arena; every [`NodeId::index`] of this
    /// document is below it, so a consumer can cache per shared object in
    /// a `Vec` of this length.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The protocol named by the pickle's `PROTO` opcode, if it has one
    /// (protocols 0 and 1 have none).
    pub fn protocol(&self) -> Option<u8> {
        self.protocol
    }

    /// Bytes consumed, up to and including `STOP` (anything after it is
    /// ignored, as Python's `pickle.loads` does).
    pub fn bytes_read(&self) -> usize {
        self.bytes_read
    }

    pub(crate) fn str_of(&self, sp: Span) -> &str {
        // Spans are only made by the reader at char boundaries of `strings`;
        // `get` keeps a broken invariant from panicking.
        self.strings.get(sp.range()).unwrap_or("")
    }

    /// The UTF-8 bytes of a string span (no char-boundary checks).
    #[inline]
    pub(crate) fn str_bytes(&self, sp: Span) -> &[u8] {
        self.strings.as_bytes().get(sp.range()).unwrap_or(&[])
    }

    pub(crate) fn bytes_of(&self, sp: Span) -> &[u8] {
        self.bytes.get(sp.range()).unwrap_or(&[])
    }

    pub(crate) fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.get(id as usize)
    }
}

impl fmt::Debug for PickleDoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PickleDoc")
            .field("protocol", &self.protocol)
            .field("nodes", &self.nodes.len())
            .field("string_bytes", &self.strings.len())
            .field("root", &self.root())
            .finish()
    }
}

/// Identity of a container in a [`PickleDoc`]: two values with the same id
/// are the same Python object (for example one stack frame referenced from
/// many trace entries through the memo).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub(crate) u32);

impl NodeId {
    /// Dense index, below [`PickleDoc::node_count`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A value inside a [`PickleDoc`]: cheap to copy, borrows the document.
///
/// The `as_*` accessors return `None` when the value has another type;
/// [`ValueRef::view`] gives a `match`-able form.
#[derive(Clone, Copy)]
pub struct ValueRef<'d> {
    pub(crate) doc: &'d PickleDoc,
    pub(crate) slot: Slot,
}

/// A [`ValueRef`] unpacked by type, for `match`.
#[derive(Debug, Clone)]
pub enum View<'d> {
    /// `None`.
    None,
    /// `bool`.
    Bool(bool),
    /// `int` that fits `i64`.
    Int(i64),
    /// `int` outside `i64`.
    BigInt(BigInt),
    /// `float`.
    Float(f64),
    /// `str`.
    Str(&'d str),
    /// `bytes`.
    Bytes(&'d [u8]),
    /// `bytearray`.
    ByteArray(&'d [u8]),
    /// `list`.
    List(ListRef<'d>),
    /// `tuple`.
    Tuple(ListRef<'d>),
    /// `dict`.
    Dict(DictRef<'d>),
    /// `set`.
    Set(SetRef<'d>),
    /// `frozenset`.
    FrozenSet(SetRef<'d>),
}

impl<'d> ValueRef<'d> {
    /// The document this value belongs to.
    pub fn doc(&self) -> &'d PickleDoc {
        self.doc
    }

    /// The value unpacked by type.
    pub fn view(&self) -> View<'d> {
        let doc = self.doc;
        match self.slot {
            Slot::None => View::None,
            Slot::Bool(b) => View::Bool(b),
            Slot::Int(i) => View::Int(i),
            Slot::Float(f) => View::Float(f),
            Slot::Str(sp) => View::Str(doc.str_of(sp)),
            Slot::Bytes(sp) => View::Bytes(doc.bytes_of(sp)),
            Slot::BigInt(sp) => View::BigInt(BigInt::from_signed_le_bytes(doc.bytes_of(sp))),
            Slot::Node(id) => match doc.node(id) {
                Some(Node::List(items)) => View::List(ListRef { doc, items, id }),
                Some(Node::Tuple(t)) => View::Tuple(ListRef {
                    doc,
                    items: &t.items,
                    id,
                }),
                Some(Node::Dict(d)) => View::Dict(DictRef { doc, dict: d, id }),
                Some(Node::Set(s)) => View::Set(SetRef { doc, set: s, id }),
                Some(Node::FrozenSet(s)) => View::FrozenSet(SetRef { doc, set: s, id }),
                Some(Node::ByteArray(sp)) => View::ByteArray(doc.bytes_of(*sp)),
                // Node ids in slots always index the arena.
                None => View::None,
            },
        }
    }

    /// Python's name for the value's type: `NoneType`, `bool`, `int`,
    /// `float`, `str`, `bytes`, `bytearray`, `list`, `tuple`, `dict`,
    /// `set` or `frozenset`.
    pub fn type_name(&self) -> &'static str {
        slot_type_name(self.doc, self.slot)
    }

    /// Whether the value is `None`.
    pub fn is_none(&self) -> bool {
        matches!(self.slot, Slot::None)
    }

    /// A `bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match self.slot {
            Slot::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// An `int` that fits `i64` (not a `bool`).
    pub fn as_i64(&self) -> Option<i64> {
        match self.slot {
            Slot::Int(i) => Some(i),
            _ => None,
        }
    }

    /// A non-negative `int` that fits `u64` (addresses above 2^63 are big
    /// ints in the pickle and are covered).
    pub fn as_u64(&self) -> Option<u64> {
        match self.slot {
            Slot::Int(i) => u64::try_from(i).ok(),
            Slot::BigInt(sp) => BigInt::from_signed_le_bytes(self.doc.bytes_of(sp)).to_u64(),
            _ => None,
        }
    }

    /// Any `int` as an `i128`, if it fits.
    pub fn as_i128(&self) -> Option<i128> {
        match self.slot {
            Slot::Int(i) => Some(i128::from(i)),
            Slot::BigInt(sp) => BigInt::from_signed_le_bytes(self.doc.bytes_of(sp)).to_i128(),
            _ => None,
        }
    }

    /// Any `int` (of any size) as a [`BigInt`].
    pub fn as_big_int(&self) -> Option<BigInt> {
        match self.slot {
            Slot::Int(i) => Some(BigInt::from(i)),
            Slot::BigInt(sp) => Some(BigInt::from_signed_le_bytes(self.doc.bytes_of(sp))),
            _ => None,
        }
    }

    /// A `float`, or an `int` converted to the nearest `f64` (like
    /// Python's `float(x)`; not `bool`).
    pub fn as_f64(&self) -> Option<f64> {
        match self.slot {
            Slot::Float(f) => Some(f),
            Slot::Int(i) => Some(i as f64),
            Slot::BigInt(sp) => Some(BigInt::from_signed_le_bytes(self.doc.bytes_of(sp)).to_f64()),
            _ => None,
        }
    }

    /// A `str`.
    pub fn as_str(&self) -> Option<&'d str> {
        match self.slot {
            Slot::Str(sp) => Some(self.doc.str_of(sp)),
            _ => None,
        }
    }

    /// A `bytes` or `bytearray`.
    pub fn as_bytes(&self) -> Option<&'d [u8]> {
        match self.slot {
            Slot::Bytes(sp) => Some(self.doc.bytes_of(sp)),
            Slot::Node(id) => match self.doc.node(id) {
                Some(Node::ByteArray(sp)) => Some(self.doc.bytes_of(*sp)),
                _ => None,
            },
            _ => None,
        }
    }

    /// A `list`.
    pub fn as_list(&self) -> Option<ListRef<'d>> {
        match self.view() {
            View::List(l) => Some(l),
            _ => None,
        }
    }

    /// A `tuple`.
    pub fn as_tuple(&self) -> Option<ListRef<'d>> {
        match self.view() {
            View::Tuple(l) => Some(l),
            _ => None,
        }
    }

    /// A `list` or a `tuple`.
    pub fn as_seq(&self) -> Option<ListRef<'d>> {
        match self.view() {
            View::List(l) | View::Tuple(l) => Some(l),
            _ => None,
        }
    }

    /// A `dict`.
    pub fn as_dict(&self) -> Option<DictRef<'d>> {
        match self.slot {
            Slot::Node(id) => match self.doc.node(id) {
                Some(Node::Dict(d)) => Some(DictRef {
                    doc: self.doc,
                    dict: d,
                    id,
                }),
                _ => None,
            },
            _ => None,
        }
    }

    /// A `set` or a `frozenset`.
    pub fn as_set(&self) -> Option<SetRef<'d>> {
        match self.view() {
            View::Set(s) | View::FrozenSet(s) => Some(s),
            _ => None,
        }
    }

    /// `self[key]` for a dict with `str` keys; `None` when the value is no
    /// dict or has no such key.
    pub fn get(&self, key: &str) -> Option<ValueRef<'d>> {
        self.as_dict()?.get(key)
    }

    /// `self[i]` for a list or tuple.
    pub fn index(&self, i: usize) -> Option<ValueRef<'d>> {
        self.as_seq()?.get(i)
    }

    /// Number of elements of a container (`len()` of a str counts bytes of
    /// its UTF-8 form); `None` for scalars.
    pub fn len(&self) -> Option<usize> {
        Some(match self.view() {
            View::List(l) | View::Tuple(l) => l.len(),
            View::Dict(d) => d.len(),
            View::Set(s) | View::FrozenSet(s) => s.len(),
            View::Str(s) => s.len(),
            View::Bytes(b) | View::ByteArray(b) => b.len(),
            _ => return None,
        })
    }

    /// Whether a container, str or bytes has no elements; `None` for
    /// scalars.
    pub fn is_empty(&self) -> Option<bool> {
        self.len().map(|n| n == 0)
    }

    /// Identity of the container (list, tuple, dict, set, frozenset,
    /// bytearray), `None` for other values. Values reached through the same
    /// memo entry have the same id.
    pub fn node_id(&self) -> Option<NodeId> {
        match self.slot {
            Slot::Node(id) => Some(NodeId(id)),
            _ => None,
        }
    }

    /// Whether two values are the same Python object: the same container,
    /// or the same memoized string, or equal scalars.
    pub fn same_object(&self, other: &ValueRef<'_>) -> bool {
        std::ptr::eq(self.doc, other.doc)
            && match (self.slot, other.slot) {
                (Slot::Node(a), Slot::Node(b)) => a == b,
                (Slot::Str(a), Slot::Str(b))
                | (Slot::Bytes(a), Slot::Bytes(b))
                | (Slot::BigInt(a), Slot::BigInt(b)) => a == b,
                (Slot::None, Slot::None) => true,
                (Slot::Bool(a), Slot::Bool(b)) => a == b,
                (Slot::Int(a), Slot::Int(b)) => a == b,
                (Slot::Float(a), Slot::Float(b)) => a.to_bits() == b.to_bits(),
                _ => false,
            }
    }
}

pub(crate) fn slot_type_name(doc: &PickleDoc, slot: Slot) -> &'static str {
    match slot {
        Slot::None => "NoneType",
        Slot::Bool(_) => "bool",
        Slot::Int(_) | Slot::BigInt(_) => "int",
        Slot::Float(_) => "float",
        Slot::Str(_) => "str",
        Slot::Bytes(_) => "bytes",
        Slot::Node(id) => match doc.node(id) {
            Some(Node::List(_)) => "list",
            Some(Node::Tuple(_)) => "tuple",
            Some(Node::Dict(_)) => "dict",
            Some(Node::Set(_)) => "set",
            Some(Node::FrozenSet(_)) => "frozenset",
            Some(Node::ByteArray(_)) => "bytearray",
            None => "NoneType",
        },
    }
}

/// Shallow: scalars in full, containers as type, id and length (a document
/// may share subtrees many times; printing them all could be huge).
impl fmt::Debug for ValueRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.view() {
            View::None => f.write_str("None"),
            View::Bool(b) => f.write_str(if b { "True" } else { "False" }),
            View::Int(i) => write!(f, "{i}"),
            View::BigInt(b) => write!(f, "{b}"),
            View::Float(x) => write!(f, "{x:?}"),
            View::Str(s) => write!(f, "{s:?}"),
            View::Bytes(b) => write!(f, "b{:?}", String::from_utf8_lossy(b)),
            View::ByteArray(b) => write!(f, "bytearray({:?})", String::from_utf8_lossy(b)),
            View::List(l) => write!(f, "<list #{} len {}>", l.id, l.len()),
            View::Tuple(l) => write!(f, "<tuple #{} len {}>", l.id, l.len()),
            View::Dict(d) => write!(f, "<dict #{} len {}>", d.id, d.len()),
            View::Set(s) => write!(f, "<set #{} len {}>", s.id, s.len()),
            View::FrozenSet(s) => write!(f, "<frozenset #{} len {}>", s.id, s.len()),
        }
    }
}

/// A `list` or `tuple` of a [`PickleDoc`].
#[derive(Clone, Copy)]
pub struct ListRef<'d> {
    doc: &'d PickleDoc,
    items: &'d [Slot],
    id: u32,
}

impl<'d> ListRef<'d> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Option<ValueRef<'d>> {
        self.items.get(i).map(|&slot| ValueRef {
            doc: self.doc,
            slot,
        })
    }

    /// The elements in order.
    pub fn iter(&self) -> ListIter<'d> {
        ListIter {
            doc: self.doc,
            inner: self.items.iter().step_by(1),
        }
    }

    /// Identity of this container.
    pub fn node_id(&self) -> NodeId {
        NodeId(self.id)
    }
}

impl fmt::Debug for ListRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'d> IntoIterator for ListRef<'d> {
    type Item = ValueRef<'d>;
    type IntoIter = ListIter<'d>;
    fn into_iter(self) -> ListIter<'d> {
        self.iter()
    }
}

/// Iterator over the elements of a [`ListRef`] or [`SetRef`], or the keys
/// or values of a [`DictRef`].
#[derive(Clone)]
pub struct ListIter<'d> {
    doc: &'d PickleDoc,
    inner: std::iter::StepBy<std::slice::Iter<'d, Slot>>,
}

impl<'d> Iterator for ListIter<'d> {
    type Item = ValueRef<'d>;
    fn next(&mut self) -> Option<ValueRef<'d>> {
        let doc = self.doc;
        self.inner.next().map(|&slot| ValueRef { doc, slot })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl DoubleEndedIterator for ListIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let doc = self.doc;
        self.inner.next_back().map(|&slot| ValueRef { doc, slot })
    }
}

impl ExactSizeIterator for ListIter<'_> {}

/// A `dict` of a [`PickleDoc`]; iteration is in insertion order.
#[derive(Clone, Copy)]
pub struct DictRef<'d> {
    doc: &'d PickleDoc,
    dict: &'d DictNode,
    id: u32,
}

impl<'d> DictRef<'d> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.dict.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.dict.entries.is_empty()
    }

    fn value_at(&self, i: usize) -> Option<ValueRef<'d>> {
        self.dict.entries.get(i).map(|e| ValueRef {
            doc: self.doc,
            slot: e[1],
        })
    }

    /// The value of the `str` key `key`.
    pub fn get(&self, key: &str) -> Option<ValueRef<'d>> {
        let keys = Keys::of_dict(&self.dict.entries);
        let i = self
            .doc
            .find_str_key(keys, self.dict.index.as_deref(), key)?;
        self.value_at(i)
    }

    /// The value of the `int` key `key` (also finds `True`/`False` and
    /// integral float keys, as Python does).
    pub fn get_int(&self, key: i64) -> Option<ValueRef<'d>> {
        let keys = Keys::of_dict(&self.dict.entries);
        let i = self
            .doc
            .find_int_key(keys, self.dict.index.as_deref(), key)?;
        self.value_at(i)
    }

    /// `(key, value)` pairs in insertion order.
    pub fn iter(&self) -> DictIter<'d> {
        DictIter {
            doc: self.doc,
            inner: self.dict.entries.iter(),
        }
    }

    /// Keys in insertion order.
    pub fn keys(&self) -> ListIter<'d> {
        ListIter {
            doc: self.doc,
            inner: self.dict.entries.as_flattened().iter().step_by(2),
        }
    }

    /// Values in insertion order.
    pub fn values(&self) -> ListIter<'d> {
        let flat = self.dict.entries.as_flattened();
        ListIter {
            doc: self.doc,
            inner: flat.get(1..).unwrap_or(&[]).iter().step_by(2),
        }
    }

    /// Identity of this container.
    pub fn node_id(&self) -> NodeId {
        NodeId(self.id)
    }
}

impl fmt::Debug for DictRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<'d> IntoIterator for DictRef<'d> {
    type Item = (ValueRef<'d>, ValueRef<'d>);
    type IntoIter = DictIter<'d>;
    fn into_iter(self) -> DictIter<'d> {
        self.iter()
    }
}

/// Iterator over the entries of a [`DictRef`].
#[derive(Clone)]
pub struct DictIter<'d> {
    doc: &'d PickleDoc,
    inner: std::slice::Iter<'d, [Slot; 2]>,
}

impl<'d> Iterator for DictIter<'d> {
    type Item = (ValueRef<'d>, ValueRef<'d>);
    fn next(&mut self) -> Option<Self::Item> {
        let doc = self.doc;
        let &[k, v] = self.inner.next()?;
        Some((ValueRef { doc, slot: k }, ValueRef { doc, slot: v }))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl ExactSizeIterator for DictIter<'_> {}

/// A `set` or `frozenset` of a [`PickleDoc`]; iteration is in the order the
/// pickle added the elements.
#[derive(Clone, Copy)]
pub struct SetRef<'d> {
    doc: &'d PickleDoc,
    set: &'d SetNode,
    id: u32,
}

impl<'d> SetRef<'d> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.set.items.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.set.items.is_empty()
    }

    /// Whether the `str` element `s` is in the set.
    pub fn contains_str(&self, s: &str) -> bool {
        let keys = Keys::of_set(&self.set.items);
        self.doc
            .find_str_key(keys, self.set.index.as_deref(), s)
            .is_some()
    }

    /// Whether the `int` element `i` is in the set.
    pub fn contains_int(&self, i: i64) -> bool {
        let keys = Keys::of_set(&self.set.items);
        self.doc
            .find_int_key(keys, self.set.index.as_deref(), i)
            .is_some()
    }

    /// The elements.
    pub fn iter(&self) -> ListIter<'d> {
        ListIter {
            doc: self.doc,
            inner: self.set.items.iter().step_by(1),
        }
    }

    /// Identity of this container.
    pub fn node_id(&self) -> NodeId {
        NodeId(self.id)
    }
}

impl fmt::Debug for SetRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl<'d> IntoIterator for SetRef<'d> {
    type Item = ValueRef<'d>;
    type IntoIter = ListIter<'d>;
    fn into_iter(self) -> ListIter<'d> {
        self.iter()
    }
}

/// Converts an `i64` value held in little-endian bytes of any length to a
/// slot (an int when it fits, else a big int stored in the byte arena).
#[inline]
pub(crate) fn int_slot(doc: &mut PickleDoc, le: &[u8]) -> Slot {
    if le.len() <= 8 {
        // Sign extension of up to 8 bytes is the value.
        return Slot::Int(bigint::i64_from_le(le));
    }
    let le = bigint::minimal(le);
    let n = le.len();
    if n <= 8 {
        Slot::Int(bigint::i64_from_le(le))
    } else {
        let start = doc.bytes.len();
        doc.bytes.extend_from_slice(le);
        Slot::BigInt(Span {
            start: start as u32, // bytes arena < 4 GiB: input is capped at 1 GiB
            len: n as u32,
        })
    }
}
