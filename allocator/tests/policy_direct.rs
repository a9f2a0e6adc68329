//! Exact scenario tests of the `direct` policy (no cache: one device call
//! per request and per free). Every step runs the invariant checker.

mod common;

/// The policy under test, on a simulated device.
type Fixture = common::Fixture<DirectAllocator<SimDevice>>;

use vramlab_allocator::DeviceCallKind;
use vramlab_allocator::SimDevice;
use vramlab_allocator::policies::direct::{DirectAllocator, Settings};
use vramlab_allocator::{AllocError, Allocator, BlockHandle, BlockState, Inspect, Invariants};

const MIB: u64 = 1 << 20;

use DeviceCallKind::{Free as DFree, Malloc as DMalloc};

impl Fixture {
    fn new(capacity: Option<u64>) -> Self {
        Fixture {
            a: DirectAllocator::new(Settings::default(), SimDevice::with_capacity(capacity)),
        }
    }
}

#[test]
fn every_request_is_one_exact_cudamalloc() {
    let mut f = Fixture::new(None);
    let a = f.malloc(1000);
    assert_eq!(f.calls(), vec![(DMalloc, 1000)], "no rounding at all");
    let b = f.malloc(3 * MIB + 1);
    assert_eq!(f.calls()[1], (DMalloc, 3 * MIB + 1));
    assert_eq!(
        f.stat("allocated_bytes.all.current"),
        (3 * MIB + 1001) as i64
    );
    assert_eq!(
        f.stat("reserved_bytes.all.current"),
        (3 * MIB + 1001) as i64
    );
    assert_eq!(
        f.stat("requested_bytes.all.current"),
        (3 * MIB + 1001) as i64
    );
    assert_eq!(
        f.stat("active_bytes.large_pool.current"),
        (3 * MIB + 1001) as i64
    );
    assert_eq!(f.stat("segment.small_pool.current"), 0);
    assert_eq!(f.stat("segment.all.current"), 2);
    assert_eq!(f.stat("allocation.all.current"), 2);
    assert_eq!(f.stat("num_device_alloc"), 2);
    assert_eq!(f.stat("inactive_split.all.current"), 0);
    assert_eq!(f.a.largest_free_block(), 0);
    f.free(a);
    assert_eq!(f.calls()[2], (DFree, 1000), "a free is a cudaFree at once");
    assert_eq!(f.stat("reserved_bytes.all.current"), (3 * MIB + 1) as i64);
    assert_eq!(f.stat("num_device_free"), 1);
    // The same size again is a new device allocation: nothing is cached.
    f.malloc(1000);
    assert_eq!(f.calls()[3], (DMalloc, 1000));
    f.free(b);
    assert_eq!(f.stat("reserved_bytes.all.peak"), (3 * MIB + 1001) as i64);
    assert_eq!(f.a.device().used(), 1000);
}

#[test]
fn segments_are_the_allocations() {
    let mut f = Fixture::new(None);
    let a = f.malloc(4096);
    let b = f.malloc(MIB);
    let segs = f.a.segments();
    assert_eq!(segs.len(), 2);
    assert_eq!(segs[0].ptr, f.a.block_ptr(a));
    assert_eq!(segs[1].ptr, f.a.block_ptr(b));
    assert_eq!(segs[0].size, 4096);
    assert_eq!(segs[0].blocks.len(), 1);
    assert_eq!(segs[0].blocks[0].state, BlockState::Allocated);
    assert_eq!(segs[1].blocks[0].requested, MIB);
}

#[test]
fn zero_bytes_and_one_exabyte() {
    let mut f = Fixture::new(None);
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
    assert!(f.calls().is_empty());
    assert_eq!(f.stat("num_ooms"), 0);
    f.a.check_invariants().unwrap();
}

#[test]
fn out_of_memory_is_immediate_without_retry() {
    let mut f = Fixture::new(Some(10 * MIB));
    let a = f.malloc(8 * MIB);
    match f.a.malloc(4 * MIB, 0) {
        Err(AllocError::OutOfMemory(r)) => {
            assert!(!r.exceeds_limit);
            assert_eq!(r.requested, 4 * MIB);
            assert_eq!(r.rounded, 4 * MIB);
            assert_eq!(r.device_request, 4 * MIB);
            assert_eq!(r.device_free, 2 * MIB);
            assert_eq!(r.allocated, 8 * MIB);
            assert_eq!(r.reserved, 8 * MIB);
            assert_eq!(r.allowed, None);
        }
        other => panic!("expected OOM, got {other:?}"),
    }
    f.a.check_invariants().unwrap();
    assert_eq!(f.stat("num_ooms"), 1);
    assert_eq!(f.stat("num_alloc_retries"), 0);
    assert_eq!(f.a.device().failed_mallocs(), 1);
    assert_eq!(
        f.calls(),
        vec![(DMalloc, 8 * MIB)],
        "nothing freed, no retry"
    );
    f.free(a);
    f.malloc(4 * MIB);
    assert_eq!(f.calls()[2], (DMalloc, 4 * MIB));
}

#[test]
fn deferred_frees_happen_at_once_and_double_frees_fail() {
    let mut f = Fixture::new(None);
    let a = f.malloc(MIB);
    f.a.record_stream(a, 7).unwrap();
    f.a.free_deferred(a).unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.calls(), vec![(DMalloc, MIB), (DFree, MIB)]);
    assert_eq!(f.stat("active_bytes.all.current"), 0);
    // The trace's completion of that free is accepted and changes nothing.
    f.a.complete_free(a).unwrap();
    assert!(matches!(f.a.free(a), Err(AllocError::UnknownHandle(_))));
    assert!(matches!(
        f.a.record_stream(a, 1),
        Err(AllocError::UnknownHandle(_))
    ));
    // The slot is recycled; the stale handle still names nothing.
    let b = f.malloc(2 * MIB);
    assert_eq!(b.index, a.index);
    assert!(f.a.free(a).is_err());
    assert_eq!(f.a.block_ptr(a), 0);
    // Completing a live allocation's free is an error: it was never freed.
    assert!(matches!(
        f.a.complete_free(b),
        Err(AllocError::UnknownHandle(_))
    ));
    f.free(b);
}

#[test]
fn empty_cache_has_nothing_to_release() {
    let mut f = Fixture::new(None);
    let a = f.malloc(MIB);
    f.a.empty_cache().unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.calls(), vec![(DMalloc, MIB)]);
    assert_eq!(f.stat("reserved_bytes.all.current"), MIB as i64);
    f.free(a);
}

#[test]
fn settings() {
    assert_eq!(Settings::parse(""), Ok(Settings::default()));
    assert_eq!(Settings::parse(" , "), Ok(Settings::default()));
    assert_eq!(Settings::default().to_string(), "");
    assert_eq!(
        Settings::parse("release_threshold:0").unwrap_err(),
        "unknown direct setting 'release_threshold': the direct policy takes no settings"
    );
}
