//! The borrowed read API over a [`PickleDoc`]: [`ValueRef`], [`View`], and
//! the container views [`ListRef`], [`DictRef`], [`SetRef`] with their
//! iterators.

use std::fmt;

use super::bigint::BigInt;
use super::doc::{DictNode, Node, NodeId, PickleDoc, SetNode, Slot, slot_type_name};
use super::keys::Keys;

impl PickleDoc {
    /// The value the pickle returns (the argument of `pickle.dump`).
    pub fn root(&self) -> ValueRef<'_> {
        ValueRef {
            doc: self,
            slot: self.root,
        }
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

/// A value inside a [`PickleDoc`]: cheap to copy, borrows the document.
///
/// The `as_*` accessors return `None` when the value has another type;
/// `ValueRef::view` gives a `match`-able form.
#[derive(Clone, Copy)]
pub struct ValueRef<'d> {
    pub(crate) doc: &'d PickleDoc,
    pub(crate) slot: Slot,
}

/// A [`ValueRef`] unpacked by type, for `match`.
#[derive(Debug, Clone)]
pub(crate) enum View<'d> {
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
    /// The value unpacked by type.
    pub(crate) fn view(&self) -> View<'d> {
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
                // Node ids in slots always index the arena; `node` answers
                // `None` for a freed container (and marks the document).
                Some(Node::Retired) | None => View::None,
            },
        }
    }

    /// Python's name for the value's type: `NoneType`, `bool`, `int`,
    /// `float`, `str`, `bytes`, `bytearray`, `list`, `tuple`, `dict`,
    /// `set` or `frozenset`.
    pub(crate) fn type_name(&self) -> &'static str {
        slot_type_name(self.doc, self.slot)
    }

    /// Whether the value is `None`.
    pub(crate) fn is_none(&self) -> bool {
        matches!(self.slot, Slot::None)
    }

    /// A `bool`.
    #[cfg(test)]
    pub(crate) fn as_bool(&self) -> Option<bool> {
        match self.slot {
            Slot::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// An `int` that fits `i64` (not a `bool`).
    #[cfg(test)]
    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self.slot {
            Slot::Int(i) => Some(i),
            _ => None,
        }
    }

    /// A non-negative `int` that fits `u64` (addresses above 2^63 are big
    /// ints in the pickle and are covered).
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self.slot {
            Slot::Int(i) => u64::try_from(i).ok(),
            Slot::BigInt(sp) => BigInt::from_signed_le_bytes(self.doc.bytes_of(sp)).to_u64(),
            _ => None,
        }
    }

    /// Any `int` as an `i128`, if it fits.
    #[cfg(test)]
    pub(crate) fn as_i128(&self) -> Option<i128> {
        match self.slot {
            Slot::Int(i) => Some(i128::from(i)),
            Slot::BigInt(sp) => BigInt::from_signed_le_bytes(self.doc.bytes_of(sp)).to_i128(),
            _ => None,
        }
    }

    /// Any `int` (of any size) as a [`BigInt`].
    #[cfg(test)]
    pub(crate) fn as_big_int(&self) -> Option<BigInt> {
        match self.slot {
            Slot::Int(i) => Some(BigInt::from(i)),
            Slot::BigInt(sp) => Some(BigInt::from_signed_le_bytes(self.doc.bytes_of(sp))),
            _ => None,
        }
    }

    /// A `float`, or an `int` converted to the nearest `f64` (like
    /// Python's `float(x)`; not `bool`).
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self.slot {
            Slot::Float(f) => Some(f),
            Slot::Int(i) => Some(i as f64),
            Slot::BigInt(sp) => Some(BigInt::from_signed_le_bytes(self.doc.bytes_of(sp)).to_f64()),
            _ => None,
        }
    }

    /// A `str`.
    pub(crate) fn as_str(&self) -> Option<&'d str> {
        match self.slot {
            Slot::Str(sp) => Some(self.doc.str_of(sp)),
            _ => None,
        }
    }

    /// A `bytes` or `bytearray`.
    #[cfg(test)]
    pub(crate) fn as_bytes(&self) -> Option<&'d [u8]> {
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
    pub(crate) fn as_list(&self) -> Option<ListRef<'d>> {
        match self.view() {
            View::List(l) => Some(l),
            _ => None,
        }
    }

    /// A `tuple`.
    #[cfg(test)]
    pub(crate) fn as_tuple(&self) -> Option<ListRef<'d>> {
        match self.view() {
            View::Tuple(l) => Some(l),
            _ => None,
        }
    }

    /// A `list` or a `tuple`.
    pub(crate) fn as_seq(&self) -> Option<ListRef<'d>> {
        match self.view() {
            View::List(l) | View::Tuple(l) => Some(l),
            _ => None,
        }
    }

    /// A `dict`.
    pub(crate) fn as_dict(&self) -> Option<DictRef<'d>> {
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
    #[cfg(test)]
    pub(crate) fn as_set(&self) -> Option<SetRef<'d>> {
        match self.view() {
            View::Set(s) | View::FrozenSet(s) => Some(s),
            _ => None,
        }
    }

    /// `self[key]` for a dict with `str` keys; `None` when the value is no
    /// dict or has no such key.
    #[cfg(test)]
    pub(crate) fn get(&self, key: &str) -> Option<ValueRef<'d>> {
        self.as_dict()?.get(key)
    }

    /// `self[i]` for a list or tuple.
    #[cfg(test)]
    pub(crate) fn index(&self, i: usize) -> Option<ValueRef<'d>> {
        self.as_seq()?.get(i)
    }

    /// Number of elements of a container (`len()` of a str counts bytes of
    /// its UTF-8 form); `None` for scalars.
    #[cfg(test)]
    pub(crate) fn len(&self) -> Option<usize> {
        Some(match self.view() {
            View::List(l) | View::Tuple(l) => l.len(),
            View::Dict(d) => d.len(),
            View::Set(s) | View::FrozenSet(s) => s.len(),
            View::Str(s) => s.len(),
            View::Bytes(b) | View::ByteArray(b) => b.len(),
            _ => return None,
        })
    }

    /// Identity of the container, `None` for a scalar, without reading the
    /// container (which a streamed read may have freed).
    pub(crate) fn node_id_unread(&self) -> Option<NodeId> {
        match self.slot {
            Slot::Node(id) => Some(NodeId(id)),
            _ => None,
        }
    }

    /// Identity of the container (list, tuple, dict, set, frozenset,
    /// bytearray), `None` for other values. Values reached through the same
    /// memo entry have the same id.
    #[cfg(test)]
    pub(crate) fn node_id(&self) -> Option<NodeId> {
        match self.slot {
            Slot::Node(id) => Some(NodeId(id)),
            _ => None,
        }
    }

    /// Whether two values are the same Python object: the same container,
    /// or the same memoized string, or equal scalars.
    #[cfg(test)]
    pub(crate) fn same_object(&self, other: &ValueRef<'_>) -> bool {
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
pub(crate) struct ListRef<'d> {
    doc: &'d PickleDoc,
    items: &'d [Slot],
    id: u32,
}

