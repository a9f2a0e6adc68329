//! What a burst of `segment_free` / `segment_unmap` entries was.
//!
//! PyTorch's trace has no entry for `torch.cuda.empty_cache()`: a call shows
//! up only as the segments it released. The same burst also appears inside
//! a `malloc` that found no cached block, failed to get a new segment, and
//! released the cache before retrying (`release_cached_blocks` followed by
//! `alloc_block(retry=true)` in `DeviceCachingAllocator::malloc`); then a
//! `segment_alloc` (or `segment_map`) and the `alloc`, or an `oom`, follow.
//!
//! Telling the two apart:
//! 1. A burst not followed by a new segment or an OOM is an `empty_cache()`.
//! 2. A burst followed by one is a release-and-retry only if no cached block
//!    could have served the request: `malloc` searches the cache before it
//!    calls the driver. Every segment the burst released was a whole free
//!    block of that size, on its stream and in its pool, when the burst
//!    began; if one of them would have passed `get_free_block`'s checks for
//!    the request that follows (same stream, same pool, large enough, and
//!    not refused by `max_split_size_mb` / `max_non_split_rounding_mb`),
//!    the malloc cannot have reached the retry: the burst was an
//!    `empty_cache()` right before that allocation (scripts often call it
//!    just after starting the memory history).
//! 3. Otherwise it is read as the retry. Whether the device was full cannot
//!    be told from a snapshot (it records neither the capacity nor other
//!    processes' memory), so that signal is not used.
//!
//! For expandable segments a `segment_unmap` gives back whole free pages
//! of a free block at least that large, so the same test applies with the
//! unmapped size as a lower bound of the block; the pool of an unmapped
//! range is small unless its size is a multiple of the large page.

use crate::snapshot::model::{Action, TraceEntry};
use crate::snapshot::size_rules::SizeRules;

/// 1 MiB: the largest request the small pool serves.
const SMALL_SIZE: u64 = 1 << 20;
/// 2 MiB: every small-pool segment (and small expandable page).
const SMALL_BUFFER: u64 = 2 << 20;

/// What a release burst was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReleaseBurst {
    /// A `torch.cuda.empty_cache()` call.
    EmptyCache,
    /// A `malloc` that released the cache and retried.
    MallocRetry,
}

/// Classifies the release burst that starts at entry `k`; `None` when `k`
/// does not start one (it is not a release, or the entry before it is one).
pub(crate) fn classify_release_burst(
    entries: &[TraceEntry],
    k: usize,
    rules: &SizeRules<'_>,
) -> Option<ReleaseBurst> {
    let first = entries.get(k)?;
    if !is_release(&first.action)
        || (k > 0 && entries.get(k - 1).is_some_and(|e| is_release(&e.action)))
    {
        return None;
    }
    let mut end = k;
    while entries.get(end).is_some_and(|e| is_release(&e.action)) {
        end += 1;
    }
    let burst = entries.get(k..end).unwrap_or_default();
    let Some(request) = request_after(entries, end) else {
        return Some(ReleaseBurst::EmptyCache);
    };
    if burst.iter().any(|e| could_serve(e, request, rules)) {
        Some(ReleaseBurst::EmptyCache)
    } else {
        Some(ReleaseBurst::MallocRetry)
    }
}

/// The request a burst's following malloc served: (rounded size, stream),
/// when a new segment or an OOM follows the burst.
#[derive(Debug, Clone, Copy)]
struct Request {
    /// Unrounded (`alloc`) or already rounded (`oom`) size.
    size: u64,
    rounded: bool,
    stream: u64,
}

fn request_after(entries: &[TraceEntry], end: usize) -> Option<Request> {
    match entries.get(end).map(|e| &e.action) {
        Some(Action::SegmentAlloc | Action::SegmentMap) => {}
        Some(Action::Oom) => {
            let e = entries.get(end)?;
            return Some(Request {
                size: e.size,
                rounded: true,
                stream: e.stream,
            });
        }
        _ => return None,
    }
    // A malloc may map several ranges before its alloc entry.
    let mut j = end;
    while entries
        .get(j)
        .is_some_and(|e| matches!(e.action, Action::SegmentAlloc | Action::SegmentMap))
    {
        j += 1;
    }
    let e = entries.get(j)?;
    match e.action {
        Action::Alloc => Some(Request {
            size: e.size,
            rounded: false,
            stream: e.stream,
        }),
        Action::Oom => Some(Request {
            size: e.size,
            rounded: true,
            stream: e.stream,
        }),
        // A new segment with no allocation after it: nothing to test
        // against, so the burst keeps the malloc reading.
        _ => Some(Request {
            size: u64::MAX,
            rounded: true,
            stream: e.stream,
        }),
    }
}

