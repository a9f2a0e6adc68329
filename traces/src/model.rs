//! The trace model: what a recorded (or generated) allocation workload is.
//!
//! A [`Trace`] is one device's stream of allocator requests. Allocations are
//! named by dense ids (`0..num_ids`), never by addresses, so a replay can keep
//! its id → block map in a flat vector. Sizes are the caller's request,
//! unrounded, exactly as `torch.cuda.caching_allocator_alloc` would see them.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

pub use crate::event::{AllocId, StreamIndex};
pub use crate::pools::PoolIndex;

pub use crate::event::Event;

/// Where a trace came from and what it was recorded under.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Free-form description of the source (file name, generator, recorder).
    pub source: String,
    /// Total memory of the recording device in bytes, when known.
    pub device_total: Option<u64>,
    /// The `PYTORCH_ALLOC_CONF` string the trace was recorded under, when known.
    pub alloc_conf: Option<String>,
    /// Framework and version, e.g. `torch 2.11.0`, when known.
    pub framework: Option<String>,
    /// Device ordinal the trace was recorded on.
    pub device: u32,
    /// Any other `key: value` header lines, kept in order of their keys
    /// (the release range among them: [`TraceHeader::releases`]).
    pub extra: BTreeMap<String, String>,
}

impl TraceHeader {
    /// The releases that could have recorded the trace, when its reader
    /// knew them (a snapshot's keys date it); kept in [`TraceHeader::extra`]
    /// in words, so that CSV and `.vlt` files carry it readably.
    pub fn releases(&self) -> Option<vramlab_torch::ReleaseRange> {
        let words = self.extra.get(vramlab_torch::RELEASES_KEY)?;
        let evidence = self.extra.get(vramlab_torch::EVIDENCE_KEY);
        vramlab_torch::ReleaseRange::from_label(words, evidence.map_or("", String::as_str))
    }

    /// Keeps `range` as the releases that could have recorded the trace.
    pub fn set_releases(&mut self, range: &vramlab_torch::ReleaseRange) {
        self.extra
            .insert(vramlab_torch::RELEASES_KEY.into(), range.label());
        self.extra.insert(
            vramlab_torch::EVIDENCE_KEY.into(),
            range.evidence.join("; "),
        );
    }
}

/// State of a block that existed before the first event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InitialBlockState {
    /// Free (cached) block.
    Free,
    /// Allocated block, known by this id in later events.
    Allocated(AllocId),
    /// Freed by the caller but awaiting stream events; completes with a later
    /// [`Event::FreeCompleted`] of this id.
    PendingFree(AllocId),
}

/// A block of an initial segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitialBlock {
    /// Absolute device address.
    pub address: u64,
    /// Block size in bytes (already rounded, as the allocator holds it).
    pub size: u64,
    /// The caller's request for this block (0 when unknown or free).
    pub requested: u64,
    /// Allocation state.
    pub state: InitialBlockState,
}

/// A segment (one cudaMalloc, or one mapped range of an expandable segment)
/// that existed before the first event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitialSegment {
    /// Base address.
    pub address: u64,
    /// Total bytes (sum of block sizes).
    pub size: u64,
    /// Index into [`Trace::streams`].
    pub stream: StreamIndex,
    /// `true` for the small pool (segment_type "small").
    pub is_small: bool,
    /// Part of an expandable segment.
    pub is_expandable: bool,
    /// The private pool it belongs to (`None`: the default pool).
    /// (Not in the serde layout: the binary format keeps it beside the
    /// state, so that files written before pools still read.)
    #[serde(skip)]
    pub pool: Option<PoolIndex>,
    /// Blocks in address order; they tile the segment.
    pub blocks: Vec<InitialBlock>,
}

/// A block that was allocated (or waiting for its free to complete) when
/// the recording began: what a replay that starts *fresh* allocates before
/// the recorded events (see [`InitialState`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitialLive {
    /// Address in the recording (orders the fresh start).
    pub address: u64,
    /// The caller's request in bytes.
    pub requested: u64,
    /// Index into [`Trace::streams`].
    pub stream: StreamIndex,
    /// `Allocated(id)` or `PendingFree(id)` (never `Free`).
    pub state: InitialBlockState,
    /// The private pool it was allocated from (`None`: the default pool).
    /// (Not in the serde layout: the binary format keeps it beside the
    /// state, so that files written before pools still read.)
    #[serde(skip)]
    pub pool: Option<PoolIndex>,
}

