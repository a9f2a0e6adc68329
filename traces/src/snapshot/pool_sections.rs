//! The pool events the walk writes for a snapshot with private pools
//! ([`PoolPlan`] says which request went where): captures and
//! `use_mem_pool` contexts around each run, and the releases that must
//! have come before a pool's segments went back to the device.
//!
//! The replay holds a pool as PyTorch does (`use_count`): once for a pool
//! that held segments at the first entry, once more per capture into it,
//! once for a MemPool object; a `use_mem_pool` context holds it while open.

use crate::model::{Event, StreamIndex};
use crate::pools::PoolIndex;
use crate::snapshot::bursts::is_release;
use crate::snapshot::model::{Action, TraceEntry};
use crate::snapshot::pool_plan::{PoolEvidence, PoolPlan};

/// The walk's pool state.
pub(super) struct PoolSections {
    /// Which request went where.
    pub plan: PoolPlan,
    /// The pool whose section is open.
    open: Option<PoolIndex>,
    /// How often the replay holds each pool.
    use_count: Vec<u32>,
    /// MemPools released for the current release burst, with the index of
    /// the event that gives their segments back.
    burst_owner: Vec<(PoolIndex, u32)>,
    sections: u64,
    releases: u64,
}

impl PoolSections {
    /// The state at the first entry.
    pub(super) fn new(plan: PoolPlan) -> PoolSections {
        let use_count = plan.held_at_start.iter().map(|&h| u32::from(h)).collect();
        PoolSections {
            plan,
            open: None,
            use_count,
            burst_owner: Vec::new(),
            sections: 0,
            releases: 0,
        }
    }

    fn is_mempool(&self, p: PoolIndex) -> bool {
        self.plan.decl(p).is_some_and(|d| d.kind.is_mempool())
    }

    /// How often the replay holds pool `p`.
    fn held(&self, p: PoolIndex) -> u32 {
        self.use_count.get(p as usize).copied().unwrap_or(0)
    }

    fn set_held(&mut self, p: PoolIndex, n: u32) {
        if let Some(c) = self.use_count.get_mut(p as usize) {
            *c = n;
        }
    }

    /// Opens the section of request entry `k` (on `stream`) unless it is
    /// open; nothing for a default-pool request.
    pub(super) fn enter(&mut self, k: usize, stream: StreamIndex, events: &mut Vec<Event>) {
        let Some(pool) = self.plan.pool_of_entry(k) else {
            return;
        };
        if self.open == Some(pool) {
            return;
        }
        self.close(events);
        if self.is_mempool(pool) {
            if self.held(pool) == 0 {
                events.push(Event::PoolCreate { pool });
                self.set_held(pool, 1);
            }
            events.push(Event::PoolEnter { pool });
        } else {
            events.push(Event::CaptureBegin { pool, stream });
            self.set_held(pool, self.held(pool) + 1);
        }
        self.open = Some(pool);
        self.sections += 1;
    }

    /// The request that follows entry `k` (the allocation a new segment,
    /// or a release-and-retry, is for), with its raw stream, when it goes
    /// to a private pool: its section must open before the segment events,
    /// which belong to that request's event.
    pub(super) fn next_pool_request(
        &self,
        entries: &[TraceEntry],
        k: usize,
    ) -> Option<(usize, u64)> {
        self.plan.evidence?;
        let (j, e) = entries
            .iter()
            .enumerate()
            .skip(k + 1)
            .find(|(_, e)| !matches!(e.action, Action::SegmentAlloc | Action::SegmentMap))?;
        let pool = self.plan.pool_of_entry(j)?;
        (matches!(e.action, Action::Alloc | Action::Oom) && self.open != Some(pool))
            .then_some((j, e.stream))
    }

    /// After request entry `k`: closes its section when its run ends.
    pub(super) fn after_request(&mut self, k: usize, events: &mut Vec<Event>) {
        if self.open.is_some() && self.plan.run_ends_at(k) {
            self.close(events);
        }
    }

    fn close(&mut self, events: &mut Vec<Event>) {
        if let Some(pool) = self.open.take() {
            if self.is_mempool(pool) {
                events.push(Event::PoolExit { pool });
            } else {
                events.push(Event::CaptureEnd { pool });
            }
        }
    }

    /// At the first entry `k` of a release burst: releases every pool the
    /// replay still holds whose segments the burst gives back. Returns
    /// `true` when every segment of the burst is a MemPool's released here
    /// (the burst is those MemPools' deletion, no `empty_cache()`).
    pub(super) fn release_for_burst(
        &mut self,
        entries: &[TraceEntry],
        k: usize,
        events: &mut Vec<Event>,
    ) -> bool {
        self.burst_owner.clear();
        if self.plan.evidence.is_none() {
            return false;
        }
        let mut all_mempools = true;
        let burst = entries
            .iter()
            .enumerate()
            .skip(k)
            .take_while(|(_, e)| is_release(&e.action));
        for (j, _) in burst {
            let Some(pool) = self.plan.pool_of_entry(j) else {
                all_mempools = false;
                continue;
            };
            if self.burst_owner.iter().any(|&(p, _)| p == pool) {
                continue;
            }
            let held = self.held(pool);
            if held == 0 {
                all_mempools = false;
                continue;
            }
            if self.open == Some(pool) {
                self.close(events);
            }
            if self.is_mempool(pool) {
                // `~MemPool`: releasePool, then emptyCache(id).
                events.push(Event::PoolRelease { pool });
                self.burst_owner.push((pool, (events.len() - 1) as u32));
                self.releases += 1;
            } else {
                for _ in 0..held {
                    events.push(Event::PoolRelease { pool });
                }
                self.releases += u64::from(held);
                all_mempools = false;
            }
            self.set_held(pool, 0);
        }
        all_mempools && !self.burst_owner.is_empty()
    }

    /// The event that gives back the segment of release entry `k` when its
    /// pool is a MemPool released for this burst.
    pub(super) fn owner_of(&self, k: usize) -> Option<u32> {
        let pool = self.plan.pool_of_entry(k)?;
        self.burst_owner
            .iter()
            .find(|&&(p, _)| p == pool)
            .map(|&(_, i)| i)
    }

    /// Closes what is open after the last entry.
    pub(super) fn finish(&mut self, events: &mut Vec<Event>) {
        self.close(events);
    }

    /// What the trace's notes say about its pools.
    pub(super) fn note(&self) -> Option<String> {
        let evidence = self.plan.evidence?;
        let pools: Vec<String> = self
            .plan
            .decls
            .iter()
            .map(|d| format!("({},{}) {}", d.id.0, d.id.1, d.kind.name()))
            .collect();
        let from = match evidence {
            PoolEvidence::EntryPoolIds => "each entry's pool_id",
            PoolEvidence::FinalSegments => {
                "the final segments' segment_pool_id (this release records no pool per entry: requests in segments freed before the dump are taken for the default pool's)"
            }
        };
        Some(format!(
            "private pools: {} ({}), read from {from}; a pool used from the default stream is taken for a MemPool (no use_on_oom, no no_split: not recorded), any other for a CUDA graph's; {} capture/use_mem_pool section(s) and {} pool release(s) re-created around the requests and the releases they explain",
            pools.len(),
            pools.join(", "),
            self.sections,
            self.releases
        ))
    }
}
