//! Exact scenario tests of the native policy: worked examples of
//! `DeviceCachingAllocator::malloc` and `free` (c10/cuda/CUDACachingAllocator.cpp)
//! (the `example_11_*` tests), the split/no-split boundaries, the oversize
//! rules, the release-on-OOM order and the statistics. Every step runs the
//! invariant checker.

mod common;

/// The policy under test, on a simulated device.
type Fixture = common::Fixture<NativeAllocator<SimDevice>>;

use vramlab_allocator::SimDevice;
use vramlab_allocator::{
    AllocConf, AllocError, Allocator, BlockHandle, Inspect, Invariants, NativeAllocator,
};
use vramlab_allocator::{Device, DeviceCallKind};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

impl Fixture {
    fn new(conf: AllocConf) -> Self {
        Fixture {
            a: NativeAllocator::new(conf, SimDevice::unlimited()),
        }
    }

    fn with_capacity(conf: AllocConf, capacity: u64) -> Self {
        Fixture {
            a: NativeAllocator::new(conf, SimDevice::with_capacity(Some(capacity))),
        }
    }

    fn default() -> Self {
        Fixture::new(AllocConf::default())
    }
}

fn conf(f: impl FnOnce(&mut AllocConf)) -> AllocConf {
    let mut c = AllocConf::default();
    f(&mut c);
    c
}

use DeviceCallKind::{
    Free as DFree, Malloc as DMalloc, Map as DMap, Reserve as DReserve, Unmap as DUnmap,
};

#[test]
fn example_11_1_two_and_a_half_mib() {
    let mut f = Fixture::default();
    let a = f.malloc(2_621_440);
    assert_eq!(f.calls(), vec![(DMalloc, 20 * MIB)]);
    assert_eq!(f.stat("segment.all.current"), 1);
    assert_eq!(f.stat("reserved_bytes.large_pool.current"), 20 * MIB as i64);
    assert_eq!(f.stat("allocation.all.current"), 1);
    assert_eq!(f.stat("allocated_bytes.all.current"), 2_621_440);
    assert_eq!(f.stat("active_bytes.all.current"), 2_621_440);
    assert_eq!(f.stat("requested_bytes.all.current"), 2_621_440);
    assert_eq!(f.stat("inactive_split.all.current"), 1);
    assert_eq!(f.stat("inactive_split_bytes.all.current"), 18_350_080);
    assert_eq!(f.stat("num_device_alloc"), 1);
    // Second request on the same stream: best fit in the 17.5 MiB tail.
    let b = f.malloc(2_621_440);
    assert_eq!(f.ptr(b), f.ptr(a) + 2_621_440);
    assert_eq!(f.calls().len(), 1);
    assert_eq!(f.stat("inactive_split_bytes.all.current"), 15 * MIB as i64);
    assert_eq!(f.stat("inactive_split.all.current"), 1);
    // The same request on another stream needs its own segment.
    f.malloc_on(2_621_440, 0x5555);
    assert_eq!(f.calls(), vec![(DMalloc, 20 * MIB), (DMalloc, 20 * MIB)]);
    assert_eq!(f.stat("inactive_split.all.current"), 2);
}

#[test]
fn example_11_1_variants_roundup() {
    let mut f = Fixture::new(conf(|c| c.roundup_power2_divisions = [2; 16]));
    f.malloc(2_621_440);
    assert_eq!(f.stat("allocated_bytes.all.current"), 3 * MIB as i64);
    assert_eq!(f.stat("requested_bytes.all.current"), 2_621_440);
    let mut f = Fixture::new(conf(|c| c.roundup_power2_divisions = [4; 16]));
    f.malloc(2_621_440);
    assert_eq!(f.stat("allocated_bytes.all.current"), 2_621_440);
}

