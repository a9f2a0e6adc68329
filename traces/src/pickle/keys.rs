//! Dict keys and set elements: Python's hashability, equality and hashing
//! rules for the plain-data types, and lookups of a key among the keys of
//! one dict or set (linear, or through its [`KeyIndex`] when it has one;
//! the index itself is in `key_index`).
//!
//! Equality follows Python for scalars (`1 == 1.0 == True`, `'a' != b'a'`)
//! and tuples (element-wise, compared without recursion). Frozensets are
//! equal when they are the same object or hold the same elements, where
//! elements that are themselves containers compare by identity: a
//! simplification Python pickles of real data never run into.

use std::hash::{BuildHasher, Hasher};

use super::doc::{Node, PickleDoc, Slot};
use super::key_index::KeyIndex;

/// 2^63 as a float (exact).
const TWO_63: f64 = (1u64 << 63) as f64;

/// A key reduced to what Python's `==` and `hash` look at.
#[derive(Clone, Copy)]
enum Norm<'a> {
    None,
    Int(i64),
    Big(&'a [u8]),
    Float(f64),
    Str(&'a [u8]),
    Bytes(&'a [u8]),
    Tuple(u32),
    FrozenSet(u32),
    Unhashable,
}

impl PickleDoc {
    fn norm(&self, s: Slot) -> Norm<'_> {
        match s {
            Slot::None => Norm::None,
            Slot::Bool(b) => Norm::Int(i64::from(b)),
            Slot::Int(i) => Norm::Int(i),
            Slot::Float(f) => {
                // Integral floats equal ints (-2^63 <= f < 2^63 fits i64).
                if f.fract() == 0.0 && (-TWO_63..TWO_63).contains(&f) {
                    Norm::Int(f as i64)
                } else {
                    Norm::Float(f)
                }
            }
            Slot::BigInt(sp) => Norm::Big(self.bytes_of(sp)),
            Slot::Str(sp) => Norm::Str(self.str_of(sp).as_bytes()),
            Slot::Bytes(sp) => Norm::Bytes(self.bytes_of(sp)),
            Slot::Node(id) => match self.nodes.get(id as usize) {
                Some(Node::Tuple(t)) if t.hashable => Norm::Tuple(id),
                Some(Node::FrozenSet(_)) => Norm::FrozenSet(id),
                _ => Norm::Unhashable,
            },
        }
    }

    /// Whether Python could use the value as a dict key.
    pub(crate) fn is_hashable(&self, s: Slot) -> bool {
        !matches!(self.norm(s), Norm::Unhashable)
    }

    /// Hash of a hashable key (consistent with [`PickleDoc::key_eq`]).
    pub(crate) fn key_hash(&self, s: Slot) -> u64 {
        match self.norm(s) {
            Norm::Tuple(id) => self.tuple_hash(id),
            n => self.shallow_hash(n),
        }
    }

    fn shallow_hash(&self, n: Norm<'_>) -> u64 {
        let mut h = self.hasher.build_hasher();
        match n {
            Norm::None => h.write_u8(0),
            Norm::Int(i) => {
                h.write_u8(1);
                h.write_i64(i);
            }
            Norm::Big(b) => {
                h.write_u8(2);
                h.write(b);
            }
            Norm::Float(f) => {
                h.write_u8(3);
                h.write_u64(f.to_bits());
            }
            Norm::Str(b) => {
                h.write_u8(4);
                h.write(b);
            }
            Norm::Bytes(b) => {
                h.write_u8(5);
                h.write(b);
            }
            Norm::Tuple(id) => {
                // Only reached for tuples whose hash is cached.
                let cached = match self.nodes.get(id as usize) {
                    Some(Node::Tuple(t)) => t.hash.get(),
                    _ => None,
                };
                return cached.unwrap_or(0);
            }
            Norm::FrozenSet(id) => {
                return match self.nodes.get(id as usize) {
                    Some(Node::FrozenSet(s)) => s.hash,
                    _ => 0,
                };
            }
            Norm::Unhashable => h.write_u8(9),
        }
        h.finish()
    }

    /// Hash of a hashable tuple, computed without recursion (post-order
    /// over nested tuples) and cached in the tuple node.
    fn tuple_hash(&self, id: u32) -> u64 {
        let tuple = |id: u32| match self.nodes.get(id as usize) {
            Some(Node::Tuple(t)) => Some(t),
            _ => None,
        };
        if let Some(h) = tuple(id).and_then(|t| t.hash.get()) {
            return h;
        }
        // Stack of (tuple id, next child to look at).
        let mut stack: Vec<(u32, usize)> = vec![(id, 0)];
        while let Some(&mut (tid, ref mut pos)) = stack.last_mut() {
            let Some(t) = tuple(tid) else {
                stack.pop();
                continue;
            };
            // Descend into the first child tuple without a cached hash.
            let mut descend = None;
            while let Some(&child) = t.items.get(*pos) {
                *pos += 1;
                if let Norm::Tuple(cid) = self.norm(child) {
                    if tuple(cid).is_some_and(|c| c.hash.get().is_none()) {
                        descend = Some(cid);
                        break;
                    }
                }
            }
            if let Some(cid) = descend {
                stack.push((cid, 0));
                continue;
            }
            let mut h = self.hasher.build_hasher();
            h.write_u8(6);
            h.write_usize(t.items.len());
            for &item in &t.items {
                h.write_u64(self.shallow_hash(self.norm(item)));
            }
            t.hash.set(Some(h.finish()));
            stack.pop();
        }
        tuple(id).and_then(|t| t.hash.get()).unwrap_or(0)
    }

    /// Python `==` between two hashable keys.
    pub(crate) fn key_eq(&self, a: Slot, b: Slot) -> bool {
        match (self.norm(a), self.norm(b)) {
            (Norm::Tuple(x), Norm::Tuple(y)) => x == y || self.tuples_eq(x, y),
            (x, y) => self.shallow_eq(x, y),
        }
    }

    fn shallow_eq(&self, a: Norm<'_>, b: Norm<'_>) -> bool {
        match (a, b) {
            (Norm::None, Norm::None) => true,
            (Norm::Int(x), Norm::Int(y)) => x == y,
            (Norm::Big(x), Norm::Big(y)) => x == y,
            (Norm::Float(x), Norm::Float(y)) => x == y,
            (Norm::Str(x), Norm::Str(y)) => x == y,
            (Norm::Bytes(x), Norm::Bytes(y)) => x == y,
            (Norm::Tuple(x), Norm::Tuple(y)) => x == y,
            (Norm::FrozenSet(x), Norm::FrozenSet(y)) => x == y || self.frozensets_eq(x, y),
            _ => false,
        }
    }

    /// Element-wise tuple equality with an explicit work list.
    fn tuples_eq(&self, x: u32, y: u32) -> bool {
        let mut work: Vec<(u32, u32)> = vec![(x, y)];
        while let Some((x, y)) = work.pop() {
            let (Some(Node::Tuple(tx)), Some(Node::Tuple(ty))) =
                (self.nodes.get(x as usize), self.nodes.get(y as usize))
            else {
                return false;
            };
            if tx.items.len() != ty.items.len() {
                return false;
            }
            if let (Some(hx), Some(hy)) = (tx.hash.get(), ty.hash.get()) {
                if hx != hy {
                    return false;
                }
            }
            for (&a, &b) in tx.items.iter().zip(&ty.items) {
                match (self.norm(a), self.norm(b)) {
                    (Norm::Tuple(ca), Norm::Tuple(cb)) => {
                        if ca != cb {
                            work.push((ca, cb));
                        }
                    }
                    (na, nb) => {
                        if !self.shallow_eq(na, nb) {
                            return false;
                        }
                    }
                }
            }
        }
        true
    }

    /// Frozenset equality; container elements compare by identity.
    fn frozensets_eq(&self, x: u32, y: u32) -> bool {
        let (Some(Node::FrozenSet(sx)), Some(Node::FrozenSet(sy))) =
            (self.nodes.get(x as usize), self.nodes.get(y as usize))
        else {
            return false;
        };
        if sx.items.len() != sy.items.len() || sx.hash != sy.hash {
            return false;
        }
        sx.items.iter().all(|&a| {
            let na = self.norm(a);
            sy.items.iter().any(|&b| self.shallow_eq(na, self.norm(b)))
        })
    }

    /// Position of `key` among `keys` (the keys of one dict or set, with
    /// their index if they have one). `h` is computed on demand.
    pub(crate) fn find_key(
        &self,
        keys: Keys<'_>,
        index: Option<&KeyIndex>,
        key: Slot,
        h: Option<u64>,
    ) -> Option<usize> {
        match index {
            Some(ix) => {
                let h = h.unwrap_or_else(|| self.key_hash(key));
                ix.candidates(h)
                    .find(|&e| keys.get(e).is_some_and(|k| self.key_eq(k, key)))
            }
            None => match key {
                // Fast path for str keys (nearly all keys in practice): a
                // str only equals a str, and mostly differs in length.
                Slot::Str(ks) => {
                    let text = self.str_bytes(ks);
                    let first = text.first();
                    keys.position(|k| match k {
                        Slot::Str(s) => {
                            s == ks
                                || (s.len == ks.len && {
                                    let other = self.str_bytes(s);
                                    other.first() == first && other == text
                                })
                        }
                        _ => false,
                    })
                }
                _ => keys.position(|k| same_slot(k, key) || self.key_eq(k, key)),
            },
        }
    }

    /// Looks up a `str` key among `keys` without building a slot.
    pub(crate) fn find_str_key(
        &self,
        keys: Keys<'_>,
        index: Option<&KeyIndex>,
        key: &str,
    ) -> Option<usize> {
        let is_key = |k: Slot| matches!(k, Slot::Str(sp) if self.str_of(sp) == key);
        match index {
            Some(ix) => {
                let h = self.shallow_hash(Norm::Str(key.as_bytes()));
                ix.candidates(h).find(|&e| keys.get(e).is_some_and(is_key))
            }
            None => keys.position(is_key),
        }
    }

    /// Looks up an int key among `keys`.
    #[cfg(test)]
    pub(crate) fn find_int_key(
        &self,
        keys: Keys<'_>,
        index: Option<&KeyIndex>,
        key: i64,
    ) -> Option<usize> {
        let is_key = |k: Slot| matches!(self.norm(k), Norm::Int(i) if i == key);
        match index {
            Some(ix) => {
                let h = self.shallow_hash(Norm::Int(key));
                ix.candidates(h).find(|&e| keys.get(e).is_some_and(is_key))
            }
            None => keys.position(is_key),
        }
    }

    /// Hash of a frozenset with these (deduplicated) elements: independent
    /// of their order.
    pub(crate) fn frozenset_hash(&self, items: &[Slot]) -> u64 {
        let mut sum = 0u64;
        for &i in items {
            let h = self.key_hash(i);
            // Mix each element hash before summing so that sums of small
            // structured hashes do not collide easily.
            sum = sum.wrapping_add(h ^ (h >> 29).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        let mut h = self.hasher.build_hasher();
        h.write_u8(7);
        h.write_usize(items.len());
        h.write_u64(sum);
        h.finish()
    }
}

/// The keys of a dict or the elements of a set.
#[derive(Clone, Copy)]
pub(crate) enum Keys<'a> {
    Set(&'a [Slot]),
    Dict(&'a [[Slot; 2]]),
}

impl<'a> Keys<'a> {
    pub(crate) fn of_set(items: &'a [Slot]) -> Keys<'a> {
        Keys::Set(items)
    }

    pub(crate) fn of_dict(entries: &'a [[Slot; 2]]) -> Keys<'a> {
        Keys::Dict(entries)
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Keys::Set(s) => s.len(),
            Keys::Dict(d) => d.len(),
        }
    }

    pub(crate) fn get(&self, i: usize) -> Option<Slot> {
        match self {
            Keys::Set(s) => s.get(i).copied(),
            Keys::Dict(d) => d.get(i).map(|e| e[0]),
        }
    }

    /// Position of the first key satisfying `pred`.
    #[inline]
    pub(crate) fn position(&self, mut pred: impl FnMut(Slot) -> bool) -> Option<usize> {
        match self {
            Keys::Set(s) => s.iter().position(|&k| pred(k)),
            Keys::Dict(d) => d.iter().position(|e| pred(e[0])),
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = Slot> + 'a {
        let (set, dict): (&'a [Slot], &'a [[Slot; 2]]) = match *self {
            Keys::Set(s) => (s, &[]),
            Keys::Dict(d) => (&[], d),
        };
        set.iter().copied().chain(dict.iter().map(|e| e[0]))
    }
}

/// Bitwise-identical slots (the same memo object, or equal scalars).
#[inline]
fn same_slot(a: Slot, b: Slot) -> bool {
    match (a, b) {
        (Slot::Str(x), Slot::Str(y)) => x.start == y.start && x.len == y.len,
        (Slot::Node(x), Slot::Node(y)) => x == y,
        (Slot::Int(x), Slot::Int(y)) => x == y,
        _ => false,
    }
}
