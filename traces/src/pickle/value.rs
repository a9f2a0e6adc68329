//! An owned value tree for building pickles ([`Value`], [`DictBuilder`]),
//! with `Arc`-shared subtrees that [`PickleWriter`](super::PickleWriter)
//! writes once and references through the memo.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use super::bigint::BigInt;
use super::doc::{Node, Slot};
use super::refs::{ValueRef, View};

/// An owned Python plain-data value.
///
/// Containers are behind `Arc`: cloning a `Value` is cheap and shares the
/// container, and the writer writes a container that is referenced more
/// than once (the same `Arc`) a single time, then refers to it through the
/// pickle memo, exactly as Python's pickler does for shared objects. Build
/// shared parts (a stack frame, a frame list) once and clone them where
/// they are used.
///
/// Dict entries are kept in insertion order as given; the writer does not
/// deduplicate keys (Python keeps the last value of a duplicated key), and
/// keys should be hashable in Python (not lists, dicts or sets).
///
/// `bytearray` values read from a pickle become [`Value::Bytes`].
///
/// The writer, equality and `Debug` never recurse, but dropping a `Value`
/// nested tens of thousands of levels deep uses the stack like any nested
/// `Arc` tree (documents read with the default depth limit are fine).
#[derive(Clone)]
pub enum Value {
    /// `None`.
    None,
    /// `bool`.
    Bool(bool),
    /// `int` within `i64`.
    Int(i64),
    /// `int` of any size (the writer writes values that fit `i64` as it
    /// writes [`Value::Int`]).
    BigInt(BigInt),
    /// `float`.
    Float(f64),
    /// `str`.
    Str(Arc<str>),
    /// `bytes` (protocol 3+; PyTorch's JavaScript viewer cannot read it).
    Bytes(Arc<[u8]>),
    /// `list`.
    List(Arc<Vec<Value>>),
    /// `tuple`.
    Tuple(Arc<Vec<Value>>),
    /// `dict`, entries in insertion order.
    Dict(Arc<Vec<(Value, Value)>>),
    /// `set` (PyTorch's JavaScript viewer cannot read it).
    Set(Arc<Vec<Value>>),
    /// `frozenset` (PyTorch's JavaScript viewer cannot read it).
    FrozenSet(Arc<Vec<Value>>),
}

impl Value {
    /// A `bytes`.
    #[cfg(test)]
    pub(crate) fn bytes(b: impl Into<Arc<[u8]>>) -> Value {
        Value::Bytes(b.into())
    }

    /// A `list` of the items.
    pub fn list<T: Into<Value>>(items: impl IntoIterator<Item = T>) -> Value {
        Value::List(Arc::new(items.into_iter().map(Into::into).collect()))
    }

    /// A `tuple` of the items.
    pub fn tuple<T: Into<Value>>(items: impl IntoIterator<Item = T>) -> Value {
        Value::Tuple(Arc::new(items.into_iter().map(Into::into).collect()))
    }

    /// A `set` of the items (assumed distinct).
    #[cfg(test)]
    pub(crate) fn set<T: Into<Value>>(items: impl IntoIterator<Item = T>) -> Value {
        Value::Set(Arc::new(items.into_iter().map(Into::into).collect()))
    }

    /// A `frozenset` of the items (assumed distinct).
    #[cfg(test)]
    pub(crate) fn frozenset<T: Into<Value>>(items: impl IntoIterator<Item = T>) -> Value {
        Value::FrozenSet(Arc::new(items.into_iter().map(Into::into).collect()))
    }

    /// A `dict` of the pairs, in order.
    pub fn dict<K: Into<Value>, V: Into<Value>>(pairs: impl IntoIterator<Item = (K, V)>) -> Value {
        Value::Dict(Arc::new(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        ))
    }

