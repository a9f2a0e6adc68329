//! Whether the device's address order could have decided anything: a
//! choice between free blocks of one size that lie in different segments.
//!
//! Two replays of one trace that differ only in where the device puts new
//! segments (the simulated driver's two placements) make the same decisions
//! for as long as no choice depends on how two segments' addresses compare:
//! splits, merges and rounding see only offsets inside a segment, pools
//! and streams are the trace's, and releases take whole sets of blocks.
//! The choices that compare segments are the best-fit lookups among free
//! blocks of one size (ordered by address up to 2.11; by an allocation
//! counter from 2.12, placement-free but noted all the same), the oversize
//! release's pick among blocks of one size, and the expandable-segments
//! search over the runs of two reservations of one stream (tried in
//! address order). A
//! replay in which none of them had candidates from two segments predicts
//! the same peak under either placement, so the second replay that
//! measures the range can be skipped.

use super::NativeAllocator;
use super::block::NIL;
use super::pool::FreeKey;
use super::pool_ref::PoolRef;
use crate::Device;

/// Blocks walked to find a segment's first block before a tie is assumed.
const HEAD_WALK: usize = 256;

impl<D: Device> NativeAllocator<D> {
    /// `true` once a choice between free blocks of one size in different
    /// segments was made (see the module doc).
    pub(super) fn placement_may_have_decided(&self) -> bool {
        self.placement_ties > 0
    }

    /// Notes a tie without looking (a choice too long to follow).
    pub(super) fn note_tie(&mut self) {
        self.placement_ties += 1;
    }

    /// Notes a tie when the free blocks of `first`'s stream and size,
    /// `first` and those after it in the pool's order, lie in more than one
    /// segment. `first` must be the first of its size in that order.
    pub(super) fn note_run(&mut self, pool: PoolRef, first: FreeKey) {
        if self.placement_ties > 0 {
            return;
        }
        // Most often no other free block has the size: one look says so.
        if self.pools[pool].next_of_size(first).is_none() {
            return;
        }
        let head = self.segment_id(first.idx);
        let split = self.pools[pool]
            .after(first)
            .take_while(|k| k.size == first.size)
            .any(|k| head.is_none() || self.segment_id(k.idx) != head);
        if split {
            self.placement_ties += 1;
        }
    }

    /// Notes a tie when two of `keys` (free blocks of one stream, in the
    /// pool's order) have one size and lie in different segments.
    pub(super) fn note_equal_sizes(&mut self, keys: &[FreeKey]) {
        if self.placement_ties > 0 {
            return;
        }
        let split = keys.windows(2).any(|w| match w {
            [a, b] => a.size == b.size && !self.same_segment(a.idx, b.idx),
            _ => false,
        });
        if split {
            self.placement_ties += 1;
        }
    }

    /// Which segment a block lies in: its expandable segment's index, or
    /// its segment's first block (`None` when that cannot be told cheaply:
    /// a tie is then assumed).
    fn segment_id(&self, idx: u32) -> Option<Segment> {
        let b = &self.arena[idx];
        if b.is_expandable() {
            return Some(Segment::Expandable(b.expandable));
        }
        self.segment_head(idx).map(Segment::Head)
    }

    /// Whether two blocks lie in one segment (`false` when that cannot be
    /// told cheaply).
    fn same_segment(&self, a: u32, b: u32) -> bool {
        match (self.segment_id(a), self.segment_id(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        }
    }

    /// The first block of `idx`'s segment (`None` past [`HEAD_WALK`]
    /// blocks).
    fn segment_head(&self, idx: u32) -> Option<u32> {
        let mut i = idx;
        for _ in 0..HEAD_WALK {
            let prev = self.arena[i].prev;
            if prev == NIL {
                return Some(i);
            }
            i = prev;
        }
        None
    }
}

/// A segment, as [`NativeAllocator::segment_of`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment {
    /// An expandable segment, by index.
    Expandable(u32),
    /// A `cudaMalloc` segment, by the arena index of its first block.
    Head(u32),
}
