//! The result of a replay: summary, timeline, device-event log, first OOM.

use serde::Serialize;
use vramlab_allocator::DeviceCallKind;
use vramlab_allocator::{MemoryStats, SegmentView};

/// Headline figures of one replay.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Events in the trace.
    pub events: u64,
    /// Events replayed (fewer than `events` when an OOM ended the replay).
    pub events_replayed: u64,
    /// `Alloc` events replayed.
    pub allocs: u64,
    /// Frees replayed (immediate and requested).
    pub frees: u64,
    /// Peak of the sum of caller sizes of live allocations: the lower bound
    /// no allocator can beat.
    pub peak_requested_bytes: u64,
    /// Peak of `allocated_bytes.all` (rounded block sizes handed out).
    pub peak_allocated_bytes: u64,
    /// Peak of `active_bytes.all`.
    pub peak_active_bytes: u64,
    /// Peak of `reserved_bytes.all` (bytes obtained from the device).
    pub peak_reserved_bytes: u64,
    /// `reserved_bytes.all.current` at the end.
    pub final_reserved_bytes: u64,
    /// `allocated_bytes.all.current` at the end.
    pub final_allocated_bytes: u64,
    /// Reserved minus allocated bytes ("reserved but unallocated") at the
    /// reserved peak: the first moment reserved reaches its peak, or, while
    /// it stays there, the moment allocated bytes are highest.
    pub waste_at_peak_bytes: u64,
    /// Peak active / peak reserved (GMLake's utilization).
    pub utilization: f64,
    /// 1 − utilization.
    pub fragmentation: f64,
    /// Device allocations during the events (cudaMalloc + map calls); the
    /// initial state of a trace that starts mid-run is not counted.
    pub num_device_alloc: u64,
    /// Device frees during the events (cudaFree + unmap calls).
    pub num_device_free: u64,
    /// Cache flushes that synchronised all streams (`num_sync_all_streams`).
    pub num_sync_all_streams: u64,
    /// Retries after a full cache flush (`num_alloc_retries`).
    pub num_alloc_retries: u64,
    /// Out-of-memory errors raised.
    pub num_ooms: u64,
    /// Simulated time spent in driver calls, microseconds.
    pub device_time_us: f64,
}

/// What a replay's pinned host requests cost (PyTorch's host caching
/// allocator under the replay's release and `pinned_*` settings).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostSummary {
    /// `host_alloc` events replayed.
    pub host_allocs: u64,
    /// Peak of live requested host bytes: what the program asked to pin.
    pub host_peak_requested_bytes: u64,
    /// Peak bytes of the blocks handed out (requests rounded to blocks),
    /// in use or waiting for their streams' events.
    pub host_peak_allocated_bytes: u64,
    /// Peak pinned bytes held from CUDA (`cudaHostAlloc`), cache included:
    /// the RAM the process pins.
    pub host_peak_reserved_bytes: u64,
    /// Pinned bytes held at the end.
    pub host_final_reserved_bytes: u64,
    /// Host blocks made (PyTorch's `num_host_alloc`); each is a
    /// `cudaHostAlloc` unless carved from the reserve segment.
    pub host_num_allocs: u64,
    /// `cudaHostAlloc` calls (or malloc + `cudaHostRegister`), the reserve
    /// segment's one included.
    pub host_cuda_allocs: u64,
    /// Peak bytes of the blocks made (PyTorch's `allocated_bytes.peak`;
    /// without a reserve segment, the peak pinned).
    pub host_peak_block_bytes: u64,
    /// Bytes of the blocks held at the end (`allocated_bytes.current`).
    pub host_final_block_bytes: u64,
    /// Processes per node that pin alike (`--ranks-per-node`).
    pub ranks_per_node: u32,
    /// The node's pinned bytes at the process's peak: the peak times the
    /// ranks per node.
    pub node_peak_reserved_bytes: u64,
}

/// The first pinned host request that did not fit in the host's RAM
/// (`--host-ram`): PyTorch raises at once, with no retry (R7.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostOomEvent {
    /// Index of the failing event.
    pub event_index: u64,
    /// Its allocation id.
    pub alloc_id: u32,
    /// The request.
    pub requested_bytes: u64,
    /// The block it needed.
    pub block_bytes: u64,
    /// What the allocator asked CUDA for (the block, or the reserve).
    pub asked_bytes: u64,
    /// Pinned bytes held at the failure.
    pub reserved_bytes: u64,
    /// The limit.
    pub limit_bytes: u64,
}

/// What one event did to the host allocator's blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HostDecision {
    /// The event.
    pub event_index: u64,
    /// Blocks made (`segment_alloc` in PyTorch's host trace).
    pub blocks_made: u32,
    /// Blocks destroyed (`segment_free`).
    pub blocks_destroyed: u32,
    /// Their bytes.
    pub bytes_made: u64,
    /// Their bytes.
    pub bytes_destroyed: u64,
}

