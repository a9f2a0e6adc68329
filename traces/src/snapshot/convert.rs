//! Snapshot → [`Trace`]s, one per device: the requests in order, the real
//! allocator's decisions kept as the expected record, and — for recordings
//! that start mid-run — the allocator state at the first entry.
//!
//! Rebuilding the initial state (spec §12.4): the segments that existed at
//! the first entry are the final `segments` plus those the trace frees
//! before allocating them, minus those it allocates first. The blocks that
//! were allocated at the first entry are the addresses the trace frees
//! before allocating them, plus the final allocated blocks the trace never
//! touches. Their layout follows from two invariants of the native
//! allocator: free neighbours are always merged, so every gap between
//! allocated blocks is one free block; and a large-pool block never leaves
//! a remainder of 1 MiB or less unsplit, so a block is its rounded request
//! unless the gap after it is at most 1 MiB (then it took the gap) or it is
//! an oversize block (then it spans to its neighbour).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::error::{Location, TraceError};
use crate::model::*;
use crate::snapshot::model::*;

const MIB: u64 = 1 << 20;

/// The allocator's size rules the converter needs to lay out blocks of an
/// initial state (from the recorded settings).
pub struct SizeRules<'a> {
    /// `round_size` of the recorded settings.
    pub round: &'a dyn Fn(u64) -> u64,
    /// `max_split_size` in bytes (`u64::MAX` = unlimited).
    pub max_split_size: u64,
}

fn default_round(n: u64) -> u64 {
    n.max(1).div_ceil(512) * 512
}

impl Default for SizeRules<'_> {
    fn default() -> Self {
        SizeRules {
            round: &default_round,
            max_split_size: u64::MAX,
        }
    }
}

/// A block of an initial segment before its size is settled: (address,
/// exact size when known, requested bytes, state, entry that frees it).
type PendingBlock = (u64, Option<u64>, u64, InitialBlockState, usize);

#[derive(Debug, Clone, Copy)]
enum LiveState {
    Allocated(AllocId),
    Pending(AllocId),
}

#[derive(Debug, Clone, Copy)]
struct InitialLive {
    address: u64,
    id: AllocId,
    requested: u64,
    pending: bool,
    /// Entry at which the trace frees it.
    freed_at: usize,
}

/// Converts every device of `snap` that has trace entries or segments.
pub fn snapshot_to_traces(
    snap: &Snapshot,
    path: &str,
    rules: &SizeRules<'_>,
) -> Result<Vec<Trace>, TraceError> {
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
    by_device
        .into_iter()
        .map(|(d, segs)| device_trace(snap, d, &segs, path, rules))
        .collect()
}