#[test]
fn example_11_2_thirty_mib() {
    let mut f = Fixture::default();
    f.malloc(31_457_280);
    assert_eq!(f.calls(), vec![(DMalloc, 30 * MIB)]);
    assert_eq!(f.stat("inactive_split.all.current"), 0);

    let mut f = Fixture::default();
    f.malloc(31_457_281);
    assert_eq!(f.calls(), vec![(DMalloc, 32 * MIB)]);
    assert_eq!(f.stat("allocated_bytes.all.current"), 31_457_792);
    assert_eq!(f.stat("inactive_split_bytes.all.current"), 2_096_640);
    assert_eq!(f.stat("inactive_split.all.current"), 1);

    // 31.5 MiB: remainder 512 KiB <= 1 MiB stays inside the block.
    let mut f = Fixture::default();
    f.malloc(33_030_144);
    assert_eq!(f.calls(), vec![(DMalloc, 32 * MIB)]);
    assert_eq!(f.stat("allocated_bytes.all.current"), 33_554_432);
    assert_eq!(f.stat("requested_bytes.all.current"), 33_030_144);
    assert_eq!(f.stat("inactive_split.all.current"), 0);

    let mut f = Fixture::new(conf(|c| c.roundup_power2_divisions = [4; 16]));
    f.malloc(31_457_280);
    assert_eq!(f.calls(), vec![(DMalloc, 32 * MIB)]);
    assert_eq!(f.stat("allocated_bytes.all.current"), 32 * MIB as i64);
}

#[test]
fn large_pool_split_boundary_is_strictly_more_than_one_mib() {
    // A 20 MiB segment: a 19 MiB request leaves exactly 1 MiB -> no split.
    let mut f = Fixture::default();
    let a = f.malloc(2 * MIB);
    f.free(a); // 20 MiB segment, whole and free
    f.malloc(19 * MIB);
    assert_eq!(f.calls().len(), 1);
    assert_eq!(f.stat("allocated_bytes.all.current"), 20 * MIB as i64);
    assert_eq!(f.stat("inactive_split.all.current"), 0);
    // 19 MiB - 512 leaves 1 MiB + 512 -> split.
    let mut f = Fixture::default();
    let a = f.malloc(2 * MIB);
    f.free(a);
    f.malloc(19 * MIB - 512);
    assert_eq!(
        f.stat("allocated_bytes.all.current"),
        (19 * MIB - 512) as i64
    );
    assert_eq!(
        f.stat("inactive_split_bytes.all.current"),
        (MIB + 512) as i64
    );
}

#[test]
fn example_11_4_small_and_boundary_cases() {
    let mut f = Fixture::default();
    let a = f.malloc(600_000);
    assert_eq!(f.calls(), vec![(DMalloc, 2 * MIB)]);
    assert_eq!(f.stat("allocated_bytes.small_pool.current"), 600_064);
    assert_eq!(f.stat("inactive_split_bytes.small_pool.current"), 1_497_088);
    f.free(a);
    assert_eq!(f.stat("inactive_split.all.current"), 0);

    // Two 1 MiB requests share one 2 MiB small segment; the second leaves no remainder.
    let mut f = Fixture::default();
    let a = f.malloc(MIB);
    let b = f.malloc(MIB);
    assert_eq!(f.calls(), vec![(DMalloc, 2 * MIB)]);
    assert_eq!(f.ptr(b), f.ptr(a) + MIB);
    assert_eq!(f.stat("inactive_split.small_pool.current"), 0);

    let mut f = Fixture::default();
    f.malloc(1_048_577);
    assert_eq!(f.calls(), vec![(DMalloc, 20 * MIB)]);
    assert_eq!(f.stat("allocated_bytes.large_pool.current"), 1_049_088);

    let mut f = Fixture::default();
    f.malloc(10_485_000);
    assert_eq!(f.calls(), vec![(DMalloc, 20 * MIB)]);
    assert_eq!(f.stat("inactive_split.large_pool.current"), 1);

    let mut f = Fixture::default();
    f.malloc(10_485_500);
    assert_eq!(f.calls(), vec![(DMalloc, 10 * MIB)]);
    assert_eq!(f.stat("inactive_split.large_pool.current"), 0);
}