impl InitialLive {
    /// The allocation id of the block.
    pub fn id(&self) -> AllocId {
        self.state.id()
    }
}

impl InitialBlockState {
    /// The allocation id of a block in use; `AllocId::MAX` for a free one.
    pub fn id(&self) -> AllocId {
        match *self {
            InitialBlockState::Allocated(id) | InitialBlockState::PendingFree(id) => id,
            InitialBlockState::Free => AllocId::MAX,
        }
    }
}

/// A virtual address reservation of an expandable segment that existed
/// when the recording began; its mapped ranges are the
/// [`InitialSegment`]s with `is_expandable` that lie inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitialReservation {
    /// Lowest address the recording shows for it (its base, or a lower
    /// bound: the recording cannot see pages unmapped before it began).
    pub address: u64,
    /// Index into [`Trace::streams`].
    pub stream: StreamIndex,
    /// Small pool (2 MiB pages) or large pool.
    pub is_small: bool,
    /// The private pool it belongs to (`None`: the default pool).
    /// (Not in the serde layout: the binary format keeps it beside the
    /// state, so that files written before pools still read.)
    #[serde(skip)]
    pub pool: Option<PoolIndex>,
}

/// The allocator state at the first event, for traces that start mid-run.
///
/// It holds two views of the same moment, one per way a replay can start
/// (`vramlab replay --start recorded|fresh`):
/// * [`InitialState::live`]: the blocks in use, which a *fresh* start
///   allocates (in address order) under the setting being evaluated;
/// * [`InitialState::segments`] (and [`InitialState::reservations`]): the
///   recorded layout, segments and free blocks included, which a
///   *recorded* start seeds as it was. When the layout could not be rebuilt
///   from the file, `segments` is empty and [`InitialState::layout_error`]
///   says why; a fresh start still works.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitialState {
    /// The blocks in use at the first event, in address order.
    pub live: Vec<InitialLive>,
    /// Segments (or mapped ranges of expandable segments) in address order.
    pub segments: Vec<InitialSegment>,
    /// Reservations of the expandable segments among `segments`.
    pub reservations: Vec<InitialReservation>,
    /// Why the recorded layout could not be rebuilt (`segments` is empty).
    pub layout_error: Option<String>,
}

impl InitialState {
    /// Number of blocks that are allocated or pending-free at the start.
    pub fn live_blocks(&self) -> usize {
        self.live.len()
    }

    /// One more than the largest id of a block in use, in the live list or
    /// the segments' layout (0 when none is in use): the ids a table of
    /// the initial state's blocks needs.
    pub fn id_bound(&self) -> usize {
        let live = self.live.iter().map(InitialLive::id);
        let laid_out = self
            .segments
            .iter()
            .flat_map(|s| s.blocks.iter().map(|b| b.state.id()));
        live.chain(laid_out)
            .filter(|&id| id != AllocId::MAX)
            .map(|id| id as usize + 1)
            .max()
            .unwrap_or(0)
    }

    /// Bytes requested by the blocks in use at the start.
    pub fn live_bytes(&self) -> u64 {
        self.live
            .iter()
            .fold(0u64, |s, b| s.saturating_add(b.requested))
    }

    /// Bytes of the recorded segments (what PyTorch had reserved).
    pub fn reserved_bytes(&self) -> u64 {
        self.segments
            .iter()
            .fold(0u64, |s, g| s.saturating_add(g.size))
    }

    /// The blocks in use, derived from a layout's segments (address order).
    pub(crate) fn live_of_segments(segments: &[InitialSegment]) -> Vec<InitialLive> {
        let mut live: Vec<InitialLive> = segments
            .iter()
            .flat_map(|s| {
                s.blocks
                    .iter()
                    .filter(|b| !matches!(b.state, InitialBlockState::Free))
                    .map(|b| InitialLive {
                        address: b.address,
                        requested: b.requested,
                        stream: s.stream,
                        state: b.state,
                        pool: s.pool,
                    })
            })
            .collect();
        live.sort_by_key(|b| b.address);
        live
    }

