//! The list of blocks whose free a trace deferred (`free_requested`), with
//! removal by arena index in constant time: a trace that requests many
//! frees and completes them later must not make every completion scan the
//! list (that made such replays quadratic).

/// "Not in the list" marker in [`PendingList::pos`].
const ABSENT: u32 = u32::MAX;

/// Arena indices in the order their frees were requested (less the ones
/// removed: a removal moves the last member into the gap, as
/// `Vec::swap_remove` does), with each member's position.
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingList {
    items: Vec<u32>,
    /// Position in `items` by arena index; [`ABSENT`] when not a member.
    pos: Vec<u32>,
}

// Indexing: `pos` only grows (`push` resizes it to cover `idx` before
// writing `pos[idx]`; nothing shrinks it), and `items` holds only indices
// that went through `push`, so every member indexes `pos` (`remove`, `take`).
// `remove` reads `pos[idx]` through a checked `get_mut`, so any index may be
// passed to it (callers pass handle indices of blocks in state
// PendingFree, but a non-member just returns `false`).
#[allow(clippy::indexing_slicing)]
impl PendingList {
    /// Appends `idx` (which must not be a member).
    pub(crate) fn push(&mut self, idx: u32) {
        let i = idx as usize;
        if self.pos.len() <= i {
            self.pos.resize(i + 1, ABSENT);
        }
        debug_assert_eq!(self.pos[i], ABSENT, "block {idx} is already pending");
        // `items` never holds more entries than there are arena slots
        // (each index at most once), so its length fits in u32.
        self.pos[i] = self.items.len() as u32;
        self.items.push(idx);
    }

    /// Removes `idx`; `false` if it was not a member. The last member takes
    /// its place.
    pub(crate) fn remove(&mut self, idx: u32) -> bool {
        let p = match self.pos.get_mut(idx as usize) {
            Some(p) if *p != ABSENT => std::mem::replace(p, ABSENT) as usize,
            _ => return false,
        };
        // `p < items.len()`: `pos` of a member is its position in `items`.
        self.items.swap_remove(p);
        if let Some(&moved) = self.items.get(p) {
            self.pos[moved as usize] = p as u32;
        }
        true
    }

    /// Number of members.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Removes and returns every member, in list order.
    pub(crate) fn take(&mut self) -> Vec<u32> {
        for &i in &self.items {
            self.pos[i as usize] = ABSENT;
        }
        std::mem::take(&mut self.items)
    }

    /// Gives the buffer of [`PendingList::take`] back for reuse, if the
    /// list is still empty.
    pub(crate) fn recycle(&mut self, mut buf: Vec<u32>) {
        if self.items.is_empty() {
            buf.clear();
            self.items = buf;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_swap_remove_order_and_positions() {
        let mut p = PendingList::default();
        let mut model: Vec<u32> = Vec::new();
        for i in [5, 1, 9, 3, 7] {
            p.push(i);
            model.push(i);
        }
        for i in [1, 7, 42, 5] {
            let pos = model.iter().position(|&x| x == i);
            if let Some(pos) = pos {
                model.swap_remove(pos);
            }
            assert_eq!(p.remove(i), pos.is_some());
            assert_eq!(p.items, model);
        }
        assert!(!p.remove(1));
        let all = p.take();
        assert_eq!(all, model);
        assert_eq!(p.len(), 0);
        p.recycle(all);
        p.push(9);
        assert_eq!(p.items, vec![9]);
        assert!(p.remove(9));
    }
}
