//! The packed data rebuilds the replay exactly: at each setting's peak,
//! the live blocks (address, size) are the blocks of the replay's segments
//! at its peak, and the device calls sum to its reserved bytes; the
//! page's own rebuild (`explorer.js`) follows the same rules.

use std::collections::BTreeSet;
use std::path::Path;

use vramlab_allocator::{AllocConf, BlockState, TorchVersion};
use vramlab_replay::{Inputs, ReplayOptions, Scenario};

use super::*;

fn trace(rel: &str) -> vramlab_traces::Trace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel);
    Inputs::new([&path]).trace().unwrap()
}

fn run(trace: &vramlab_traces::Trace, conf: &str) -> SettingRun {
    let opts = ReplayOptions {
        check_invariants: false,
        segments_at_peak: true,
        record_addresses: true,
        ..ReplayOptions::default()
    };
    let c = AllocConf::parse(conf, TorchVersion::NEWEST).unwrap();
    let r = Scenario::native(c).run(trace, &opts).unwrap();
    SettingRun::new(conf, r)
}

/// What the page computes at event `t` for setting `k`: the live blocks
/// and the reserved bytes.
fn rebuilt(index: &Index<'_>, blob: &[u8], k: usize, t: i64) -> (BTreeSet<(u64, u64)>, i64) {
    let col = |c: &Column, i: usize| c.get(blob, i).unwrap() as i64;
    let tc = &index.columns;
    let s = &index.settings[k];
    let done = tc.get("free_done").unwrap_or(&tc["free_at"]);
    let mut live = BTreeSet::new();
    for id in 0..index.ids {
        let end = if s.holds_pending {
            col(done, id)
        } else {
            col(&tc["free_at"], id)
        };
        let size = col(&s.columns["bsize"], id);
        if col(&tc["alloc_at"], id) <= t && end > t && size > 0 {
            live.insert((col(&s.columns["addr"], id) as u64, size as u64));
        }
    }
    let mut reserved = 0;
    for j in 0..s.columns["log_ev"].len {
        if col(&s.columns["log_ev"], j) > t {
            break;
        }
        let size = col(&s.columns["log_size"], j);
        match col(&s.columns["log_kind"], j) {
            0 | 2 => reserved += size,
            1 | 3 => reserved -= size,
            _ => {}
        }
    }
    (live, reserved)
}

fn check(rel: &str, confs: &[&str]) {
    let trace = trace(rel);
    let runs: Vec<SettingRun> = confs.iter().map(|c| run(&trace, c)).collect();
    let view = ExploreTrace::of(&trace).unwrap();
    let usable: Vec<&SettingRun> = runs.iter().collect();
    let (index, blob) = pack(&view, &usable);
    assert_eq!(index.events, trace.events.len() as u64);
    for (k, r) in runs.iter().enumerate() {
        let t = r.run.peak_event_index.map_or(-1, |e| e as i64);
        let (live, reserved) = rebuilt(&index, &blob, k, t);
        let expected: BTreeSet<(u64, u64)> = r
            .run
            .segments_at_peak
            .iter()
            .flat_map(|s| s.blocks.iter())
            .filter(|b| b.state != BlockState::Free)
            .map(|b| (b.ptr, b.size))
            .collect();
        assert!(!expected.is_empty(), "{rel} under {}", r.label);
        assert_eq!(
            live, expected,
            "{rel} under {}: blocks at the peak",
            r.label
        );
        let seg_bytes: u64 = r.run.segments_at_peak.iter().map(|s| s.size).sum();
        assert_eq!(
            reserved as u64, r.run.summary.peak_reserved_bytes,
            "{rel} under {}",
            r.label
        );
        assert_eq!(
            seg_bytes, r.run.summary.peak_reserved_bytes,
            "{rel} under {}",
            r.label
        );
    }
}

#[test]
fn the_packed_columns_rebuild_each_peak_of_a_training_step() {
    check(
        "workloads/data/gpt-small-train.csv",
        &["", "expandable_segments:True", "roundup_power2_divisions:8"],
    );
}

#[test]
fn the_packed_columns_rebuild_a_snapshot_recorded_mid_run() {
    check(
        "tests/pools/snapshots/serving-warmup-midrun.torch2.15.pickle",
        &["", "expandable_segments:True"],
    );
}

#[test]
fn frames_are_stored_once_and_named_by_file_and_line() {
    let stacks = vec![
        vec![
            "train.py:10 in step".to_string(),
            "train.py:3 in main".to_string(),
        ],
        vec![
            "model.py:7 in forward".to_string(),
            "train.py:3 in main".to_string(),
        ],
    ];
    let (lines, idx) = line_table(&stacks);
    assert_eq!(
        lines,
        vec![
            "train.py:10 in step",
            "train.py:3 in main",
            "model.py:7 in forward"
        ]
    );
    assert_eq!(idx, vec![vec![0, 1], vec![2, 1]]);
}