    /// Python's name for the value's type (see [`ValueRef::type_name`]).
    #[cfg(test)]
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::None => "NoneType",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::BigInt(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
            Value::Set(_) => "set",
            Value::FrozenSet(_) => "frozenset",
        }
    }

    /// Whether the value is `None`.
    #[cfg(test)]
    pub(crate) fn is_none(&self) -> bool {
        matches!(self, Value::None)
    }

    /// A `bool`.
    #[cfg(test)]
    pub(crate) fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// An `int` that fits `i64`.
    #[cfg(test)]
    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::BigInt(b) => b.to_i64(),
            _ => None,
        }
    }

    /// A non-negative `int` that fits `u64`.
    #[cfg(test)]
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(i) => u64::try_from(*i).ok(),
            Value::BigInt(b) => b.to_u64(),
            _ => None,
        }
    }

    /// A `float`, or an `int` converted to `f64`.
    #[cfg(test)]
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            Value::Int(i) => Some(*i as f64),
            Value::BigInt(b) => Some(b.to_f64()),
            _ => None,
        }
    }

    /// A `str`.
    #[cfg(test)]
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A `bytes`.
    #[cfg(test)]
    pub(crate) fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// The items of a `list`.
    #[cfg(test)]
    pub(crate) fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    /// The items of a `list` or `tuple`.
    #[cfg(test)]
    pub(crate) fn as_seq(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) | Value::Tuple(l) => Some(l),
            _ => None,
        }
    }

    /// The entries of a `dict`.
    #[cfg(test)]
    pub(crate) fn as_dict(&self) -> Option<&[(Value, Value)]> {
        match self {
            Value::Dict(d) => Some(d),
            _ => None,
        }
    }

    /// `self[key]` for a dict with `str` keys (the last entry wins, as in
    /// Python). Linear in the dict's size.
    #[cfg(test)]
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        self.as_dict()?
            .iter()
            .rev()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// Address of the shared container (`None` for scalars and strings):
    /// equal for clones of one container.
    pub(crate) fn container_ptr(&self) -> Option<*const ()> {
        Some(match self {
            Value::List(a) | Value::Tuple(a) | Value::Set(a) | Value::FrozenSet(a) => {
                Arc::as_ptr(a).cast()
            }
            Value::Dict(a) => Arc::as_ptr(a).cast(),
            _ => return None,
        })
    }

    /// Children of a container, in pickling order (dict: key, value, ...).
    pub(crate) fn children(&self) -> Children<'_> {
        match self {
            Value::List(a) | Value::Tuple(a) | Value::Set(a) | Value::FrozenSet(a) => {
                Children::Items(a.iter())
            }
            Value::Dict(d) => Children::Pairs(d.iter(), None),
            _ => Children::Items([].iter()),
        }
    }
}

/// Iterator over a container's children.
pub(crate) enum Children<'v> {
    Items(std::slice::Iter<'v, Value>),
    Pairs(std::slice::Iter<'v, (Value, Value)>, Option<&'v Value>),
}

impl<'v> Iterator for Children<'v> {
    type Item = &'v Value;
    fn next(&mut self) -> Option<&'v Value> {
        match self {
            Children::Items(it) => it.next(),
            Children::Pairs(it, pending) => {
                if let Some(v) = pending.take() {
                    return Some(v);
                }
                let (k, v) = it.next()?;
                *pending = Some(v);
                Some(k)
            }
        }
    }
}

/// Structural equality (Python `==` for same-typed values; `1 != 1.0`
/// here). Compares without recursion and compares each pair of shared
/// containers once.
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        let mut work: Vec<(&Value, &Value)> = vec![(self, other)];
        let mut seen: HashSet<(*const (), *const ())> = HashSet::new();
        while let Some((a, b)) = work.pop() {
            let same = match (a, b) {
                (Value::None, Value::None) => true,
                (Value::Bool(x), Value::Bool(y)) => x == y,
                (Value::Float(x), Value::Float(y)) => x == y,
                (Value::Str(x), Value::Str(y)) => x == y,
                (Value::Bytes(x), Value::Bytes(y)) => x == y,
                (Value::Int(_) | Value::BigInt(_), Value::Int(_) | Value::BigInt(_)) => {
                    as_big(a) == as_big(b)
                }
                (Value::List(x), Value::List(y))
                | (Value::Tuple(x), Value::Tuple(y))
                | (Value::Set(x), Value::Set(y))
                | (Value::FrozenSet(x), Value::FrozenSet(y)) => {
                    if !Arc::ptr_eq(x, y)
                        && seen.insert((Arc::as_ptr(x).cast(), Arc::as_ptr(y).cast()))
                    {
                        if x.len() != y.len() {
                            return false;
                        }
                        work.extend(x.iter().zip(y.iter()));
                    }
                    true
                }
                (Value::Dict(x), Value::Dict(y)) => {
                    if !Arc::ptr_eq(x, y)
                        && seen.insert((Arc::as_ptr(x).cast(), Arc::as_ptr(y).cast()))
                    {
                        if x.len() != y.len() {
                            return false;
                        }
                        for ((ka, va), (kb, vb)) in x.iter().zip(y.iter()) {
                            work.push((ka, kb));
                            work.push((va, vb));
                        }
                    }
                    true
                }
                _ => false,
            };
            if !same {
                return false;
            }
        }
        true
    }
}

