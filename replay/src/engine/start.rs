//! How a replay of a trace that starts mid-run begins.
//!
//! A recording started after the model was loaded (the usual way) begins
//! with blocks already in use. There are two honest ways to replay it:
//!
//! * [`Start::Recorded`]: seed the allocator with the recorded layout —
//!   segments, free blocks and blocks in use exactly where PyTorch had them.
//!   This is what `vramlab fidelity` does, and the right start for the
//!   settings the snapshot was recorded under. Under another setting it is a
//!   mixed answer (a layout made under one setting, continued under
//!   another), and only PyTorch's native policy can hold such a layout.
//! * [`Start::Fresh`]: start from an empty allocator and allocate the
//!   blocks in use at the first entry (in address order: segment by segment,
//!   block by block, as the recording laid them out; pending frees are
//!   freed right after, deferred) under the setting or policy being
//!   evaluated, then replay the recorded events. Every setting and every
//!   policy starts alike, so comparisons are fair; cached free memory of the
//!   recording is not carried over.
//!
//! What-if replays (another setting, another policy, a capacity) use
//! `fresh`; a replay of the recorded settings alone uses `recorded`
//! ([`choose_start`]).

use std::fmt;

use vramlab_allocator::{
    AllocError, Allocator, BlockHandle, PoolKind, SeedBlock, SeedBlockState, SeedPool, SeedRange,
};
use vramlab_traces::advice::Opt;
use vramlab_traces::{InitialBlockState, InitialSegment, InitialState, Trace};

use crate::engine::fresh_pools::{FreshPools, pool_options};
use crate::engine::{ReplayDevice, ReplayError};

/// How a replay of a trace that starts mid-run begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Start {
    /// The recorded layout, seeded as it was.
    #[default]
    Recorded,
    /// The blocks in use allocated afresh under the evaluated setting.
    Fresh,
}

impl Start {
    /// `recorded` or `fresh`.
    pub fn name(self) -> &'static str {
        match self {
            Start::Recorded => "recorded",
            Start::Fresh => "fresh",
        }
    }
}

