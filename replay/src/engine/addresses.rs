//! Where each allocation went: the address and block size of every id,
//! kept only when [`crate::ReplayOptions::record_addresses`] asks (fidelity
//! checks, snapshots written from a replay, the report's explorer).

use vramlab_allocator::{Allocator, SegmentView};

/// The address and block size per allocation id (both empty when not
/// recording; 0 for ids never allocated).
#[derive(Debug, Default)]
pub(super) struct AddressBook {
    /// The address each id got.
    pub(super) addresses: Vec<u64>,
    /// The size of the block each id got (`allocated_bytes` it added: the
    /// rounded request, or the whole block when the rest was not split off).
    pub(super) sizes: Vec<u64>,
}

impl AddressBook {
    /// A book for `n_ids` ids, or an empty one when not `recording`.
    pub(super) fn new(recording: bool, n_ids: usize) -> Self {
        if recording {
            AddressBook {
                addresses: vec![0; n_ids],
                sizes: vec![0; n_ids],
            }
        } else {
            AddressBook::default()
        }
    }

    /// `true` when the book keeps anything.
    #[inline]
    pub(super) fn recording(&self) -> bool {
        !self.addresses.is_empty()
    }

    /// `allocated_bytes` before a malloc, read only when recording (the
    /// block size is what the malloc adds to it).
    #[inline]
    pub(super) fn allocated_before<A: Allocator>(&self, alloc: &A) -> i64 {
        if self.recording() {
            alloc.stats().allocated_bytes.all.current
        } else {
            0
        }
    }

    /// Id `id` got `ptr`, and `allocated_bytes` grew by `size`.
    #[inline]
    pub(super) fn allocated(&mut self, id: usize, ptr: u64, size: u64) {
        if let Some(a) = self.addresses.get_mut(id) {
            *a = ptr;
        }
        if let Some(s) = self.sizes.get_mut(id) {
            *s = size;
        }
    }

    /// The ids of a recorded start got `ptr_of(id)` (0: not live); their
    /// block sizes are read from the allocator's segments.
    pub(super) fn seeded<A: Allocator>(&mut self, alloc: &A, ptr_of: impl Fn(usize) -> u64) {
        if !self.recording() {
            return;
        }
        let segments = alloc.segments();
        for (id, a) in self.addresses.iter_mut().enumerate() {
            let p = ptr_of(id);
            if p != 0 {
                *a = p;
                if let Some(s) = self.sizes.get_mut(id) {
                    *s = block_size_at(&segments, p);
                }
            }
        }
    }
}

/// The size of the block at `ptr` among `segments` (0 when none starts there).
fn block_size_at(segments: &[SegmentView], ptr: u64) -> u64 {
    segments
        .iter()
        .find(|s| s.ptr <= ptr && ptr < s.ptr.saturating_add(s.size))
        .and_then(|s| s.blocks.iter().find(|b| b.ptr == ptr))
        .map_or(0, |b| b.size)
}