fn device_trace(
    snap: &Snapshot,
    device: u32,
    segments: &[&Segment],
    path: &str,
    rules: &SizeRules<'_>,
) -> Result<Trace, TraceError> {
    let empty = Vec::new();
    let entries = snap.device_traces.get(device as usize).unwrap_or(&empty);
    let err = |k: usize, msg: String| {
        TraceError::new(
            path,
            Location::Entry(k as u64),
            format!("device_traces[{device}]: {msg}"),
        )
    };
    let mut header = TraceHeader {
        source: path.to_string(),
        device,
        ..Default::default()
    };
    if let Some(s) = &snap.allocator_settings {
        header.alloc_conf = Some(s.conf_string.clone().unwrap_or_default());
        if let Some(m) = s.max_split_size {
            header
                .extra
                .insert("recorded_max_split_size".into(), m.to_string());
        }
        if let Some(e) = s.expandable_segments {
            header
                .extra
                .insert("recorded_expandable_segments".into(), e.to_string());
        }
        if let Some(g) = s.garbage_collection_threshold {
            header.extra.insert(
                "recorded_garbage_collection_threshold".into(),
                g.to_string(),
            );
        }
    }
    header.framework = Some("torch (PyTorch memory snapshot)".into());
    let mut t = Trace::new(header);
    let mut streams = StreamInterner::default();
    let mut expected = ExpectedRecord::default();
    let mut live: HashMap<u64, LiveState> = HashMap::new();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut initial_live: Vec<InitialLive> = Vec::new();
    // First segment event per address: (kind, size, stream).
    let mut seg_first: HashMap<u64, (SegmentEventKind, u64, u64)> = HashMap::new();
    let mut next_id: AllocId = 0;
    let mut unknown_actions: BTreeMap<String, u64> = BTreeMap::new();
    let mut inferred_empty_cache = 0u64;
    let mut skipped_entries = 0u64;

    let mut new_id = |k: usize| -> Result<AllocId, TraceError> {
        let id = next_id;
        next_id = next_id
            .checked_add(1)
            .ok_or_else(|| err(k, "more than 4294967295 allocations".into()))?;
        Ok(id)
    };
    let set_addr = |e: &mut ExpectedRecord, id: AllocId, addr: Option<u64>| {
        put(&mut e.alloc_addresses, id, addr);
    };

    let mut burst_event: Option<usize> = None;
    // Entry index at which each block address is first mentioned.
    let mut first_mention: BTreeMap<u64, usize> = BTreeMap::new();
    let mut k = 0usize;
    while let Some(e) = entries.get(k) {
        let addr = e.addr.unwrap_or(0);
        if !is_release(&e.action) {
            burst_event = None;
        }
        if matches!(
            e.action,
            Action::Alloc | Action::FreeRequested | Action::FreeCompleted
        ) {
            first_mention.entry(addr).or_insert(k);
        }
        match &e.action {
            Action::Alloc => {
                if let Some(prev) = live.get(&addr) {
                    let what = match prev {
                        LiveState::Allocated(_) => "allocated",
                        LiveState::Pending(_) => "waiting for its free to complete",
                    };
                    return Err(err(k, format!("alloc at {addr:#x}, which is still {what}")));
                }
                let id = new_id(k)?;
                let stream = streams.index(&mut t, e.stream);
                t.events.push(Event::Alloc {
                    id,
                    stream,
                    size: e.size,
                });
                set_addr(&mut expected, id, Some(addr));
                set_frames(&mut t, id, e.frames);
                live.insert(addr, LiveState::Allocated(id));
                seen.insert(addr);
            }
            Action::FreeRequested => {
                let id = match live.get(&addr) {
                    Some(LiveState::Allocated(id)) => *id,
                    Some(LiveState::Pending(_)) => {
                        return Err(err(
                            k,
                            format!(
                                "free_requested at {addr:#x}, whose free was already requested"
                            ),
                        ));
                    }
                    None if !seen.contains(&addr) => {
                        // Allocated before the recording began.
                        let id = new_id(k)?;
                        initial_live.push(InitialLive {
                            address: addr,
                            id,
                            requested: e.size,
                            pending: false,
                            freed_at: k,
                        });
                        set_addr(&mut expected, id, Some(addr));
                        seen.insert(addr);
                        id
                    }
                    None => {
                        return Err(err(
                            k,
                            format!("free_requested at {addr:#x}, which is not allocated"),
                        ));
                    }
                };
                let completes_now = entries
                    .get(k + 1)
                    .is_some_and(|n| n.action == Action::FreeCompleted && n.addr == e.addr);
                if completes_now {
                    t.events.push(Event::Free { id });
                    live.remove(&addr);
                    k += 1;
                } else {
                    t.events.push(Event::FreeRequested { id });
                    live.insert(addr, LiveState::Pending(id));
                }
            }
            Action::FreeCompleted => match live.get(&addr) {
                Some(LiveState::Pending(id)) => {
                    t.events.push(Event::FreeCompleted { id: *id });
                    live.remove(&addr);
                }
                Some(LiveState::Allocated(_)) => {
                    return Err(err(
                        k,
                        format!("free_completed at {addr:#x} without a free_requested"),
                    ));
                }
                None if !seen.contains(&addr) => {
                    // Its free was requested before the recording began.
                    let id = new_id(k)?;
                    initial_live.push(InitialLive {
                        address: addr,
                        id,
                        requested: e.size,
                        pending: true,
                        freed_at: k,
                    });
                    set_addr(&mut expected, id, Some(addr));
                    seen.insert(addr);
                    t.events.push(Event::FreeCompleted { id });
                }
                None => {
                    return Err(err(
                        k,
                        format!("free_completed at {addr:#x}, which is not allocated"),
                    ));
                }
            },
            Action::SegmentAlloc
            | Action::SegmentFree
            | Action::SegmentMap
            | Action::SegmentUnmap => {
                let kind = match e.action {
                    Action::SegmentAlloc => SegmentEventKind::Alloc,
                    Action::SegmentFree => SegmentEventKind::Free,
                    Action::SegmentMap => SegmentEventKind::Map,
                    _ => SegmentEventKind::Unmap,
                };
                if matches!(kind, SegmentEventKind::Free | SegmentEventKind::Unmap)
                    && starts_release_burst(entries, k)
                {
                    // Not followed by a new segment or an OOM within the same
                    // malloc: an empty_cache() call (the trace has no entry
                    // for it).
                    t.events.push(Event::EmptyCache);
                    inferred_empty_cache += 1;
                    burst_event = Some(t.events.len() - 1);
                }
                // A segment event belongs to the event that follows it (a
                // malloc records segment_alloc before its alloc entry); an
                // inferred empty_cache owns its own burst.
                let event_index = burst_event.unwrap_or(t.events.len());
                expected.segment_events.push(ExpectedSegmentEvent {
                    event_index: event_index as u32,
                    kind,
                    address: addr,
                    size: e.size,
                });
                seg_first.entry(addr).or_insert((kind, e.size, e.stream));
            }
            Action::Oom => {
                // The failed request has no alloc entry: replay it so the
                // replay fails at the same point.
                let id = new_id(k)?;
                let stream = streams.index(&mut t, e.stream);
                expected.ooms.push(ExpectedOom {
                    event_index: t.events.len() as u32,
                    size: e.size,
                    device_free: e.device_free.unwrap_or(0),
                });
                t.events.push(Event::Alloc {
                    id,
                    stream,
                    size: e.size,
                });
                set_addr(&mut expected, id, None);
            }
            Action::Snapshot | Action::UserDefined => skipped_entries += 1,
            Action::Other(name) => *unknown_actions.entry(name.clone()).or_default() += 1,
        }
        k += 1;
    }

    if entries.is_empty() {
        t.notes.push(
            "the snapshot holds no trace entries for this device (recorded with enabled=\"state\", or without _record_memory_history): there is nothing to replay; record with torch.cuda.memory._record_memory_history(max_entries=...)".into(),
        );
    }
    for (name, n) in &unknown_actions {
        t.notes.push(format!(
            "{n} trace entries with the unknown action '{name}' were ignored"
        ));
    }
    if skipped_entries > 0 {
        t.notes.push(format!(
            "{skipped_entries} 'snapshot'/'user_defined' marker entries carry no allocation and were skipped"
        ));
    }
    if inferred_empty_cache > 0 {
        t.notes.push(format!(
            "inferred {inferred_empty_cache} empty_cache() call(s) from segment_free/segment_unmap bursts that no malloc explains"
        ));
    }
    let initial = initial_state(
        segments,
        device,
        &mut t,
        &initial_live,
        &first_mention,
        &seg_first,
        &seen,
        &mut next_id,
        &mut expected,
        rules,
        path,
    )?;
    if let Some(init) = &initial {
        let live_blocks = init.live_blocks();
        t.notes.push(format!(
            "the recording starts mid-run (or its ring buffer overflowed): the allocator state at the first entry was rebuilt from the final segments ({} segments, {} live blocks)",
            init.segments.len(),
            live_blocks
        ));
    }
    t.initial = initial;
    expected.final_segments = segments
        .iter()
        .map(|s| FinalSegment {
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
        })
        .collect();
    if !t.alloc_frames.is_empty() {
        t.frames = snap.frames.clone();
        t.alloc_frames.resize(next_id as usize, None);
    }
    if expected.alloc_addresses.len() < next_id as usize {
        expected.alloc_addresses.resize(next_id as usize, None);
    }
    t.num_ids = next_id;
    t.expected = Some(expected);
    Ok(t)
}