impl fmt::Display for Start {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Start {
    type Err = String;
    fn from_str(s: &str) -> Result<Start, String> {
        match s {
            "recorded" => Ok(Start::Recorded),
            "fresh" => Ok(Start::Fresh),
            other => Err(format!("unknown start '{other}' (known: recorded, fresh)")),
        }
    }
}

/// The start a command should use for `trace` when it replays it under
/// `runs` (for each: is it PyTorch's native policy under the recorded
/// settings, on an unlimited device?). `requested` is the user's choice.
/// `None` when the trace starts from an empty allocator.
pub fn choose_start(trace: &Trace, requested: Option<Start>, all_recorded: bool) -> Option<Start> {
    let init = trace.initial.as_ref()?;
    if let Some(s) = requested {
        return Some(s);
    }
    if all_recorded && init.layout_error.is_none() {
        Some(Start::Recorded)
    } else {
        Some(Start::Fresh)
    }
}

/// The start for `trace` replayed under `scenarios`: the user's choice,
/// else `recorded` when every scenario is PyTorch's native policy under the
/// settings the trace was recorded with, on an unlimited device without a
/// memory fraction, else `fresh`. `None` for a trace that starts from an
/// empty allocator.
pub fn start_for(
    trace: &Trace,
    scenarios: &[crate::Scenario],
    requested: Option<Start>,
) -> Option<Start> {
    let all_recorded = !scenarios.is_empty()
        && scenarios.iter().all(|s| {
            s.capacity.is_none()
                && s.memory_fraction.is_none()
                && s.policy.native_conf().is_some_and(|c| {
                    recorded_conf(trace, c.version)
                        .ok()
                        .flatten()
                        .is_some_and(|r| r.to_string() == c.to_string())
                })
        });
    choose_start(trace, requested, all_recorded)
}

/// A one-line description of a start, for people.
pub fn describe_start(trace: &Trace, start: Option<Start>) -> String {
    let Some(init) = trace.initial.as_ref() else {
        return "empty allocator (the recording starts from the beginning)".into();
    };
    match start.unwrap_or_default() {
        Start::Recorded => format!(
            "recorded: {} segments ({}) and {} blocks in use as the recording found them at its first entry",
            init.segments.len(),
            vramlab_allocator::format::format_size(init.reserved_bytes()),
            init.live_blocks()
        ),
        Start::Fresh => format!(
            "fresh: the {} blocks in use at the first entry ({}) allocated under each setting, then the recorded events",
            init.live_blocks(),
            vramlab_allocator::format::format_size(init.live_bytes())
        ),
    }
}

/// What the replay learns about an initial block while seeding.
pub(crate) struct Seeded {
    pub address: u64,
    pub id: u32,
    pub handle: BlockHandle,
    pub requested: u64,
    pub pending: bool,
}

/// Why a seeded block could not be placed: the device is full.
pub(crate) struct StartOom {
    /// The policy's report.
    pub error: AllocError,
    /// The block (fresh) or segment size (recorded) that did not fit.
    pub bytes: u64,
    /// Id of the block that failed (fresh start).
    pub id: Option<u32>,
    /// Ids of blocks that could not be placed (their later frees are no-ops).
    pub lost: Vec<u32>,
}

/// Seeds `alloc` with `init` as `start` says, calling `each` for every
/// block placed. A recorded start puts every segment and reservation at
/// its recorded address (on a device that can place), so the address order
/// PyTorch's ties depend on is the recorded one under any placement
/// policy. An out-of-memory is returned, not raised: the caller reports it
/// as the replay's OOM at the start.
pub(crate) fn seed<A>(
    trace: &Trace,
    init: &InitialState,
    start: Start,
    alloc: &mut A,
    stop_at_oom: bool,
    each: &mut dyn FnMut(Seeded) -> Result<(), ReplayError>,
) -> Result<Option<StartOom>, ReplayError>
where
    A: Allocator,
    A::Dev: ReplayDevice,
{
    match start {
        Start::Fresh => seed_fresh(trace, init, alloc, stop_at_oom, each),
        Start::Recorded => seed_recorded(trace, init, alloc, each),
    }
}

fn raw_stream(trace: &Trace, index: u32, what: &str, at: u64) -> Result<u64, ReplayError> {
    trace
        .streams
        .get(index as usize)
        .copied()
        .ok_or_else(|| ReplayError::Initial(format!("{what} at {at:#x}: unknown stream index")))
}

fn seed_fresh<A: Allocator>(
    trace: &Trace,
    init: &InitialState,
    alloc: &mut A,
    stop_at_oom: bool,
    each: &mut dyn FnMut(Seeded) -> Result<(), ReplayError>,
) -> Result<Option<StartOom>, ReplayError> {
    let mut oom: Option<StartOom> = None;
    let pool_err = |e: AllocError| ReplayError::Initial(format!("private pools at the start: {e}"));
    let mut pools = FreshPools::new(trace);
    for b in &init.live {
        let stream = raw_stream(trace, b.stream, "block", b.address)?;
        let (id, pending) = match b.state {
            InitialBlockState::Allocated(id) => (id, false),
            InitialBlockState::PendingFree(id) => (id, true),
            InitialBlockState::Free => continue,
        };
        if let Some(o) = &mut oom {
            o.lost.push(id);
            continue;
        }
        if b.requested > 0 {
            // (A zero-byte request allocates nothing: no section for it, as
            // in the rewritten trace.)
            pools.before(alloc, b.pool, b.stream).map_err(pool_err)?;
        }
        match alloc.malloc(b.requested, stream) {
            Ok(h) => {
                if pending {
                    alloc.free_deferred(h).map_err(|e| {
                        ReplayError::Initial(format!("block at {:#x}: {e}", b.address))
                    })?;
                }
                each(Seeded {
                    address: b.address,
                    id,
                    handle: h,
                    requested: b.requested,
                    pending,
                })?;
            }
            Err(e @ AllocError::OutOfMemory(_)) => {
                oom = Some(StartOom {
                    error: e,
                    bytes: b.requested,
                    id: Some(id),
                    lost: vec![id],
                });
                if stop_at_oom {
                    break;
                }
            }
            Err(e) => {
                return Err(ReplayError::Initial(format!(
                    "block at {:#x}: {e}",
                    b.address
                )));
            }
        }
    }
    if oom.is_none() {
        pools.finish(alloc, init).map_err(pool_err)?;
    }
    Ok(oom)
}

fn seed_blocks(seg: &InitialSegment) -> Vec<SeedBlock> {
    seg.blocks
        .iter()
        .map(|b| SeedBlock {
            size: b.size,
            requested: b.requested,
            state: match b.state {
                InitialBlockState::Free => SeedBlockState::Free,
                InitialBlockState::Allocated(_) => SeedBlockState::Allocated,
                InitialBlockState::PendingFree(_) => SeedBlockState::PendingFree,
            },
        })
        .collect()
}

fn pool_of(is_small: bool) -> PoolKind {
    if is_small {
        PoolKind::Small
    } else {
        PoolKind::Large
    }
}

/// Reports the allocated and pending blocks of `segs` (handles in order).
fn report_blocks<'a>(
    segs: impl Iterator<Item = &'a InitialSegment>,
    handles: Vec<Option<BlockHandle>>,
    each: &mut dyn FnMut(Seeded) -> Result<(), ReplayError>,
) -> Result<(), ReplayError> {
    let blocks = segs.flat_map(|s| s.blocks.iter());
    for (b, h) in blocks.zip(handles) {
        let (id, pending) = match b.state {
            InitialBlockState::Free => continue,
            InitialBlockState::Allocated(id) => (id, false),
            InitialBlockState::PendingFree(id) => (id, true),
        };
        each(Seeded {
            address: b.address,
            id,
            handle: h.unwrap_or(BlockHandle::NULL),
            requested: b.requested,
            pending,
        })?;
    }
    Ok(())
}

