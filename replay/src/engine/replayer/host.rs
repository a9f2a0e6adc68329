//! The pinned host allocator's side of a replay: a trace's `host_*` events
//! go through PyTorch's host allocator ([`HostAllocator`], under the
//! release and `pinned_*` settings of the replay), beside the device's
//! caching allocator and independent of it, as in PyTorch.
//!
//! A block freed after streams used it (`HostFreeRequested`) records one
//! event; the trace's `HostFreeCompleted` says it has completed, and the
//! allocator takes the block back when it next processes events (its next
//! request or `empty_cache`), oldest first, as PyTorch does. Host requests
//! are rare next to device ones: the table of live host blocks is a hash
//! map that a device-only trace never touches.

use rustc_hash::FxHashMap;
use vramlab_allocator::host::{HostAllocator, HostBlockId, HostEventId, HostRules};

use vramlab_traces::Event;

use super::{Replayer, trace_err};
use crate::engine::ReplayError;
use crate::engine::run::{HostDecision, HostOomEvent, HostSummary};

/// A host allocation that is live, or freed and waiting for its event.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// `None`: a 0-byte request (PyTorch's null pointer).
    block: Option<HostBlockId>,
    size: u64,
    /// The event its free recorded, until the trace says it completed.
    pending: Option<HostEventId>,
}

/// The host side of one replay.
pub(super) struct HostSide {
    alloc: HostAllocator,
    /// Bytes the process may pin (`None`: no limit).
    limit: Option<u64>,
    live: FxHashMap<u32, Held>,
    /// Completion of each event recorded so far, by its id.
    done: Vec<bool>,
    requested: u64,
    summary: HostSummary,
    oom: Option<HostOomEvent>,
    /// What each event did to the host allocator's blocks, when kept
    /// (fidelity: compared with the recording's `host_traces`).
    decisions: Option<Vec<HostDecision>>,
}

/// Why a host event cannot be replayed.
pub(super) enum HostError {
    /// The trace is inconsistent (the message says how).
    Trace(String),
}

impl HostSide {
    /// The host side of a replay under `rules`, pinning at most `limit`
    /// bytes; `decisions`: keep what each event did.
    pub(super) fn new(rules: HostRules, limit: Option<u64>, decisions: bool) -> Self {
        HostSide {
            alloc: HostAllocator::new(rules),
            limit,
            live: FxHashMap::default(),
            done: Vec::new(),
            requested: 0,
            summary: HostSummary::default(),
            oom: None,
            decisions: decisions.then(Vec::new),
        }
    }

    /// A request of `size` bytes for `id` at event `ei`; `Ok(true)` when
    /// it ran out of host memory.
    /// `number`: the allocation's id in the trace (`id` is renamed when a
    /// streamed read recycles ids).
    pub(super) fn alloc(
        &mut self,
        ei: u64,
        id: u32,
        number: u32,
        size: u64,
    ) -> Result<bool, HostError> {
        if self.live.contains_key(&id) {
            return Err(HostError::Trace(format!(
                "host_alloc of id {id}, which is live"
            )));
        }
        self.summary.host_allocs += 1;
        let before = self.blocks_made();
        let done = &self.done;
        let completed = |e: HostEventId| done.get(e.0 as usize).copied().unwrap_or(false);
        match self.alloc.try_allocate(size, &completed, self.limit) {
            Ok(block) => {
                self.live.insert(
                    id,
                    Held {
                        block,
                        size,
                        pending: None,
                    },
                );
                self.requested = self.requested.saturating_add(size);
                self.note(ei, before);
                Ok(false)
            }
            Err(asked) => {
                // Its frees find nothing to give back (a replay that goes
                // on past the OOM skips them).
                self.live.insert(
                    id,
                    Held {
                        block: None,
                        size: 0,
                        pending: None,
                    },
                );
                if self.oom.is_none() {
                    self.oom = Some(HostOomEvent {
                        event_index: ei,
                        alloc_id: number,
                        requested_bytes: size,
                        block_bytes: self.alloc.rules().block_size(size),
                        asked_bytes: asked,
                        reserved_bytes: self.reserved(),
                        limit_bytes: self.limit.unwrap_or(u64::MAX),
                    });
                }
                self.note(ei, before);
                Ok(true)
            }
        }
    }

    /// A free of `id`: at once (`deferred` false), or after an event.
    pub(super) fn free(&mut self, ei: u64, id: u32, deferred: bool) -> Result<(), HostError> {
        let what = if deferred {
            "host_free_requested"
        } else {
            "host_free"
        };
        if self.live.get(&id).is_none_or(|h| h.pending.is_some()) {
            return Err(HostError::Trace(format!(
                "{what} of id {id}, which {}",
                self.describe(id)
            )));
        }
        let before = self.blocks_made();
        let Some(held) = self.live.get_mut(&id) else {
            return Ok(());
        };
        self.requested = self.requested.saturating_sub(held.size);
        let Some(block) = held.block else {
            // A 0-byte request: no block, nothing to wait for.
            if deferred {
                held.pending = Some(HostEventId(u64::MAX));
            } else {
                self.live.remove(&id);
            }
            return Ok(());
        };
        if deferred {
            self.alloc.record_stream(block, 1);
        }
        let events = self.alloc.free(block);
        match events.last() {
            Some(&e) => {
                held.pending = Some(e);
                if self.done.len() <= e.0 as usize {
                    self.done.resize(e.0 as usize + 1, false);
                }
            }
            None => {
                self.live.remove(&id);
            }
        }
        self.note(ei, before);
        Ok(())
    }

