//! The ids of a CSV trace that are live while it is read: a map keyed by
//! the number for plain numbers, one keyed by the text for everything else.
//! Only live ids are kept (an id leaves at its free), so memory follows
//! what is live, not the length of the file or the size of its numbers.

use rustc_hash::FxHashMap;

use crate::model::AllocId;

/// How a read gives out dense allocation ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdUse {
    /// Every `alloc` takes the next id (`0, 1, 2, …`), as `Trace`
    /// promises: a trace read whole.
    Unique,
    /// An `alloc` takes the id of an allocation whose free completed, when
    /// there is one: ids stay below the most allocations live at once, so
    /// a replay's table of ids is bounded by what is live. For events
    /// replayed as they are read; the `n`-th `alloc` of the file is still
    /// the `n`-th allocation (`StreamCounts::allocs`).
    Recycled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Allocated,
    Requested,
}

/// What an id names while it is live: its dense id, state, and (for a
/// requested free) the line that requested it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Live {
    pub(super) dense: AllocId,
    pub(super) state: State,
    pub(super) line: u64,
    /// Which allocator gave it.
    pub(super) memory: Memory,
}

/// Which allocator a row's request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Memory {
    /// The device's caching allocator (`alloc`, `free`, …).
    Device,
    /// The pinned host allocator (`host_alloc`, `host_free`, …).
    Host,
    /// Device memory outside PyTorch (`raw_alloc`, `raw_free`).
    Raw,
}

impl Memory {
    pub(super) fn prefix(self) -> &'static str {
        match self {
            Memory::Device => "",
            Memory::Host => "host_",
            Memory::Raw => "raw_",
        }
    }

    /// The row's action as the file spells it.
    pub(super) fn action(self, device: &'static str) -> &'static str {
        match (self, device) {
            (Memory::Device, a) => a,
            (Memory::Host, "alloc") => "host_alloc",
            (Memory::Host, "free") => "host_free",
            (Memory::Host, "free_requested") => "host_free_requested",
            (Memory::Host, "free_completed") => "host_free_completed",
            (Memory::Host, _) => "host_empty_cache",
            (Memory::Raw, "alloc") => "raw_alloc",
            (Memory::Raw, _) => "raw_free",
        }
    }

    /// Why an `alloc` of this memory takes no stream.
    pub(super) fn no_stream(self) -> &'static str {
        match self {
            Memory::Raw => "raw_alloc takes no stream",
            _ => {
                "host_alloc takes no stream (the streams that use a pinned block are known at its free: host_free_requested)"
            }
        }
    }

    /// The error for a free of an id this memory holds, by a row of
    /// another.
    pub(super) fn mismatch(self, action: &str, id: &str) -> String {
        match self {
            Memory::Host => format!(
                "{action} of id '{id}', which is a pinned host allocation (free it with host_free)"
            ),
            Memory::Raw => format!(
                "{action} of id '{id}', which is memory outside PyTorch (free it with raw_free)"
            ),
            Memory::Device => {
                format!("{action} of id '{id}', which is a device allocation (free it with free)")
            }
        }
    }
}

/// The live ids.
#[derive(Default)]
pub(super) struct Ids {
    by_number: FxHashMap<u64, Live>,
    by_text: FxHashMap<Box<[u8]>, Live>,
}

/// A plain decimal number (no sign, no leading zero, at most 19 digits):
/// `7` and `007` are different ids, so only the first is a number.
fn number_of(id: &[u8]) -> Option<u64> {
    if id.is_empty() || id.len() > 19 || (id.len() > 1 && id.first() == Some(&b'0')) {
        return None;
    }
    let mut n = 0u64;
    for &b in id {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    Some(n)
}

/// Where an id lives in [`Ids`], worked out once per row.
#[derive(Clone, Copy)]
pub(super) enum Key<'a> {
    /// A plain number.
    Number(u64),
    /// Any other text.
    Text(&'a [u8]),
}

impl Ids {
    pub(super) fn key(id: &[u8]) -> Key<'_> {
        match number_of(id) {
            Some(n) => Key::Number(n),
            None => Key::Text(id),
        }
    }

    pub(super) fn get(&self, key: Key<'_>) -> Option<Live> {
        match key {
            Key::Number(n) => self.by_number.get(&n).copied(),
            Key::Text(id) => self.by_text.get(id).copied(),
        }
    }

    /// Adds `v` under `key` unless the key is live (`false`, unchanged):
    /// one lookup for a number.
    pub(super) fn insert_new(&mut self, key: Key<'_>, v: Live) -> bool {
        match key {
            Key::Number(n) => match self.by_number.entry(n) {
                std::collections::hash_map::Entry::Occupied(_) => false,
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(v);
                    true
                }
            },
            Key::Text(id) => {
                if self.by_text.contains_key(id) {
                    return false;
                }
                self.by_text.insert(id.into(), v);
                true
            }
        }
    }

    /// The live id `key`, to change in place.
    pub(super) fn get_mut(&mut self, key: Key<'_>) -> Option<&mut Live> {
        match key {
            Key::Number(n) => self.by_number.get_mut(&n),
            Key::Text(id) => self.by_text.get_mut(id),
        }
    }

    /// Removes `key` and returns what it named.
    pub(super) fn remove(&mut self, key: Key<'_>) -> Option<Live> {
        match key {
            Key::Number(n) => self.by_number.remove(&n),
            Key::Text(id) => self.by_text.remove(id),
        }
    }
}
