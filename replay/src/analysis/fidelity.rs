//! Fidelity: replay a recorded snapshot under its recorded settings, with
//! every new segment placed where the real one was, and compare every
//! allocation address and every segment event with what PyTorch did.

use serde::Serialize;
use vramlab_allocator::DeviceCallKind;
use vramlab_allocator::{AllocConf, BlockState, Inspect};
use vramlab_traces::{Event, ExpectedRecord, InitialBlockState, SegmentEventKind, Trace};

use crate::engine::run::Run;
use crate::engine::scenario::Scenario;
use crate::engine::{ReplayError, ReplayOptions, replay};

/// A segment reduced to what the final-state comparison looks at: base,
/// size, and (address, size, in use) of each block.
type SegmentShape = (u64, u64, Vec<(u64, u64, bool)>);

/// A block in a mismatch report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FreeBlock {
    /// Address.
    pub address: u64,
    /// Size in bytes.
    pub size: u64,
}

/// The first place where the replay and the recording disagree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    /// Index of the trace event.
    pub event_index: u64,
    /// `alloc_address`, `segment_event`, `oom` or `final_state`.
    pub kind: String,
    /// What the recording says.
    pub expected: String,
    /// What the replay did.
    pub actual: String,
    /// Free blocks of the request's stream just before the event.
    pub free_blocks: Vec<FreeBlock>,
}

/// Fidelity figures of one device (or the total).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct FidelityReport {
    /// Device ordinal (`None` in the total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<u32>,
    /// Settings replayed.
    pub conf: String,
    /// Trace events.
    pub events: u64,
    /// Allocations in the trace (alloc events).
    pub allocs: u64,
    /// Allocations that got the recorded address.
    pub alloc_addresses_matched: u64,
    /// Recorded segment events (alloc, free, map, unmap).
    pub segment_events_expected: u64,
    /// Replayed segment events equal to the recorded one at the same position.
    pub segment_events_matched: u64,
    /// Segment events the replay made.
    pub segment_events_actual: u64,
    /// Whether the replay's final segments equal the snapshot's.
    pub final_state_matched: Option<bool>,
    /// Pinned host allocations in the trace (a 2.14+ snapshot's
    /// `host_traces`).
    #[serde(skip_serializing_if = "is_zero")]
    pub host_allocs: u64,
    /// Events at which the recording's host allocator made or destroyed
    /// blocks.
    #[serde(skip_serializing_if = "is_zero")]
    pub host_decisions_expected: u64,
    /// Of those, the ones the replay made alike (same event, same blocks
    /// and bytes).
    #[serde(skip_serializing_if = "is_zero")]
    pub host_decisions_matched: u64,
    /// Events at which the replay's host allocator made or destroyed
    /// blocks.
    #[serde(skip_serializing_if = "is_zero")]
    pub host_decisions_actual: u64,
    /// The first disagreement, if any.
    pub first_mismatch: Option<Mismatch>,
    /// Remarks from reading the trace.
    pub notes: Vec<String>,
}

impl FidelityReport {
    /// `true` when everything matched.
    pub fn is_exact(&self) -> bool {
        self.first_mismatch.is_none()
            && self.alloc_addresses_matched == self.allocs
            && self.segment_events_matched == self.segment_events_expected
            && self.segment_events_actual == self.segment_events_expected
            && self.host_decisions_matched == self.host_decisions_expected
            && self.host_decisions_actual == self.host_decisions_expected
    }

