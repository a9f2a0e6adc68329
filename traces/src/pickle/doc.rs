//! The parsed document: an arena of containers plus string and byte arenas
//! ([`PickleDoc`]), the values the reader stores in them ([`Slot`], [`Node`])
//! and the reading limits ([`ReadOptions`]). The borrowed read API over it
//! ([`ValueRef`](super::ValueRef) and the container views) is in `refs`.

use std::cell::Cell;
use std::collections::hash_map::RandomState;

use super::key_index::KeyIndex;

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
    /// A container whose contents were handed to a list sink (the `sink`
    /// module) and freed while the pickle was read (a snapshot's trace
    /// entry). Any read of it marks the document
    /// ([`PickleDoc::retired_touched`]), so that the reader of a streamed
    /// parse knows to read the file whole.
    Retired,
}

/// Limits for [`PickleDoc::from_slice_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadOptions {
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
pub(crate) const MAX_INPUT_LEN: usize = 1 << 30;

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
/// and of bounded depth.
///
/// ```
/// use vramlab_traces::{PickleDoc, Value};
/// // pickle.dumps({'a': [1, 2]}, protocol=2)
/// let doc = PickleDoc::from_slice(b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01]q\x02(K\x01K\x02es.")?;
/// assert_eq!(doc.root().to_value(), Value::dict([("a", Value::list([1, 2]))]));
/// # Ok::<(), vramlab_traces::PickleError>(())
/// ```
pub struct PickleDoc {
    pub(crate) strings: String,
    pub(crate) bytes: Vec<u8>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: Slot,
    pub(crate) hasher: RandomState,
    pub(crate) protocol: Option<u8>,
    pub(crate) bytes_read: usize,
    /// Set when a [`Node::Retired`] container was read.
    pub(crate) retired_touched: Cell<bool>,
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
            retired_touched: Cell::new(false),
        }
    }

    /// Number of containers in the arena; every `NodeId::index` of this
    /// document is below it, so a consumer can cache per shared object in
    /// a `Vec` of this length.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The protocol named by the pickle's `PROTO` opcode, if it has one
    /// (protocols 0 and 1 have none).
    #[cfg(test)]
    pub(crate) fn protocol(&self) -> Option<u8> {
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

    /// The container `id`; `None` (and the document marked) for one whose
    /// contents were handed to a sink and freed.
    #[inline]
    pub(crate) fn node(&self, id: u32) -> Option<&Node> {
        match self.nodes.get(id as usize) {
            Some(Node::Retired) => {
                self.retired_touched.set(true);
                None
            }
            n => n,
        }
    }

    /// Whether a container freed by a sink was read since the parse began:
    /// then what was read of it is not the file's, and the caller reads the
    /// file again without a sink.
    pub(crate) fn retired_touched(&self) -> bool {
        self.retired_touched.get()
    }
}

/// Identity of a container in a [`PickleDoc`]: two values with the same id
/// are the same Python object (for example one stack frame referenced from
/// many trace entries through the memo).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct NodeId(pub(crate) u32);

impl NodeId {
    /// Dense index, below [`PickleDoc::node_count`].
    #[cfg(test)]
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

/// Python's name for the type of `slot` (what `ValueRef::type_name` gives).
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
            Some(Node::Retired) | None => "NoneType",
        },
    }
}
