//! GMLake's sizes: rounding (`round_size`), pools and segment sizes
//! (`get_allocation_size`).

use crate::policies::rounding::round_up;

/// All sizes are rounded to at least this (`kMinBlockSize`).
pub(crate) const MIN_BLOCK_SIZE: u64 = 512;
/// Largest small-pool request (`kSmallSize`).
pub(crate) const SMALL_SIZE: u64 = 1 << 20;
/// Small segment size (`kSmallBuffer`).
pub(crate) const SMALL_BUFFER: u64 = 2 << 20;
/// Segment size of large requests below [`MIN_LARGE_ALLOC`] (`kLargeBuffer`).
pub(crate) const LARGE_BUFFER: u64 = 20 << 20;
/// Large requests from this size get a segment of their own size.
pub(crate) const MIN_LARGE_ALLOC: u64 = 10 << 20;
/// Physical chunk ("pBlock") size and large-pool rounding (`kGranularity`).
pub(crate) const GRANULARITY: u64 = 2 << 20;

/// `round_size` of GMLake: 512-byte multiples, 2 MiB multiples above 1 MiB.
pub(crate) fn round_size(size: u64) -> u64 {
    let r = round_up(size.max(1), MIN_BLOCK_SIZE);
    if r > SMALL_SIZE {
        round_up(size, GRANULARITY)
    } else {
        r
    }
}

/// `get_allocation_size`: the segment size for a rounded request.
pub(crate) fn allocation_size(rounded: u64) -> u64 {
    if rounded <= SMALL_SIZE {
        SMALL_BUFFER
    } else if rounded < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        round_up(rounded, GRANULARITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_follows_gmlake() {
        assert_eq!(round_size(1), 512);
        assert_eq!(round_size(1 << 20), 1 << 20);
        assert_eq!(round_size((1 << 20) + 1), 2 << 20);
        assert_eq!(round_size(5 << 20), 6 << 20);
        assert_eq!(allocation_size(512), SMALL_BUFFER);
        assert_eq!(allocation_size(8 << 20), LARGE_BUFFER);
        assert_eq!(allocation_size(10 << 20), 10 << 20);
    }
}