    /// Adds another device's figures (for the total).
    pub(crate) fn add(&mut self, o: &FidelityReport) {
        self.events += o.events;
        self.allocs += o.allocs;
        self.alloc_addresses_matched += o.alloc_addresses_matched;
        self.segment_events_expected += o.segment_events_expected;
        self.segment_events_matched += o.segment_events_matched;
        self.segment_events_actual += o.segment_events_actual;
        self.host_allocs += o.host_allocs;
        self.host_decisions_expected += o.host_decisions_expected;
        self.host_decisions_matched += o.host_decisions_matched;
        self.host_decisions_actual += o.host_decisions_actual;
        self.final_state_matched = match (self.final_state_matched, o.final_state_matched) {
            (None, x) | (x, None) => x,
            (Some(a), Some(b)) => Some(a && b),
        };
        if self.first_mismatch.is_none() {
            self.first_mismatch = o.first_mismatch.clone();
        }
    }
}

fn kind_of(k: DeviceCallKind) -> Option<SegmentEventKind> {
    match k {
        DeviceCallKind::Malloc => Some(SegmentEventKind::Alloc),
        DeviceCallKind::Free => Some(SegmentEventKind::Free),
        DeviceCallKind::Map => Some(SegmentEventKind::Map),
        DeviceCallKind::Unmap => Some(SegmentEventKind::Unmap),
        _ => None,
    }
}

/// The first disagreement found so far: (event index, kind, expected,
/// replayed). Keeps the one at the lowest event index.
#[derive(Default)]
struct FirstMismatch(Option<(u64, String, String, String)>);

impl FirstMismatch {
    fn note(&mut self, idx: u64, kind: &str, exp: String, act: String) {
        if self.0.as_ref().is_none_or(|f| idx < f.0) {
            self.0 = Some((idx, kind.to_string(), exp, act));
        }
    }
}

/// Replays `trace` (which must carry an expected record) under `conf` and
/// compares it with the recording.
pub fn check_fidelity(trace: &Trace, conf: AllocConf) -> Result<FidelityReport, ReplayError> {
    let Some(expected) = &trace.expected else {
        return Err(ReplayError::Initial(
            "the trace has no recorded allocator decisions to compare with (only PyTorch snapshots have them)".into(),
        ));
    };
    let scenario = Scenario::native(conf);
    let mut alloc = scenario
        .native_allocator(trace)
        .ok_or_else(|| ReplayError::Initial("fidelity needs the native policy".into()))?;
    let opts = ReplayOptions {
        stop_at_oom: false,
        place_at_expected: true,
        record_addresses: true,
        // The recorded pinned_* settings, as the device's.
        host_rules: scenario.host_rules(),
        check_invariants: cfg!(debug_assertions),
        ..Default::default()
    };
    let run = replay(trace, &mut alloc, &opts)?;
    let mut report = FidelityReport {
        device: Some(trace.header.device),
        conf: scenario.label(),
        events: trace.events.len() as u64,
        notes: trace.notes.clone(),
        ..Default::default()
    };
    let mut first = FirstMismatch::default();
    compare_addresses(trace, expected, &run, &mut report, &mut first);
    compare_segment_events(expected, &run, &mut report, &mut first);
    compare_host(trace, &run, &mut report, &mut first);
    if !expected.final_segments.is_empty() && run.oom.is_none() {
        compare_final_state(trace, expected, &alloc.segments(), &mut report, &mut first);
    }
    if let Some((idx, kind, exp, act)) = first.0 {
        let host = kind == "host_decision";
        report.first_mismatch = Some(Mismatch {
            event_index: idx,
            kind,
            expected: exp,
            actual: act,
            // The device's free blocks say nothing about a host block.
            free_blocks: if host {
                Vec::new()
            } else {
                free_blocks_before(trace, &scenario, idx)?
            },
        });
    }
    Ok(report)
}

