//! Exact scenario tests of the `bfc` policy (TensorFlow's / XLA's BFC
//! allocator): region growth and doubling, bins and best fit, the split
//! rules, coalescing, the backpedal loop and garbage collection on OOM.
//! Every step runs the invariant checker.

mod common;

/// The policy under test, on a simulated device.
type Fixture = common::Fixture<BfcAllocator<SimDevice>>;

use vramlab_allocator::DeviceCallKind;
use vramlab_allocator::SimDevice;
use vramlab_allocator::policies::bfc::{BfcAllocator, Settings};
use vramlab_allocator::{AllocError, Allocator, BlockHandle, Inspect, Invariants};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

use DeviceCallKind::{Free as DFree, Malloc as DMalloc};

impl Fixture {
    fn new(settings: &str, capacity: Option<u64>) -> Self {
        let parsed = Settings::parse(settings).expect("settings");
        Fixture {
            a: BfcAllocator::new(parsed, SimDevice::with_capacity(capacity)),
        }
    }
}

#[test]
fn growth_regions_start_at_2mib_and_double() {
    let mut f = Fixture::new("allow_growth:true,memory_limit:1GiB", None);
    assert_eq!(f.a.memory_limit(), GIB);
    assert_eq!(f.a.curr_region_allocation_bytes(), 2 * MIB);
    // 1000 B -> 1024 B; the first region is 2 MiB, the next will be 4 MiB.
    f.malloc(1000);
    assert_eq!(f.calls(), vec![(DMalloc, 2 * MIB)]);
    assert_eq!(f.a.curr_region_allocation_bytes(), 4 * MIB);
    assert_eq!(f.stat("allocated_bytes.all.current"), 1024);
    assert_eq!(f.stat("requested_bytes.all.current"), 1000);
    // 2 MiB >= 2 x 1024: split, the remainder is a free chunk.
    assert_eq!(f.stat("inactive_split.all.current"), 1);
    assert_eq!(
        f.stat("inactive_split_bytes.all.current"),
        (2 * MIB - 1024) as i64
    );
    // 3 MiB does not fit the remainder: a 4 MiB region, handed out whole
    // (4 MiB < 2 x 3 MiB and the 1 MiB excess is under 128 MiB).
    f.malloc(3 * MIB);
    assert_eq!(f.calls()[1], (DMalloc, 4 * MIB));
    assert_eq!(f.a.curr_region_allocation_bytes(), 8 * MIB);
    assert_eq!(
        f.stat("allocated_bytes.all.current"),
        (4 * MIB + 1024) as i64
    );
    // 10 MiB: the region size doubles to 16 MiB to fit, and since it had to
    // grow it is not doubled again afterwards.
    f.malloc(10 * MIB);
    assert_eq!(f.calls()[2], (DMalloc, 16 * MIB));
    assert_eq!(f.a.curr_region_allocation_bytes(), 16 * MIB);
    // 1 MiB takes the first region's whole remainder (2 MiB - 1 KiB is less
    // than 2 MiB, so no split).
    f.malloc(MIB);
    assert_eq!(f.calls().len(), 3);
    assert_eq!(f.stat("inactive_split.all.current"), 0);
    assert_eq!(f.a.largest_free_block(), 0);
    // The next miss gets a 16 MiB region, and the size doubles to 32 MiB.
    f.malloc(MIB);
    assert_eq!(f.calls()[3], (DMalloc, 16 * MIB));
    assert_eq!(f.a.curr_region_allocation_bytes(), 32 * MIB);
    assert_eq!(f.stat("segment.all.current"), 4);
    assert_eq!(
        f.stat("reserved_bytes.large_pool.current"),
        (38 * MIB) as i64
    );
    assert_eq!(f.stat("reserved_bytes.small_pool.current"), 0);
    assert_eq!(f.a.largest_free_block(), 15 * MIB);
}

