//! OOM points pinned on constructed traces where the answer is known.

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::find_oom_point;
use vramlab_replay::{Scenario, Start};
use vramlab_traces::read_csv;

const MIB: u64 = 1 << 20;

fn trace(rows: &str) -> vramlab_traces::Trace {
    read_csv(format!("action,id,size,stream\n{rows}").as_bytes(), "t.csv").unwrap()
}

fn conf(s: &str) -> AllocConf {
    AllocConf::parse(s, TorchVersion::NEWEST).unwrap()
}

/// Two 30 MiB tensors, freed, then one 64 MiB tensor.
fn two_then_one() -> vramlab_traces::Trace {
    trace(&format!(
        "alloc,a,{m30}\nalloc,b,{m30}\nfree,a\nfree,b\nalloc,c,{m64}\nfree,c\n",
        m30 = 30 * MIB,
        m64 = 64 * MIB
    ))
}

#[test]
fn flushing_the_cache_lets_the_default_fit_the_live_peak() {
    // Unlimited: 30 + 30 cached, then a new 64 MiB segment: 124 MiB reserved.
    // With less, the full flush frees both 30 MiB segments first: 64 MiB is enough.
    let p = find_oom_point(&two_then_one(), &Scenario::native(conf("")), Start::Fresh).unwrap();
    assert_eq!(p.unlimited_peak_reserved, 124 * MIB);
    assert_eq!(p.lower_bound, 64 * MIB);
    assert_eq!(p.min_capacity, 64 * MIB);
    assert!(p.verified);
    assert!(p.not_monotone_at.is_empty());
}

#[test]
fn expandable_segments_need_whole_pages() {
    // 20 MiB pages: the 64 MiB tensor needs 4 pages = 80 MiB.
    let p = find_oom_point(
        &two_then_one(),
        &Scenario::native(conf("expandable_segments:True")),
        Start::Fresh,
    )
    .unwrap();
    assert_eq!(p.unlimited_peak_reserved, 80 * MIB);
    assert_eq!(p.min_capacity, 80 * MIB);
    assert!(p.verified);
}

#[test]
fn fragmentation_raises_the_point_above_the_live_peak() {
    // a, b, c of 4 MiB share one 20 MiB segment; freeing b leaves a hole
    // that a 10 MiB request cannot use while a and c live: it needs its own
    // 10 MiB segment, so 30 MiB against 18 MiB of live tensors.
    let t = trace(&format!(
        "alloc,a,{m4}\nalloc,b,{m4}\nalloc,c,{m4}\nfree,b\nalloc,d,{m10}\n",
        m4 = 4 * MIB,
        m10 = 10 * MIB
    ));
    let p = find_oom_point(&t, &Scenario::native(conf("")), Start::Fresh).unwrap();
    assert_eq!(p.lower_bound, 18 * MIB);
    assert_eq!(p.min_capacity, 30 * MIB);
    assert!(p.verified);
}
