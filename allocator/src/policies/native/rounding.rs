//! Size rounding and segment sizing: `DeviceCachingAllocator::round_size`,
//! `roundup_power2_next_division` and `get_allocation_size` in
//! c10/cuda/CUDACachingAllocator.cpp.

use crate::conf::{AllocConf, MIB, ROUNDUP_INTERVALS};

/// Every block size is a multiple of this (`kMinBlockSize`).
pub(super) const MIN_BLOCK_SIZE: u64 = 512;
/// Rounded sizes up to this go to the small pool (`kSmallSize`).
pub(super) const SMALL_SIZE: u64 = MIB;
/// Segment size of the small pool and its expandable page (`kSmallBuffer`).
pub(super) const SMALL_BUFFER: u64 = 2 * MIB;
/// Large requests below this get a whole large-buffer segment (`kMinLargeAlloc`).
pub(super) const MIN_LARGE_ALLOC: u64 = 10 * MIB;
/// Larger segments are rounded up to a multiple of this (`kRoundLarge`).
pub(super) const ROUND_LARGE: u64 = 2 * MIB;

/// Index of the `roundup_power2_divisions` interval of a request:
/// `clamp(floor(log2(n)) - 20, 0, 15)`.
#[inline]
pub fn interval_index(n: u64) -> usize {
    if n == 0 {
        return 0;
    }
    let log2 = 63 - n.leading_zeros() as i64;
    (log2 - 20).clamp(0, 15) as usize
}

// `interval_index` returns at most 15: a valid index of the table.
const _: () = assert!(ROUNDUP_INTERVALS == 16);

/// PyTorch's `roundup_power2_next_division`: `n` rounded up to the next of
/// `divisions` equal steps between its enclosing powers of two (saturating
/// at `u64::MAX`).
///
/// # Panics
///
/// If `n` or `divisions` is 0 ([`round_size`] only calls it with
/// `n >= 512` and `divisions > 1`).
#[inline]
pub(super) fn round_to_pow2_division(n: u64, divisions: u64) -> u64 {
    if n.is_power_of_two() {
        return n;
    }
    let floor = 1u64 << (63 - n.leading_zeros());
    let step = floor >> (63 - divisions.leading_zeros());
    if step == 0 {
        return floor << 1;
    }
    let base = n & !(step - 1);
    if base == n {
        n
    } else {
        base.saturating_add(step)
    }
}

/// `round_size`: the block size a request of `n` bytes gets. Sizes within
/// a rounding step of `u64::MAX` round to `u64::MAX` (`malloc` refuses
/// requests of `MAX_REQUEST` or more before rounding them).
// Indexing: `interval_index` clamps to `0..=15` and the table is a
// `[u32; ROUNDUP_INTERVALS]` with `ROUNDUP_INTERVALS == 16` (asserted at
// compile time below `interval_index`).
#[allow(clippy::indexing_slicing)]
#[inline]
pub fn round_size(conf: &AllocConf, n: u64) -> u64 {
    if n < MIN_BLOCK_SIZE {
        return MIN_BLOCK_SIZE;
    }
    let d = conf.roundup_power2_divisions[interval_index(n)] as u64;
    if d > 1 && n > MIN_BLOCK_SIZE * d {
        round_to_pow2_division(n, d)
    } else {
        n.div_ceil(MIN_BLOCK_SIZE).saturating_mul(MIN_BLOCK_SIZE)
    }
}

