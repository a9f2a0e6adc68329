//! Which PyTorch releases could have written a snapshot.
//!
//! Each release from 2.0 to 2.11 added keys to the snapshot dict; the keys a
//! file holds bound the release that wrote it. What was checked, and how
//! (the PyTorch sources, the key names in each release wheel's libraries,
//! and `torch.cuda.memory._snapshot()` run under 2.2–2.11), is in
//! docs/torch-release-signals.md. The signals, oldest first:
//!
//! | release | first appears |
//! |---|---|
//! | 2.0 | blocks carry `history` (no block `address`) |
//! | 2.1 | segments carry `segment_pool_id`, `is_expandable`; `segment_map`/`segment_unmap` actions |
//! | 2.2 | trace entries carry `time_us` |
//! | 2.3 | top-level `allocator_settings` |
//! | 2.5 | top-level `external_annotations` |
//! | 2.8 | trace entries carry `compile_context` |
//! | 2.9 | `allocator_settings` has `graph_capture_record_stream_reuse` |
//! | 2.10 | trace entries carry `user_metadata` |
//! | 2.11 | `forward_frames` (with autograd anomaly mode only) |
//! | 2.12 | trace entries carry `pool_id` |
//! | 2.13 | `allocator_settings` has `max_cached_size`, `max_round_threshold` |
//! | 2.14 | top-level `host_segments`, `host_traces`; the trace action `annotate` (`_annotate_tensor`) |
//! | 2.15 | trace entries may carry `internal_metadata` (when set; else a 2.15 snapshot reads as 2.14–2.15) |
//!
//! Without trace entries the entry signals are missing, and the range is
//! wider. Keys no release up to 2.15 writes mean "2.15 or later".

use crate::snapshot::model::{Action, Snapshot};

use vramlab_torch::TorchVersion;
pub use vramlab_torch::{EVIDENCE_KEY, RELEASES_KEY, ReleaseRange};

/// The newest release vramlab tells apart (the oldest is 2.0).
const NEWEST: TorchVersion = TorchVersion::NEWEST;

/// Release 2.`minor`.
const fn r(minor: u16) -> TorchVersion {
    TorchVersion::new(2, minor)
}

/// Keys that no release up to [`NEWEST`] writes (seen in later PyTorch
/// development): their presence means a later release.
const LATER_KEYS: &[&str] = &[];

/// The releases that could have written `snap`.
pub fn releases_of(snap: &Snapshot) -> ReleaseRange {
    let mut r = bounded(snap);
    let later_key = LATER_KEYS.iter().find(|k| snap.keys_seen.contains(**k));
    let later_action = snap
        .device_traces
        .iter()
        .flatten()
        .find_map(|e| match &e.action {
            Action::Other(name) => Some(name.clone()),
            _ => None,
        });
    if later_key.is_some() || later_action.is_some() {
        r.later = true;
        r.oldest = NEWEST;
        r.newest = NEWEST;
        r.evidence.push(match (later_key, later_action) {
            (Some(k), _) => format!("`{k}` is newer than 2.15"),
            (None, Some(a)) => format!("the trace action `{a}` is newer than 2.15"),
            (None, None) => String::new(),
        });
    }
    r
}

