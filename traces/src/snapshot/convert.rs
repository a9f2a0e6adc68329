//! Snapshot → [`Trace`]s, one per device: the requests in order, the real
//! allocator's decisions kept as the expected record, and — for recordings
//! that start mid-run — the allocator state at the first entry.
//!
//! The steps live in their own modules: `walk` (entries → events),
//! `bursts` (empty_cache() or a malloc's release-and-retry) and `initial`
//! (the state at the first entry). A device whose state cannot be laid out
//! still converts: its trace carries the reason, and the blocks in use, so
//! that a replay can start fresh; other devices are unaffected.

use std::collections::BTreeMap;

use crate::error::TraceError;
use crate::model::*;
use crate::snapshot::host::{CacheLimit, interleave, walk_host};
use crate::snapshot::initial::initial_state;
use crate::snapshot::model::*;
use crate::snapshot::release::releases_of;
use crate::snapshot::size_rules::SizeRules;
use crate::snapshot::walk::{LEGACY_LIST_NOTE, NO_ENTRIES_NOTE, walk_entries};

/// Converts every device of `snap` that has trace entries or segments.
/// A device whose entries are inconsistent is an error; see
/// [`snapshot_to_device_traces`] to keep the others.
pub fn snapshot_to_traces(
    snap: &Snapshot,
    path: &str,
    rules: &SizeRules<'_>,
) -> Result<Vec<Trace>, TraceError> {
    snapshot_to_device_traces(snap, path, rules)
        .into_iter()
        .map(|(_, t)| t)
        .collect()
}

/// Converts every device of `snap` that has trace entries or segments, each
/// on its own: one device's malformed entries do not stop the others.
pub fn snapshot_to_device_traces(
    snap: &Snapshot,
    path: &str,
    rules: &SizeRules<'_>,
) -> Vec<(u32, Result<Trace, TraceError>)> {
    // Segments grouped by device once: a snapshot naming many devices must
    // not make every device's conversion scan every segment.
    let mut by_device: BTreeMap<u32, Vec<&Segment>> = BTreeMap::new();
    for (d, entries) in snap.device_traces.iter().enumerate() {
        if !entries.is_empty() {
            if let Ok(d) = u32::try_from(d) {
                by_device.entry(d).or_default();
            }
        }
    }
    for s in &snap.segments {
        by_device.entry(s.device).or_default().push(s);
    }
    // The process's pinned host memory goes with its first device (a
    // snapshot of host memory alone is device 0's).
    let pinned = !snap.host_traces.is_empty() || !snap.host_segments.is_empty();
    if pinned && by_device.is_empty() {
        by_device.insert(0, Vec::new());
    }
    let host_device = by_device.keys().next().copied();
    by_device
        .into_iter()
        .map(|(d, segs)| {
            let host = Some(d) == host_device;
            (d, device_trace(snap, d, &segs, path, rules, host))
        })
        .collect()
}

fn header(snap: &Snapshot, device: u32, path: &str) -> TraceHeader {
    let releases = releases_of(snap);
    let mut header = TraceHeader {
        source: path.to_string(),
        device,
        framework: Some(format!(
            "torch {} (PyTorch memory snapshot)",
            releases.label()
        )),
        ..Default::default()
    };
    header.set_releases(&releases);
    if let Some(s) = &snap.allocator_settings {
        header.alloc_conf = Some(s.conf_string.clone().unwrap_or_default());
        let extra = &mut header.extra;
        if let Some(m) = s.max_split_size {
            extra.insert("recorded_max_split_size".into(), m.to_string());
        }
        if let Some(e) = s.expandable_segments {
            extra.insert("recorded_expandable_segments".into(), e.to_string());
        }
        if let Some(g) = s.garbage_collection_threshold {
            extra.insert(
                "recorded_garbage_collection_threshold".into(),
                g.to_string(),
            );
        }
    }
    header
}