/// `get_allocation_size`: bytes asked from cudaMalloc for a new segment that
/// must hold a block of rounded size `s` (saturating at `u64::MAX`).
#[inline]
pub fn allocation_size(conf: &AllocConf, s: u64) -> u64 {
    if s <= SMALL_SIZE {
        SMALL_BUFFER
    } else if s < MIN_LARGE_ALLOC {
        conf.large_segment_size_bytes()
    } else {
        s.div_ceil(ROUND_LARGE).saturating_mul(ROUND_LARGE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::AllocConf;

    fn with_divisions(d: u32) -> AllocConf {
        AllocConf {
            roundup_power2_divisions: [d; 16],
            ..AllocConf::default()
        }
    }

    #[test]
    fn default_rounding() {
        let c = AllocConf::default();
        assert_eq!(round_size(&c, 1), 512);
        assert_eq!(round_size(&c, 511), 512);
        assert_eq!(round_size(&c, 512), 512);
        assert_eq!(round_size(&c, 513), 1024);
        assert_eq!(round_size(&c, 600_000), 600_064);
        assert_eq!(round_size(&c, 1_048_577), 1_049_088);
        assert_eq!(round_size(&c, 10_485_000), 10_485_248);
        assert_eq!(round_size(&c, 10_485_500), 10_485_760);
        assert_eq!(round_size(&c, 31_457_281), 31_457_792);
    }

    #[test]
    fn pow2_division_rounding() {
        // The guard n > 512*d of `DeviceCachingAllocator::round_size` keeps
        // small requests on the 512 rule.
        assert_eq!(round_size(&with_divisions(4), 1200), 1536);
        assert_eq!(round_size(&with_divisions(2), 2_621_440), 3 * MIB);
        assert_eq!(round_size(&with_divisions(4), 2_621_440), 2_621_440);
        assert_eq!(round_size(&with_divisions(4), 31_457_280), 32 * MIB);
        assert_eq!(round_size(&with_divisions(8), 700 * MIB), 704 * MIB);
        // powers of two stay
        assert_eq!(round_size(&with_divisions(8), 64 * MIB), 64 * MIB);
        // d = 1 means off
        assert_eq!(
            round_size(&with_divisions(1), 700 * MIB + 1),
            700 * MIB + 512
        );
        // the guard boundary: n == 512*d is not power-2 rounded
        assert_eq!(round_size(&with_divisions(4), 2048), 2048);
        assert_eq!(round_size(&with_divisions(4), 2049), 2560);
        // large d: step = floor / d
        assert_eq!(
            round_size(&with_divisions(16), (1 << 30) + 1),
            (1 << 30) + (64 << 20)
        );
    }

    #[test]
    fn table_is_indexed_by_unrounded_size() {
        let mut c = AllocConf::default();
        c.roundup_power2_divisions[1] = 4; // [2 MiB, 4 MiB)
        assert_eq!(interval_index(2 * MIB - 1), 0);
        assert_eq!(interval_index(2 * MIB), 1);
        assert_eq!(interval_index(u64::MAX), 15);
        assert_eq!(interval_index(0), 0);
        assert_eq!(round_size(&c, 2 * MIB - 1), 2 * MIB); // 512 rule
        assert_eq!(round_size(&c, 2 * MIB + 1), 2 * MIB + 512 * 1024);
    }

    #[test]
    fn segment_sizes() {
        let c = AllocConf::default();
        assert_eq!(allocation_size(&c, 512), 2 * MIB);
        assert_eq!(allocation_size(&c, MIB), 2 * MIB);
        assert_eq!(allocation_size(&c, MIB + 512), 20 * MIB);
        assert_eq!(allocation_size(&c, 10 * MIB - 512), 20 * MIB);
        assert_eq!(allocation_size(&c, 10 * MIB), 10 * MIB);
        assert_eq!(allocation_size(&c, 31_457_792), 32 * MIB);
        assert_eq!(allocation_size(&c, 700 * MIB), 700 * MIB);
        let big = AllocConf {
            large_segment_size: Some(64 * MIB),
            ..AllocConf::default()
        };
        assert_eq!(allocation_size(&big, 2 * MIB), 64 * MIB);
    }

    /// These are public and get sizes straight from users (`vramlab conf
    /// --sizes`), not only requests `malloc` has already capped at
    /// `MAX_REQUEST`: rounding near `u64::MAX` must saturate, not overflow.
    #[test]
    fn huge_sizes_saturate() {
        let c = AllocConf::default();
        assert_eq!(round_size(&c, u64::MAX), u64::MAX);
        let last_multiple = !511u64;
        assert_eq!(round_size(&c, last_multiple + 1), u64::MAX);
        assert_eq!(round_size(&c, last_multiple), last_multiple);
        assert_eq!(round_size(&c, last_multiple - 1), last_multiple);
        for d in [2, 8, 1 << 31] {
            assert_eq!(round_size(&with_divisions(d), u64::MAX), u64::MAX);
            assert_eq!(round_size(&with_divisions(d), (1 << 63) + 1), {
                let step = (1u64 << 63) / u64::from(d);
                (1 << 63) + step
            });
        }
        assert_eq!(round_to_pow2_division(u64::MAX, 4), u64::MAX);
        assert_eq!(allocation_size(&c, u64::MAX), u64::MAX);
        let last_large = !(ROUND_LARGE - 1);
        assert_eq!(allocation_size(&c, last_large + 1), u64::MAX);
        assert_eq!(allocation_size(&c, last_large), last_large);
        assert_eq!(allocation_size(&c, 1 << 63), 1 << 63);
    }
}