/// Up to 2.11 (`BlockComparatorSize`): smallest, then lowest address.
/// Later releases: allocator/tests/native_tie_order.rs.
#[test]
fn best_fit_prefers_smallest_then_lowest_address() {
    let mut f = Fixture {
        a: NativeAllocator::new(
            AllocConf::new(vramlab_allocator::TorchVersion::new(2, 11)),
            SimDevice::unlimited(),
        ),
    };
    // Three whole segments: 30, 24, 24 MiB (freed, cached).
    let a = f.malloc(30 * MIB);
    let b = f.malloc(24 * MIB);
    let c = f.malloc(24 * MIB);
    // The simulated driver places them downwards (as an H200 does), so
    // the later segment is the lower one; the rule is about addresses,
    // not age.
    let (lo, hi) = (f.ptr(b).min(f.ptr(c)), f.ptr(b).max(f.ptr(c)));
    assert!(lo < hi);
    f.free(c);
    f.free(a);
    f.free(b);
    // 22 MiB: both 24 MiB blocks fit equally; the lower address wins.
    let d = f.malloc(22 * MIB);
    assert_eq!(f.ptr(d), lo);
    let e = f.malloc(22 * MIB);
    assert_eq!(f.ptr(e), hi);
    assert_eq!(f.calls().len(), 3);
}

#[test]
fn coalescing_merges_both_neighbours() {
    let mut f = Fixture::default();
    let a = f.malloc(4 * MIB);
    let b = f.malloc(4 * MIB);
    let c = f.malloc(4 * MIB);
    // one 20 MiB segment: a b c + 8 MiB tail
    assert_eq!(f.calls().len(), 1);
    f.free(b);
    assert_eq!(f.stat("inactive_split.all.current"), 2);
    assert_eq!(f.stat("inactive_split_bytes.all.current"), 12 * MIB as i64);
    f.free(c); // merges with b and the tail
    assert_eq!(f.stat("inactive_split.all.current"), 1);
    assert_eq!(f.stat("inactive_split_bytes.all.current"), 16 * MIB as i64);
    f.free(a); // whole segment again
    assert_eq!(f.stat("inactive_split.all.current"), 0);
    assert_eq!(f.stat("inactive_split_bytes.all.current"), 0);
    assert_eq!(f.a.largest_free_block(), 20 * MIB);
    // cumulative counters follow PyTorch's net-change updates
    assert_eq!(f.stat("inactive_split.all.allocated"), 2);
    assert_eq!(f.stat("inactive_split.all.freed"), 2);
}

#[test]
fn example_11_3_oversize_rules() {
    let mss = conf(|c| c.max_split_size = Some(512 * MIB));
    // A cached 710 MiB block serves a 700 MiB request unsplit.
    let mut f = Fixture::new(mss.clone());
    let big = f.malloc(710 * MIB);
    assert_eq!(f.stat("oversize_segments.current"), 1);
    f.free(big);
    let h = f.malloc(734_003_200);
    assert_eq!(f.calls().len(), 1);
    assert_eq!(f.stat("allocated_bytes.all.current"), 744_488_960);
    assert_eq!(f.stat("requested_bytes.all.current"), 734_003_200);
    assert_eq!(f.stat("oversize_allocations.current"), 1);
    assert_eq!(f.stat("inactive_split.all.current"), 0);
    f.free(h);
    assert_eq!(f.stat("oversize_allocations.current"), 0);

    // A cached 720 MiB block is rejected (>= 700 + 20): new segment.
    let mut f = Fixture::new(mss.clone());
    let big = f.malloc(720 * MIB);
    f.free(big);
    f.malloc(734_003_200);
    assert_eq!(f.calls(), vec![(DMalloc, 720 * MIB), (DMalloc, 700 * MIB)]);
    assert_eq!(f.stat("oversize_segments.current"), 2);

    // max_non_split_rounding_mb:1024 lets the 1 GiB block be reused.
    let mut f = Fixture::new(conf(|c| {
        c.max_split_size = Some(512 * MIB);
        c.max_non_split_rounding = Some(1024 * MIB);
    }));
    let big = f.malloc(GIB);
    f.free(big);
    f.malloc(734_003_200);
    assert_eq!(f.calls().len(), 1);
    assert_eq!(f.stat("allocated_bytes.all.current"), GIB as i64);

    // A normal request never takes a block >= max_split_size.
    let mut f = Fixture::new(mss);
    let big = f.malloc(600 * MIB);
    f.free(big);
    f.malloc(100 * MIB);
    assert_eq!(f.calls(), vec![(DMalloc, 600 * MIB), (DMalloc, 100 * MIB)]);
}

/// Builds free cached oversize segments of the given sizes (MiB), then asks
/// for 700 MiB on a device too small to hold it next to them.
fn oom_release_fixture(cached_mib: &[u64], capacity: u64) -> Fixture {
    let mut f = Fixture::with_capacity(conf(|c| c.max_split_size = Some(512 * MIB)), capacity);
    let hs: Vec<_> = cached_mib.iter().map(|&m| f.malloc(m * MIB)).collect();
    for h in hs {
        f.free(h);
    }
    f
}

