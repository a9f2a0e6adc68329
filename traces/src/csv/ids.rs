//! The ids of a CSV trace that are live while it is read: a table for
//! plain numbers, a map for everything else.

use rustc_hash::FxHashMap;

use crate::model::AllocId;

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
}

/// The live ids.
#[derive(Default)]
pub(super) struct Ids {
    by_number: Vec<Option<Live>>,
    by_text: FxHashMap<Box<[u8]>, Live>,
}

/// A plain decimal number (no sign, no leading zero) that indexes
/// [`Ids::by_number`], when it is below `limit`.
fn index_of(id: &[u8], limit: usize) -> Option<usize> {
    if id.is_empty() || id.len() > 9 || (id.len() > 1 && id.first() == Some(&b'0')) {
        return None;
    }
    let mut n = 0usize;
    for &b in id {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (b - b'0') as usize;
    }
    (n < limit).then_some(n)
}

/// Where an id lives in [`Ids`], worked out once per row.
#[derive(Clone, Copy)]
pub(super) enum Key<'a> {
    /// A number small enough for the table, with its text: an id first
    /// seen when the table's limit was lower lives in the text map, and
    /// stays there until it is freed.
    Index(usize, &'a [u8]),
    Text(&'a [u8]),
}

impl Ids {
    /// Ids index a table at most 16 entries per line read so far (plus
    /// 4096): memory stays proportional to the input.
    pub(super) fn key(id: &[u8], lineno: u64) -> Key<'_> {
        let limit = (lineno as usize).saturating_mul(16).saturating_add(4096);
        match index_of(id, limit) {
            Some(i) => Key::Index(i, id),
            None => Key::Text(id),
        }
    }

    pub(super) fn get(&self, key: Key<'_>) -> Option<Live> {
        match key {
            Key::Index(i, id) => self
                .by_number
                .get(i)
                .copied()
                .flatten()
                .or_else(|| self.in_text(id)),
            Key::Text(id) => self.by_text.get(id).copied(),
        }
    }

    /// An id kept in the text map (rare: only numbers beyond the table's
    /// limit when they were first allocated).
    fn in_text(&self, id: &[u8]) -> Option<Live> {
        if self.by_text.is_empty() {
            None
        } else {
            self.by_text.get(id).copied()
        }
    }

    pub(super) fn set(&mut self, key: Key<'_>, v: Live) {
        match key {
            Key::Index(i, id) if self.in_text(id).is_none() => {
                if i >= self.by_number.len() {
                    self.by_number.resize(i + 1, None);
                }
                if let Some(slot) = self.by_number.get_mut(i) {
                    *slot = Some(v);
                }
            }
            Key::Index(_, id) | Key::Text(id) => match self.by_text.get_mut(id) {
                Some(slot) => *slot = v,
                None => {
                    self.by_text.insert(id.into(), v);
                }
            },
        }
    }

    pub(super) fn remove(&mut self, key: Key<'_>) {
        match key {
            Key::Index(i, id) => {
                if let Some(slot) = self.by_number.get_mut(i) {
                    *slot = None;
                }
                if !self.by_text.is_empty() {
                    self.by_text.remove(id);
                }
            }
            Key::Text(id) => {
                self.by_text.remove(id);
            }
        }
    }
}
