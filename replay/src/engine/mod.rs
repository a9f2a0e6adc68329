//! The replay engine: trace × policy × device → [`Run`].
//!
//! Module map: this file (the [`replay`] entry point, its options and
//! errors), `replayer` (the per-event steps), [`start`] (traces recorded
//! mid-run), [`run`] (what comes out), [`scenario`] (policy + settings +
//! simulated device), [`timed`] (host-time measurement), `cuda` (a real
//! GPU, feature `cuda`).
//!
//! The loop is the inner loop of every sweep and search: per event it does a
//! policy call, a few array updates and a handful of comparisons; no heap
//! allocation, hashing or formatting unless something happens (an OOM, a
//! device call, a timeline point).
//!
//! A trace that starts mid-run is first seeded as [`ReplayOptions::start`]
//! says (see [`crate::engine::start`]).

use vramlab_allocator::Allocator;
use vramlab_allocator::Device;
use vramlab_traces::Trace;

use replayer::Replayer;
use run::Run;
use start::Start;
use vramlab_allocator::{DeviceError, DevicePtr, Refusal, SimDevice};

mod addresses;
pub(crate) mod colocate;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
mod fresh_pools;
pub(crate) mod kv_rule;
pub(crate) mod passes;
mod replayer;
pub(crate) mod run;
pub(crate) mod scenario;
pub(crate) mod start;
pub(crate) mod static_plan;
pub(crate) mod stream;
pub(crate) mod timed;

/// What the engine needs from a device beyond [`Device`].
pub trait ReplayDevice: Device {
    /// Place the next segment or reservation at `addr` (fidelity mode).
    fn place_next(&mut self, _addr: u64) {}
    /// Forget unused placements.
    fn clear_placements(&mut self) {}
    /// Refuse allocations as the real device did (fidelity mode).
    fn refuse(&mut self, _refusal: Refusal) {}
    /// Time spent in driver calls so far, microseconds.
    fn device_time_us(&self) -> f64 {
        0.0
    }
    /// Takes `size` bytes outside the allocator (memory outside PyTorch).
    fn take_outside(&mut self, _size: u64) -> Result<(), DeviceError> {
        Err(no_tenants())
    }
    /// Gives back memory of [`ReplayDevice::take_outside`].
    fn give_outside(&mut self, _size: u64) {}
    /// The segment at `ptr` sleeps (an engine pool's); returns its size.
    fn suspend(&mut self, _ptr: DevicePtr) -> Result<u64, DeviceError> {
        Err(no_tenants())
    }
    /// The sleeping segments at `ptrs` wake, all or none.
    fn resume(&mut self, _ptrs: &[DevicePtr]) -> Result<(), DeviceError> {
        Err(no_tenants())
    }
}

/// The error of a device that does not model engine pools' sleep or memory
/// outside the allocator.
fn no_tenants() -> DeviceError {
    DeviceError::Other(
        "engine pools' sleep and memory outside PyTorch are replayed on a simulated device only"
            .into(),
    )
}

impl ReplayDevice for SimDevice {
    fn place_next(&mut self, addr: u64) {
        SimDevice::place_next(self, addr);
    }
    fn clear_placements(&mut self) {
        SimDevice::clear_placements(self);
    }
    fn refuse(&mut self, refusal: Refusal) {
        SimDevice::refuse(self, refusal);
    }
    fn device_time_us(&self) -> f64 {
        self.time_us()
    }
    fn take_outside(&mut self, size: u64) -> Result<(), DeviceError> {
        SimDevice::take_outside(self, size)
    }
    fn give_outside(&mut self, size: u64) {
        SimDevice::give_outside(self, size);
    }
    fn suspend(&mut self, ptr: DevicePtr) -> Result<u64, DeviceError> {
        SimDevice::suspend(self, ptr)
    }
    fn resume(&mut self, ptrs: &[DevicePtr]) -> Result<(), DeviceError> {
        SimDevice::resume(self, ptrs)
    }
}

