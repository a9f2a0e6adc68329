//! One replay as `vramlab replay --json` prints it.

use std::collections::BTreeMap;

use serde::Serialize;
use vramlab_allocator::Placement;
use vramlab_traces::Trace;

use crate::analysis::placement::PlacementRange;
use crate::engine::run::{OomEvent, Run, Summary};

/// One replay of a trace under one setting: what ran, the headline figures
/// of [`crate::Summary`], the first OOM, the final statistics and (when the
/// other address order was replayed too) the placement range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayResult {
    /// The trace's path.
    pub trace: String,
    /// Policy name.
    pub policy: String,
    /// Settings string.
    pub conf: String,
    /// Device capacity (`None` = unlimited).
    pub capacity: Option<u64>,
    /// How a trace that starts mid-run began (`empty`: from an empty
    /// allocator).
    pub start: &'static str,
    /// Streams of the trace.
    pub streams: usize,
    /// The headline figures, flattened into the object (the CLI prints the
    /// keys sorted, so their order here does not reach the JSON).
    #[serde(flatten)]
    pub summary: Summary,
    /// The first OOM, if one happened.
    pub(crate) oom: Option<OomFigures>,
    /// The final `torch.cuda.memory_stats()`, flattened
    /// (`allocated_bytes.all.peak`, …).
    pub stats: BTreeMap<String, i64>,
    /// The placement range, when the other address order was replayed.
    #[serde(flatten)]
    pub(crate) placement: Option<PlacementFigures>,
    /// Each pool at the peak and at the end (traces with private pools).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<crate::results::pools::PoolUse>,
    /// The pinned host allocator's figures (`host_peak_reserved_bytes`,
    /// …), flattened; absent when the trace has no host requests.
    #[serde(flatten)]
    pub host: Option<crate::engine::run::HostSummary>,
    /// The first pinned host request that did not fit (`--host-ram`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_oom: Option<crate::engine::run::HostOomEvent>,
}

/// The figures of an OOM a replay result names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct OomFigures {
    /// Index of the failing event.
    pub(crate) event_index: u64,
    /// The state at the start did not fit.
    pub(crate) at_start: bool,
    /// The caller's request.
    pub(crate) requested_bytes: u64,
    /// The rounded request.
    pub(crate) rounded_bytes: u64,
    /// What the policy last asked the device for.
    pub(crate) device_request_bytes: u64,
    /// Reserved bytes at the failure.
    pub(crate) reserved_bytes: u64,
    /// Allocated bytes at the failure.
    pub(crate) allocated_bytes: u64,
    /// Live caller bytes at the failure.
    pub(crate) live_requested_bytes: u64,
    /// Largest free cached block at the failure.
    pub(crate) largest_free_block: u64,
    /// Free device memory at the failure.
    pub(crate) device_free_bytes: u64,
    /// PyTorch's error message.
    pub(crate) message: String,
}

impl From<&OomEvent> for OomFigures {
    fn from(o: &OomEvent) -> Self {
        OomFigures {
            event_index: o.event_index,
            at_start: o.at_start,
            requested_bytes: o.requested_bytes,
            rounded_bytes: o.rounded_bytes,
            device_request_bytes: o.device_request_bytes,
            reserved_bytes: o.reserved_bytes,
            allocated_bytes: o.allocated_bytes,
            live_requested_bytes: o.live_requested_bytes,
            largest_free_block: o.largest_free_block,
            device_free_bytes: o.device_free_bytes,
            message: o.message.clone(),
        }
    }
}

/// Peak reserved under both address orders of the simulated driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PlacementFigures {
    /// The simulated driver's order.
    pub(crate) placement: Placement,
    /// The other order's result.
    pub(crate) other_placement: OtherPlacement,
    /// The lower and the higher of the two peaks.
    pub(crate) peak_reserved_range_bytes: [u64; 2],
    /// Both orders gave the same peak and the same OOM.
    pub(crate) placement_settled: bool,
}

/// A replay's result under the other address order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct OtherPlacement {
    /// The order.
    pub(crate) placement: Placement,
    /// Peak reserved bytes under it.
    pub(crate) peak_reserved_bytes: u64,
    /// Its first OOM's event, if any.
    pub(crate) oom_event: Option<u64>,
}

impl From<&PlacementRange> for PlacementFigures {
    fn from(r: &PlacementRange) -> Self {
        PlacementFigures {
            placement: r.placement,
            other_placement: OtherPlacement {
                placement: r.other,
                peak_reserved_bytes: r.other_peak_reserved_bytes,
                oom_event: r.other_oom_event,
            },
            peak_reserved_range_bytes: [r.low(), r.high()],
            placement_settled: r.settled(),
        }
    }
}

impl ReplayResult {
    /// The result of `run`, a replay of `trace` (read from `path`), with the
    /// placement range when there is one.
    pub fn new(trace: &Trace, path: &str, run: &Run, range: Option<&PlacementRange>) -> Self {
        let s = &run.summary;
        ReplayResult {
            trace: path.to_string(),
            policy: run.policy.clone(),
            conf: run.conf.clone(),
            capacity: run.capacity,
            start: run.start.map_or("empty", |s| s.name()),
            streams: trace.streams.len(),
            summary: s.clone(),
            oom: run.oom.as_ref().map(OomFigures::from),
            stats: run.stats.flatten(),
            placement: range.map(PlacementFigures::from),
            pools: crate::results::pools::pool_uses(
                trace,
                &run.segments_at_peak,
                &run.final_segments,
            ),
            host: run.host.clone(),
            host_oom: run.host_oom.clone(),
        }
    }
}
