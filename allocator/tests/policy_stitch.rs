//! Exact scenario tests of the `stitch` policy (GMLake-style virtual-memory
//! stitching): rounding and segments, which free blocks are stitched and in
//! what order, the split of the last piece, reuse of cached sBlocks,
//! dissolving, the fragment limit, the three stitching points
//! (`defragment_level`), `max_pieces`, `gc_limit`, streams, deferred frees
//! and OOM. Every step runs the invariant checker.

mod common;

/// The policy under test, on a simulated device.
type Fixture = common::Fixture<StitchAllocator<SimDevice>>;

use vramlab_allocator::DeviceCallKind;
use vramlab_allocator::SimDevice;
use vramlab_allocator::policies::stitch::{Settings, StitchAllocator};
use vramlab_allocator::{AllocError, Allocator, BlockHandle, BlockState, Inspect, Invariants};

const MIB: u64 = 1 << 20;

use DeviceCallKind::{
    Malloc as DMalloc, Map as DMap, Release as DRelease, Reserve as DReserve, Unmap as DUnmap,
};

const S1: u64 = 0x1111;
const S2: u64 = 0x2222;

impl Fixture {
    fn new(settings: &str, capacity: Option<u64>) -> Self {
        let parsed = Settings::parse(settings).expect("settings");
        Fixture {
            a: StitchAllocator::new(parsed, SimDevice::with_capacity(capacity)),
        }
    }
}

#[test]
fn rounding_pools_segments_and_splits() {
    let mut f = Fixture::new("", None);
    // Small pool: 512-byte rounding, 2 MiB cudaMalloc segments.
    f.malloc(1000);
    assert_eq!(f.calls(), vec![(DMalloc, 2 * MIB)]);
    assert_eq!(f.stat("allocated_bytes.small_pool.current"), 1024);
    // Above 1 MiB: 2 MiB rounding (3 MiB -> 4 MiB), a 20 MiB virtual segment
    // mapped in 2 MiB pages, split since 16 MiB >= 2 MiB remain.
    f.malloc(3 * MIB);
    assert_eq!(f.calls()[1..], [(DReserve, 20 * MIB), (DMap, 20 * MIB)]);
    assert_eq!(
        f.stat("allocated_bytes.large_pool.current"),
        (4 * MIB) as i64
    );
    assert_eq!(
        f.stat("requested_bytes.large_pool.current"),
        (3 * MIB) as i64
    );
    assert_eq!(
        f.stat("inactive_split_bytes.large_pool.current"),
        (16 * MIB) as i64
    );
    // 11 MiB -> 12 MiB from the 16 MiB rest; 3 MiB -> the last 4 MiB whole.
    f.malloc(11 * MIB);
    f.malloc(3 * MIB);
    assert_eq!(f.calls().len(), 3);
    assert_eq!(f.stat("inactive_split.large_pool.current"), 0);
    // 1 MiB + 1 B is a large request of 2 MiB: a new 20 MiB segment.
    f.malloc(MIB + 1);
    assert_eq!(f.calls()[3..], [(DReserve, 20 * MIB), (DMap, 20 * MIB)]);
    assert_eq!(
        f.stat("allocated_bytes.large_pool.current"),
        (22 * MIB) as i64
    );
    assert_eq!(f.stat("segment.all.current"), 3);
    assert_eq!(f.stat("reserved_bytes.all.current"), (42 * MIB) as i64);
    assert_eq!(f.a.num_stitches(), 0);
}

/// Three 12 MiB segments a, b, c (one each); a and c freed again.
fn holes(settings: &str, capacity: Option<u64>) -> (Fixture, u64, u64, BlockHandle) {
    let mut f = Fixture::new(settings, capacity);
    let a = f.malloc(12 * MIB);
    let b = f.malloc(12 * MIB);
    let c = f.malloc(12 * MIB);
    let (pa, pc) = (f.ptr(a), f.ptr(c));
    f.free(a);
    f.free(c);
    assert_eq!(f.calls().len(), 6);
    assert_eq!(f.a.largest_free_block(), 12 * MIB);
    (f, pa, pc, b)
}