#[test]
fn example_11_3_release_available_frees_largest_first_until_enough() {
    // Cached {600, 550, 100}; 1250 + 700 does not fit 1500 MiB.
    let mut f = oom_release_fixture(&[600, 550, 100], 1500 * MIB);
    f.malloc(734_003_200);
    assert_eq!(
        f.calls()[3..],
        [(DFree, 600 * MIB), (DFree, 550 * MIB), (DMalloc, 700 * MIB)]
    );
    assert_eq!(f.stat("num_alloc_retries"), 0);
    assert_eq!(f.stat("num_sync_all_streams"), 0);
}

#[test]
fn example_11_3_partial_release_then_full_flush() {
    // Cached {600, 100}: frees 600 (not enough, returns false), the first
    // retry fails (100 + 700 > 750), then empty-cache frees 100 and the
    // retry succeeds.
    let mut f = oom_release_fixture(&[600, 100], 750 * MIB);
    f.malloc(734_003_200);
    assert_eq!(
        f.calls()[2..],
        [(DFree, 600 * MIB), (DFree, 100 * MIB), (DMalloc, 700 * MIB)]
    );
    assert_eq!(f.stat("num_alloc_retries"), 1);
    assert_eq!(f.stat("num_sync_all_streams"), 1);
}

#[test]
fn example_11_3_single_large_block_released() {
    // Cached {1024 (rejected by NSR), 600}: the 1 GiB block is >= the key
    // size and is released alone.
    let mut f = oom_release_fixture(&[1024, 600], 2048 * MIB);
    f.malloc(734_003_200);
    assert_eq!(f.calls()[2..], [(DFree, 1024 * MIB), (DMalloc, 700 * MIB)]);
}

#[test]
fn oom_after_all_attempts() {
    let mut f = Fixture::with_capacity(AllocConf::default(), 100 * MIB);
    let keep = f.malloc(60 * MIB);
    let cached = f.malloc(30 * MIB);
    f.free(cached);
    let before = f.a.stats().allocated_bytes;
    match f.a.malloc(50 * MIB, 0) {
        Err(AllocError::OutOfMemory(r)) => {
            assert_eq!(r.rounded, 50 * MIB);
            assert_eq!(r.device_request, 50 * MIB);
            assert_eq!(r.allocated, 60 * MIB);
            // the flush released the cached 30 MiB segment before failing
            assert_eq!(r.reserved, 60 * MIB);
            assert!(
                r.to_string()
                    .starts_with("CUDA out of memory. Tried to allocate 50.00 MiB.")
            );
        }
        other => panic!("expected OOM, got {other:?}"),
    }
    f.a.check_invariants().unwrap();
    assert_eq!(f.stat("num_ooms"), 1);
    assert_eq!(f.stat("num_alloc_retries"), 1);
    assert_eq!(f.a.stats().allocated_bytes, before);
    assert_eq!(f.calls().last(), Some(&(DFree, 30 * MIB)));
    f.free(keep);
}

#[test]
fn exabyte_and_zero_requests() {
    let mut f = Fixture::default();
    assert_eq!(f.a.malloc(0, 0).unwrap(), BlockHandle::NULL);
    f.a.free(BlockHandle::NULL).unwrap();
    match f.a.malloc(1 << 60, 0) {
        Err(AllocError::OutOfMemory(r)) => {
            assert!(r.exceeds_limit);
            assert_eq!(
                r.to_string(),
                "CUDA out of memory. Tried to allocate more than 1EB memory."
            );
        }
        other => panic!("expected OOM, got {other:?}"),
    }
    assert_eq!(f.stat("num_ooms"), 0);
    assert!(f.calls().is_empty());
    assert!(
        f.a.malloc((1 << 60) - 1, 0).is_ok(),
        "just below the limit is a normal request"
    );
}

#[test]
fn double_free_and_stale_handles_are_errors() {
    let mut f = Fixture::default();
    let a = f.malloc(MIB);
    f.free(a);
    assert!(matches!(f.a.free(a), Err(AllocError::UnknownHandle(_))));
    // The slot may be recycled; the stale handle still fails.
    let _b = f.malloc(4096);
    assert!(f.a.free(a).is_err());
}

