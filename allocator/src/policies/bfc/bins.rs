//! Bins of free chunks (`kNumBins`, `BinNumForSize`, `ChunkComparator`):
//! rounding, the bin of a size, and keeping free chunks in their bins.

use super::{BfcAllocator, ChunkState, POOL};
use crate::devices::Device;
use crate::policies::rounding::round_up;

/// `kNumBins`.
pub(crate) const NUM_BINS: usize = 21;
/// `kMinAllocationSize`: the rounding unit and the smallest chunk.
pub(crate) const MIN_ALLOCATION_SIZE: u64 = 256;

/// `BinNumForSize`: the bin of a chunk of `bytes` bytes.
#[inline]
pub(crate) fn bin_num_for_size(bytes: u64) -> usize {
    let v = bytes.max(MIN_ALLOCATION_SIZE) >> 8;
    ((63 - v.leading_zeros()) as usize).min(NUM_BINS - 1)
}

/// The entry of a per-bin table (`bins`, or the checker's copy) for chunks
/// of `bytes` bytes.
// Indexing: `bin_num_for_size` clamps to `NUM_BINS - 1` and the table has
// `NUM_BINS` entries by its type.
#[allow(clippy::indexing_slicing)]
#[inline]
pub(super) fn bin_for<T>(bins: &mut [T; NUM_BINS], bytes: u64) -> &mut T {
    &mut bins[bin_num_for_size(bytes)]
}

/// `RoundedBytes`: `bytes` rounded up to a multiple of 256.
#[inline]
pub(crate) fn rounded_bytes(bytes: u64) -> u64 {
    round_up(bytes, MIN_ALLOCATION_SIZE)
}

/// Sort key of a free chunk inside its bin: size, then address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct BinKey {
    pub(super) size: u64,
    pub(super) ptr: u64,
    pub(super) idx: u32,
}

impl<D: Device> BfcAllocator<D> {
    #[inline]
    pub(super) fn key(&self, idx: u32) -> BinKey {
        let c = &self.chunks[idx];
        BinKey {
            size: c.size,
            ptr: c.ptr,
            idx,
        }
    }

    /// `InsertFreeChunkIntoBin`.
    pub(super) fn insert_free(&mut self, idx: u32) {
        let key = self.key(idx);
        let c = &mut self.chunks[idx];
        c.state = ChunkState::Free;
        if c.is_split() {
            self.stats.inactive_split.increase(POOL, 1);
            self.stats.inactive_split_bytes.increase(POOL, key.size);
        }
        bin_for(&mut self.bins, key.size).insert(key);
    }

    /// `RemoveFreeChunkFromBin`.
    pub(super) fn remove_free(&mut self, idx: u32) {
        let key = self.key(idx);
        if self.chunks[idx].is_split() {
            self.stats.inactive_split.decrease(POOL, 1);
            self.stats.inactive_split_bytes.decrease(POOL, key.size);
        }
        bin_for(&mut self.bins, key.size).remove(&key);
    }

    /// `LargestFreeChunk`: the last chunk of the highest non-empty bin.
    pub(super) fn largest_free_chunk(&self) -> u64 {
        self.bins
            .iter()
            .rev()
            .find_map(|b| b.last())
            .map_or(0, |k| k.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_match_bin_num_for_size() {
        assert_eq!(bin_num_for_size(1), 0);
        assert_eq!(bin_num_for_size(256), 0);
        assert_eq!(bin_num_for_size(511), 0);
        assert_eq!(bin_num_for_size(512), 1);
        for b in 0..NUM_BINS {
            let lo = 256u64 << b;
            assert_eq!(bin_num_for_size(lo), b);
            assert_eq!(bin_num_for_size(lo * 2 - 1), b);
        }
        assert_eq!(bin_num_for_size(256 << 20), 20);
        assert_eq!(bin_num_for_size(1 << 40), 20);
    }
}