fn as_big(v: &Value) -> Option<BigInt> {
    match v {
        Value::Int(i) => Some(BigInt::from(*i)),
        Value::BigInt(b) => Some(b.clone()),
        _ => None,
    }
}

/// Shallow for containers (type, length and address), full for scalars: a
/// tree with shared parts could print very large.
impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::None => f.write_str("None"),
            Value::Bool(b) => f.write_str(if *b { "True" } else { "False" }),
            Value::Int(i) => write!(f, "{i}"),
            Value::BigInt(b) => write!(f, "{b}"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Bytes(b) => write!(f, "b{:?}", String::from_utf8_lossy(b)),
            Value::List(l) => write!(f, "<list len {} at {:p}>", l.len(), Arc::as_ptr(l)),
            Value::Tuple(l) => write!(f, "<tuple len {} at {:p}>", l.len(), Arc::as_ptr(l)),
            Value::Dict(d) => write!(f, "<dict len {} at {:p}>", d.len(), Arc::as_ptr(d)),
            Value::Set(l) => write!(f, "<set len {} at {:p}>", l.len(), Arc::as_ptr(l)),
            Value::FrozenSet(l) => {
                write!(f, "<frozenset len {} at {:p}>", l.len(), Arc::as_ptr(l))
            }
        }
    }
}

macro_rules! from_small_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::Int(i64::from(v))
            }
        }
    )*};
}
from_small_int!(i8, i16, i32, i64, u8, u16, u32);

macro_rules! from_wide_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                match i64::try_from(v) {
                    Ok(i) => Value::Int(i),
                    Err(_) => Value::BigInt(BigInt::from(v as i128)),
                }
            }
        }
    )*};
}
from_wide_int!(u64, usize, isize);

impl From<i128> for Value {
    fn from(v: i128) -> Value {
        match i64::try_from(v) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::BigInt(BigInt::from(v)),
        }
    }
}

impl From<u128> for Value {
    fn from(v: u128) -> Value {
        match i64::try_from(v) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::BigInt(BigInt::from(v)),
        }
    }
}

impl From<BigInt> for Value {
    fn from(v: BigInt) -> Value {
        match v.to_i64() {
            Some(i) => Value::Int(i),
            None => Value::BigInt(v),
        }
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

impl From<f32> for Value {
    fn from(v: f32) -> Value {
        Value::Float(f64::from(v))
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Str(v.into())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Str(v.into())
    }
}

impl From<Arc<str>> for Value {
    fn from(v: Arc<str>) -> Value {
        Value::Str(v)
    }
}

impl From<&Value> for Value {
    fn from(v: &Value) -> Value {
        v.clone()
    }
}

impl From<Vec<Value>> for Value {
    /// A `list`.
    fn from(v: Vec<Value>) -> Value {
        Value::List(Arc::new(v))
    }
}

impl From<()> for Value {
    /// `None`.
    fn from(_: ()) -> Value {
        Value::None
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    /// `None` for `None`, else the value.
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::None, Into::into)
    }
}

/// Builds a dict entry by entry:
///
/// ```
/// use vramlab_traces::{DictBuilder, Value};
/// let frame = DictBuilder::new()
///     .entry("name", "forward")
///     .entry("filename", "model.py")
///     .entry("line", 42)
///     .build();
/// // The same frame in two events: written once, then referenced.
/// let events = Value::list([
///     DictBuilder::new().entry("action", "alloc").entry("frames", Value::list([frame.clone()])).build(),
///     DictBuilder::new().entry("action", "free_completed").entry("frames", Value::list([frame])).build(),
/// ]);
/// assert!(matches!(events, Value::List(ref l) if l.len() == 2));
/// ```
#[derive(Debug, Clone, Default)]
pub struct DictBuilder {
    entries: Vec<(Value, Value)>,
}

impl DictBuilder {
    /// An empty dict.
    pub fn new() -> DictBuilder {
        DictBuilder::default()
    }

    /// An empty dict with room for `n` entries.
    pub fn with_capacity(n: usize) -> DictBuilder {
        DictBuilder {
            entries: Vec::with_capacity(n),
        }
    }