#[test]
fn empty_cache_releases_only_whole_free_segments() {
    let mut f = Fixture::default();
    let a = f.malloc(4 * MIB); // segment 1 (20 MiB), stays partly used
    let b = f.malloc(30 * MIB); // segment 2
    let c = f.malloc(4096); // small segment
    f.free(b);
    f.free(c);
    f.a.empty_cache().unwrap();
    f.a.check_invariants().unwrap();
    // large pool first, then small
    assert_eq!(f.calls()[3..], [(DFree, 30 * MIB), (DFree, 2 * MIB)]);
    assert_eq!(f.stat("reserved_bytes.all.current"), 20 * MIB as i64);
    assert_eq!(f.stat("num_sync_all_streams"), 1);
    assert_eq!(f.stat("num_device_free"), 2);
    f.free(a);
    f.a.empty_cache().unwrap();
    assert_eq!(f.stat("reserved_bytes.all.current"), 0);
    assert_eq!(f.stat("segment.all.current"), 0);
    assert_eq!(f.stat("reserved_bytes.all.peak"), (52 * MIB) as i64);
}

#[test]
fn streams_never_share_blocks() {
    let mut f = Fixture::default();
    let a = f.malloc_on(4 * MIB, 7);
    f.free(a);
    f.malloc_on(4 * MIB, 0);
    assert_eq!(
        f.calls().len(),
        2,
        "a block freed on stream 7 is not reused on stream 0"
    );
    f.malloc_on(4 * MIB, 7);
    assert_eq!(f.calls().len(), 2, "but is reused on stream 7");
}

#[test]
fn record_stream_defers_reuse_until_next_malloc() {
    let mut f = Fixture::default();
    let a = f.malloc_on(4 * MIB, 0);
    f.a.record_stream(a, 9).unwrap();
    f.free(a);
    // pending: still active, not allocated
    assert_eq!(f.stat("allocated_bytes.all.current"), 0);
    assert_eq!(f.stat("active_bytes.all.current"), 4 * MIB as i64);
    // process_events at the next malloc completes the free first
    f.malloc_on(4 * MIB, 0);
    assert_eq!(f.calls().len(), 1);
    assert_eq!(f.stat("active_bytes.all.current"), 4 * MIB as i64);
}

#[test]
fn deferred_free_completes_on_request_or_sync() {
    let mut f = Fixture::default();
    let a = f.malloc(4 * MIB);
    f.a.free_deferred(a).unwrap();
    f.a.check_invariants().unwrap();
    // while pending, the block is not reused
    let b = f.malloc(4 * MIB);
    assert_ne!(f.ptr(b), 0);
    assert_eq!(f.stat("active.all.current"), 2);
    f.a.complete_free(a).unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.stat("active.all.current"), 1);
    // completion at a synchronisation, then the trace's completion is a no-op
    f.a.free_deferred(b).unwrap();
    f.a.empty_cache().unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.stat("active.all.current"), 0);
    f.a.complete_free(b).unwrap();
    assert_eq!(f.stat("reserved_bytes.all.current"), 0);
}

#[test]
fn memory_fraction_is_pure_arithmetic() {
    // 1 GiB device, fraction 0.5 -> 512 MiB allowed.
    let mut f = Fixture::with_capacity(AllocConf::default(), GIB);
    f.a.set_memory_fraction(0.5);
    assert_eq!(f.a.allowed_memory_maximum(), Some(512 * MIB));
    f.malloc(500 * MIB);
    assert!(matches!(
        f.a.malloc(20 * MIB, 0),
        Err(AllocError::OutOfMemory(_))
    ));
    // no device call was attempted for the refused request
    assert_eq!(f.calls(), vec![(DMalloc, 500 * MIB)]);
    assert_eq!(f.a.device().failed_mallocs(), 0);
    // 2.11: fraction 1.0 removes the limit
    f.a.set_memory_fraction(1.0);
    assert_eq!(f.a.allowed_memory_maximum(), None);
}

