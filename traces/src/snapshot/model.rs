//! A typed PyTorch memory snapshot (`_cuda_memorySnapshot` in
//! torch/csrc/cuda/Module.cpp, written by `torch.cuda.memory._dump_snapshot`): what
//! `torch.cuda.memory._snapshot()` returns, with every documented key.
//! Optional keys are `Option`s; unknown keys are tolerated and counted.

use std::collections::BTreeMap;

pub use crate::model::Frame;

/// Index of a frame list in [`Snapshot::frames`]. Lists the pickle shares
/// (through its memo) are stored once and referred to by the same index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FramesRef(pub u32);

/// Block state in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotBlockState {
    /// `active_allocated`.
    ActiveAllocated,
    /// `active_pending_free` (freed, waiting for stream events).
    ActivePendingFree,
    /// `inactive` (cached, free).
    Inactive,
}

/// A block of a [`Segment`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotBlock {
    /// Address (older snapshots without it get one computed from the segment).
    pub address: u64,
    /// Size in bytes.
    pub size: u64,
    /// The caller's request (stale for inactive blocks; absent in ≤2.0).
    pub requested_size: Option<u64>,
    /// State.
    pub state: SnapshotBlockState,
    /// Stack of the allocation.
    pub frames: Option<FramesRef>,
}

/// A segment (one cudaMalloc, or one mapped range of an expandable segment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Device index.
    pub device: u32,
    /// Base address.
    pub address: u64,
    /// Sum of block sizes.
    pub total_size: u64,
    /// Bytes of allocated blocks.
    pub allocated_size: u64,
    /// Bytes of allocated or pending blocks.
    pub active_size: u64,
    /// Requested bytes of active blocks.
    pub requested_size: u64,
    /// Raw stream handle.
    pub stream: u64,
    /// `true` for `segment_type == "small"`.
    pub is_small: bool,
    /// `segment_pool_id`, `(0, 0)` for the default pool.
    pub pool_id: (i64, i64),
    /// `is_expandable`.
    pub is_expandable: bool,
    /// Stack at segment creation.
    pub frames: Option<FramesRef>,
    /// Blocks in address order.
    pub blocks: Vec<SnapshotBlock>,
}

/// Action of a trace entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `alloc`.
    Alloc,
    /// `free_requested`.
    FreeRequested,
    /// `free_completed`.
    FreeCompleted,
    /// `segment_alloc`.
    SegmentAlloc,
    /// `segment_free`.
    SegmentFree,
    /// `segment_map`.
    SegmentMap,
    /// `segment_unmap`.
    SegmentUnmap,
    /// `snapshot` (a snapshot was taken).
    Snapshot,
    /// `oom`.
    Oom,
    /// `user_defined` (≈2.4 annotations).
    UserDefined,
    /// `annotate` (2.14+): metadata attached to a live allocation by
    /// `torch.cuda.memory._annotate_tensor`; no memory changes hands.
    Annotate,
    /// An action this version of vramlab does not know.
    Other(String),
}

impl Action {
    /// From PyTorch's action string.
    pub(crate) fn from_name(s: &str) -> Action {
        match s {
            "alloc" => Action::Alloc,
            "free_requested" => Action::FreeRequested,
            "free_completed" => Action::FreeCompleted,
            "segment_alloc" => Action::SegmentAlloc,
            "segment_free" => Action::SegmentFree,
            "segment_map" => Action::SegmentMap,
            "segment_unmap" => Action::SegmentUnmap,
            "snapshot" => Action::Snapshot,
            "oom" => Action::Oom,
            "user_defined" => Action::UserDefined,
            "annotate" => Action::Annotate,
            other => Action::Other(other.to_string()),
        }
    }

    /// PyTorch's action string.
    pub(crate) fn name(&self) -> &str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Snapshot => "snapshot",
            Action::Oom => "oom",
            Action::UserDefined => "user_defined",
            Action::Annotate => "annotate",
            Action::Other(s) => s,
        }
    }
}

/// One entry of a device trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEntry {
    /// What happened.
    pub action: Action,
    /// Address (absent for `oom`).
    pub addr: Option<u64>,
    /// Free device bytes (`oom` only).
    pub device_free: Option<u64>,
    /// Bytes: the caller's request for `alloc`/`free_*`, the segment or
    /// range size for `segment_*`, the rounded request for `oom`, total
    /// active bytes for `snapshot`.
    pub size: u64,
    /// Raw stream handle.
    pub stream: u64,
    /// Wall-clock microseconds (≈2.2+).
    pub time_us: Option<i64>,
    /// Stack, when kept.
    pub frames: Option<FramesRef>,
    /// `compile_context` (≈2.5+). Entries share equal texts (most carry
    /// the same one), so a million entries do not hold a million copies.
    pub compile_context: Option<std::sync::Arc<str>>,
    /// `user_metadata` (≈2.7+), shared like `compile_context`.
    pub user_metadata: Option<std::sync::Arc<str>>,
    /// `pool_id`: the pool the block or segment belongs to, `(0, 0)` for
    /// the default pool (written from 2.12; absent before).
    pub pool_id: Option<(i64, i64)>,
}

/// `allocator_settings` (≈2.4+).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AllocatorSettings {
    /// `PYTORCH_CUDA_ALLOC_CONF`: the last settings string.
    pub conf_string: Option<String>,
    /// `max_split_size` in bytes (-1 = unlimited).
    pub max_split_size: Option<i64>,
    /// `garbage_collection_threshold`.
    pub garbage_collection_threshold: Option<f64>,
    /// `expandable_segments`.
    pub expandable_segments: Option<bool>,
    /// `roundup_power2_divisions` by interval label ("1", "2", …, "32768").
    pub roundup_power2_divisions: BTreeMap<u64, u64>,
    /// Any other key, printed as text.
    pub other: BTreeMap<String, String>,
    /// Every key, in the file's order.
    pub keys: Vec<String>,
}

/// One `external_annotations` entry, as text key/value pairs.
pub type Annotation = BTreeMap<String, String>;

/// A whole snapshot.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// All segments of all devices.
    pub segments: Vec<Segment>,
    /// One trace per device ordinal.
    pub device_traces: Vec<Vec<TraceEntry>>,
    /// `host_traces` (2.14+): the pinned host allocator's own history.
    pub host_traces: Vec<TraceEntry>,
    /// Blocks of `host_segments` (2.14+): (address, size, state) at the
    /// dump, state as PyTorch names it (`active_allocated`,
    /// `active_pending_free`, `inactive`).
    pub host_segments: Vec<(u64, u64, String)>,
    /// `vramlab_host_requests` (written by `vramlab record`): the bytes of
    /// each pinned tensor the script made, `(address, bytes)` in order.
    pub host_requests: Vec<(u64, u64)>,
    /// Settings (≈2.4+).
    pub allocator_settings: Option<AllocatorSettings>,
    /// Annotations (≈2.5+).
    pub external_annotations: Vec<Annotation>,
    /// Shared frame lists.
    pub frames: Vec<Vec<Frame>>,
    /// Keys vramlab does not know, top-level and nested, with counts
    /// (tolerated, reported by `vramlab stats`).
    pub unknown_keys: BTreeMap<String, u64>,
    /// The file is the bare list of segments `torch.cuda.memory_snapshot()`
    /// returns: the state only, no trace and no settings.
    pub legacy_segment_list: bool,
    /// Keys present, as `level.key` (`segments[].is_expandable`,
    /// `device_traces[][].time_us`, top-level keys bare), sampled on the
    /// first dicts of each level: what tells PyTorch releases apart.
    pub keys_seen: std::collections::BTreeSet<String>,
}