/// One point of the down-sampled timeline: the maximum of each series over
/// the events since the previous point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TimelinePoint {
    /// Index of the last event covered by this point.
    pub event_index: u64,
    /// Live caller bytes.
    pub requested: u64,
    /// `allocated_bytes.all.current`.
    pub allocated: u64,
    /// `active_bytes.all.current`.
    pub active: u64,
    /// `reserved_bytes.all.current`.
    pub reserved: u64,
    /// Largest free cached block at the end of the interval.
    pub largest_free: u64,
}

impl TimelinePoint {
    /// External fragmentation at this point: 1 − largest free block / free
    /// cached bytes (0 when nothing is cached).
    pub fn external_fragmentation(&self) -> f64 {
        let free = self.reserved.saturating_sub(self.active);
        if free == 0 {
            0.0
        } else {
            1.0 - (self.largest_free.min(free) as f64 / free as f64)
        }
    }
}

/// A device call made while replaying an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LoggedCall {
    /// The event during which the call happened (`None` for the initial
    /// state of a trace that starts mid-run).
    pub event_index: Option<u32>,
    /// What the call did.
    #[serde(serialize_with = "serialize_kind")]
    pub kind: DeviceCallKind,
    /// Address.
    pub ptr: u64,
    /// Bytes.
    pub size: u64,
}

fn serialize_kind<S: serde::Serializer>(k: &DeviceCallKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.name())
}

/// How many of the largest live allocations an [`OomEvent`] names.
pub(crate) const LARGEST_LIVE: usize = 5;

/// The allocation that failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OomEvent {
    /// Index of the failing event (0 when the state at the start did not fit).
    pub event_index: u64,
    /// Allocation id of the failing request (`None` when a recorded
    /// segment of the initial state did not fit).
    pub alloc_id: Option<u32>,
    /// The allocator state at the first entry of a trace that starts mid-run
    /// did not fit: the run failed before its first event.
    pub at_start: bool,
    /// The caller's request.
    pub requested_bytes: u64,
    /// The rounded request.
    pub rounded_bytes: u64,
    /// What the policy last asked the device for.
    pub device_request_bytes: u64,
    /// `reserved_bytes.all.current` at the failure.
    pub reserved_bytes: u64,
    /// `allocated_bytes.all.current` at the failure.
    pub allocated_bytes: u64,
    /// Live caller bytes at the failure.
    pub live_requested_bytes: u64,
    /// Largest free cached block at the failure.
    pub largest_free_block: u64,
    /// Free device memory at the failure.
    pub device_free_bytes: u64,
    /// PyTorch's error message.
    pub message: String,
    /// The largest allocations live at the failure (id, requested bytes),
    /// largest first (at most `LARGEST_LIVE`): whose memory it was.
    pub largest_live: Vec<(u32, u64)>,
    /// The allocator's segments at the failure.
    #[serde(skip)]
    pub segments: Vec<SegmentView>,
}

/// Everything a replay produced.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Run {
    /// Policy name.
    pub policy: String,
    /// Settings string.
    pub conf: String,
    /// Device capacity (`None` = unlimited).
    pub capacity: Option<u64>,
    /// How a trace that starts mid-run began (`None`: it starts from an
    /// empty allocator).
    pub start: Option<crate::engine::start::Start>,
    /// Headline figures.
    pub summary: Summary,
    /// Down-sampled timeline.
    pub timeline: Vec<TimelinePoint>,
    /// Device calls in order.
    pub device_log: Vec<LoggedCall>,
    /// The first OOM, if one happened.
    pub oom: Option<OomEvent>,
    /// Final statistics.
    pub stats: MemoryStats,
    /// Address each allocation id got (only when requested; 0 for ids that
    /// were never allocated).
    #[serde(skip)]
    pub alloc_addresses: Vec<u64>,
    /// Size of the block each allocation id got (only when addresses are
    /// recorded; 0 for ids never allocated): the rounded request, or the
    /// whole block when the rest was too small to split off.
    #[serde(skip)]
    pub alloc_block_sizes: Vec<u64>,
    /// The event after which reserved bytes reached the peak that
    /// [`Summary::waste_at_peak_bytes`] describes (`None`: the state the
    /// replay began with, before any event).
    #[serde(skip)]
    pub peak_event_index: Option<u64>,
    /// Segments at the moment reserved bytes peaked (only when requested).
    #[serde(skip)]
    pub segments_at_peak: Vec<SegmentView>,
    /// Segments at the end of the replay (only when requested).
    #[serde(skip)]
    pub final_segments: Vec<SegmentView>,
    /// No decision of the replay depended on how the device's addresses
    /// compare (the policy said so: [`Inspect::placement_may_have_decided`]),
    /// so the other placement predicts the same; `false` when the policy
    /// cannot tell.
    ///
    /// [`Inspect::placement_may_have_decided`]: vramlab_allocator::Inspect::placement_may_have_decided
    #[serde(skip)]
    pub placement_free: bool,
    /// The pinned host allocator's figures (`None`: the trace has no host
    /// requests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostSummary>,
    /// The first pinned host request that did not fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_oom: Option<HostOomEvent>,
    /// What each event did to the host allocator's blocks (kept only in
    /// fidelity mode).
    #[serde(skip)]
    pub host_decisions: Vec<HostDecision>,
}