fn set_frames(t: &mut Trace, id: AllocId, frames: Option<FramesRef>) {
    if let Some(f) = frames {
        put(&mut t.alloc_frames, id, Some(f.0));
    }
}

/// Sets `v[id]`, first growing `v` with `None`s when it is shorter.
fn put<T: Clone>(v: &mut Vec<Option<T>>, id: AllocId, x: Option<T>) {
    let i = id as usize;
    match v.get_mut(i) {
        Some(slot) => *slot = x,
        None => {
            v.resize(i, None);
            v.push(x);
        }
    }
}

fn is_release(a: &Action) -> bool {
    matches!(a, Action::SegmentFree | Action::SegmentUnmap)
}

fn previous_is_release(entries: &[TraceEntry], k: usize) -> bool {
    // Callers pass k < entries.len(), so k - 1 is in bounds.
    k > 0 && entries.get(k - 1).is_some_and(|e| is_release(&e.action))
}

/// `true` when entry `k` starts a burst of segment releases that is not
/// followed by a segment allocation, mapping or OOM (which would make it
/// part of a malloc's release-and-retry path).
fn starts_release_burst(entries: &[TraceEntry], k: usize) -> bool {
    if previous_is_release(entries, k) {
        return false;
    }
    let mut j = k;
    while entries.get(j).is_some_and(|e| is_release(&e.action)) {
        j += 1;
    }
    !matches!(
        entries.get(j).map(|e| &e.action),
        Some(Action::SegmentAlloc | Action::SegmentMap | Action::Oom)
    )
}