#[test]
fn stitches_free_blocks_largest_first_and_splits_the_last() {
    let (mut f, pa, pc, _b) = holes("fragment_limit:4MiB", None);
    // 20 MiB: no block fits, 12 + 12 do. Largest first (equal sizes: the
    // higher address first): c whole, then the front 8 MiB of a.
    let s = f.malloc(20 * MIB);
    let ps = f.ptr(s);
    assert_eq!(
        f.calls_at()[6..],
        [
            (DReserve, ps, 20 * MIB),
            (DUnmap, pc, 12 * MIB),
            (DUnmap, pa, 8 * MIB),
            (DMap, ps, 20 * MIB),
        ]
    );
    assert_eq!(f.a.pieces(s), vec![(pc, 12 * MIB), (pa, 8 * MIB)]);
    assert_eq!(f.a.num_stitches(), 1);
    assert_eq!(f.a.stitched_bytes(), 20 * MIB);
    // Stitching moves pages: nothing is allocated from the device.
    assert_eq!(f.a.device().used(), 36 * MIB);
    assert_eq!(f.stat("reserved_bytes.all.current"), (36 * MIB) as i64);
    assert_eq!(f.stat("segment.all.current"), 3);
    assert_eq!(f.stat("num_device_alloc"), 3);
    assert_eq!(f.stat("allocated_bytes.all.current"), (32 * MIB) as i64);
    assert_eq!(f.stat("requested_bytes.all.current"), (32 * MIB) as i64);
    // What is left of a: 4 MiB, free and split.
    assert_eq!(f.stat("inactive_split.all.current"), 1);
    assert_eq!(f.stat("inactive_split_bytes.all.current"), (4 * MIB) as i64);
    assert_eq!(f.a.largest_free_block(), 4 * MIB);
    // The segment view shows the pieces in their sBlock's state.
    let segs = f.a.segments();
    assert_eq!(segs.len(), 3);
    let states: Vec<_> = segs[0].blocks.iter().map(|b| (b.size, b.state)).collect();
    assert_eq!(
        states,
        vec![
            (8 * MIB, BlockState::Allocated),
            (4 * MIB, BlockState::Free)
        ]
    );
    assert_eq!(segs[2].blocks[0].state, BlockState::Allocated);
    // Freed, the sBlock stays cached, and the same request reuses it.
    f.free(s);
    assert_eq!(f.a.num_cached_sblocks(), 1);
    assert_eq!(f.a.largest_free_block(), 20 * MIB);
    assert_eq!(f.a.segments()[0].blocks[0].state, BlockState::Free);
    let s2 = f.malloc(20 * MIB);
    assert_eq!(f.ptr(s2), ps);
    assert_eq!(f.calls().len(), 10);
    assert_eq!(f.a.num_stitches(), 1);
    f.free(s2);
    // 6 MiB: the 4 MiB rest is too small, the cached 20 MiB sBlock is over
    // the reuse limit (1x), and one free block cannot be stitched. Before
    // growing, the cached sBlock is dissolved: pages go home, a's pieces
    // merge again, and 6 MiB is carved from the lower 12 MiB block.
    let x = f.malloc(6 * MIB);
    assert_eq!(
        f.calls_at()[10..],
        [
            (DUnmap, ps, 20 * MIB),
            (DRelease, ps, 20 * MIB),
            (DMap, pc, 12 * MIB),
            (DMap, pa, 8 * MIB),
        ]
    );
    assert_eq!(f.ptr(x), pa);
    assert_eq!(f.a.num_dissolves(), 1);
    assert_eq!(f.a.num_sblocks(), 0);
    assert_eq!(f.a.stitched_bytes(), 0);
    assert_eq!(f.a.largest_free_block(), 12 * MIB);
    assert_eq!(f.a.device().used(), 36 * MIB);
}

