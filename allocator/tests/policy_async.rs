//! Exact scenario tests of the `async` policy (a stream-ordered pool like
//! `cudaMallocAsync`): growth by granularity, best fit and splitting,
//! cross-stream reuse rules, the unifying stream of multi-stream blocks,
//! merging by reuse class, release threshold and trimming, and OOM. Every
//! step runs the invariant checker.

mod common;

/// The policy under test, on a simulated device.
type Fixture = common::Fixture<AsyncPoolAllocator<SimDevice>>;

use vramlab_allocator::DeviceCallKind;
use vramlab_allocator::SimDevice;
use vramlab_allocator::policies::async_pool::{AsyncPoolAllocator, Settings};
use vramlab_allocator::{AllocError, Allocator, BlockHandle, BlockState, Inspect, Invariants};

const MIB: u64 = 1 << 20;

use DeviceCallKind::{Free as DFree, Malloc as DMalloc};

const S1: u64 = 0x1111;
const S2: u64 = 0x2222;
const S3: u64 = 0x3333;

impl Fixture {
    fn new(settings: &str, capacity: Option<u64>) -> Self {
        let parsed = Settings::parse(settings).expect("settings");
        Fixture {
            a: AsyncPoolAllocator::new(parsed, SimDevice::with_capacity(capacity)),
        }
    }

    fn sync(&mut self) {
        self.a.synchronize().expect("synchronize");
        self.a.check_invariants().expect("invariants");
    }
}

#[test]
fn the_pool_grows_in_2mib_multiples() {
    let mut f = Fixture::new("", None);
    assert_eq!(f.a.granularity(), 2 * MIB);
    // 1000 B -> 1024 B from a new 2 MiB chunk; the rest stays in the pool.
    let a = f.malloc_on(1000, S1);
    assert_eq!(f.calls(), vec![(DMalloc, 2 * MIB)]);
    assert_eq!(f.stat("allocated_bytes.all.current"), 1024);
    assert_eq!(f.stat("requested_bytes.all.current"), 1000);
    assert_eq!(
        f.stat("reserved_bytes.large_pool.current"),
        (2 * MIB) as i64
    );
    assert_eq!(
        f.stat("inactive_split_bytes.all.current"),
        (2 * MIB - 1024) as i64
    );
    // 3 MiB does not fit the 2 MiB - 1 KiB rest: a 4 MiB chunk.
    f.malloc_on(3 * MIB, S1);
    assert_eq!(f.calls()[1], (DMalloc, 4 * MIB));
    // 5 MiB + 1 B -> 5 MiB + 256 B: a 6 MiB chunk.
    let c = f.malloc_on(5 * MIB + 1, S1);
    assert_eq!(f.calls()[2], (DMalloc, 6 * MIB));
    assert_eq!(
        f.stat("allocated_bytes.all.current"),
        (8 * MIB + 1024 + 256) as i64
    );
    // A small request is carved from the best fitting rest: 1 MiB - 256 B
    // left in the 6 MiB chunk beats 1 MiB (4 MiB chunk) and 2 MiB - 1 KiB.
    let b = f.malloc_on(512 * 1024, S1);
    assert_eq!(f.calls().len(), 3);
    assert_eq!(f.ptr(b), f.ptr(c) + 5 * MIB + 256);
    assert_eq!(f.stat("segment.all.current"), 3);
    // a, freed on S1, and the rest of its chunk (reusable by every stream)
    // are of different reuse classes: they stay apart until a sync.
    f.free(a);
    assert_eq!(f.a.largest_free_block(), 2 * MIB - 1024);
    // At a sync they merge into a whole free chunk, which the default
    // threshold (0) returns to the device.
    f.sync();
    assert_eq!(f.calls()[3..], [(DFree, 2 * MIB)]);
    assert_eq!(f.a.largest_free_block(), MIB);
    assert_eq!(f.stat("segment.all.current"), 2);
}

#[test]
fn same_stream_reuses_at_once() {
    let mut f = Fixture::new("", None);
    let a = f.malloc_on(4 * MIB, S1);
    let pa = f.ptr(a);
    f.free(a);
    let b = f.malloc_on(4 * MIB, S1);
    assert_eq!(f.ptr(b), pa);
    assert_eq!(f.calls().len(), 1);
}