/// Every allocation's address (and every recorded OOM) against the replay.
fn compare_addresses(
    trace: &Trace,
    expected: &ExpectedRecord,
    run: &Run,
    report: &mut FidelityReport,
    first: &mut FirstMismatch,
) {
    let oom_events: std::collections::HashSet<u32> =
        expected.ooms.iter().map(|o| o.event_index).collect();
    for (i, ev) in trace.events.iter().enumerate() {
        let Event::Alloc { id, size, .. } = *ev else {
            continue;
        };
        let want = expected.alloc_addresses.get(id as usize).copied().flatten();
        let got = run.alloc_addresses.get(id as usize).copied().unwrap_or(0);
        if oom_events.contains(&(i as u32)) {
            let failed = run.oom.as_ref().is_some_and(|o| o.event_index == i as u64) || got == 0;
            if !failed {
                first.note(
                    i as u64,
                    "oom",
                    format!("OOM for {size} bytes"),
                    format!("allocated at {got:#x}"),
                );
            }
            continue;
        }
        report.allocs += 1;
        match want {
            Some(w) if w == got => report.alloc_addresses_matched += 1,
            Some(w) => first.note(
                i as u64,
                "alloc_address",
                format!("alloc of {size} bytes at {w:#x}"),
                if got == 0 {
                    "the allocation failed".to_string()
                } else {
                    format!("at {got:#x}")
                },
            ),
            None => {}
        }
    }
}

/// For `skip_serializing_if`: host figures are left out of snapshots
/// without host traces.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The host allocator's recorded decisions against the replay's, event by
/// event (host addresses come from the process's heap: not compared).
fn compare_host(trace: &Trace, run: &Run, report: &mut FidelityReport, first: &mut FirstMismatch) {
    report.host_allocs = trace
        .events
        .iter()
        .filter(|e| matches!(e, Event::HostAlloc { .. }))
        .count() as u64;
    let expected = trace.expected_host.as_deref().unwrap_or_default();
    let actual = &run.host_decisions;
    report.host_decisions_expected = expected.len() as u64;
    report.host_decisions_actual = actual.len() as u64;
    let words = |made: u32, bytes_made: u64, gone: u32, bytes_gone: u64, at: u64| {
        format!(
            "{made} host block(s) made ({bytes_made} bytes), {gone} destroyed ({bytes_gone} bytes) at event {at}"
        )
    };
    // Merged by event: a decision one side lacks does not shift the rest.
    let (mut i, mut j) = (0, 0);
    while i < expected.len() || j < actual.len() {
        let (e, a) = (expected.get(i), actual.get(j));
        let (e, a) = match (e, a) {
            (Some(x), Some(y)) if x.event_index < y.event_index => (Some(x), None),
            (Some(x), Some(y)) if y.event_index < x.event_index => (None, Some(y)),
            other => other,
        };
        i += usize::from(e.is_some());
        j += usize::from(a.is_some());
        if let (Some(e), Some(a)) = (e, a) {
            if (
                e.blocks_made,
                e.bytes_made,
                e.blocks_destroyed,
                e.bytes_destroyed,
            ) == (
                a.blocks_made,
                a.bytes_made,
                a.blocks_destroyed,
                a.bytes_destroyed,
            ) {
                report.host_decisions_matched += 1;
                continue;
            }
        }
        let idx = e.map_or_else(|| a.map_or(0, |a| a.event_index), |e| e.event_index);
        let exp = e.map_or("nothing".into(), |e| {
            words(
                e.blocks_made,
                e.bytes_made,
                e.blocks_destroyed,
                e.bytes_destroyed,
                e.event_index,
            )
        });
        let act = a.map_or("nothing".into(), |a| {
            words(
                a.blocks_made,
                a.bytes_made,
                a.blocks_destroyed,
                a.bytes_destroyed,
                a.event_index,
            )
        });
        first.note(idx, "host_decision", exp, act);
    }
}