#[test]
fn no_stitching_below_the_fragment_limit_or_when_off() {
    for settings in ["fragment_limit:32MiB", "fragment_limit:4MiB,stitch:false"] {
        let (mut f, _, _, _) = holes(settings, None);
        f.malloc(20 * MIB);
        assert_eq!(
            f.calls()[6..],
            [(DReserve, 20 * MIB), (DMap, 20 * MIB)],
            "{settings}"
        );
        assert_eq!(f.a.num_stitches(), 0);
    }
    // The default limit is 512 MiB.
    let (mut f, _, _, _) = holes("", None);
    f.malloc(20 * MIB);
    assert_eq!(f.a.num_stitches(), 0);
}

#[test]
fn defragment_level_1_stitches_once_the_device_refuses() {
    let (mut f, _, _, _) = holes("fragment_limit:4MiB,defragment_level:1", Some(36 * MIB));
    f.malloc(20 * MIB);
    // The new segment's pages do not fit (its reservation is released);
    // then the free blocks are stitched.
    assert_eq!(
        f.calls()[6..],
        [
            (DReserve, 20 * MIB),
            (DRelease, 20 * MIB),
            (DReserve, 20 * MIB),
            (DUnmap, 12 * MIB),
            (DUnmap, 8 * MIB),
            (DMap, 20 * MIB),
        ]
    );
    assert_eq!(f.a.device().failed_mallocs(), 1);
    assert_eq!(f.a.num_stitches(), 1);
    assert_eq!(f.stat("num_alloc_retries"), 0);
    // With room on the device, level 1 grows instead.
    let (mut f, _, _, _) = holes("fragment_limit:4MiB,defragment_level:1", None);
    f.malloc(20 * MIB);
    assert_eq!(f.calls()[6..], [(DReserve, 20 * MIB), (DMap, 20 * MIB)]);
    assert_eq!(f.a.num_stitches(), 0);
}

#[test]
fn defragment_level_2_flushes_the_cache_first() {
    let (mut f, _, _, _) = holes("fragment_limit:4MiB,defragment_level:2", Some(36 * MIB));
    f.malloc(20 * MIB);
    // The flush frees the two whole free segments, and the retry fits.
    assert_eq!(
        f.calls()[6..],
        [
            (DReserve, 20 * MIB),
            (DRelease, 20 * MIB),
            (DUnmap, 12 * MIB),
            (DRelease, 12 * MIB),
            (DUnmap, 12 * MIB),
            (DRelease, 12 * MIB),
            (DReserve, 20 * MIB),
            (DMap, 20 * MIB),
        ]
    );
    assert_eq!(f.a.num_stitches(), 0);
    assert_eq!(f.stat("num_alloc_retries"), 1);
    assert_eq!(f.stat("num_sync_all_streams"), 1);
    assert_eq!(f.stat("reserved_bytes.all.current"), (32 * MIB) as i64);
}

#[test]
fn level_0_stitches_before_growing_even_when_memory_is_free() {
    let (mut f, _, _, _) = holes("fragment_limit:4MiB", Some(1 << 40));
    f.malloc(20 * MIB);
    assert_eq!(f.calls()[6..7], [(DReserve, 20 * MIB)]);
    assert_eq!(f.a.num_stitches(), 1);
    assert_eq!(f.a.device().failed_mallocs(), 0);
}

/// Three whole free 10 MiB segments.
fn three_tens(settings: &str) -> (Fixture, [u64; 3]) {
    let mut f = Fixture::new(settings, None);
    let hs = [f.malloc(10 * MIB), f.malloc(10 * MIB), f.malloc(10 * MIB)];
    let ps = hs.map(|h| f.ptr(h));
    for h in hs {
        f.free(h);
    }
    (f, ps)
}