/// How to replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayOptions {
    /// End the replay at the first OOM (default). Otherwise the failed
    /// allocation is skipped, and so are its frees.
    pub stop_at_oom: bool,
    /// Maximum number of timeline points.
    pub timeline_points: usize,
    /// Run the policy's invariant checker after every event (slow; on in
    /// debug builds by default).
    pub check_invariants: bool,
    /// Place new segments where the trace's expected record says the real
    /// allocator got them (fidelity mode; needs a device that can place).
    pub place_at_expected: bool,
    /// Keep the address and block size of every allocation
    /// ([`Run::alloc_addresses`], [`Run::alloc_block_sizes`]).
    pub record_addresses: bool,
    /// Keep the segment layout at the reserved peak ([`Run::segments_at_peak`]).
    pub segments_at_peak: bool,
    /// Keep the segment layout at the end ([`Run::final_segments`]).
    pub final_segments: bool,
    /// Told the number of events replayed so far at every timeline point
    /// (at most [`ReplayOptions::timeline_points`] calls), for a progress
    /// display on long replays.
    pub progress: Option<ProgressHook>,
    /// How a trace that starts mid-run begins (ignored for traces that
    /// start from an empty allocator).
    pub start: Start,
    /// Replay only the events before this index (`None`: all of them).
    pub stop_before: Option<u64>,
    /// Shown the allocator's segments after every event that made the
    /// device allocate (a new segment, or pages mapped into an expandable
    /// one): what `explain` reads to see what a growing request found.
    pub growth_hook: Option<GrowthHook>,
    /// Count the device's calls without keeping them: [`Run::device_log`]
    /// stays empty and the device forgets each call once it is counted,
    /// so that memory does not grow with the number of calls (a `direct`
    /// policy makes one per event). For replays that report figures
    /// alone: sweeps and replays of a trace as it is read.
    pub forget_device_calls: bool,
    /// The pinned host allocator's release and `pinned_*` settings for the
    /// trace's host requests (`None`: PyTorch's defaults for the trace's
    /// release; [`crate::Scenario`] sets the native policy's own).
    pub host_rules: Option<vramlab_allocator::host::HostRules>,
    /// The most bytes the process may pin (`None`: no limit): a host
    /// request beyond it is a host out-of-memory ([`Run::host_oom`]).
    pub host_ram: Option<u64>,
    /// Processes per node that pin alike: the per-node pinned figure is
    /// this many times the process's ([`HostSummary::node_peak_reserved_bytes`]).
    ///
    /// [`HostSummary::node_peak_reserved_bytes`]: crate::HostSummary::node_peak_reserved_bytes
    pub ranks_per_node: u32,
}

/// A callback for [`ReplayOptions::growth_hook`]: the event's index and
/// the segments after it. Two hooks are equal when they are the same
/// callback.
#[derive(Clone)]
pub struct GrowthHook(pub std::sync::Arc<GrowthFn>);

/// What a [`GrowthHook`] calls.
pub type GrowthFn = dyn Fn(u64, &[vramlab_allocator::SegmentView]) + Send + Sync;

impl GrowthHook {
    /// Wraps `f`.
    pub fn new(f: impl Fn(u64, &[vramlab_allocator::SegmentView]) + Send + Sync + 'static) -> Self {
        GrowthHook(std::sync::Arc::new(f))
    }
}

impl std::fmt::Debug for GrowthHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GrowthHook")
    }
}

impl PartialEq for GrowthHook {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for GrowthHook {}

/// A callback for [`ReplayOptions::progress`]. Two hooks are equal when
/// they are the same callback.
#[derive(Clone)]
pub struct ProgressHook(pub std::sync::Arc<dyn Fn(u64) + Send + Sync>);

impl ProgressHook {
    /// Wraps `f`.
    pub fn new(f: impl Fn(u64) + Send + Sync + 'static) -> Self {
        ProgressHook(std::sync::Arc::new(f))
    }
}

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

impl PartialEq for ProgressHook {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ProgressHook {}

impl ReplayOptions {
    /// The options of a replay that reports its figures alone (sweeps,
    /// searches, recommendations): no invariant checks, one timeline
    /// point, the device's calls counted and forgotten; a mid-run trace
    /// begins as `start` says.
    pub fn figures_only(start: Start) -> ReplayOptions {
        ReplayOptions {
            check_invariants: false,
            timeline_points: 1,
            start,
            forget_device_calls: true,
            ..Default::default()
        }
    }
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            stop_at_oom: true,
            timeline_points: 2000,
            check_invariants: cfg!(debug_assertions),
            place_at_expected: false,
            record_addresses: false,
            segments_at_peak: false,
            final_segments: false,
            progress: None,
            start: Start::Recorded,
            stop_before: None,
            growth_hook: None,
            forget_device_calls: false,
            host_rules: None,
            host_ram: None,
            ranks_per_node: 1,
        }
    }
}

/// Why a replay could not run to its end. An OOM is not an error: it is
/// part of the [`Run`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The trace is inconsistent at this event.
    #[error("event {event_index}: {message}")]
    Trace {
        /// Index of the offending event.
        event_index: u64,
        /// What is wrong.
        message: String,
    },
    /// The trace as a whole is inconsistent (found before any event runs).
    #[error("{0}")]
    Malformed(String),
    /// The initial state could not be rebuilt.
    #[error("initial state: {0}")]
    Initial(String),
    /// The policy failed for a reason other than running out of memory.
    #[error("event {event_index}: {message}")]
    Allocator {
        /// Index of the event.
        event_index: u64,
        /// The policy's error.
        message: String,
    },
    /// The invariant checker found an inconsistency (a bug in the policy).
    #[error("invariant violated after event {event_index}: {message}")]
    Invariant {
        /// Index of the event after which the check failed.
        event_index: u64,
        /// The violation.
        message: String,
    },
}

