//! The host allocator against what PyTorch's own did on the fake device
//! (docs/host-allocator-spec.md, Appendix A and the OBS lines of R4.4,
//! R4.6), and the rules read from the wheels' headers.

use super::*;
use crate::Stat;

fn host(release: (u16, u16), conf: &str) -> HostAllocator {
    let v = TorchVersion::new(release.0, release.1);
    let conf = AllocConf::parse(conf, v).expect("settings the release accepts");
    HostAllocator::new(HostRules::of(&conf))
}

const DONE: &dyn Fn(HostEventId) -> bool = &|_| true;

/// `[current, peak, allocated, freed]`.
fn q(s: Stat) -> [i64; 4] {
    [s.current, s.peak, s.allocated, s.freed]
}

/// Appendix A's sequence, one step at a time: the active statistics of
/// 2.11 (with its two quirks) and 2.15, and the block statistics of both.
#[test]
fn appendix_a_sequence_gives_pytorchs_statistics() {
    for (release, steps) in [
        (
            (2, 11),
            [
                ([1, 1, 1, 0], [65536, 65536, 65536, 0]),
                ([1, 1, 1, 0], [65536, 65536, 65536, 0]),
                ([2, 2, 2, 0], [131072, 131072, 131072, 0]),
                ([2, 2, 2, 0], [131072, 131072, 131072, 0]),
                ([2, 3, 3, 1], [131201, 131200, 131200, -1]),
                ([3, 3, 4, 1], [196737, 196737, 196736, -1]),
            ],
        ),
        (
            (2, 15),
            [
                ([1, 1, 1, 0], [65536, 65536, 65536, 0]),
                ([0, 1, 1, 1], [0, 65536, 65536, 65536]),
                ([1, 1, 2, 1], [65536, 65536, 131072, 65536]),
                ([1, 1, 2, 1], [65536, 65536, 131072, 65536]),
                ([1, 2, 3, 2], [128, 65664, 131200, 131072]),
                ([2, 2, 4, 2], [65664, 65664, 196736, 131072]),
            ],
        ),
    ] {
        let mut h = host(release, "");
        let mut seen = Vec::new();
        let mut note = |h: &HostAllocator| {
            let s = h.stats();
            seen.push((q(s.active_requests()), q(s.active_bytes())));
        };
        let a = h.allocate(40_960, DONE).unwrap();
        assert_eq!(h.block(a).unwrap().1, 65_536);
        note(&h);
        h.free(a);
        note(&h);
        let b = h.allocate(40_000, DONE).unwrap();
        assert_eq!(h.block(b), h.block(a), "the cached block, at its address");
        note(&h);
        h.record_stream(b, 7);
        assert_eq!(h.free(b).len(), 1);
        note(&h);
        let c = h.allocate(100, DONE).unwrap();
        assert_eq!(h.block(c).unwrap().1, 128);
        note(&h);
        let d = h.allocate(65_536, DONE).unwrap();
        assert_eq!(h.block(d), h.block(a));
        note(&h);
        assert_eq!(h.allocate(0, DONE), None);
        assert_eq!(seen, steps.to_vec(), "{release:?}");
        assert_eq!(q(h.stats().allocations), [2, 2, 2, 0]);
        h.free(c);
        h.free(d);
        h.empty_cache(DONE);
        assert_eq!(q(h.stats().allocations), [0, 2, 2, 2]);
        assert_eq!(q(h.stats().allocated_bytes), [0, 65_664, 65_664, 65_664]);
        let active = q(h.stats().active_requests());
        match release {
            (2, 11) => assert_eq!(active, [3, 3, 4, 1], "2.11 never counts these frees"),
            _ => assert_eq!(active, [0, 2, 4, 4]),
        }
    }
}