    /// The events of `id`'s requested free completed.
    pub(super) fn free_completed(&mut self, id: u32) -> Result<(), HostError> {
        let Some(e) = self.live.get(&id).and_then(|h| h.pending) else {
            return Err(HostError::Trace(format!(
                "host_free_completed of id {id}, which {} (no host_free_requested before it)",
                self.describe(id)
            )));
        };
        self.live.remove(&id);
        if let Some(d) = self.done.get_mut(e.0 as usize) {
            *d = true;
        }
        Ok(())
    }

    /// `torch._C._host_emptyCache()`.
    pub(super) fn empty_cache(&mut self, ei: u64) {
        let before = self.blocks_made();
        let done = &self.done;
        self.alloc
            .empty_cache(&|e| done.get(e.0 as usize).copied().unwrap_or(false));
        self.note(ei, before);
    }

    /// Host requests replayed so far.
    pub(super) fn allocs(&self) -> u64 {
        self.summary.host_allocs
    }

    /// The figures, the first host OOM and the decisions kept.
    pub(super) fn finish(
        mut self,
        ranks_per_node: u32,
    ) -> (HostSummary, Option<HostOomEvent>, Vec<HostDecision>) {
        let st = self.alloc.stats();
        let peak = st.reserved_bytes.peak.max(0) as u64;
        self.summary.host_peak_reserved_bytes = peak;
        self.summary.ranks_per_node = ranks_per_node.max(1);
        self.summary.node_peak_reserved_bytes =
            peak.saturating_mul(u64::from(ranks_per_node.max(1)));
        self.summary.host_final_reserved_bytes = st.reserved_bytes.current.max(0) as u64;
        self.summary.host_num_allocs = st.allocations.allocated.max(0) as u64;
        self.summary.host_cuda_allocs = st.host_alloc_calls;
        self.summary.host_peak_block_bytes = st.allocated_bytes.peak.max(0) as u64;
        self.summary.host_final_block_bytes = st.allocated_bytes.current.max(0) as u64;
        (self.summary, self.oom, self.decisions.unwrap_or_default())
    }

    fn reserved(&self) -> u64 {
        self.alloc.stats().reserved_bytes.current.max(0) as u64
    }

    /// Blocks and their bytes made and destroyed so far.
    fn blocks_made(&self) -> [i64; 4] {
        let st = self.alloc.stats();
        let (a, b) = (&st.allocations, &st.allocated_bytes);
        [a.allocated, a.freed, b.allocated, b.freed]
    }

    /// Peaks after event `ei`, and what it did to the blocks (made and
    /// destroyed since `before`).
    fn note(&mut self, ei: u64, before: [i64; 4]) {
        let s = &mut self.summary;
        s.host_peak_requested_bytes = s.host_peak_requested_bytes.max(self.requested);
        s.host_peak_allocated_bytes = s.host_peak_allocated_bytes.max(self.alloc.in_use_bytes());
        let now = self.blocks_made();
        if let Some(d) = &mut self.decisions {
            let [a, b, c, e] = now;
            let [a0, b0, c0, e0] = before;
            if a > a0 || b > b0 {
                d.push(HostDecision {
                    event_index: ei,
                    blocks_made: (a - a0) as u32,
                    blocks_destroyed: (b - b0) as u32,
                    bytes_made: (c - c0) as u64,
                    bytes_destroyed: (e - e0) as u64,
                });
            }
        }
    }

    fn describe(&self, id: u32) -> &'static str {
        match self.live.get(&id) {
            Some(h) if h.pending.is_some() => "has a free pending",
            Some(_) => "is live",
            None => "is not a live host allocation",
        }
    }
}

impl Replayer<'_> {
    /// The pinned host allocator's rules, where the options do not give
    /// them (a scenario's own settings).
    pub(in crate::engine) fn set_host_rules(
        &mut self,
        rules: Option<vramlab_allocator::host::HostRules>,
    ) {
        self.host_rules = rules;
    }

    /// A request to the pinned host allocator; `Ok(true)` when it ran out
    /// of host memory and the replay must stop.
    pub(super) fn host_event(&mut self, ei: u64, ev: &Event) -> Result<bool, ReplayError> {
        let (trace, opts) = (self.trace, self.opts);
        let given = opts.host_rules.as_ref().or(self.host_rules.as_ref());
        let side = self.host.get_or_insert_with(|| {
            let rules = given.cloned().unwrap_or_else(|| {
                let release = trace
                    .header
                    .releases()
                    .map(|r| r.rules())
                    .unwrap_or_default();
                vramlab_allocator::host::HostRules::of(&vramlab_allocator::AllocConf::new(release))
            });
            HostSide::new(rules, opts.host_ram, opts.place_at_expected)
        });
        let r = match *ev {
            Event::HostAlloc { id, size } => {
                let number = if self.recycled {
                    // Host allocations take allocation numbers too.
                    let n = self.numbers.get(self.next_number).copied();
                    self.next_number += 1;
                    let seen = self.allocs + side.allocs();
                    n.unwrap_or_else(|| u32::try_from(seen).unwrap_or(u32::MAX))
                } else {
                    id
                };
                side.alloc(ei, id, number, size)
                    .map(|oom| oom && opts.stop_at_oom)
            }
            Event::HostFree { id } => side.free(ei, id, false).map(|()| false),
            Event::HostFreeRequested { id } => side.free(ei, id, true).map(|()| false),
            Event::HostFreeCompleted { id } => side.free_completed(id).map(|()| false),
            _ => {
                side.empty_cache(ei);
                Ok(false)
            }
        };
        r.map_err(|HostError::Trace(m)| trace_err(ei, m))
    }
}