    /// A state from a rebuilt layout (its live blocks derived from it).
    pub fn from_segments(segments: Vec<InitialSegment>) -> Self {
        InitialState {
            live: InitialState::live_of_segments(&segments),
            segments,
            reservations: Vec::new(),
            layout_error: None,
        }
    }
}

/// Kind of a device-level decision recorded by the real allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SegmentEventKind {
    /// cudaMalloc of a new segment.
    Alloc,
    /// cudaFree of a whole segment.
    Free,
    /// Pages mapped into an expandable segment.
    Map,
    /// Pages unmapped from an expandable segment.
    Unmap,
}

impl SegmentEventKind {
    /// The name PyTorch's trace uses (`segment_alloc`, …).
    pub fn trace_name(self) -> &'static str {
        match self {
            SegmentEventKind::Alloc => "segment_alloc",
            SegmentEventKind::Free => "segment_free",
            SegmentEventKind::Map => "segment_map",
            SegmentEventKind::Unmap => "segment_unmap",
        }
    }
}

/// A device-level decision the real allocator made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedSegmentEvent {
    /// Index of the trace event during which it happened (a segment_alloc
    /// belongs to the `Alloc` that follows it in the recording).
    pub event_index: u32,
    /// What happened.
    pub kind: SegmentEventKind,
    /// Segment or range address.
    pub address: u64,
    /// Segment or range size in bytes.
    pub size: u64,
}

/// A segment as the real allocator left it at the end of the recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalSegment {
    /// Base address.
    pub address: u64,
    /// Total bytes.
    pub size: u64,
    /// Small pool.
    pub is_small: bool,
    /// Mapped range of an expandable segment.
    pub is_expandable: bool,
    /// The private pool it belongs to (`None`: the default pool). (Not in
    /// the serde layout: the binary format keeps it beside the record.)
    #[serde(skip)]
    pub pool: Option<PoolIndex>,
    /// Blocks: (address, size, state) with state one of
    /// [`InitialBlockState::Free`] or `Allocated`/`PendingFree` (ids unused: 0).
    pub blocks: Vec<(u64, u64, InitialBlockState)>,
}

/// What the real allocator decided, kept from a snapshot for fidelity checks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedRecord {
    /// Address returned for each allocation id (`None` for ids of initial blocks
    /// that the record does not cover, or allocations that failed).
    pub alloc_addresses: Vec<Option<u64>>,
    /// Recorded segment events in order.
    pub segment_events: Vec<ExpectedSegmentEvent>,
    /// Event indices at which the real allocator raised an OOM, with the rounded
    /// request size and the `device_free` it reported.
    pub ooms: Vec<ExpectedOom>,
    /// The segments at the end of the recording (the snapshot's state).
    pub final_segments: Vec<FinalSegment>,
    /// Event indices of allocations whose first device request failed, so
    /// that the real allocator released its cache and retried (a burst of
    /// `segment_free` before the new segment that no cached block explains).
    pub retries: Vec<u32>,
}

/// An OOM the real allocator raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedOom {
    /// Index of the trace event that failed.
    pub event_index: u32,
    /// The rounded request (`size` of the `oom` entry).
    pub size: u64,
    /// Free device bytes reported by cudaMemGetInfo.
    pub device_free: u64,
}

/// One stack frame (innermost first in a list), as PyTorch records it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Frame {
    /// Source file.
    pub filename: String,
    /// Line number.
    pub line: i64,
    /// Function name.
    pub name: String,
}

impl Frame {
    /// A Python frame (a `.py` file with a line), not one of PyTorch's
    /// native (C++) frames.
    pub(crate) fn is_python(&self) -> bool {
        self.line > 0 && self.filename.ends_with(".py")
    }

    /// Inside the `torch` package itself.
    pub(crate) fn is_pytorch(&self) -> bool {
        let f = self.filename.replace('\\', "/");
        f.contains("/torch/") || f.starts_with("torch/")
    }

    /// Inside Python's standard library (`…/lib/python3.X/copy.py`, or
    /// `…\\Lib\\copy.py` on Windows), not a site package.
    pub(crate) fn is_stdlib(&self) -> bool {
        let f = self.filename.replace('\\', "/").to_ascii_lowercase();
        if f.contains("site-packages") || f.contains("dist-packages") {
            return false;
        }
        let parent = f.rsplit('/').nth(1).unwrap_or("");
        parent == "lib" || (parent.starts_with("python3") && f.contains("/lib/"))
    }