fn ids_of<'a>(segs: impl Iterator<Item = &'a InitialSegment>) -> Vec<u32> {
    segs.flat_map(|s| s.blocks.iter())
        .filter_map(|b| match b.state {
            InitialBlockState::Allocated(id) | InitialBlockState::PendingFree(id) => Some(id),
            InitialBlockState::Free => None,
        })
        .collect()
}

fn seed_recorded<A>(
    trace: &Trace,
    init: &InitialState,
    alloc: &mut A,
    each: &mut dyn FnMut(Seeded) -> Result<(), ReplayError>,
) -> Result<Option<StartOom>, ReplayError>
where
    A: Allocator,
    A::Dev: ReplayDevice,
{
    if let Some(e) = &init.layout_error {
        return Err(ReplayError::Initial(format!(
            "the recorded layout at the first entry could not be rebuilt ({e}); start fresh instead ({})",
            Opt::Start.with_word("fresh")
        )));
    }
    // The private pools that held segments at the first entry existed and
    // were held then (a graph, a MemPool object).
    let mut held: Vec<u32> = init
        .segments
        .iter()
        .map(|s| s.pool)
        .chain(init.reservations.iter().map(|r| r.pool))
        .flatten()
        .collect();
    held.sort_unstable();
    held.dedup();
    for pool in held {
        alloc
            .create_pool(pool, pool_options(trace, pool))
            .map_err(|e| ReplayError::Initial(format!("private pool {pool}: {e}")))?;
    }
    let not_supported = |e: AllocError, at: u64| match e {
        AllocError::Invalid(m) if m.contains("cannot start from a recorded") => {
            ReplayError::Initial(format!(
                "{m}: only PyTorch's native policy can hold PyTorch's recorded layout; start fresh instead ({})",
                Opt::Start.with_word("fresh")
            ))
        }
        e => ReplayError::Initial(format!("segment at {at:#x}: {e}")),
    };
    for seg in init.segments.iter().filter(|s| !s.is_expandable) {
        let stream = raw_stream(trace, seg.stream, "segment", seg.address)?;
        alloc.device_mut().place_next(seg.address);
        let r = alloc.seed_segment(
            SeedPool {
                kind: pool_of(seg.is_small),
                private: seg.pool,
            },
            stream,
            &seed_blocks(seg),
        );
        alloc.device_mut().clear_placements();
        match r {
            Ok(handles) => report_blocks(std::iter::once(seg), handles, each)?,
            Err(e @ AllocError::OutOfMemory(_)) => {
                return Ok(Some(out_of_memory(init, e, seg.size)));
            }
            Err(e) => return Err(not_supported(e, seg.address)),
        }
    }
    for (i, res) in init.reservations.iter().enumerate() {
        let next = init.reservations.get(i + 1).map_or(u64::MAX, |r| r.address);
        let mine = |s: &&InitialSegment| {
            s.is_expandable
                && s.stream == res.stream
                && s.is_small == res.is_small
                && s.address >= res.address
                && s.address < next
        };
        let blocks: Vec<Vec<SeedBlock>> =
            init.segments.iter().filter(mine).map(seed_blocks).collect();
        let ranges: Vec<SeedRange<'_>> = init
            .segments
            .iter()
            .filter(mine)
            .zip(&blocks)
            .map(|(s, b)| SeedRange {
                offset: s.address - res.address,
                blocks: b,
            })
            .collect();
        let stream = raw_stream(trace, res.stream, "reservation", res.address)?;
        alloc.device_mut().place_next(res.address);
        let r = alloc.seed_expandable(
            SeedPool {
                kind: pool_of(res.is_small),
                private: res.pool,
            },
            stream,
            &ranges,
        );
        alloc.device_mut().clear_placements();
        match r {
            Ok(handles) => report_blocks(init.segments.iter().filter(mine), handles, each)?,
            Err(e @ AllocError::OutOfMemory(_)) => {
                let bytes = init.segments.iter().filter(mine).map(|s| s.size).sum();
                return Ok(Some(out_of_memory(init, e, bytes)));
            }
            Err(e) => return Err(not_supported(e, res.address)),
        }
    }
    let seeded_expandable = init.segments.iter().filter(|s| s.is_expandable).all(|s| {
        init.reservations
            .iter()
            .any(|r| r.stream == s.stream && r.is_small == s.is_small && r.address <= s.address)
    });
    if !seeded_expandable {
        return Err(ReplayError::Initial(format!(
            "an expandable segment's mapped range belongs to no reservation; start fresh instead ({})",
            Opt::Start.with_word("fresh")
        )));
    }
    Ok(None)
}

/// The recorded state does not fit the device: every block of it is lost
/// (a recorded start stops at its first segment that does not fit).
fn out_of_memory(init: &InitialState, error: AllocError, bytes: u64) -> StartOom {
    StartOom {
        error,
        bytes,
        id: None,
        lost: ids_of(init.segments.iter()),
    }
}

/// The settings a trace was recorded under, if it says (`None` when the
/// trace does not record them). An unparsable recorded string is an error.
pub fn recorded_conf(
    trace: &Trace,
    version: vramlab_allocator::TorchVersion,
) -> Result<Option<vramlab_allocator::AllocConf>, String> {
    match &trace.header.alloc_conf {
        None => Ok(None),
        Some(s) => vramlab_allocator::AllocConf::parse(s, version)
            .map(Some)
            .map_err(|e| {
                format!(
                    "the recorded settings {s:?} do not parse under PyTorch {version} rules: {e}"
                )
            }),
    }
}
