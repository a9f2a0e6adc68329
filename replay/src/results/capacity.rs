//! A replay on a fixed capacity, as `vramlab oom-point --capacity --json`
//! prints it: it fits (with its peak), or where it ran out, the code that
//! asked, and the allocator's state there.

use serde::Serialize;
use vramlab_allocator::{BlockState, SegmentView};
use vramlab_traces::{Frame, Trace};

use crate::engine::run::{OomEvent, Run};

/// One setting replayed on one capacity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityRun {
    /// The setting's label.
    pub setting: String,
    /// The capacity, in bytes.
    pub capacity: u64,
    /// The first OOM (`None`: it fits).
    pub oom: Option<OomEvent>,
    /// Its peak when it fits; the code and the allocator state when not.
    #[serde(flatten)]
    pub(crate) outcome: CapacityOutcome,
}

/// How a replay on a capacity ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum CapacityOutcome {
    /// It fits.
    Fits {
        /// Its peak reserved bytes.
        peak_reserved_bytes: u64,
    },
    /// It ran out of memory.
    OutOfMemory(OomState),
}

/// The code and the allocator state at an OOM.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct OomState {
    /// The Python frames of the failing allocation, innermost first (`None`
    /// when a recorded segment of the initial state did not fit).
    pub(crate) failing_stack: Option<Vec<Frame>>,
    /// The largest allocations live at the failure, largest first.
    pub(crate) largest_live: Vec<LiveAllocation>,
    /// Free bytes cached in the segments.
    pub(crate) cached_free_bytes: u64,
    /// The allocator's segments at the failure.
    pub(crate) segments: Vec<SegmentAtOom>,
}

/// An allocation live at an OOM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct LiveAllocation {
    /// Allocation id.
    pub(crate) id: u32,
    /// The caller's request.
    pub(crate) requested_bytes: u64,
    /// The Python frames that made it, innermost first.
    pub(crate) stack: Vec<Frame>,
}

/// A segment at an OOM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct SegmentAtOom {
    /// Base address.
    pub(crate) address: u64,
    /// Bytes.
    pub(crate) size: u64,
    /// `small` or `large`.
    pub(crate) pool: &'static str,
    /// An expandable segment.
    pub(crate) expandable: bool,
    /// Its blocks in address order.
    pub(crate) blocks: Vec<BlockAtOom>,
}

/// A block of a segment at an OOM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct BlockAtOom {
    /// Address.
    pub(crate) address: u64,
    /// Bytes.
    pub(crate) size: u64,
    /// The last request it served.
    pub(crate) requested: u64,
    /// Its state as a snapshot names it (`active_allocated`, `inactive`, …).
    pub(crate) state: &'static str,
}

/// Free (cached) bytes of a segment.
pub fn free_bytes(s: &SegmentView) -> u64 {
    s.blocks
        .iter()
        .filter(|b| b.state == BlockState::Free)
        .map(|b| b.size)
        .sum()
}

/// The Python frames of `id`'s stack, innermost first.
fn code_stack(trace: &Trace, id: u32) -> Vec<Frame> {
    vramlab_traces::code_frames(trace.stack_of(id))
        .into_iter()
        .cloned()
        .collect()
}

impl OomState {
    /// The code and the state of `o`, an OOM of a replay of `trace`.
    pub(crate) fn new(trace: &Trace, o: &OomEvent) -> Self {
        OomState {
            failing_stack: o.alloc_id.map(|id| code_stack(trace, id)),
            largest_live: o
                .largest_live
                .iter()
                .map(|&(id, size)| LiveAllocation {
                    id,
                    requested_bytes: size,
                    stack: code_stack(trace, id),
                })
                .collect(),
            cached_free_bytes: o.segments.iter().map(free_bytes).sum(),
            segments: o
                .segments
                .iter()
                .map(|s| SegmentAtOom {
                    address: s.ptr,
                    size: s.size,
                    pool: s.pool.name(),
                    expandable: s.is_expandable,
                    blocks: s
                        .blocks
                        .iter()
                        .map(|b| BlockAtOom {
                            address: b.ptr,
                            size: b.size,
                            requested: b.requested,
                            state: b.state.snapshot_name(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

impl CapacityRun {
    /// `run`, a replay of `trace` on `capacity`.
    pub fn new(trace: &Trace, run: &Run, capacity: u64) -> Self {
        CapacityRun {
            setting: run.conf.clone(),
            capacity,
            oom: run.oom.clone(),
            outcome: match &run.oom {
                None => CapacityOutcome::Fits {
                    peak_reserved_bytes: run.summary.peak_reserved_bytes,
                },
                Some(o) => CapacityOutcome::OutOfMemory(OomState::new(trace, o)),
            },
        }
    }
}