#[test]
fn max_pieces_limits_an_sblock() {
    // 25 MiB -> 26 MiB needs all three (30 MiB); the last, lowest one is cut
    // to 6 MiB.
    let (mut f, [pa, pb, pc]) = three_tens("fragment_limit:4MiB");
    let s = f.malloc(25 * MIB);
    assert_eq!(
        f.a.pieces(s),
        vec![(pc, 10 * MIB), (pb, 10 * MIB), (pa, 6 * MIB)]
    );
    assert_eq!(f.stat("allocated_bytes.all.current"), (26 * MIB) as i64);
    assert_eq!(f.stat("requested_bytes.all.current"), (25 * MIB) as i64);
    // At most two pieces: 20 MiB do not cover it, so a new segment.
    let (mut f, _) = three_tens("fragment_limit:4MiB,max_pieces:2");
    f.malloc(25 * MIB);
    assert_eq!(f.calls()[6..], [(DReserve, 26 * MIB), (DMap, 26 * MIB)]);
    assert_eq!(f.a.num_stitches(), 0);
}

#[test]
fn gc_limit_dissolves_cached_sblocks() {
    for (settings, cached_after) in [
        ("fragment_limit:4MiB,gc_limit:30MiB", 0),
        ("fragment_limit:4MiB", 1),
    ] {
        let mut f = Fixture::new(settings, None);
        let hs: Vec<_> = (0..4).map(|_| f.malloc(12 * MIB)).collect();
        let ps: Vec<_> = hs.iter().map(|&h| f.ptr(h)).collect();
        for h in hs {
            f.free(h);
        }
        let s1 = f.malloc(20 * MIB);
        assert_eq!(f.a.pieces(s1), vec![(ps[3], 12 * MIB), (ps[2], 8 * MIB)]);
        f.free(s1);
        // 22 MiB: b and the front 10 MiB of a; 20 + 22 MiB of sBlocks.
        let s2 = f.malloc(22 * MIB);
        assert_eq!(f.a.pieces(s2), vec![(ps[1], 12 * MIB), (ps[0], 10 * MIB)]);
        assert_eq!(f.a.num_cached_sblocks(), cached_after, "{settings}");
        assert_eq!(f.a.num_dissolves(), 1 - cached_after as u64);
        assert_eq!(f.a.num_sblocks(), 1 + cached_after);
    }
}

#[test]
fn only_free_blocks_of_the_same_stream_are_stitched() {
    let mut f = Fixture::new("fragment_limit:4MiB", None);
    let a = f.malloc_on(12 * MIB, S2);
    let b = f.malloc_on(12 * MIB, S2);
    f.free(a);
    f.free(b);
    f.malloc_on(20 * MIB, S1);
    assert_eq!(f.calls()[4..], [(DReserve, 20 * MIB), (DMap, 20 * MIB)]);
    assert_eq!(f.a.num_stitches(), 0);
    f.malloc_on(20 * MIB, S2);
    assert_eq!(f.a.num_stitches(), 1);
}

#[test]
fn deferred_and_multi_stream_frees_of_sblocks() {
    let (mut f, _, _, _) = holes("fragment_limit:4MiB", None);
    let s = f.malloc(20 * MIB);
    f.a.record_stream(s, S2).unwrap();
    f.free(s);
    // Used on S2: pending until the next malloc processes its event.
    assert_eq!(f.stat("active_bytes.all.current"), (32 * MIB) as i64);
    assert_eq!(f.a.num_cached_sblocks(), 0);
    let s2 = f.malloc(20 * MIB);
    assert_eq!(f.a.num_stitches(), 1, "the cached sBlock was reused");
    f.a.free_deferred(s2).unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.stat("allocated_bytes.all.current"), (12 * MIB) as i64);
    assert_eq!(f.stat("active_bytes.all.current"), (32 * MIB) as i64);
    f.a.complete_free(s2).unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(f.a.num_cached_sblocks(), 1);
    assert!(matches!(f.a.free(s2), Err(AllocError::UnknownHandle(_))));
}