#[test]
fn split_only_at_twice_the_request() {
    let mut f = Fixture::new("allow_growth:true,memory_limit:1GiB", None);
    let a = f.malloc(2 * MIB);
    assert_eq!(f.calls(), vec![(DMalloc, 2 * MIB)]);
    assert_eq!(f.stat("inactive_split.all.current"), 0);
    f.free(a);
    // 2 MiB chunk, 1 MiB request: exactly 2x -> split.
    let b = f.malloc(MIB);
    assert_eq!(f.stat("allocated_bytes.all.current"), MIB as i64);
    assert_eq!(f.stat("inactive_split_bytes.all.current"), MIB as i64);
    f.free(b);
    assert_eq!(f.stat("inactive_split.all.current"), 0, "merged back");
    // 1 MiB + 1 byte rounds to 1 MiB + 256: under 2x, no split.
    f.malloc(MIB + 1);
    assert_eq!(f.stat("allocated_bytes.all.current"), (2 * MIB) as i64);
    assert_eq!(f.stat("requested_bytes.all.current"), (MIB + 1) as i64);
    assert_eq!(f.calls().len(), 1);
}

#[test]
fn split_when_the_excess_reaches_128_mib() {
    // One 512 MiB region (no growth). 384 MiB leaves exactly 128 MiB: split.
    let mut f = Fixture::new("memory_limit:512MiB", None);
    f.malloc(384 * MIB);
    assert_eq!(f.calls(), vec![(DMalloc, 512 * MIB)]);
    assert_eq!(f.stat("allocated_bytes.all.current"), (384 * MIB) as i64);
    assert_eq!(f.a.largest_free_block(), 128 * MIB);
    // 256 bytes more leaves 128 MiB - 256: the whole region is handed out.
    let mut f = Fixture::new("memory_limit:512MiB", None);
    f.malloc(384 * MIB + 1);
    assert_eq!(f.stat("allocated_bytes.all.current"), (512 * MIB) as i64);
    assert_eq!(f.a.largest_free_block(), 0);
    // fragmentation_fraction 1/8 of the limit: the cap is 64 MiB.
    let mut f = Fixture::new("memory_limit:512MiB,fragmentation_fraction:0.125", None);
    assert_eq!(f.a.max_internal_fragmentation_bytes(), 64 * MIB);
    f.malloc(448 * MIB);
    assert_eq!(f.stat("allocated_bytes.all.current"), (448 * MIB) as i64);
    assert_eq!(f.a.largest_free_block(), 64 * MIB);
}

#[test]
fn best_fit_searches_bins_upward_smallest_then_lowest_address() {
    // One 64 MiB region carved into a(4) b(1) c(8) d(1) e(4) f(1) + 45 MiB.
    let mut f = Fixture::new("memory_limit:64MiB", None);
    let hs: Vec<_> = [4, 1, 8, 1, 4, 1]
        .iter()
        .map(|&m| f.malloc(m * MIB))
        .collect();
    assert_eq!(f.calls(), vec![(DMalloc, 64 * MIB)]);
    let (pa, pc, pe) = (f.ptr(hs[0]), f.ptr(hs[2]), f.ptr(hs[4]));
    assert_eq!(pc, pa + 5 * MIB);
    assert_eq!(pe, pa + 14 * MIB);
    f.free(hs[0]);
    f.free(hs[2]);
    f.free(hs[4]);
    assert_eq!(f.stat("inactive_split.all.current"), 4);
    // 3 MiB is in bin 13 ([2, 4) MiB), empty; bin 14 holds the two 4 MiB
    // chunks: the lower address wins, handed out whole (under 2x).
    let x = f.malloc(3 * MIB);
    assert_eq!(f.ptr(x), pa);
    assert_eq!(f.stat("allocated_bytes.all.current"), (7 * MIB) as i64);
    let y = f.malloc(3 * MIB);
    assert_eq!(f.ptr(y), pe);
    // Bin 14 is empty now; bin 15 holds c (8 MiB): split 3 + 5.
    let z = f.malloc(3 * MIB);
    assert_eq!(f.ptr(z), pc);
    assert_eq!(f.a.largest_free_block(), 45 * MIB);
    assert_eq!(
        f.stat("inactive_split_bytes.all.current"),
        (50 * MIB) as i64
    );
    assert_eq!(f.calls().len(), 1);
}