/// The recorded segment events against the replay's, position by position.
fn compare_segment_events(
    expected: &ExpectedRecord,
    run: &Run,
    report: &mut FidelityReport,
    first: &mut FirstMismatch,
) {
    let actual: Vec<_> = run
        .device_log
        .iter()
        .filter_map(|c| Some((c.event_index?, kind_of(c.kind)?, c.ptr, c.size)))
        .collect();
    report.segment_events_expected = expected.segment_events.len() as u64;
    report.segment_events_actual = actual.len() as u64;
    let n = expected.segment_events.len().max(actual.len());
    for p in 0..n {
        let e = expected.segment_events.get(p);
        let a = actual.get(p);
        if let (Some(e), Some(&(ai, ak, ap, asz))) = (e, a) {
            if e.event_index == ai && e.kind == ak && e.address == ap && e.size == asz {
                report.segment_events_matched += 1;
                continue;
            }
        }
        let idx = match (e, a) {
            (Some(e), Some(a)) => (e.event_index as u64).min(a.0 as u64),
            (Some(e), None) => e.event_index as u64,
            (None, Some(a)) => a.0 as u64,
            (None, None) => 0,
        };
        let fmt_e = e.map_or("nothing".to_string(), |e| {
            format!(
                "{} {:#x} ({} bytes) at event {}",
                e.kind.trace_name(),
                e.address,
                e.size,
                e.event_index
            )
        });
        let fmt_a = a.map_or("nothing".to_string(), |a| {
            format!(
                "{} {:#x} ({} bytes) at event {}",
                a.1.trace_name(),
                a.2,
                a.3,
                a.0
            )
        });
        first.note(idx, "segment_event", fmt_e, fmt_a);
    }
}

/// The replay's final segments against the snapshot's.
fn compare_final_state(
    trace: &Trace,
    expected: &ExpectedRecord,
    segments: &[vramlab_allocator::SegmentView],
    report: &mut FidelityReport,
    first: &mut FirstMismatch,
) {
    let got: Vec<SegmentShape> = segments
        .iter()
        .map(|s| {
            let blocks: Vec<_> = s
                .blocks
                .iter()
                .map(|b| (b.ptr, b.size, b.state != BlockState::Free))
                .collect();
            (s.ptr, s.size, blocks)
        })
        .collect();
    let want: Vec<SegmentShape> = expected
        .final_segments
        .iter()
        .map(|s| {
            let blocks: Vec<_> = s
                .blocks
                .iter()
                .map(|&(a, sz, st)| (a, sz, st != InitialBlockState::Free))
                .collect();
            (s.address, s.size, blocks)
        })
        .collect();
    report.final_state_matched = Some(got == want);
    if got != want {
        let pos = got
            .iter()
            .zip(&want)
            .position(|(g, w)| g != w)
            .unwrap_or(got.len().min(want.len()));
        let show = |v: Option<&SegmentShape>| {
            v.map_or("no segment".to_string(), |s| {
                format!("segment {:#x} ({} bytes, {} blocks)", s.0, s.1, s.2.len())
            })
        };
        first.note(
            trace.events.len() as u64,
            "final_state",
            show(want.get(pos)),
            show(got.get(pos)),
        );
    }
}

/// The free blocks of the stream of event `idx` just before it runs.
fn free_blocks_before(
    trace: &Trace,
    scenario: &Scenario,
    idx: u64,
) -> Result<Vec<FreeBlock>, ReplayError> {
    let idx = (idx as usize).min(trace.events.len());
    let stream = match trace.events.get(idx) {
        Some(Event::Alloc { stream, .. }) => {
            trace.streams.get(*stream as usize).copied().unwrap_or(0)
        }
        _ => 0,
    };
    let Some(mut alloc) = scenario.native_allocator(trace) else {
        return Ok(Vec::new());
    };
    let opts = ReplayOptions {
        stop_at_oom: false,
        place_at_expected: true,
        check_invariants: false,
        timeline_points: 1,
        stop_before: Some(idx as u64),
        ..Default::default()
    };
    replay(trace, &mut alloc, &opts)?;
    Ok(alloc
        .segments()
        .iter()
        .filter(|s| s.stream == stream)
        .flat_map(|s| s.blocks.iter())
        .filter(|b| b.state == BlockState::Free)
        .map(|b| FreeBlock {
            address: b.ptr,
            size: b.size,
        })
        .collect())
}