#[test]
fn empty_cache_dissolves_then_releases_every_free_segment() {
    let (mut f, _, _, b) = holes("fragment_limit:4MiB", None);
    let s = f.malloc(20 * MIB);
    f.free(s);
    f.free(b);
    f.a.empty_cache().unwrap();
    f.a.check_invariants().unwrap();
    assert_eq!(
        f.calls()[10..],
        [
            (DUnmap, 20 * MIB),
            (DRelease, 20 * MIB),
            (DMap, 12 * MIB),
            (DMap, 8 * MIB),
            (DUnmap, 12 * MIB),
            (DRelease, 12 * MIB),
            (DUnmap, 12 * MIB),
            (DRelease, 12 * MIB),
            (DUnmap, 12 * MIB),
            (DRelease, 12 * MIB),
        ]
    );
    assert_eq!(f.stat("reserved_bytes.all.current"), 0);
    assert_eq!(f.stat("segment.all.current"), 0);
    assert_eq!(f.stat("num_device_free"), 3);
    assert_eq!(f.a.device().used(), 0);
}

#[test]
fn out_of_memory_after_the_flush_and_retry() {
    let mut f = Fixture::new("fragment_limit:4MiB", Some(24 * MIB));
    f.malloc(12 * MIB);
    f.malloc(12 * MIB);
    match f.a.malloc(12 * MIB, 0) {
        Err(AllocError::OutOfMemory(r)) => {
            assert_eq!(r.rounded, 12 * MIB);
            assert_eq!(r.device_request, 12 * MIB);
            assert_eq!(r.allocated, 24 * MIB);
            assert_eq!(r.reserved, 24 * MIB);
        }
        other => panic!("expected OOM, got {other:?}"),
    }
    f.a.check_invariants().unwrap();
    assert_eq!(f.stat("num_ooms"), 1);
    assert_eq!(f.stat("num_alloc_retries"), 1);
    assert_eq!(f.a.device().failed_mallocs(), 2);
    assert_eq!(f.a.malloc(0, 0).unwrap(), BlockHandle::NULL);
    assert!(matches!(
        f.a.malloc(1 << 60, 0),
        Err(AllocError::OutOfMemory(r)) if r.exceeds_limit
    ));
}

#[test]
fn double_frees_are_unknown_handles() {
    let (mut f, _, _, b) = holes("fragment_limit:4MiB", None);
    f.free(b);
    assert!(matches!(f.a.free(b), Err(AllocError::UnknownHandle(_))));
    let s = f.malloc(20 * MIB);
    f.free(s);
    assert!(matches!(f.a.free(s), Err(AllocError::UnknownHandle(_))));
    let s2 = f.malloc(20 * MIB);
    assert_eq!(s2.index, s.index, "the cached sBlock is handed out again");
    assert!(f.a.free(s).is_err(), "with a new generation");
    f.free(s2);
}

#[test]
fn settings_errors_name_key_and_value() {
    assert_eq!(
        Settings::parse("defragment_level:3").unwrap_err(),
        "stitch setting defragment_level: invalid value '3' (expected 0, 1 or 2)"
    );
    assert_eq!(
        Settings::parse("max_pieces:1").unwrap_err(),
        "stitch setting max_pieces: invalid value '1' (expected an integer of at least 2, or unlimited)"
    );
    assert_eq!(
        Settings::parse("fragment_limit:big").unwrap_err(),
        "stitch setting fragment_limit: invalid size 'big' (expected bytes or a number with a unit such as 512MiB or 8GiB)"
    );
    assert!(
        Settings::parse("fragLimit:1")
            .unwrap_err()
            .starts_with("unknown stitch setting 'fragLimit'")
    );
    let c = Settings::parse("fragment_limit:64MiB,max_pieces:8").unwrap();
    assert_eq!(
        c.to_string(),
        "stitch:true,fragment_limit:64MiB,reuse_limit:1,defragment_level:0,max_pieces:8,gc_limit:1000GiB"
    );
    assert_eq!(Settings::parse(&c.to_string()), Ok(c));
}
