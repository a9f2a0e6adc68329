//! Per-item repetition: work a workload does once per item of the batch
//! (diffusers' VAE slicing decodes a batch one image at a time), at batch
//! sizes beyond the recorded ones.
//!
//! Recorded at batch 1 and 2, the phase (say `vae decode`) holds at batch 2
//! the first item's block, seen at both batches, and the second item's, seen
//! at batch 2 only, right after it. The second block is found as the
//! longest run of batch-2-only events that repeats the events just before
//! it (allocations, and frees of allocations made at the same position of
//! the block; nothing freed from before it) with the same sizes. At batch
//! `b` it is emitted `b − 1` times, every size that of the first item's
//! (one item each); what each block leaves behind (the item's result)
//! accumulates and is freed where the recorded second one is, newest first
//! (as a Python list releases its items).

use crate::GenError;
use vramlab_traces::advice::OptionName;

use crate::opt::WorkloadOpt;

use super::{Presence, TEvent, Template};

/// How `instantiate` repeats the per-item block.
pub(super) struct PerItem {
    /// First event of the second item's block.
    pub(super) start: usize,
    /// Its end (exclusive).
    pub(super) end: usize,
    /// Repetitions beyond the recorded one.
    pub(super) extra: u64,
    /// (allocation of the second block, its counterpart in the first).
    pub(super) like: Vec<(u32, u32)>,
    /// Allocations of the second block that outlive it.
    pub(super) accumulated: Vec<u32>,
}

/// An event of a block, relative to the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rel {
    Alloc,
    /// A free (kind: free, requested, completed) of the allocation made at
    /// this position of the block, or (`None`) of one made before it.
    Free(u8, Option<usize>),
    EmptyCache,
}

impl Template {
    /// The events of a block relative to it, and its allocations in order.
    fn block(&self, evs: &[usize]) -> (Vec<Rel>, Vec<u32>) {
        let mut made: Vec<u32> = Vec::new();
        let rel = evs
            .iter()
            .filter_map(|&i| self.events.get(i))
            .map(|&ev| {
                let kind = match ev {
                    TEvent::Alloc(a) => {
                        made.push(a);
                        return Rel::Alloc;
                    }
                    TEvent::EmptyCache => return Rel::EmptyCache,
                    TEvent::Free(_) => 0,
                    TEvent::FreeRequested(_) => 1,
                    TEvent::FreeCompleted(_) => 2,
                };
                let pos = ev.alloc().and_then(|a| made.iter().position(|&m| m == a));
                Rel::Free(kind, pos)
            })
            .collect();
        (rel, made)
    }

    /// Plans the repetition of phase `label`'s per-item block for `batch`
    /// (`None`: no repetition needed).
    // Indexing: `present`, `ev_present`, `presence` and `allocs` are indexed
    // by template events and allocations (T1, T2); `r` and `l` stay within
    // `eff`.
    #[allow(clippy::indexing_slicing)]
    pub(super) fn plan_per_item(
        &self,
        label: Option<&str>,
        batch: u64,
        x: i128,
        present: &[bool],
        ev_present: &[bool],
    ) -> Result<Option<PerItem>, GenError> {
        let (Some(label), Some(other)) = (label, self.other_batch) else {
            return Ok(None);
        };
        if batch <= other {
            return Ok(None);
        }
        let err =
            |m: &str| self.request_error(format!("{}: {m}", WorkloadOpt::Batch.with_number(batch)));
        let Some(p) = self.phases.iter().position(|(_, l)| l == label) else {
            return Err(err(&format!("no '{label}' phase to repeat per item")));
        };
        // The second item's block may end after the phase (its last events
        // have no counterpart at batch 1, so they follow the next mark):
        // searched up to the end of the next phase.
        let ps = self.phases[p].0;
        let pe = self
            .phases
            .get(p + 2)
            .map_or(self.events.len(), |(e, _)| *e);
        let eff: Vec<usize> = (ps..pe)
            .filter(|&i| {
                ev_present[i] && self.events[i].alloc().is_none_or(|a| present[a as usize])
            })
            .collect();
        let other_only = |i: usize| self.presence[i] == Presence::OtherBatchOnly;
        let Some(r) = eff.iter().position(|&i| other_only(i)) else {
            return Err(err(&format!(
                "the '{label}' phase has no events of the second item"
            )));
        };
        let run = eff[r..].iter().take_while(|&&i| other_only(i)).count();
        let size_at = |a: u32| self.allocs[a as usize].size.eval(other, x);
        // The longest block that repeats the one before it.
        let found = (1..=r.min(run)).rev().find_map(|l| {
            let (ra, ma) = self.block(&eff[r - l..r]);
            let (rb, mb) = self.block(&eff[r..r + l]);
            let same = ra == rb
                && !rb.iter().any(|e| matches!(e, Rel::Free(_, None)))
                && ma.iter().zip(&mb).all(|(&a, &b)| size_at(a) == size_at(b));
            same.then_some((l, ma, mb, rb))
        });
        let Some((l, ma, mb, rb)) = found else {
            return Err(err(&format!(
                "the '{label}' phase's second item does not repeat the first; it cannot be repeated per item"
            )));
        };
        let freed: Vec<usize> = rb
            .iter()
            .filter_map(|e| match e {
                Rel::Free(_, Some(p)) => Some(*p),
                _ => None,
            })
            .collect();
        let accumulated = mb
            .iter()
            .enumerate()
            .filter(|(p, _)| !freed.contains(p))
            .map(|(_, &a)| a)
            .collect();
        Ok(Some(PerItem {
            start: eff[r],
            end: eff[r + l - 1] + 1,
            extra: batch - other,
            like: mb.into_iter().zip(ma).collect(),
            accumulated,
        }))
    }
}