#[test]
fn coalescing_merges_next_then_previous() {
    let mut f = Fixture::new("memory_limit:16MiB", None);
    let a = f.malloc(4 * MIB);
    let b = f.malloc(4 * MIB);
    let c = f.malloc(4 * MIB);
    assert_eq!(f.a.largest_free_block(), 4 * MIB);
    f.free(b);
    assert_eq!(f.stat("inactive_split.all.current"), 2);
    f.free(a); // a absorbs b
    assert_eq!(f.stat("inactive_split.all.current"), 2);
    assert_eq!(f.a.largest_free_block(), 8 * MIB);
    f.free(c); // a+b absorbs c and the tail: one free chunk, the region
    assert_eq!(f.stat("inactive_split.all.current"), 0);
    assert_eq!(f.a.largest_free_block(), 16 * MIB);
    let segs = f.a.segments();
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].blocks.len(), 1);
}

#[test]
fn preallocation_takes_the_memory_fraction_at_the_first_request() {
    // An 8 GiB device: JAX's default 75 % -> one 6 GiB region.
    let mut f = Fixture::new("", Some(8 * GIB));
    assert_eq!(f.a.memory_limit(), 6 * GIB);
    assert!(f.calls().is_empty(), "nothing before the first request");
    f.malloc(1024);
    assert_eq!(f.calls(), vec![(DMalloc, 6 * GIB)]);
    f.malloc(GIB);
    assert_eq!(f.calls().len(), 1);
    assert_eq!(f.stat("reserved_bytes.all.current"), (6 * GIB) as i64);
    // Beyond the limit: refused without asking the device.
    match f.a.malloc(7 * GIB, 0) {
        Err(AllocError::OutOfMemory(r)) => {
            assert_eq!(r.rounded, 7 * GIB);
            assert_eq!(r.allowed, Some(6 * GIB));
        }
        other => panic!("expected OOM, got {other:?}"),
    }
    f.a.check_invariants().unwrap();
    assert_eq!(f.calls().len(), 1);
    assert_eq!(f.a.device().failed_mallocs(), 0);
    assert_eq!(f.stat("num_ooms"), 1);
    // preallocate:F is JAX's spelling of the same thing.
    let mut f = Fixture::new("preallocate:0.5", Some(8 * GIB));
    f.malloc(1);
    assert_eq!(f.calls(), vec![(DMalloc, 4 * GIB)]);
}

#[test]
fn preallocation_backpedals_by_ten_percent_until_the_device_accepts() {
    // The device reports 2 GiB but holds 1 GiB: the 1.5 GiB region is cut
    // to RoundedBytes(bytes * 0.9f) until it fits.
    let mut dev = SimDevice::with_capacity(Some(GIB));
    dev.set_total(2 * GIB);
    let mut a = BfcAllocator::new(Settings::default(), dev);
    assert_eq!(a.memory_limit(), 1_610_612_736);
    a.malloc(MIB, 0).unwrap();
    a.check_invariants().unwrap();
    // 1610612736, 1449551360, 1304596224, 1174136576 failed.
    assert_eq!(a.device().failed_mallocs(), 4);
    assert_eq!(a.regions().len(), 1);
    assert_eq!(a.regions()[0].1, 1_056_722_944);
    assert_eq!(a.total_region_allocated_bytes(), 1_056_722_944);
}