fn bounded(snap: &Snapshot) -> ReleaseRange {
    let has = |k: &str| snap.keys_seen.contains(k);
    let entries = snap.device_traces.iter().any(|d| !d.is_empty());
    let block_history = has("segments[].blocks[].history");
    let modern_segments = has("segments[].segment_pool_id")
        || has("segments[].is_expandable")
        || snap
            .device_traces
            .iter()
            .flatten()
            .any(|e| matches!(e.action, Action::SegmentMap | Action::SegmentUnmap));
    if snap.legacy_segment_list {
        return if block_history {
            ReleaseRange::new(r(0), r(0), vec!["blocks carry `history`".into()])
        } else {
            ReleaseRange::new(
                r(1),
                NEWEST,
                vec![
                    "a segment list (torch.cuda.memory_snapshot()) says little about its release"
                        .into(),
                ],
            )
        };
    }
    let Some(settings) = &snap.allocator_settings else {
        if block_history {
            return ReleaseRange::new(
                r(0),
                r(0),
                vec![
                    "blocks carry `history`".into(),
                    "no `allocator_settings`".into(),
                ],
            );
        }
        let mut ev = vec!["no `allocator_settings` (added in 2.3)".to_string()];
        if !entries {
            let lo = if modern_segments { r(1) } else { r(0) };
            ev.push("no trace entries".into());
            return ReleaseRange::new(lo, r(2), ev);
        }
        return if has("device_traces[][].time_us") {
            ev.push("trace entries carry `time_us` (2.2+)".into());
            ReleaseRange::new(r(2), r(2), ev)
        } else if modern_segments {
            ev.push("trace entries lack `time_us` (added in 2.2)".into());
            ReleaseRange::new(r(1), r(1), ev)
        } else {
            ev.push("trace entries lack `time_us`".into());
            ReleaseRange::new(r(0), r(1), ev)
        };
    };
    if !has("external_annotations") {
        return ReleaseRange::new(
            r(3),
            r(4),
            vec![
                "`allocator_settings` (2.3+)".into(),
                "no `external_annotations` (added in 2.5)".into(),
            ],
        );
    }
    let graph_key = settings
        .keys
        .iter()
        .any(|k| k == "graph_capture_record_stream_reuse");
    if !graph_key {
        let mut ev = vec![
            "`external_annotations` (2.5+)".to_string(),
            "no `graph_capture_record_stream_reuse` setting (added in 2.9)".into(),
        ];
        if !entries {
            ev.push("no trace entries".into());
            return ReleaseRange::new(r(5), r(8), ev);
        }
        return if has("device_traces[][].compile_context") {
            ev.push("trace entries carry `compile_context` (2.8+)".into());
            ReleaseRange::new(r(8), r(8), ev)
        } else {
            ev.push("trace entries lack `compile_context` (added in 2.8)".into());
            ReleaseRange::new(r(5), r(7), ev)
        };
    }
    let mut ev = vec!["the `graph_capture_record_stream_reuse` setting (2.9+)".to_string()];
    if !entries {
        ev.push("no trace entries".into());
        return ReleaseRange::new(r(9), NEWEST, ev);
    }
    if !has("device_traces[][].user_metadata") {
        ev.push("trace entries lack `user_metadata` (added in 2.10)".into());
        return ReleaseRange::new(r(9), r(9), ev);
    }
    ev.push("trace entries carry `user_metadata` (2.10+)".into());
    if let Some(r) = after_2_11(snap, &settings.keys, &mut ev) {
        return r;
    }
    if snap.keys_seen.iter().any(|k| k.ends_with("forward_frames")) {
        ev.push("`forward_frames` (2.11+)".into());
        return ReleaseRange::new(r(11), r(11), ev);
    }
    ReleaseRange::new(r(10), r(11), ev)
}