    /// `dir/file.py:LINE in name`, the path cut to its last two parts.
    pub fn short(&self) -> String {
        let f = self.filename.replace('\\', "/");
        let parts: Vec<&str> = f.rsplit('/').take(2).collect();
        let short: Vec<&str> = parts.into_iter().rev().collect();
        format!("{}:{} in {}", short.join("/"), self.line, self.name)
    }
}

/// The Python frames of a stack, innermost first, starting at the first
/// that is neither inside the `torch` package nor Python's standard
/// library: the code that asked for the memory, then its callers.
pub fn code_frames(frames: &[Frame]) -> Vec<&Frame> {
    let python: Vec<&Frame> = frames.iter().filter(|f| f.is_python()).collect();
    let first = python
        .iter()
        .position(|f| !f.is_pytorch() && !f.is_stdlib())
        .unwrap_or(0);
    python.into_iter().skip(first).collect()
}

/// One device's allocation trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// Provenance.
    pub header: TraceHeader,
    /// Raw stream handles (`cudaStream_t` values; 0 = default stream), indexed
    /// by [`StreamIndex`]. Always holds at least the default stream.
    pub streams: Vec<u64>,
    /// Allocator state before the first event (`None` = empty allocator).
    pub initial: Option<InitialState>,
    /// The requests.
    pub events: Vec<Event>,
    /// Number of distinct allocation ids (initial live blocks + allocs).
    pub num_ids: u32,
    /// What the real allocator did, when known.
    pub expected: Option<ExpectedRecord>,
    /// Remarks a reader or converter made (e.g. ring-buffer overflow).
    pub notes: Vec<String>,
    /// Stack frame lists, shared by index (from snapshots; may be empty).
    pub frames: Vec<Vec<Frame>>,
    /// For each allocation id, the index into [`Trace::frames`] of the stack
    /// that allocated it (empty when the trace has no stacks).
    pub alloc_frames: Vec<Option<u32>>,
    /// Phase marks (`# phase: LABEL` lines of the recorder: build, forward,
    /// backward, optimizer, prefill, decode, …), in event order.
    #[serde(default)]
    pub phases: Vec<PhaseMark>,
    /// Private pools (CUDA graphs' pools, MemPools), indexed by
    /// `PoolIndex`; empty when everything went to the default pool.
    #[serde(default)]
    pub pools: Vec<crate::pools::PoolDecl>,
    /// The trace has requests to the pinned host allocator, or (read as it
    /// is read) its file's format version may hold them: writers then
    /// write the version that does (CSV v3, `.vlt` 5).
    #[serde(default)]
    pub host_events: bool,
    /// The trace has engine pools' sleeps and wakes or memory outside
    /// PyTorch ([`Event::is_tenant`]), or (read as it is read) its file's
    /// format version may hold them: writers then write the version that
    /// does (CSV v4, `.vlt` 6).
    #[serde(default)]
    pub tenant_events: bool,
    /// What the real pinned host allocator did, event by event, when
    /// known (a snapshot's `host_traces`): the events that made or
    /// destroyed host blocks.
    #[serde(default)]
    pub expected_host: Option<Vec<ExpectedHostDecision>>,
}

/// What the real pinned host allocator did to its blocks during one event
/// (`segment_alloc` and `segment_free` entries of `host_traces`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedHostDecision {
    /// The event.
    pub event_index: u64,
    /// Blocks made.
    pub blocks_made: u32,
    /// Blocks destroyed.
    pub blocks_destroyed: u32,
    /// Bytes of the blocks made.
    pub bytes_made: u64,
    /// Bytes of the blocks destroyed.
    pub bytes_destroyed: u64,
}

/// The start of a recorded phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseMark {
    /// Index of the phase's first event (= the number of events before it).
    pub event_index: u64,
    /// The recorder's label, e.g. `step 0: forward`.
    pub label: String,
}

impl Trace {
    /// An empty trace with only the default stream.
    pub fn new(header: TraceHeader) -> Self {
        Trace {
            header,
            streams: vec![0],
            ..Default::default()
        }
    }