/// GC fixture: a 1 GiB device with fraction 0.5 (512 MiB allowed) and the
/// given threshold. Caches whole blocks A (100 MiB), B (120), C (140), then
/// re-touches B `touch_b` times and C `touch_c` times (each reuse of a whole
/// block ticks the large pool's clock and resets the block's age).
fn gc_fixture(threshold: f64, touch_b: usize, touch_c: usize) -> Fixture {
    let mut f = Fixture::with_capacity(conf(|c| c.garbage_collection_threshold = threshold), GIB);
    f.a.set_memory_fraction(0.5);
    for m in [100, 120, 140] {
        let h = f.malloc(m * MIB);
        f.free(h);
    }
    for (m, n) in [(120, touch_b), (140, touch_c)] {
        for _ in 0..n {
            let h = f.malloc(m * MIB);
            f.free(h);
        }
    }
    assert_eq!(f.calls().len(), 3, "touching reuses cached blocks");
    f
}

fn frees_after_setup(f: &Fixture) -> Vec<(DeviceCallKind, u64)> {
    f.calls()[3..].to_vec()
}

#[test]
fn gc_one_pass_frees_blocks_at_least_average_age() {
    // clock: A@1 B@2 C@3, C touched 3x -> C@6; the 200 MiB miss ticks to 7.
    // ages A=6 B=5 C=1, avg 4 -> pass 1 frees A and B (220 >= target 104).
    let mut f = gc_fixture(0.5, 0, 3);
    f.malloc(200 * MIB);
    assert_eq!(
        frees_after_setup(&f),
        vec![(DFree, 100 * MIB), (DFree, 120 * MIB), (DMalloc, 200 * MIB)]
    );
}

#[test]
fn gc_second_pass_uses_the_new_average() {
    // A@1 B@4 C@5, miss at 6: ages 5,2,1 avg 2.67 -> pass 1 frees A (100 < 104);
    // pass 2 avg (2+1)/2 = 1.5 frees B only.
    let mut f = gc_fixture(0.5, 1, 1);
    f.malloc(200 * MIB);
    assert_eq!(
        frees_after_setup(&f),
        vec![(DFree, 100 * MIB), (DFree, 120 * MIB), (DMalloc, 200 * MIB)]
    );
    assert_eq!(
        f.a.largest_free_block(),
        140 * MIB,
        "the youngest block stays cached"
    );
}

#[test]
fn gc_stops_once_target_is_reclaimed() {
    // threshold 0.52 -> 266.24 MiB, target 93.76 MiB: pass 1 frees A only.
    let mut f = gc_fixture(0.52, 1, 1);
    f.malloc(200 * MIB);
    assert_eq!(
        frees_after_setup(&f),
        vec![(DFree, 100 * MIB), (DMalloc, 200 * MIB)]
    );
}

#[test]
fn gc_needs_a_memory_fraction() {
    let mut f = Fixture::with_capacity(conf(|c| c.garbage_collection_threshold = 0.1), GIB);
    for m in [100, 120, 140] {
        let h = f.malloc(m * MIB);
        f.free(h);
    }
    f.malloc(200 * MIB);
    assert_eq!(frees_after_setup(&f), vec![(DMalloc, 200 * MIB)]);
}

#[test]
fn expandable_segments_map_pages() {
    let ex = conf(|c| c.expandable_segments = true);
    // 11.1 variant: one 20 MiB page mapped, segment count stays 0.
    let mut f = Fixture::new(ex.clone());
    f.malloc(2_621_440);
    let c = f.calls();
    assert_eq!(c[0].0, DReserve);
    assert_eq!(c[1], (DMap, 20 * MIB));
    assert_eq!(f.stat("segment.all.current"), 0);
    assert_eq!(f.stat("reserved_bytes.all.current"), 20 * MIB as i64);
    assert_eq!(f.stat("inactive_split.all.current"), 0);
    assert_eq!(f.stat("num_device_alloc"), 1);
    assert_eq!(f.a.largest_free_block(), 18_350_080);

    // 11.2 variant: 30 MiB maps 2 pages in one call; a following 16 MiB
    // uses the 10 MiB tail plus one new page, leaving 14 MiB free.
    let mut f = Fixture::new(ex);
    let a = f.malloc(30 * MIB);
    assert_eq!(f.calls()[1], (DMap, 40 * MIB));
    let b = f.malloc(16 * MIB);
    assert_eq!(f.calls()[2], (DMap, 20 * MIB));
    assert_eq!(f.ptr(b), f.ptr(a) + 30 * MIB);
    assert_eq!(f.a.largest_free_block(), 14 * MIB);
    assert_eq!(f.stat("reserved_bytes.all.current"), 60 * MIB as i64);
    // freeing never unmaps; empty_cache unmaps whole free pages only
    f.free(a);
    assert_eq!(f.stat("reserved_bytes.all.current"), 60 * MIB as i64);
    f.a.empty_cache().unwrap();
    f.a.check_invariants().unwrap();
    // [0,30) free -> page 0 fully free, page 1 holds 30..40 free + b from 30
    assert_eq!(f.calls()[3], (DUnmap, 20 * MIB));
    assert_eq!(f.stat("reserved_bytes.all.current"), 40 * MIB as i64);
    assert_eq!(f.stat("num_device_free"), 1);
    f.free(b);
    f.a.empty_cache().unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.stat("reserved_bytes.all.current"), 0);
    assert_eq!(f.a.device().used(), 0);
    assert_eq!(f.calls().last().map(|c| c.0), Some(DeviceCallKind::Release));
}