/// R1.3, R4.6 (OBS 2.15 with a 1 MiB round threshold and a 2 MiB cache
/// limit): exact sizes above the threshold, a block over the limit given
/// back at its free, a smaller exact block reused when large enough.
#[test]
fn round_threshold_and_cache_limit_of_2_15() {
    let mut h = host(
        (2, 15),
        "pinned_max_round_threshold_mb:1,pinned_max_cached_size_mb:2",
    );
    let a = h.allocate(1_572_864, DONE).unwrap();
    assert_eq!(h.block(a).unwrap().1, 1_572_864);
    let b = h.allocate(3 * 1_048_576 + 5, DONE).unwrap();
    assert_eq!(h.block(b).unwrap().1, 3_145_733);
    h.free(b);
    assert_eq!(h.stats().allocations.current, 1);
    assert_eq!(h.stats().allocations.freed, 1, "num_host_free");
    h.free(a);
    let before = h.stats().active_bytes().allocated;
    let c = h.allocate(1_228_800, DONE).unwrap();
    assert_eq!(h.block(c), h.block(a));
    assert_eq!(h.stats().active_bytes().allocated - before, 1_572_864);
}

/// R2.3: 2.13 takes the bucket's last block without looking at its size,
/// so an exact-size request can get a smaller block (PyTorch's bug); 2.14
/// takes only a block large enough.
#[test]
fn release_2_13_hands_out_a_block_too_small() {
    let conf = "pinned_max_round_threshold_mb:1";
    let mut old = host((2, 13), conf);
    let a = old.allocate(1_200_000, DONE).unwrap();
    old.free(a);
    let b = old.allocate(1_900_000, DONE).unwrap();
    assert_eq!(old.block(b).unwrap().1, 1_200_000);
    let mut new = host((2, 14), conf);
    let a = new.allocate(1_200_000, DONE).unwrap();
    new.free(a);
    let b = new.allocate(1_900_000, DONE).unwrap();
    assert_eq!(new.block(b).unwrap().1, 1_900_000);
    assert_ne!(new.block(a), new.block(b));
}

/// R4.4 (OBS 2.15 with a 1 MiB reserve): blocks carved 4 KiB apart, one
/// host allocation for all; a block too large for it from CUDA; the
/// reserve's space not reused after `empty_cache`, but carved further.
#[test]
fn reserve_segment_is_carved_in_pages() {
    let mut h = host((2, 15), "pinned_reserve_segment_size_mb:1");
    let blocks: Vec<HostBlockId> = [100, 100, 5000]
        .into_iter()
        .map(|n| h.allocate(n, DONE).unwrap())
        .collect();
    let got: Vec<(u64, u64)> = blocks.iter().map(|&b| h.block(b).unwrap()).collect();
    let base = got.first().unwrap().0;
    assert_eq!(
        got,
        vec![(base, 128), (base + 4096, 128), (base + 8192, 8192)]
    );
    assert_eq!(h.stats().host_alloc_calls, 1);
    assert_eq!(h.stats().allocations.allocated, 3);
    let big = h.allocate(4 << 20, DONE).unwrap();
    assert_eq!(h.stats().host_alloc_calls, 2);
    assert_eq!(h.stats().reserved_bytes.current, (1 << 20) + (4 << 20));
    for b in blocks.into_iter().chain([big]) {
        h.free(b);
    }
    h.empty_cache(DONE);
    assert_eq!(h.stats().allocations.freed, 4);
    assert_eq!(h.stats().host_free_calls, 1);
    assert_eq!(
        h.stats().reserved_bytes.current,
        1 << 20,
        "the reserve is never given back"
    );
    let again = h.allocate(100, DONE).unwrap();
    assert_eq!(h.block(again).unwrap(), (base + 16_384, 128));
    assert_eq!(h.stats().host_alloc_calls, 2);
}

/// R3.4: events are processed oldest first, and an incomplete one holds
/// back every later one, completed or not.
#[test]
fn an_incomplete_event_holds_back_the_later_ones() {
    let mut h = host((2, 15), "");
    let a = h.allocate(1000, DONE).unwrap();
    let b = h.allocate(1000, DONE).unwrap();
    h.record_stream(a, 1);
    h.record_stream(b, 2);
    let first = h.free(a);
    let _second = h.free(b);
    let only_second = |e: HostEventId| !first.contains(&e);
    let c = h.allocate(1000, &only_second).unwrap();
    assert_ne!(h.block(c), h.block(a));
    assert_ne!(h.block(c), h.block(b), "b waits behind a's event");
    let d = h.allocate(1000, DONE).unwrap();
    assert_eq!(h.block(d), h.block(b), "the most recently cached first");
}