/// `true` if the whole free block that release entry `e` gave back would
/// certainly have served `r` (`get_free_block` would have returned it or
/// a better fit).
fn could_serve(e: &TraceEntry, r: Request, rules: &SizeRules<'_>) -> bool {
    if e.stream != r.stream || r.size >= 1 << 60 {
        return false;
    }
    let s = if r.rounded {
        r.size
    } else {
        (rules.round)(r.size)
    };
    let request_small = s <= SMALL_SIZE;
    let (block, exact) = match e.action {
        // A cudaMalloc segment: small-pool segments are 2 MiB, large ones
        // at least 10 MiB.
        Action::SegmentFree => (e.size, true),
        // Free pages of a free mapped block of at least this size.
        Action::SegmentUnmap => (e.size, false),
        _ => return false,
    };
    let block_small = if exact {
        block == SMALL_BUFFER
    } else {
        rules.large_page == 0 || block % rules.large_page != 0
    };
    if block_small != request_small || block < s {
        return false;
    }
    let mss = rules.max_split_size;
    if mss == u64::MAX {
        return true;
    }
    if !exact {
        // The block's exact size decides the max_split_size checks.
        return false;
    }
    if s < mss {
        block < mss
    } else {
        block < s.saturating_add(rules.max_non_split_rounding)
    }
}