    /// Moves every event index the trace keeps (the recorded segment
    /// events, retries and OOMs, and the phase marks) by `moved`, after
    /// events were put in among its events.
    pub(crate) fn move_event_indices(&mut self, moved: impl Fn(u64) -> u64) {
        if let Some(x) = &mut self.expected {
            for s in &mut x.segment_events {
                s.event_index = moved(u64::from(s.event_index)) as u32;
            }
            for r in &mut x.retries {
                *r = moved(u64::from(*r)) as u32;
            }
            for o in &mut x.ooms {
                o.event_index = moved(u64::from(o.event_index)) as u32;
            }
        }
        for p in &mut self.phases {
            p.event_index = moved(p.event_index);
        }
    }

    /// The trace needs CSV v4 / `.vlt` 6: it has (or its file's version
    /// may have) engine pools' sleeps and wakes or memory outside PyTorch,
    /// or it declares an engine pool.
    pub fn has_tenant_events(&self) -> bool {
        self.tenant_events
            || self
                .pools
                .iter()
                .any(|d| d.kind == crate::pools::PrivatePoolKind::Engine)
            || self.events.iter().any(Event::is_tenant)
    }

    /// Number of `Alloc` events.
    pub fn num_allocs(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Alloc { .. }))
            .count()
    }

    /// `true` when `pool` is declared a MemPool.
    pub(crate) fn pool_is_mempool(&self, pool: PoolIndex) -> bool {
        self.pools
            .get(pool as usize)
            .is_some_and(|d| d.kind.is_mempool())
    }

    /// The event that starts routing `stream`'s requests to `pool`: a
    /// capture for a graph pool, a `use_mem_pool` context for a MemPool.
    pub fn pool_section_begin(&self, pool: PoolIndex, stream: StreamIndex) -> Event {
        if self.pool_is_mempool(pool) {
            Event::PoolEnter { pool }
        } else {
            Event::CaptureBegin { pool, stream }
        }
    }

    /// The event that ends what [`Trace::pool_section_begin`] started.
    pub fn pool_section_end(&self, pool: PoolIndex) -> Event {
        if self.pool_is_mempool(pool) {
            Event::PoolExit { pool }
        } else {
            Event::CaptureEnd { pool }
        }
    }

    /// The stack that allocated `id`, innermost frame first (empty when
    /// the trace has no stacks for it).
    pub fn stack_of(&self, id: AllocId) -> &[Frame] {
        self.alloc_frames
            .get(id as usize)
            .copied()
            .flatten()
            .and_then(|f| self.frames.get(f as usize))
            .map_or(&[], |v| v.as_slice())
    }

    /// Index of a raw stream handle, interning it if new. Scans the stream
    /// table; readers that intern many handles use `StreamInterner`.
    pub fn stream_index(&mut self, raw: u64) -> StreamIndex {
        match self.streams.iter().position(|&s| s == raw) {
            Some(i) => i as StreamIndex,
            None => {
                self.streams.push(raw);
                (self.streams.len() - 1) as StreamIndex
            }
        }
    }
}

/// [`Trace::stream_index`] in constant time per handle: a reader interns
/// one handle per event, and a file with thousands of distinct streams
/// must not make that a scan of the table each time.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamInterner {
    index: HashMap<u64, StreamIndex>,
}

impl StreamInterner {
    /// Index of `raw` in `trace`'s stream table, appending it if new (the
    /// same answer as [`Trace::stream_index`]).
    pub(crate) fn index(&mut self, trace: &mut Trace, raw: u64) -> StreamIndex {
        if self.index.len() != trace.streams.len() {
            // First use, or the table changed behind our back: rebuild.
            self.index.clear();
            for (i, &s) in trace.streams.iter().enumerate() {
                self.index.entry(s).or_insert(i as StreamIndex);
            }
            if self.index.len() != trace.streams.len() {
                // A table with duplicates: fall back to the scan.
                return trace.stream_index(raw);
            }
        }
        if let Some(&i) = self.index.get(&raw) {
            return i;
        }
        trace.streams.push(raw);
        let i = (trace.streams.len() - 1) as StreamIndex;
        self.index.insert(raw, i);
        i
    }
}