#[test]
fn other_streams_wait_for_a_synchronisation() {
    let mut f = Fixture::new("release_threshold:max", None);
    let a = f.malloc_on(4 * MIB, S1);
    let pa = f.ptr(a);
    f.free(a);
    // S2 may not reuse memory S1 freed: the pool grows.
    let b = f.malloc_on(4 * MIB, S2);
    assert_ne!(f.ptr(b), pa);
    assert_eq!(f.calls(), vec![(DMalloc, 4 * MIB), (DMalloc, 4 * MIB)]);
    f.free(b);
    // After a synchronisation every stream may; the threshold keeps both.
    f.sync();
    assert_eq!(f.stat("num_sync_all_streams"), 1);
    assert_eq!(f.calls().len(), 2);
    let c = f.malloc_on(4 * MIB, S3);
    assert_eq!(f.ptr(c), pa, "best fit, lowest address");
    assert_eq!(f.calls().len(), 2);
}

#[test]
fn reuse_across_streams_lets_any_stream_reuse_at_once() {
    let mut f = Fixture::new("reuse_across_streams:true", None);
    let a = f.malloc_on(4 * MIB, S1);
    let pa = f.ptr(a);
    f.free(a);
    let b = f.malloc_on(4 * MIB, S2);
    assert_eq!(f.ptr(b), pa);
    assert_eq!(f.calls().len(), 1);
}

#[test]
fn multi_stream_blocks_go_to_the_unifying_stream() {
    let mut f = Fixture::new("release_threshold:max", None);
    let a = f.malloc_on(4 * MIB, S1);
    let pa = f.ptr(a);
    f.a.record_stream(a, S2).unwrap();
    f.free(a);
    // Freed on PyTorch's unifying stream: not even S1 may reuse it.
    let b = f.malloc_on(4 * MIB, S1);
    assert_ne!(f.ptr(b), pa);
    // A trace's deferred free is the same kind of free.
    f.a.free_deferred(b).unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.stat("active_bytes.all.current"), 0);
    f.a.complete_free(b).unwrap();
    f.malloc_on(4 * MIB, S1);
    assert_eq!(f.calls().len(), 3);
    f.sync();
    let d = f.malloc_on(4 * MIB, S2);
    assert_eq!(f.ptr(d), pa);
    assert_eq!(f.calls().len(), 3);
}

#[test]
fn free_blocks_merge_only_within_their_reuse_class() {
    let mut f = Fixture::new("release_threshold:max", None);
    let a = f.malloc_on(MIB, S1); // [a 1 MiB][1 MiB free, shared]
    let b = f.malloc_on(512 * 1024, S2); // shared rest is usable by S2
    assert_eq!(f.ptr(b), f.ptr(a) + MIB);
    assert_eq!(f.calls(), vec![(DMalloc, 2 * MIB)]);
    f.free(a); // freed on S1
    f.free(b); // freed on S2: neither neighbour is of its class
    assert_eq!(f.stat("inactive_split.all.current"), 3);
    assert_eq!(f.a.largest_free_block(), MIB);
    f.sync(); // one class: one free chunk again
    assert_eq!(f.stat("inactive_split.all.current"), 0);
    assert_eq!(f.a.largest_free_block(), 2 * MIB);
    let segs = f.a.segments();
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].blocks.len(), 1);
    assert_eq!(segs[0].blocks[0].state, BlockState::Free);
}