fn device_trace(
    snap: &Snapshot,
    device: u32,
    segments: &[&Segment],
    path: &str,
    rules: &SizeRules<'_>,
    with_host: bool,
) -> Result<Trace, TraceError> {
    let empty = Vec::new();
    let entries = snap.device_traces.get(device as usize).unwrap_or(&empty);
    let with_host = with_host && (!snap.host_traces.is_empty() || !snap.host_segments.is_empty());
    let keep_starts = with_host || !snap.external_annotations.is_empty();
    let mut w = walk_entries(
        entries,
        segments,
        header(snap, device, path),
        device,
        path,
        rules,
        keep_starts,
    )?;
    let initial = initial_state(segments, &mut w, rules);
    let mut expected = std::mem::take(&mut w.expected);
    let mut t = std::mem::take(&mut w.trace);
    if snap.legacy_segment_list {
        t.notes.retain(|n| n != NO_ENTRIES_NOTE);
        t.notes.insert(0, LEGACY_LIST_NOTE.into());
    }
    if let Some(init) = &initial {
        if !entries.is_empty() {
            t.notes.push(initial_note(init));
        }
    }
    t.initial = initial;
    let pool_of = |s: &Segment| {
        let id = (s.pool_id.0 as u64, s.pool_id.1 as u64);
        t.pools.iter().position(|d| d.id == id).map(|i| i as u32)
    };
    expected.final_segments = segments
        .iter()
        .map(|s| final_segment(s, pool_of(s)))
        .collect();
    if !t.alloc_frames.is_empty() {
        t.frames = snap.frames.clone();
        t.alloc_frames.resize(w.next_id as usize, None);
    }
    if expected.alloc_addresses.len() < w.next_id as usize {
        expected.alloc_addresses.resize(w.next_id as usize, None);
    }
    t.num_ids = w.next_id;
    t.expected = Some(expected);
    let times: Vec<Option<i64>> = entries.iter().map(|e| e.time_us).collect();
    let mut starts = std::mem::take(&mut w.entry_starts);
    super::annotations::apply(
        &mut t,
        &snap.external_annotations,
        device,
        &mut starts,
        &times,
    );
    if with_host {
        let settings = snap.allocator_settings.as_ref();
        let limit = CacheLimit::of(
            settings.and_then(|s| s.other.get("max_cached_size").map(String::as_str)),
            settings.and_then(|s| s.conf_string.as_deref()),
        );
        let host = walk_host(
            &snap.host_traces,
            &snap.host_segments,
            &snap.host_requests,
            limit,
            t.num_ids,
            path,
        )?;
        interleave(&mut t, host, &starts, &times);
        if entries.is_empty() {
            t.notes.retain(|n| n != NO_ENTRIES_NOTE);
        }
    }
    Ok(t)
}

fn initial_note(init: &InitialState) -> String {
    let what = format!(
        "the recording starts mid-run (or its ring buffer overflowed): {} blocks were in use at the first entry",
        init.live_blocks()
    );
    match &init.layout_error {
        None => format!(
            "{what}; the allocator state there was rebuilt from the final segments ({} segments)",
            init.segments.len()
        ),
        Some(e) => format!(
            "{what}; their recorded layout could not be rebuilt ({e}), so replays start fresh (those blocks allocated first)"
        ),
    }
}

fn final_segment(s: &Segment, pool: Option<PoolIndex>) -> FinalSegment {
    FinalSegment {
        pool,
        address: s.address,
        size: s.total_size,
        is_small: s.is_small,
        is_expandable: s.is_expandable,
        blocks: s
            .blocks
            .iter()
            .map(|b| {
                let st = match b.state {
                    SnapshotBlockState::Inactive => InitialBlockState::Free,
                    SnapshotBlockState::ActiveAllocated => InitialBlockState::Allocated(0),
                    SnapshotBlockState::ActivePendingFree => InitialBlockState::PendingFree(0),
                };
                (b.address, b.size, st)
            })
            .collect(),
    }
}
