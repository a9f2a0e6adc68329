//! Which private pool each request of a snapshot went to, and how the walk
//! re-creates the pool events PyTorch does not record.
//!
//! A snapshot never records a capture's begin or end, a `use_mem_pool`
//! context, or a pool's release; it records where memory went:
//!
//! * from 2.12 every trace entry carries `pool_id`, the pool of the block
//!   or segment it is about;
//! * every release writes `segment_pool_id` on the final segments, so for
//!   older snapshots a request belongs to a private pool when its block
//!   lies in a final segment of that pool (allocated after the segment's
//!   last `segment_alloc`); segments freed during the recording are then
//!   taken for the default pool's.
//!
//! From that the walk rebuilds the rest ([`PoolPlan`]):
//!
//! * **kind**: a pool whose requests come from the default stream (0) is a
//!   `torch.cuda.MemPool` (a capture cannot run on the legacy default
//!   stream); any other is a CUDA graph's pool. MemPool options
//!   (`use_on_oom`, `no_split`) are not recorded and taken as off.
//! * **sections**: the requests are cut into runs, each a maximal sequence
//!   of requests routed to one pool — by stream for a graph's pool (other
//!   streams' requests go to the default pool meanwhile), by thread for a
//!   MemPool — and each run is wrapped in a capture (`capture_begin` …
//!   `capture_end`) or a `use_mem_pool` context (`pool_enter` …
//!   `pool_exit`) that opens at its first request and closes after its
//!   last;
//! * **release**: when the cache gives back a segment of a pool that the
//!   replay still holds, the graphs or the MemPool holding it were let go
//!   first: the walk releases the pool right before that burst.

use std::collections::{BTreeMap, HashSet};

use crate::pools::{PoolDecl, PoolIndex};
use crate::snapshot::model::{Action, Segment, TraceEntry};

/// Where the pools of a snapshot's requests come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PoolEvidence {
    /// Every entry's `pool_id` (2.12+).
    EntryPoolIds,
    /// The final segments' `segment_pool_id` (older releases).
    FinalSegments,
}

/// The private pools of one device's trace, and the pool of each entry.
#[derive(Debug, Default)]
pub(super) struct PoolPlan {
    /// The pools, in `MempoolId_t` order.
    pub decls: Vec<PoolDecl>,
    /// The pool of each entry (`None`: the default pool); empty when the
    /// trace has no private pools.
    entry_pool: Vec<Option<PoolIndex>>,
    /// Entries after which the run routed to their pool ends.
    run_ends: HashSet<usize>,
    /// Pools that held segments at the first entry (a graph or a MemPool
    /// that existed before the recording began).
    pub held_at_start: Vec<bool>,
    /// Segments at the first entry that belong to a private pool: base →
    /// (end, pool).
    at_start: BTreeMap<u64, (u64, PoolIndex)>,
    /// What the pools were read from (`None`: no private pools).
    pub evidence: Option<PoolEvidence>,
}

impl PoolPlan {
    /// The plan of `entries`, whose final segments are `segments`.
    pub(super) fn of(entries: &[TraceEntry], segments: &[&Segment]) -> PoolPlan {
        let private = |id: (i64, i64)| id != (0, 0);
        let mut ids: Vec<(i64, i64)> = segments
            .iter()
            .map(|s| s.pool_id)
            .chain(entries.iter().filter_map(|e| e.pool_id))
            .filter(|&id| private(id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return PoolPlan::default();
        }
        let index = |id: (i64, i64)| -> Option<PoolIndex> {
            if !private(id) {
                return None;
            }
            ids.binary_search(&id).ok().map(|i| i as PoolIndex)
        };
        let from_entries = entries.iter().any(|e| e.pool_id.is_some());
        let mut plan = PoolPlan {
            evidence: Some(if from_entries {
                PoolEvidence::EntryPoolIds
            } else {
                PoolEvidence::FinalSegments
            }),
            ..PoolPlan::default()
        };
        plan.entry_pool = if from_entries {
            entries.iter().map(|e| e.pool_id.and_then(index)).collect()
        } else {
            pools_from_final_segments(entries, segments, &index)
        };
        plan.at_start = segments_at_start(entries, segments, &plan.entry_pool, &index);
        plan.held_at_start = vec![false; ids.len()];
        for &(_, p) in plan.at_start.values() {
            if let Some(h) = plan.held_at_start.get_mut(p as usize) {
                *h = true;
            }
        }
        plan.decls = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                let id = (id.0 as u64, id.1 as u64);
                if plan.is_mempool(i as PoolIndex, entries, segments, &index) {
                    PoolDecl::mempool(id)
                } else {
                    PoolDecl::graph(id)
                }
            })
            .collect();
        plan.run_ends = run_ends(entries, &plan.entry_pool, &plan.decls);
        plan
    }

    /// A pool whose requests (or, without any, whose final segments) are on
    /// the default stream is a MemPool.
    fn is_mempool(
        &self,
        p: PoolIndex,
        entries: &[TraceEntry],
        segments: &[&Segment],
        index: &dyn Fn((i64, i64)) -> Option<PoolIndex>,
    ) -> bool {
        let mut requests = entries
            .iter()
            .zip(&self.entry_pool)
            .filter(|(e, q)| is_request(e) && **q == Some(p))
            .peekable();
        if requests.peek().is_some() {
            return requests.any(|(e, _)| e.stream == 0);
        }
        segments
            .iter()
            .any(|s| index(s.pool_id) == Some(p) && s.stream == 0)
    }

    /// The pool entry `k` is about (`None`: the default pool).
    #[inline]
    pub(super) fn pool_of_entry(&self, k: usize) -> Option<PoolIndex> {
        self.entry_pool.get(k).copied().flatten()
    }

    /// `true` when the run routed to entry `k`'s pool ends after it.
    #[inline]
    pub(super) fn run_ends_at(&self, k: usize) -> bool {
        !self.run_ends.is_empty() && self.run_ends.contains(&k)
    }

    /// The private pool of the segment that held `address` at the first
    /// entry (`None`: the default pool's, or no segment).
    pub(super) fn pool_at_start(&self, address: u64) -> Option<PoolIndex> {
        let (_, &(end, p)) = self.at_start.range(..=address).next_back()?;
        (address < end).then_some(p)
    }

    /// The declaration of pool `p`.
    pub(super) fn decl(&self, p: PoolIndex) -> Option<&PoolDecl> {
        self.decls.get(p as usize)
    }
}