#[test]
fn synchronize_trims_to_the_release_threshold_largest_first() {
    let mut f = Fixture::new("release_threshold:4MiB", None);
    let hs: Vec<_> = [2, 4, 8]
        .iter()
        .map(|&m| f.malloc_on(m * MIB, S1))
        .collect();
    let keep = f.malloc_on(MIB, S1); // in its own 2 MiB chunk
    for h in hs {
        f.free(h);
    }
    assert_eq!(f.stat("reserved_bytes.all.current"), (16 * MIB) as i64);
    // 16 MiB held, 4 MiB allowed: free 8 MiB, then 4 MiB (6 > 4), then stop
    // at 4 MiB. The partly used chunk is never released.
    f.sync();
    assert_eq!(f.calls()[4..], [(DFree, 8 * MIB), (DFree, 4 * MIB)]);
    assert_eq!(f.stat("reserved_bytes.all.current"), (4 * MIB) as i64);
    assert_eq!(f.stat("num_device_free"), 2);
    // empty_cache trims to 0 whatever the threshold.
    f.a.empty_cache().unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.calls()[6..], [(DFree, 2 * MIB)]);
    assert_eq!(f.stat("reserved_bytes.all.current"), (2 * MIB) as i64);
    f.free(keep);
    f.a.empty_cache().unwrap();
    assert_eq!(f.stat("reserved_bytes.all.current"), 0);
    assert_eq!(f.a.device().used(), 0);
    assert_eq!(f.stat("num_sync_all_streams"), 3);
}

#[test]
fn the_default_threshold_trims_everything_at_a_synchronisation() {
    let mut f = Fixture::new("", None);
    let a = f.malloc_on(4 * MIB, S1);
    f.free(a);
    f.sync();
    assert_eq!(f.calls(), vec![(DMalloc, 4 * MIB), (DFree, 4 * MIB)]);
    // PyTorch's value keeps it.
    let mut f = Fixture::new("release_threshold:max", None);
    let a = f.malloc_on(4 * MIB, S1);
    f.free(a);
    f.sync();
    assert_eq!(f.calls().len(), 1);
}

#[test]
fn out_of_memory_fails_at_once() {
    let mut f = Fixture::new("", Some(8 * MIB));
    let a = f.malloc_on(4 * MIB, S1);
    f.free(a);
    // S2 cannot reuse S1's 4 MiB, and 4 + 6 MiB do not fit.
    match f.a.malloc(6 * MIB, S2) {
        Err(AllocError::OutOfMemory(r)) => {
            assert_eq!(r.requested, 6 * MIB);
            assert_eq!(r.rounded, 6 * MIB);
            assert_eq!(r.device_request, 6 * MIB);
            assert_eq!(r.reserved, 4 * MIB);
            assert_eq!(r.allocated, 0);
            assert_eq!(r.device_free, 4 * MIB);
        }
        other => panic!("expected OOM, got {other:?}"),
    }
    f.a.check_invariants().unwrap();
    assert_eq!(f.stat("num_ooms"), 1);
    assert_eq!(f.calls(), vec![(DMalloc, 4 * MIB)], "no trim, no retry");
    // After a synchronisation (threshold 0) the chunk is gone and 6 MiB fit.
    f.sync();
    f.malloc_on(6 * MIB, S2);
    assert_eq!(f.calls()[1..], [(DFree, 4 * MIB), (DMalloc, 6 * MIB)]);
}

#[test]
fn zero_exabyte_double_free_and_settings() {
    let mut f = Fixture::new("", None);
    assert_eq!(f.a.malloc(0, S1).unwrap(), BlockHandle::NULL);
    assert!(matches!(
        f.a.malloc(1 << 60, S1),
        Err(AllocError::OutOfMemory(r)) if r.exceeds_limit
    ));
    let a = f.malloc_on(MIB, S1);
    f.free(a);
    assert!(matches!(f.a.free(a), Err(AllocError::UnknownHandle(_))));
    let b = f.malloc_on(MIB, S1);
    assert!(f.a.free(a).is_err());
    assert!(matches!(
        f.a.complete_free(b),
        Err(AllocError::UnknownHandle(_))
    ));
    f.free(b);
    assert_eq!(
        Settings::parse("reuse_across_streams:sometimes").unwrap_err(),
        "async setting reuse_across_streams: invalid value 'sometimes' (expected true or false)"
    );
    assert!(
        Settings::parse("threshold:1GiB")
            .unwrap_err()
            .starts_with("unknown async setting 'threshold'")
    );
    let c = Settings::parse("release_threshold:1GiB,reuse_across_streams:false").unwrap();
    assert_eq!(
        c.to_string(),
        "release_threshold:1GiB,reuse_across_streams:false"
    );
}