/// `segment_free` or `segment_unmap`.
pub(super) fn is_release(a: &Action) -> bool {
    matches!(a, Action::SegmentFree | Action::SegmentUnmap)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn e(action: &str, addr: u64, size: u64, stream: u64) -> TraceEntry {
        TraceEntry {
            action: Action::from_name(action),
            addr: Some(addr),
            device_free: None,
            size,
            stream,
            time_us: None,
            frames: None,
            compile_context: None,
            user_metadata: None,
            pool_id: None,
        }
    }

    fn classify(entries: &[TraceEntry], rules: &SizeRules<'_>) -> Option<ReleaseBurst> {
        classify_release_burst(entries, 0, rules)
    }

    #[test]
    fn a_burst_with_nothing_allocated_after_it_is_empty_cache() {
        let r = SizeRules::default();
        let t = [e("segment_free", 0x1000_0000, 20 * MIB, 0)];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::EmptyCache));
        let t = [
            e("segment_free", 0x1000_0000, 20 * MIB, 0),
            e("alloc", 0x2000_0000, 512, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::EmptyCache));
        // Only the first release of a burst starts it.
        let t = [
            e("segment_free", 0x1000_0000, 20 * MIB, 0),
            e("segment_free", 0x3000_0000, 20 * MIB, 0),
        ];
        assert_eq!(classify_release_burst(&t, 1, &r), None);
        assert_eq!(
            classify_release_burst(&[e("alloc", 1, 1, 0)], 0, &r),
            None,
            "not a release"
        );
    }

    #[test]
    fn a_released_segment_that_fits_the_next_request_makes_it_empty_cache() {
        let r = SizeRules::default();
        // 20 MiB released, then a new 20 MiB segment for a 5 MiB request:
        // the released segment would have served it.
        let t = [
            e("segment_free", 0x1000_0000, 20 * MIB, 0),
            e("segment_alloc", 0x2000_0000, 20 * MIB, 0),
            e("alloc", 0x2000_0000, 5 * MIB, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::EmptyCache));
        // Too small for the request: the malloc's retry.
        let t = [
            e("segment_free", 0x1000_0000, 20 * MIB, 0),
            e("segment_alloc", 0x2000_0000, 40 * MIB, 0),
            e("alloc", 0x2000_0000, 30 * MIB, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::MallocRetry));
    }

    #[test]
    fn another_stream_or_pool_does_not_count() {
        let r = SizeRules::default();
        let t = [
            e("segment_free", 0x1000_0000, 20 * MIB, 7),
            e("segment_alloc", 0x2000_0000, 20 * MIB, 0),
            e("alloc", 0x2000_0000, 5 * MIB, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::MallocRetry));
        // A small-pool segment (2 MiB) cannot serve a large request, nor a
        // large segment a small one.
        let t = [
            e("segment_free", 0x1000_0000, 2 * MIB, 0),
            e("segment_alloc", 0x2000_0000, 20 * MIB, 0),
            e("alloc", 0x2000_0000, 1536 * 1024, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::MallocRetry));
        let t = [
            e("segment_free", 0x1000_0000, 20 * MIB, 0),
            e("segment_alloc", 0x2000_0000, 2 * MIB, 0),
            e("alloc", 0x2000_0000, 4096, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::MallocRetry));
        let t = [
            e("segment_free", 0x1000_0000, 2 * MIB, 0),
            e("segment_alloc", 0x2000_0000, 2 * MIB, 0),
            e("alloc", 0x2000_0000, 4096, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::EmptyCache));
    }

    #[test]
    fn an_oom_after_the_burst_is_tested_with_its_rounded_size() {
        let r = SizeRules::default();
        let oom = |size| TraceEntry {
            action: Action::Oom,
            addr: None,
            device_free: Some(0),
            ..e("oom", 0, size, 0)
        };
        let t = [e("segment_free", 0x1000_0000, 20 * MIB, 0), oom(30 * MIB)];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::MallocRetry));
        let t = [e("segment_free", 0x1000_0000, 40 * MIB, 0), oom(30 * MIB)];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::EmptyCache));
    }

    #[test]
    fn max_split_size_refusals_keep_the_retry_reading() {
        let round = |n: u64| n.max(1).div_ceil(512) * 512;
        let r = SizeRules {
            round: &round,
            max_split_size: 128 * MIB,
            max_non_split_rounding: 20 * MIB,
            large_page: 20 * MIB,
        };
        // A 200 MiB free segment is oversize: a 5 MiB request never uses it.
        let t = [
            e("segment_free", 0x1000_0000, 200 * MIB, 0),
            e("segment_alloc", 0x2000_0000, 20 * MIB, 0),
            e("alloc", 0x2000_0000, 5 * MIB, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::MallocRetry));
        // An oversize request takes an oversize block less than 20 MiB larger.
        let t = [
            e("segment_free", 0x1000_0000, 210 * MIB, 0),
            e("segment_alloc", 0x2000_0000, 200 * MIB, 0),
            e("alloc", 0x2000_0000, 200 * MIB, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::EmptyCache));
        let t = [
            e("segment_free", 0x1000_0000, 220 * MIB, 0),
            e("segment_alloc", 0x2000_0000, 200 * MIB, 0),
            e("alloc", 0x2000_0000, 200 * MIB, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::MallocRetry));
    }

    #[test]
    fn unmapped_pages_count_as_a_block_at_least_that_large() {
        let r = SizeRules::default();
        let t = [
            e("segment_unmap", 0x1000_0000, 40 * MIB, 0),
            e("segment_map", 0x2000_0000, 20 * MIB, 0),
            e("alloc", 0x2000_0000, 30 * MIB, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::EmptyCache));
        let t = [
            e("segment_unmap", 0x1000_0000, 20 * MIB, 0),
            e("segment_map", 0x2000_0000, 40 * MIB, 0),
            e("segment_map", 0x4000_0000, 20 * MIB, 0),
            e("alloc", 0x2000_0000, 50 * MIB, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::MallocRetry));
        // Small pages (not a multiple of 20 MiB) serve small requests.
        let t = [
            e("segment_unmap", 0x1000_0000, 2 * MIB, 0),
            e("segment_map", 0x2000_0000, 2 * MIB, 0),
            e("alloc", 0x2000_0000, 4096, 0),
        ];
        assert_eq!(classify(&t, &r), Some(ReleaseBurst::EmptyCache));
    }
}