    /// Adds an entry (chaining form).
    pub fn entry(mut self, key: impl Into<Value>, value: impl Into<Value>) -> DictBuilder {
        self.insert(key, value);
        self
    }

    /// Adds an entry.
    pub fn insert(&mut self, key: impl Into<Value>, value: impl Into<Value>) {
        self.entries.push((key.into(), value.into()));
    }

    /// The dict.
    pub fn build(self) -> Value {
        Value::Dict(Arc::new(self.entries))
    }
}

impl From<DictBuilder> for Value {
    fn from(b: DictBuilder) -> Value {
        b.build()
    }
}

impl ValueRef<'_> {
    /// Converts to an owned [`Value`], keeping sharing: a container reached
    /// several times (through the memo) becomes one `Arc`, and so does a
    /// memoized string. Runs without recursion in time and memory linear in
    /// the document.
    pub fn to_value(&self) -> Value {
        let doc = self.doc;
        let mut cache: HashMap<u32, Value> = HashMap::new();
        let mut strs: HashMap<(u32, u32), Arc<str>> = HashMap::new();
        let mut scalar = |slot: Slot, cache: &HashMap<u32, Value>| -> Value {
            match slot {
                Slot::Str(sp) => Value::Str(
                    strs.entry((sp.start, sp.len))
                        .or_insert_with(|| Arc::from(doc.str_of(sp)))
                        .clone(),
                ),
                Slot::Node(id) => cache.get(&id).cloned().unwrap_or(Value::None),
                other => match (ValueRef { doc, slot: other }).view() {
                    View::None => Value::None,
                    View::Bool(b) => Value::Bool(b),
                    View::Int(i) => Value::Int(i),
                    View::BigInt(b) => Value::BigInt(b),
                    View::Float(f) => Value::Float(f),
                    View::Bytes(b) => Value::Bytes(b.into()),
                    _ => Value::None,
                },
            }
        };
        let Slot::Node(root) = self.slot else {
            return scalar(self.slot, &cache);
        };
        // Post-order over the (acyclic) document: (node, next child).
        let mut stack: Vec<(u32, usize)> = vec![(root, 0)];
        while let Some(&mut (id, ref mut pos)) = stack.last_mut() {
            let node = doc.node(id);
            let children: &[Slot] = match node {
                Some(Node::List(items)) => items,
                Some(Node::Tuple(t)) => &t.items,
                Some(Node::Set(s)) | Some(Node::FrozenSet(s)) => &s.items,
                _ => &[],
            };
            let entries: &[Slot] = match node {
                Some(Node::Dict(d)) => d.entries.as_flattened(),
                _ => &[],
            };
            let total = children.len() + entries.len();
            let mut descend = None;
            while *pos < total {
                let p = *pos;
                *pos += 1;
                let child = children.get(p).or_else(|| entries.get(p - children.len()));
                if let Some(&Slot::Node(c)) = child {
                    if !cache.contains_key(&c) {
                        descend = Some(c);
                        break;
                    }
                }
            }
            if let Some(c) = descend {
                stack.push((c, 0));
                continue;
            }
            let conv = |s: &[Slot], scalar: &mut dyn FnMut(Slot, &HashMap<u32, Value>) -> Value| {
                s.iter().map(|&x| scalar(x, &cache)).collect::<Vec<Value>>()
            };
            let v = match node {
                Some(Node::List(items)) => Value::List(Arc::new(conv(items, &mut scalar))),
                Some(Node::Tuple(t)) => Value::Tuple(Arc::new(conv(&t.items, &mut scalar))),
                Some(Node::Set(s)) => Value::Set(Arc::new(conv(&s.items, &mut scalar))),
                Some(Node::FrozenSet(s)) => Value::FrozenSet(Arc::new(conv(&s.items, &mut scalar))),
                Some(Node::Dict(d)) => {
                    let flat = conv(d.entries.as_flattened(), &mut scalar);
                    let mut it = flat.into_iter();
                    let mut pairs = Vec::with_capacity(d.entries.len());
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    Value::Dict(Arc::new(pairs))
                }
                Some(Node::ByteArray(sp)) => Value::Bytes(doc.bytes_of(*sp).into()),
                Some(Node::Retired) | None => Value::None,
            };
            cache.insert(id, v);
            stack.pop();
        }
        cache.remove(&root).unwrap_or(Value::None)
    }
}
