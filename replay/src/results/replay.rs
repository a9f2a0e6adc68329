//! One replay as `vramlab replay --json` prints it.

use std::collections::BTreeMap;

use serde::Serialize;
use vramlab_allocator::Placement;
use vramlab_traces::Trace;

use crate::analysis::placement::PlacementRange;
use crate::engine::run::{OomEvent, Run};

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
    /// Events in the trace.
    pub events: u64,
    /// Events replayed.
    pub events_replayed: u64,
    /// `Alloc` events replayed.
    pub allocs: u64,
    /// Frees replayed.
    pub frees: u64,
    /// Streams of the trace.
    pub streams: usize,
    /// Peak live caller bytes.
    pub peak_requested_bytes: u64,
    /// Peak allocated bytes.
    pub peak_allocated_bytes: u64,
    /// Peak active bytes.
    pub peak_active_bytes: u64,
    /// Peak reserved bytes.
    pub peak_reserved_bytes: u64,
    /// Reserved bytes at the end.
    pub final_reserved_bytes: u64,
    /// Allocated bytes at the end.
    pub final_allocated_bytes: u64,
    /// Reserved minus allocated bytes at the reserved peak.
    pub waste_at_peak_bytes: u64,
    /// Peak active / peak reserved.
    pub utilization: f64,
    /// 1 − utilization.
    pub fragmentation: f64,
    /// Device allocations.
    pub num_device_alloc: u64,
    /// Device frees.
    pub num_device_free: u64,
    /// Retries after a full cache flush.
    pub num_alloc_retries: u64,
    /// Cache flushes that synchronised all streams.
    pub num_sync_all_streams: u64,
    /// Out-of-memory errors raised.
    pub num_ooms: u64,
    /// Time spent in driver calls, microseconds.
    pub device_time_us: f64,
    /// The first OOM, if one happened.
    pub oom: Option<OomFigures>,
    /// The final `torch.cuda.memory_stats()`, flattened
    /// (`allocated_bytes.all.peak`, …).
    pub stats: BTreeMap<String, i64>,
    /// The placement range, when the other address order was replayed.
    #[serde(flatten)]
    pub placement: Option<PlacementFigures>,
}

/// The figures of an OOM a replay result names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OomFigures {
    /// Index of the failing event.
    pub event_index: u64,
    /// The state at the start did not fit.
    pub at_start: bool,
    /// The caller's request.
    pub requested_bytes: u64,
    /// The rounded request.
    pub rounded_bytes: u64,
    /// What the policy last asked the device for.
    pub device_request_bytes: u64,
    /// Reserved bytes at the failure.
    pub reserved_bytes: u64,
    /// Allocated bytes at the failure.
    pub allocated_bytes: u64,
    /// Live caller bytes at the failure.
    pub live_requested_bytes: u64,
    /// Largest free cached block at the failure.
    pub largest_free_block: u64,
    /// Free device memory at the failure.
    pub device_free_bytes: u64,
    /// PyTorch's error message.
    pub message: String,
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
pub struct PlacementFigures {
    /// The simulated driver's order.
    pub placement: Placement,
    /// The other order's result.
    pub other_placement: OtherPlacement,
    /// The lower and the higher of the two peaks.
    pub peak_reserved_range_bytes: [u64; 2],
    /// Both orders gave the same peak and the same OOM.
    pub placement_settled: bool,
}

/// A replay's result under the other address order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OtherPlacement {
    /// The order.
    pub placement: Placement,
    /// Peak reserved bytes under it.
    pub peak_reserved_bytes: u64,
    /// Its first OOM's event, if any.
    pub oom_event: Option<u64>,
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
            events: s.events,
            events_replayed: s.events_replayed,
            allocs: s.allocs,
            frees: s.frees,
            streams: trace.streams.len(),
            peak_requested_bytes: s.peak_requested_bytes,
            peak_allocated_bytes: s.peak_allocated_bytes,
            peak_active_bytes: s.peak_active_bytes,
            peak_reserved_bytes: s.peak_reserved_bytes,
            final_reserved_bytes: s.final_reserved_bytes,
            final_allocated_bytes: s.final_allocated_bytes,
            waste_at_peak_bytes: s.waste_at_peak_bytes,
            utilization: s.utilization,
            fragmentation: s.fragmentation,
            num_device_alloc: s.num_device_alloc,
            num_device_free: s.num_device_free,
            num_alloc_retries: s.num_alloc_retries,
            num_sync_all_streams: s.num_sync_all_streams,
            num_ooms: s.num_ooms,
            device_time_us: s.device_time_us,
            oom: run.oom.as_ref().map(OomFigures::from),
            stats: run.stats.flatten(),
            placement: range.map(PlacementFigures::from),
        }
    }
}