impl<'d> ListRef<'d> {
    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are no elements.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Element `i`.
    pub(crate) fn get(&self, i: usize) -> Option<ValueRef<'d>> {
        self.items.get(i).map(|&slot| ValueRef {
            doc: self.doc,
            slot,
        })
    }

    /// The elements in order.
    pub(crate) fn iter(&self) -> ListIter<'d> {
        ListIter {
            doc: self.doc,
            inner: self.items.iter().step_by(1),
        }
    }

    /// Identity of this container.
    pub(crate) fn node_id(&self) -> NodeId {
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
pub(crate) struct ListIter<'d> {
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
pub(crate) struct DictRef<'d> {
    doc: &'d PickleDoc,
    dict: &'d DictNode,
    id: u32,
}

impl<'d> DictRef<'d> {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.dict.entries.len()
    }

    fn value_at(&self, i: usize) -> Option<ValueRef<'d>> {
        self.dict.entries.get(i).map(|e| ValueRef {
            doc: self.doc,
            slot: e[1],
        })
    }

    /// The value of the `str` key `key`.
    pub(crate) fn get(&self, key: &str) -> Option<ValueRef<'d>> {
        let keys = Keys::of_dict(&self.dict.entries);
        let i = self
            .doc
            .find_str_key(keys, self.dict.index.as_deref(), key)?;
        self.value_at(i)
    }

    /// The value of the `int` key `key` (also finds `True`/`False` and
    /// integral float keys, as Python does).
    #[cfg(test)]
    pub(crate) fn get_int(&self, key: i64) -> Option<ValueRef<'d>> {
        let keys = Keys::of_dict(&self.dict.entries);
        let i = self
            .doc
            .find_int_key(keys, self.dict.index.as_deref(), key)?;
        self.value_at(i)
    }

    /// `(key, value)` pairs in insertion order.
    pub(crate) fn iter(&self) -> DictIter<'d> {
        DictIter {
            doc: self.doc,
            inner: self.dict.entries.iter(),
        }
    }

    /// Keys in insertion order.
    pub(crate) fn keys(&self) -> ListIter<'d> {
        ListIter {
            doc: self.doc,
            inner: self.dict.entries.as_flattened().iter().step_by(2),
        }
    }

    /// Values in insertion order.
    #[cfg(test)]
    pub(crate) fn values(&self) -> ListIter<'d> {
        let flat = self.dict.entries.as_flattened();
        ListIter {
            doc: self.doc,
            inner: flat.get(1..).unwrap_or(&[]).iter().step_by(2),
        }
    }

    /// Identity of this container.
    pub(crate) fn node_id(&self) -> NodeId {
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
pub(crate) struct DictIter<'d> {
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
pub(crate) struct SetRef<'d> {
    doc: &'d PickleDoc,
    set: &'d SetNode,
    id: u32,
}

impl<'d> SetRef<'d> {
    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.set.items.len()
    }

    /// Whether the `str` element `s` is in the set.
    #[cfg(test)]
    pub(crate) fn contains_str(&self, s: &str) -> bool {
        let keys = Keys::of_set(&self.set.items);
        self.doc
            .find_str_key(keys, self.set.index.as_deref(), s)
            .is_some()
    }

    /// Whether the `int` element `i` is in the set.
    #[cfg(test)]
    pub(crate) fn contains_int(&self, i: i64) -> bool {
        let keys = Keys::of_set(&self.set.items);
        self.doc
            .find_int_key(keys, self.set.index.as_deref(), i)
            .is_some()
    }

    /// The elements.
    pub(crate) fn iter(&self) -> ListIter<'d> {
        ListIter {
            doc: self.doc,
            inner: self.set.items.iter().step_by(1),
        }
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