/// Regions of 2, 4 and 8 MiB (growth), the first two unused again, under a
/// 64 MiB limit on a device of `capacity` bytes.
fn gc_fixture(settings: &str, capacity: u64) -> Fixture {
    let mut f = Fixture::new(settings, Some(capacity));
    let a = f.malloc(2 * MIB);
    let b = f.malloc(4 * MIB);
    f.malloc(8 * MIB);
    f.free(a);
    f.free(b);
    assert_eq!(
        f.calls(),
        vec![(DMalloc, 2 * MIB), (DMalloc, 4 * MIB), (DMalloc, 8 * MIB)]
    );
    assert_eq!(f.a.curr_region_allocation_bytes(), 16 * MIB);
    f
}

#[test]
fn oom_garbage_collection_frees_unused_regions_and_retries() {
    let mut f = gc_fixture(
        "allow_growth:true,memory_limit:64MiB,garbage_collection:true",
        52 * MIB,
    );
    // 40 MiB: region size 16 -> 64 MiB, capped at the 50 MiB available;
    // 50, 45, 40.5 MiB fail on the 52 MiB device (14 MiB in use), the next
    // cut would drop under 40 MiB. GC frees the 2 and 4 MiB regions; the
    // retry asks for 56 MiB, then 52848384, 47563776 and 42807552 bytes.
    let h = f.malloc(40 * MIB);
    assert_eq!(
        f.calls()[3..],
        [(DFree, 2 * MIB), (DFree, 4 * MIB), (DMalloc, 42_807_552)]
    );
    assert_eq!(f.a.device().failed_mallocs(), 6);
    assert_eq!(f.stat("num_alloc_retries"), 1);
    assert_eq!(f.stat("num_ooms"), 0);
    // The first attempt grew the region size to 64 MiB; the retry did not
    // need to grow it, so it doubles after success: 128 MiB.
    assert_eq!(f.a.curr_region_allocation_bytes(), 128 * MIB);
    // 42807552 < 2 x 40 MiB and the excess is small: handed out whole.
    assert_eq!(
        f.stat("allocated_bytes.all.current"),
        (8 * MIB + 42_807_552) as i64
    );
    assert_eq!(f.a.block_ptr(h) % 256, 0);
    assert_eq!(f.stat("segment.all.current"), 2);
}

#[test]
fn oom_without_garbage_collection_keeps_the_regions() {
    let mut f = gc_fixture("allow_growth:true,memory_limit:64MiB", 52 * MIB);
    match f.a.malloc(40 * MIB, 0) {
        Err(AllocError::OutOfMemory(r)) => {
            assert_eq!(r.rounded, 40 * MIB);
            // The last size asked of the device.
            assert_eq!(r.device_request, 42_467_328);
            assert_eq!(r.allowed, Some(64 * MIB));
            assert_eq!(r.reserved, 14 * MIB);
            assert_eq!(r.allocated, 8 * MIB);
        }
        other => panic!("expected OOM, got {other:?}"),
    }
    f.a.check_invariants().unwrap();
    assert_eq!(f.calls().len(), 3);
    assert_eq!(f.a.device().failed_mallocs(), 3);
    assert_eq!(f.stat("num_ooms"), 1);
    assert_eq!(f.stat("num_alloc_retries"), 0);
}

#[test]
fn garbage_collection_skips_when_it_cannot_help() {
    // 60 MiB > 64 - 14 + 6: no region is freed.
    let mut f = gc_fixture(
        "allow_growth:true,memory_limit:64MiB,garbage_collection:true",
        52 * MIB,
    );
    assert!(matches!(
        f.a.malloc(60 * MIB, 0),
        Err(AllocError::OutOfMemory(_))
    ));
    f.a.check_invariants().unwrap();
    assert_eq!(f.calls().len(), 3);
    assert_eq!(f.stat("num_alloc_retries"), 0);
}