#[test]
fn expandable_700_mib_maps_exactly() {
    let mut f = Fixture::new(conf(|c| c.expandable_segments = true));
    f.malloc(734_003_200);
    assert_eq!(f.calls()[1], (DMap, 700 * MIB));
    assert_eq!(f.a.largest_free_block(), 0);
}

#[test]
fn device_total_sizes_expandable_reservations() {
    let mut f = Fixture::with_capacity(conf(|c| c.expandable_segments = true), 80 * GIB);
    f.malloc(MIB);
    // small pool: 2 MiB pages, reservation 90 GiB
    assert_eq!(f.calls()[0], (DReserve, 90 * GIB));
    assert_eq!(f.a.device().mem_info().total, 80 * GIB);
}

#[test]
fn memory_fraction_semantics_follow_the_target_version() {
    // <= 2.9: any call sets the limit, even 1.0 (which enables GC);
    // 2.10+: 1.0 removes the limit.
    let v29: vramlab_allocator::TorchVersion = "2.9".parse().unwrap();
    let mut old = Fixture::with_capacity(AllocConf::new(v29), GIB);
    old.a.set_memory_fraction(1.0);
    assert_eq!(old.a.allowed_memory_maximum(), Some(GIB));
    let mut new = Fixture::with_capacity(AllocConf::default(), GIB);
    new.a.set_memory_fraction(1.0);
    assert_eq!(new.a.allowed_memory_maximum(), None);
    // The 2.10+ config key applies the fraction at construction.
    let c = AllocConf::parse(
        "per_process_memory_fraction:0.25",
        vramlab_allocator::TorchVersion::NEWEST,
    )
    .unwrap();
    let f = Fixture::with_capacity(c, GIB);
    assert_eq!(f.a.allowed_memory_maximum(), Some(GIB / 4));
}

#[test]
fn large_segment_size_changes_segments_and_pages() {
    let c = AllocConf::parse(
        "large_segment_size_mb:64",
        vramlab_allocator::TorchVersion::NEWEST,
    )
    .unwrap();
    let mut f = Fixture::new(c);
    f.malloc(2 * MIB);
    assert_eq!(f.calls(), vec![(DMalloc, 64 * MIB)]);
    let c = AllocConf::parse(
        "large_segment_size_mb:64,expandable_segments:True",
        vramlab_allocator::TorchVersion::NEWEST,
    )
    .unwrap();
    let mut f = Fixture::new(c);
    f.malloc(2 * MIB);
    assert_eq!(f.calls()[1], (DMap, 64 * MIB));
}

#[test]
fn expandable_segments_ignore_max_split_size_when_splitting() {
    // With expandable segments every large block splits with the 512-byte
    // rule, even above max_split_size (`DeviceCachingAllocator::should_split`).
    let c = conf(|c| {
        c.expandable_segments = true;
        c.max_split_size = Some(64 * MIB);
    });
    let mut f = Fixture::new(c);
    let a = f.malloc(100 * MIB); // maps 5 pages = 100 MiB, exact
    f.free(a);
    // get_free_block rejects the 100 MiB block for a 70 MiB oversize request
    // (100 >= 70 + 20), but the expandable path finds it as room in front of
    // the unmapped tail, maps nothing and splits it
    // (`DeviceCachingAllocator::try_allocate_expandable_block`).
    let b = f.malloc(70 * MIB);
    assert_eq!(f.calls().iter().filter(|c| c.0 == DMap).count(), 1);
    assert_eq!(f.a.largest_free_block(), 30 * MIB);
    assert_eq!(f.stat("allocated_bytes.all.current"), (70 * MIB) as i64);
    assert_eq!(f.stat("oversize_allocations.current"), 1);
    f.free(b);
}