/// The signals of 2.12 to 2.15, read from snapshots that each release's
/// own allocator wrote (the oracle): entries carry `pool_id` from 2.12,
/// `allocator_settings` has `max_cached_size` and `max_round_threshold`
/// from 2.13, the top level has `host_segments` and `host_traces` from
/// 2.14; 2.15 entries carry `internal_metadata` when it is set (else a
/// 2.15 snapshot is "2.14–2.15"). `None`: none of them (2.11 or earlier).
fn after_2_11(snap: &Snapshot, settings: &[String], ev: &mut Vec<String>) -> Option<ReleaseRange> {
    let has = |k: &str| snap.keys_seen.contains(k);
    let setting = |k: &str| settings.iter().any(|x| x == k);
    let (lo, why) = if has("device_traces[][].internal_metadata") {
        (r(15), "trace entries carry `internal_metadata` (2.15)")
    } else if has("host_segments") || has("host_traces") {
        (r(14), "top-level `host_segments` (2.14+)")
    } else if snap
        .device_traces
        .iter()
        .flatten()
        .any(|e| e.action == Action::Annotate)
    {
        (r(14), "the trace action `annotate` (2.14+)")
    } else if setting("max_cached_size") || setting("max_round_threshold") {
        (
            r(13),
            "the `max_cached_size` setting (2.13+), no `host_segments` (added in 2.14)",
        )
    } else if has("device_traces[][].pool_id") {
        (
            r(12),
            "trace entries carry `pool_id` (2.12+), no `max_cached_size` setting (added in 2.13)",
        )
    } else {
        return None;
    };
    ev.push(why.into());
    let hi = if lo == r(14) { r(15) } else { lo };
    Some(ReleaseRange::new(lo, hi, std::mem::take(ev)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::model::AllocatorSettings;

    fn snap(keys: &[&str], settings: Option<&[&str]>, entries: bool) -> Snapshot {
        let mut s = Snapshot {
            keys_seen: keys.iter().map(|k| k.to_string()).collect(),
            allocator_settings: settings.map(|k| AllocatorSettings {
                keys: k.iter().map(|x| x.to_string()).collect(),
                ..Default::default()
            }),
            ..Default::default()
        };
        if entries {
            s.device_traces = vec![vec![crate::snapshot::model::TraceEntry {
                action: Action::Alloc,
                addr: Some(0),
                device_free: None,
                size: 1,
                stream: 0,
                time_us: None,
                frames: None,
                compile_context: None,
                user_metadata: None,
                pool_id: None,
            }]];
        }
        s
    }

    #[test]
    fn every_release_step_is_told_apart() {
        let base: &[&str] = &["PYTORCH_CUDA_ALLOC_CONF", "max_split_size"];
        let with_graph: &[&str] = &[
            "PYTORCH_CUDA_ALLOC_CONF",
            "graph_capture_record_stream_reuse",
        ];
        let cases: Vec<(Snapshot, &str)> = vec![
            (snap(&["segments[].blocks[].history"], None, true), "2.0"),
            (snap(&["segments[].segment_pool_id"], None, true), "2.1"),
            (
                snap(
                    &["segments[].segment_pool_id", "device_traces[][].time_us"],
                    None,
                    true,
                ),
                "2.2",
            ),
            (
                snap(&["segments[].segment_pool_id"], None, false),
                "2.1–2.2",
            ),
            (snap(&[], Some(base), true), "2.3–2.4"),
            (snap(&["external_annotations"], Some(base), true), "2.5–2.7"),
            (
                snap(
                    &["external_annotations", "device_traces[][].compile_context"],
                    Some(base),
                    true,
                ),
                "2.8",
            ),
            (
                snap(&["external_annotations"], Some(base), false),
                "2.5–2.8",
            ),
            (
                snap(&["external_annotations"], Some(with_graph), true),
                "2.9",
            ),
            (
                snap(
                    &["external_annotations", "device_traces[][].user_metadata"],
                    Some(with_graph),
                    true,
                ),
                "2.10–2.11",
            ),
            (
                snap(
                    &[
                        "external_annotations",
                        "device_traces[][].user_metadata",
                        "device_traces[][].forward_frames",
                    ],
                    Some(with_graph),
                    true,
                ),
                "2.11",
            ),
            (
                snap(&["external_annotations"], Some(with_graph), false),
                "2.9–2.15",
            ),
            (
                snap(
                    &[
                        "external_annotations",
                        "device_traces[][].user_metadata",
                        "device_traces[][].pool_id",
                    ],
                    Some(with_graph),
                    true,
                ),
                "2.12",
            ),
            (
                snap(
                    &[
                        "external_annotations",
                        "device_traces[][].user_metadata",
                        "device_traces[][].pool_id",
                    ],
                    Some(&[
                        "PYTORCH_CUDA_ALLOC_CONF",
                        "graph_capture_record_stream_reuse",
                        "max_cached_size",
                        "max_round_threshold",
                    ]),
                    true,
                ),
                "2.13",
            ),
            (
                snap(
                    &[
                        "external_annotations",
                        "host_segments",
                        "host_traces",
                        "device_traces[][].user_metadata",
                        "device_traces[][].pool_id",
                    ],
                    Some(&[
                        "PYTORCH_CUDA_ALLOC_CONF",
                        "graph_capture_record_stream_reuse",
                        "max_cached_size",
                    ]),
                    true,
                ),
                "2.14–2.15",
            ),
            (
                snap(
                    &[
                        "external_annotations",
                        "device_traces[][].user_metadata",
                        "device_traces[][].internal_metadata",
                    ],
                    Some(with_graph),
                    true,
                ),
                "2.15",
            ),
        ];
        for (s, want) in cases {
            let r = releases_of(&s);
            assert_eq!(r.label(), want, "{:?}", r.evidence);
            assert!(!r.evidence.is_empty());
        }
    }

    /// An `annotate` entry (`_annotate_tensor`, first in the 2.14 wheel;
    /// scripts/oracle_experiments/annotate.py) means 2.14 or later, not a
    /// release newer than vramlab knows.
    #[test]
    fn an_annotate_entry_means_2_14_or_later() {
        let mut s = snap(
            &["external_annotations", "device_traces[][].user_metadata"],
            Some(&[
                "PYTORCH_CUDA_ALLOC_CONF",
                "graph_capture_record_stream_reuse",
            ]),
            true,
        );
        let mut e = s.device_traces[0][0].clone();
        e.action = Action::from_name("annotate");
        s.device_traces[0].push(e);
        let r = releases_of(&s);
        assert_eq!(r.label(), "2.14–2.15", "{:?}", r.evidence);
        assert!(!r.later);
        assert!(r.evidence.iter().any(|e| e.contains("`annotate` (2.14+)")));
    }

    #[test]
    fn a_segment_list_is_wide_unless_it_has_history() {
        let mut s = snap(&[], None, false);
        s.legacy_segment_list = true;
        assert_eq!(releases_of(&s).label(), "2.1–2.15");
        s.keys_seen.insert("segments[].blocks[].history".into());
        assert_eq!(releases_of(&s).label(), "2.0");
        let got = releases_of(&s);
        assert_eq!((got.oldest, got.newest, got.later), (r(0), r(0), false));
    }
}