#[allow(clippy::too_many_arguments)]
fn initial_state(
    segments: &[&Segment],
    device: u32,
    t: &mut Trace,
    initial_live: &[InitialLive],
    first_mention: &BTreeMap<u64, usize>,
    seg_first: &HashMap<u64, (SegmentEventKind, u64, u64)>,
    touched: &HashSet<u64>,
    next_id: &mut AllocId,
    expected: &mut ExpectedRecord,
    rules: &SizeRules<'_>,
    path: &str,
) -> Result<Option<InitialState>, TraceError> {
    let err = |msg: String| {
        TraceError::new(
            path,
            Location::File,
            format!("device {device}: initial state: {msg}"),
        )
    };
    // (address, size, stream, is_small, expandable)
    let mut segs: BTreeMap<u64, (u64, u64, bool, bool)> = BTreeMap::new();
    let mut exact_blocks: Vec<(u64, u64, u64, InitialBlockState)> = Vec::new();
    for &s in segments {
        if seg_first.contains_key(&s.address) {
            continue; // created (or re-created) during the trace
        }
        if s.is_expandable {
            // A mapped range: it existed at the start only if no map event
            // touched it; such layouts are not rebuilt.
            if s.blocks
                .iter()
                .any(|b| b.state != SnapshotBlockState::Inactive)
                || !s.blocks.is_empty()
            {
                return Err(err(format!(
                    "the expandable segment range at {:#x} existed before the recording began; starting mid-run from expandable segments is not supported",
                    s.address
                )));
            }
        }
        if s.address.checked_add(s.total_size).is_none() {
            return Err(err(format!(
                "the segment at {:#x} of {} bytes runs past the end of the address space",
                s.address, s.total_size
            )));
        }
        segs.insert(
            s.address,
            (s.total_size, s.stream, s.is_small, s.is_expandable),
        );
        for b in &s.blocks {
            if b.state == SnapshotBlockState::Inactive || touched.contains(&b.address) {
                continue;
            }
            // Allocated through the whole recording: its size is exact.
            let id = *next_id;
            *next_id = next_id
                .checked_add(1)
                .ok_or_else(|| err("more than 4294967295 allocations".into()))?;
            let st = if b.state == SnapshotBlockState::ActivePendingFree {
                InitialBlockState::PendingFree(id)
            } else {
                InitialBlockState::Allocated(id)
            };
            exact_blocks.push((b.address, b.size, b.requested_size.unwrap_or(b.size), st));
            put(&mut expected.alloc_addresses, id, Some(b.address));
        }
    }
    // In address order, so that the first problem reported is always the same.
    let mut first: Vec<_> = seg_first.iter().collect();
    first.sort_unstable_by_key(|(addr, _)| **addr);
    for (&addr, &(kind, size, stream)) in first {
        if matches!(kind, SegmentEventKind::Free) && addr.checked_add(size).is_none() {
            return Err(err(format!(
                "the segment at {addr:#x} of {size} bytes runs past the end of the address space"
            )));
        }
        if matches!(kind, SegmentEventKind::Free) {
            segs.insert(addr, (size, stream, size == 2 * MIB, false));
        } else if matches!(kind, SegmentEventKind::Unmap) {
            return Err(err(format!(
                "pages at {addr:#x} were mapped before the recording began; starting mid-run from expandable segments is not supported"
            )));
        }
    }
    if segs.is_empty() {
        if let Some(b) = initial_live.first() {
            return Err(err(format!(
                "the block at {:#x} was allocated before the recording began, but no segment holds it (the final segments are missing or incomplete)",
                b.address
            )));
        }
        return Ok(None);
    }
    // Blocks per segment: (address, exact size or None, requested, state,
    // entry at which the trace frees it).
    let mut per_seg: BTreeMap<u64, Vec<PendingBlock>> = BTreeMap::new();
    let find_seg = |addr: u64| -> Option<u64> {
        segs.range(..=addr)
            .next_back()
            .filter(|(base, (size, ..))| addr < base.saturating_add(*size))
            .map(|(base, _)| *base)
    };
    for b in initial_live {
        let base = find_seg(b.address).ok_or_else(|| {
            err(format!(
                "the block at {:#x} was allocated before the recording began, but no segment holds it",
                b.address
            ))
        })?;
        let st = if b.pending {
            InitialBlockState::PendingFree(b.id)
        } else {
            InitialBlockState::Allocated(b.id)
        };
        per_seg
            .entry(base)
            .or_default()
            .push((b.address, None, b.requested, st, b.freed_at));
    }
    for &(addr, size, requested, st) in &exact_blocks {
        let base = find_seg(addr)
            .ok_or_else(|| err(format!("block at {addr:#x} lies outside its segment")))?;
        per_seg
            .entry(base)
            .or_default()
            .push((addr, Some(size), requested, st, usize::MAX));
    }
    let mut out = InitialState::default();
    let mut streams = StreamInterner::default();
    for (&base, &(size, stream, is_small, expandable)) in &segs {
        let mut blocks = per_seg.remove(&base).unwrap_or_default();
        blocks.sort_by_key(|b| b.0);
        let end = base.saturating_add(size);
        let mut cursor = base;
        let mut laid = Vec::new();
        for (i, &(addr, exact, requested, st, freed_at)) in blocks.iter().enumerate() {
            let next_start = blocks.get(i + 1).map_or(end, |n| n.0);
            if addr < cursor {
                return Err(err(format!("blocks overlap at {addr:#x}")));
            }
            if addr > cursor {
                laid.push(InitialBlock {
                    address: cursor,
                    size: addr - cursor,
                    requested: 0,
                    state: InitialBlockState::Free,
                });
            }
            let bsize = match exact {
                Some(s) => s,
                None => {
                    // Requests of 2^60 bytes or more are never served (and
                    // rounding one could overflow): taken as they are.
                    let s = if requested < 1 << 60 {
                        (rules.round)(requested)
                    } else {
                        requested
                    };
                    let room = next_start.saturating_sub(addr);
                    if s > room {
                        return Err(err(format!(
                            "the block at {addr:#x} needs {s} bytes but only {room} lie before the next block"
                        )));
                    }
                    if is_small {
                        s
                    } else if s >= rules.max_split_size || room - s <= MIB {
                        room
                    } else {
                        // The block may have kept an unsplit remainder of up
                        // to 1 MiB when it was allocated. Any block address
                        // the trace mentions in (addr+s, addr+s+1 MiB] while
                        // this block is live is where it ends: no large-pool
                        // block is 1 MiB or smaller, so nothing else can
                        // start there.
                        // addr + s <= the segment's end, which does not
                        // overflow (checked when the segment was taken).
                        first_mention
                            .range(
                                addr.saturating_add(s).saturating_add(1)
                                    ..=addr.saturating_add(s).saturating_add(MIB),
                            )
                            .find(|&(_, &at)| at < freed_at)
                            .map_or(s, |(&end, _)| end - addr)
                    }
                }
            };
            laid.push(InitialBlock {
                address: addr,
                size: bsize,
                requested,
                state: st,
            });
            // An exact size comes from the snapshot, unchecked.
            cursor = addr.checked_add(bsize).ok_or_else(|| {
                err(format!(
                    "blocks run past the end of the segment at {base:#x}"
                ))
            })?;
        }
        if cursor > end {
            return Err(err(format!(
                "blocks run past the end of the segment at {base:#x}"
            )));
        }
        if cursor < end {
            laid.push(InitialBlock {
                address: cursor,
                size: end - cursor,
                requested: 0,
                state: InitialBlockState::Free,
            });
        }
        let stream_idx = streams.index(t, stream);
        out.segments.push(InitialSegment {
            address: base,
            size,
            stream: stream_idx,
            is_small,
            is_expandable: expandable,
            blocks: laid,
        });
    }
    Ok(Some(out))
}