/// Replays `trace` through `alloc`.
pub fn replay<A>(trace: &Trace, alloc: &mut A, opts: &ReplayOptions) -> Result<Run, ReplayError>
where
    A: Allocator,
    A::Dev: ReplayDevice,
{
    check_id_count(trace)?;
    let mut r = Replayer::new(trace, opts);
    let start_oom = r.seed(alloc)?;
    r.begin(alloc);
    let mut stop = false;
    if let Some(o) = start_oom {
        r.oom_at_start(alloc, o);
        stop = opts.stop_at_oom;
    }
    if !stop {
        let limit = opts.stop_before.map_or(usize::MAX, |n| n as usize);
        for (i, ev) in trace.events.iter().enumerate().take(limit) {
            if r.event(alloc, i, ev)? {
                break;
            }
        }
    }
    Ok(r.finish(alloc))
}

/// Every id needs an allocation (an event or an initial block), so a
/// larger count is an error; refusing it here also keeps a hand-built
/// trace from sizing the engine's tables to billions of slots.
fn check_id_count(trace: &Trace) -> Result<(), ReplayError> {
    let initial_blocks = trace.initial.as_ref().map_or(0, |i| i.live_blocks());
    if trace.num_ids as usize > trace.events.len().saturating_add(initial_blocks) {
        return Err(ReplayError::Malformed(format!(
            "the trace declares {} allocation ids but holds {} events and {initial_blocks} live initial blocks",
            trace.num_ids,
            trace.events.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use vramlab_allocator::{AllocConf, TorchVersion};
    use vramlab_traces::{
        Event, InitialBlock, InitialBlockState, InitialSegment, InitialState, TraceHeader,
    };

    use super::*;
    use crate::engine::scenario::Scenario;

    /// A hand-built trace: nothing checks it before the replay does.
    fn trace(num_ids: u32, events: Vec<Event>) -> Trace {
        let mut t = Trace::new(TraceHeader::default());
        t.num_ids = num_ids;
        t.events = events;
        t
    }

    fn run(t: &Trace) -> Result<Run, ReplayError> {
        Scenario::native(AllocConf::new(TorchVersion::default())).run(t, &ReplayOptions::default())
    }

    fn err(t: &Trace) -> String {
        run(t).unwrap_err().to_string()
    }

    #[test]
    fn ids_beyond_num_ids_are_errors_not_panics() {
        let alloc = |id| Event::Alloc {
            id,
            stream: 0,
            size: 512,
        };
        assert_eq!(
            err(&trace(1, vec![alloc(0), alloc(1)])),
            "event 1: id 1 is out of range (the trace declares 1 ids)"
        );
        assert_eq!(
            err(&trace(0, vec![alloc(u32::MAX)])),
            "event 0: id 4294967295 is out of range (the trace declares 0 ids)"
        );
        for ev in [
            Event::Free { id: 3 },
            Event::FreeRequested { id: 3 },
            Event::FreeCompleted { id: 3 },
        ] {
            assert_eq!(
                err(&trace(1, vec![alloc(0), ev])),
                "event 1: id 3 is out of range (the trace declares 1 ids)"
            );
        }
        // In range, the same trace replays.
        let ok = trace(1, vec![alloc(0), Event::Free { id: 0 }]);
        assert_eq!(run(&ok).unwrap().summary.frees, 1);
    }

    #[test]
    fn more_ids_than_allocations_is_refused_before_any_table_is_sized() {
        // Four billion ids and no events would otherwise ask for ~96 GB.
        assert_eq!(
            err(&trace(u32::MAX, vec![])),
            "the trace declares 4294967295 allocation ids but holds 0 events and 0 live initial blocks"
        );
        assert_eq!(
            err(&trace(2, vec![Event::EmptyCache])),
            "the trace declares 2 allocation ids but holds 1 events and 0 live initial blocks"
        );
    }

    #[test]
    fn a_stream_beyond_the_stream_table_is_an_error() {
        let t = trace(
            1,
            vec![Event::Alloc {
                id: 0,
                stream: 5,
                size: 512,
            }],
        );
        assert_eq!(
            err(&t),
            "event 0: stream index 5 is not in the stream table"
        );
        let mut empty = t.clone();
        empty.streams.clear();
        assert_eq!(
            err(&empty),
            "event 0: stream index 5 is not in the stream table"
        );
    }

    #[test]
    fn initial_block_ids_beyond_num_ids_are_errors() {
        let seg = |stream, id| InitialSegment {
            address: 0x7f00_0000_0000,
            size: 2 << 20,
            stream,
            is_small: false,
            is_expandable: false,
            pool: None,
            blocks: vec![InitialBlock {
                address: 0x7f00_0000_0000,
                size: 2 << 20,
                requested: 2 << 20,
                state: InitialBlockState::Allocated(id),
            }],
        };
        let mut t = trace(1, vec![Event::EmptyCache]);
        t.initial = Some(InitialState::from_segments(vec![seg(0, 1)]));
        assert_eq!(
            err(&t),
            "initial state: block at 0x7f0000000000: id 1 is out of range or used twice"
        );
        t.initial = Some(InitialState::from_segments(vec![seg(9, 0)]));
        assert_eq!(
            err(&t),
            "initial state: segment at 0x7f0000000000: unknown stream index"
        );
        t.initial = Some(InitialState::from_segments(vec![seg(0, 0)]));
        assert_eq!(run(&t).unwrap().summary.events_replayed, 1);
    }
}