#[test]
fn pending_frees_block_merging_until_completed() {
    let mut f = Fixture::default();
    let a = f.malloc(4 * MIB);
    let b = f.malloc(4 * MIB);
    f.a.free_deferred(a).unwrap();
    f.free(b); // b cannot merge with the pending a
    assert_eq!(
        f.a.largest_free_block(),
        16 * MIB - 4 * MIB + 4 * MIB - 4 * MIB + 4 * MIB
    );
    f.a.complete_free(a).unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.a.largest_free_block(), 20 * MIB);
}

/// Up to 2.11 the driver's address order decides a best-fit tie: two
/// equal cached 24 MiB segments, a 22 MiB request takes the lower one,
/// which is the older segment with ascending addresses and the newer one
/// with the H200 driver's order (new regions below the old ones).
#[test]
fn the_placement_decides_which_equal_block_a_request_takes() {
    use vramlab_allocator::Placement;
    for (placement, takes_newer) in [(Placement::Ascending, false), (Placement::Driver, true)] {
        let mut dev = SimDevice::unlimited();
        dev.set_placement(placement);
        let mut f = Fixture {
            a: NativeAllocator::new(
                AllocConf::new(vramlab_allocator::TorchVersion::new(2, 11)),
                dev,
            ),
        };
        let old = f.malloc(24 * MIB);
        let new = f.malloc(24 * MIB);
        let (p_old, p_new) = (f.ptr(old), f.ptr(new));
        assert_eq!(p_old < p_new, placement == Placement::Ascending);
        f.free(old);
        f.free(new);
        let got = f.malloc(22 * MIB);
        let want = if takes_newer { p_new } else { p_old };
        assert_eq!(f.ptr(got), want, "{placement}");
        assert_eq!(f.calls().len(), 2, "no third segment");
    }
}

/// `throw_on_cudamalloc_oom` (2.12+): a new segment larger than the free
/// memory fails before the driver is asked — no cached blocks released, no
/// retry, `num_ooms` not counted. Measured with PyTorch 2.12.1–2.15.0 on
/// the fake device (scripts/oracle_experiments/throw_on_oom.py; raw output in
/// docs/results/releases/throw-on-cudamalloc-oom.txt): on a
/// 40 MiB device with 24 MiB allocated, an 18 MiB request fails with
/// retries 0, OOMs 0 under the key, and retries 1, OOMs 1 without it.
#[test]
fn throw_on_cudamalloc_oom_rejects_before_the_driver() {
    let v = vramlab_allocator::TorchVersion::new(2, 15);
    for (on, retries, ooms) in [(false, 1, 1), (true, 0, 0)] {
        let mut c = AllocConf::new(v);
        c.throw_on_cudamalloc_oom = on;
        let mut f = Fixture::with_capacity(c, 40 * MIB);
        let _held = f.malloc(24 * MIB);
        match f.a.malloc(18 * MIB, 0) {
            Err(AllocError::OutOfMemory(r)) => {
                assert_eq!(r.preemptive, on);
                let msg = r.to_string();
                let want = if on {
                    "CUDA out of memory. Allocation was preemptively rejected because it would exceed per_process_memory_fraction limit. Requested size: 18.00 MiB"
                } else {
                    "CUDA out of memory. Tried to allocate 18.00 MiB."
                };
                assert!(msg.starts_with(want), "{msg}");
            }
            other => panic!("expected OOM, got {other:?}"),
        }
        assert_eq!(f.stat("num_alloc_retries"), retries, "on={on}");
        assert_eq!(f.stat("num_ooms"), ooms, "on={on}");
        assert_eq!(f.stat("num_device_alloc"), 1);
    }
    // 2.11 has no such key.
    assert!(
        AllocConf::parse(
            "throw_on_cudamalloc_oom:True",
            vramlab_allocator::TorchVersion::new(2, 11)
        )
        .is_err()
    );
}