/// An entry that asks for memory: an allocation, or one that failed.
fn is_request(e: &TraceEntry) -> bool {
    matches!(e.action, Action::Alloc | Action::Oom)
}

/// Older snapshots: a block or segment entry belongs to a private pool when
/// its address lies in a final segment of that pool, at or after the
/// segment's last `segment_alloc` (before it, the range was another
/// segment, whose pool is not recorded).
fn pools_from_final_segments(
    entries: &[TraceEntry],
    segments: &[&Segment],
    index: &dyn Fn((i64, i64)) -> Option<PoolIndex>,
) -> Vec<Option<PoolIndex>> {
    let mut last_made: BTreeMap<u64, usize> = BTreeMap::new();
    for (k, e) in entries.iter().enumerate() {
        if matches!(e.action, Action::SegmentAlloc | Action::SegmentMap) {
            last_made.insert(e.addr.unwrap_or(0), k);
        }
    }
    // base → (end, pool, first entry of the final incarnation)
    let owned: BTreeMap<u64, (u64, PoolIndex, usize)> = segments
        .iter()
        .filter_map(|s| {
            let p = index(s.pool_id)?;
            let from = last_made.get(&s.address).copied().unwrap_or(0);
            Some((s.address, (s.address + s.total_size, p, from)))
        })
        .collect();
    entries
        .iter()
        .enumerate()
        .map(|(k, e)| {
            let a = e.addr?;
            let (_, &(end, p, from)) = owned.range(..=a).next_back()?;
            (a < end && k >= from).then_some(p)
        })
        .collect()
}

/// The private pools' segments that existed at the first entry: final
/// segments no entry allocates, and (from 2.12, where entries tell the
/// pool) segments the trace frees before it allocates them.
fn segments_at_start(
    entries: &[TraceEntry],
    segments: &[&Segment],
    entry_pool: &[Option<PoolIndex>],
    index: &dyn Fn((i64, i64)) -> Option<PoolIndex>,
) -> BTreeMap<u64, (u64, PoolIndex)> {
    let mut made: HashSet<u64> = HashSet::new();
    let mut out = BTreeMap::new();
    for (k, e) in entries.iter().enumerate() {
        let a = e.addr.unwrap_or(0);
        match e.action {
            Action::SegmentAlloc | Action::SegmentMap => {
                made.insert(a);
            }
            Action::SegmentFree | Action::SegmentUnmap if !made.contains(&a) => {
                if let Some(p) = entry_pool.get(k).copied().flatten() {
                    out.entry(a).or_insert((a + e.size, p));
                }
                made.insert(a);
            }
            _ => {}
        }
    }
    for s in segments {
        if let Some(p) = index(s.pool_id) {
            if !made.contains(&s.address) {
                out.entry(s.address)
                    .or_insert((s.address + s.total_size, p));
            }
        }
    }
    out
}

/// How requests reach a pool during a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// A capture: the requests of one stream.
    Stream(u64),
    /// A `use_mem_pool` context: every request of the thread.
    Thread,
}

/// The last request of every run (see the module documentation).
fn run_ends(
    entries: &[TraceEntry],
    entry_pool: &[Option<PoolIndex>],
    decls: &[PoolDecl],
) -> HashSet<usize> {
    let mut ends = HashSet::new();
    // (pool, route, last request of the run)
    let mut open: Option<(PoolIndex, Route, usize)> = None;
    for (k, e) in entries.iter().enumerate() {
        if !is_request(e) {
            continue;
        }
        let want = entry_pool.get(k).copied().flatten().map(|p| {
            let thread = decls.get(p as usize).is_some_and(|d| d.kind.is_mempool());
            (
                p,
                if thread {
                    Route::Thread
                } else {
                    Route::Stream(e.stream)
                },
            )
        });
        match (open, want) {
            (Some((p, r, _)), Some(w)) if (p, r) == w => open = Some((p, r, k)),
            (Some((_, _, last)), Some((p, r))) => {
                ends.insert(last);
                open = Some((p, r, k));
            }
            (None, Some((p, r))) => open = Some((p, r, k)),
            (Some((_, r, last)), None) => {
                // A default-pool request ends the run it would have joined.
                if r == Route::Thread || r == Route::Stream(e.stream) {
                    ends.insert(last);
                    open = None;
                }
            }
            (None, None) => {}
        }
    }
    if let Some((_, _, last)) = open {
        ends.insert(last);
    }
    ends
}