#[test]
fn empty_cache_frees_unused_regions_and_completes_deferred_frees() {
    let mut f = Fixture::new("allow_growth:true,memory_limit:1GiB", None);
    let a = f.malloc(2 * MIB);
    let b = f.malloc(4 * MIB);
    let c = f.malloc(8 * MIB);
    f.free(a);
    f.a.free_deferred(c).unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.stat("active_bytes.all.current"), (12 * MIB) as i64);
    assert_eq!(f.stat("allocated_bytes.all.current"), (4 * MIB) as i64);
    f.a.empty_cache().unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.calls()[3..], [(DFree, 2 * MIB), (DFree, 8 * MIB)]);
    assert_eq!(f.stat("reserved_bytes.all.current"), (4 * MIB) as i64);
    assert_eq!(f.stat("num_sync_all_streams"), 1);
    assert_eq!(f.stat("num_device_free"), 2);
    // The trace's late completion is accepted.
    f.a.complete_free(c).unwrap();
    f.free(b);
}

#[test]
fn deferred_free_holds_the_chunk_until_completion() {
    let mut f = Fixture::new("memory_limit:16MiB", None);
    let a = f.malloc(8 * MIB);
    f.a.free_deferred(a).unwrap();
    f.a.check_invariants().unwrap();
    // Still in use: the next 8 MiB takes the other half.
    let b = f.malloc(8 * MIB);
    assert_eq!(f.ptr(b), f.ptr(a) + 8 * MIB);
    assert!(matches!(f.a.free(a), Err(AllocError::UnknownHandle(_))));
    f.a.complete_free(a).unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.a.largest_free_block(), 8 * MIB);
}

#[test]
fn streams_are_ignored() {
    let mut f = Fixture::new("memory_limit:16MiB", None);
    let a = f.malloc_on(4 * MIB, 7);
    f.a.record_stream(a, 9).unwrap();
    let pa = f.ptr(a);
    f.free(a);
    let b = f.malloc_on(4 * MIB, 0);
    assert_eq!(f.ptr(b), pa, "BFC reuses across streams at once");
}

#[test]
fn zero_exabyte_and_double_free() {
    let mut f = Fixture::new("memory_limit:16MiB", None);
    assert_eq!(f.a.malloc(0, 0).unwrap(), BlockHandle::NULL);
    assert!(matches!(
        f.a.malloc(1 << 60, 0),
        Err(AllocError::OutOfMemory(r)) if r.exceeds_limit
    ));
    assert!(f.calls().is_empty());
    let a = f.malloc(MIB);
    let pa = f.ptr(a);
    f.free(a);
    assert!(matches!(f.a.free(a), Err(AllocError::UnknownHandle(_))));
    assert_eq!(f.ptr(a), 0, "a stale handle has no address");
    // The same chunk handed out again gets a new generation.
    let b = f.malloc(MIB);
    assert_eq!(f.ptr(b), pa);
    assert_ne!(a, b);
    assert!(f.a.free(a).is_err());
    f.free(b);
}

#[test]
fn settings_errors_name_key_and_value() {
    assert_eq!(
        Settings::parse("allow_growth:maybe").unwrap_err(),
        "bfc setting allow_growth: invalid value 'maybe' (expected true or false)"
    );
    assert_eq!(
        Settings::parse("memory_limit:lots").unwrap_err(),
        "bfc setting memory_limit: invalid size 'lots' (expected bytes or a number with a unit such as 512MiB or 8GiB)"
    );
    assert_eq!(
        Settings::parse("memory_fraction:1.5").unwrap_err(),
        "bfc setting memory_fraction: 1.5 is out of range (expected a number in (0, 1])"
    );
    assert!(
        Settings::parse("growth:true")
            .unwrap_err()
            .starts_with("unknown bfc setting 'growth'")
    );
    assert!(Settings::parse("memory_limit:1GiB,memory_fraction:0.5").is_err());
    assert!(Settings::parse("preallocate:0.5,allow_growth:true").is_err());
    let c = Settings::parse("allow_growth:true,memory_limit:8GiB,garbage_collection:true").unwrap();
    assert_eq!(
        c.to_string(),
        "allow_growth:true,memory_limit:8GiB,garbage_collection:true,fragmentation_fraction:0"
    );
    assert_eq!(Settings::parse(&c.to_string()), Ok(c));
}
