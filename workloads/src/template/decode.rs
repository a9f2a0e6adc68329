//! Decode length (`--new-tokens`): the last recorded decode step repeated
//! with every size one token further on.
//!
//! A generation workload records `new_tokens − 1` decode steps after the
//! prefill (phase `decode` up to the next phase). With a cache that grows
//! by concatenation, decode step `t` at prompt length `seq` makes exactly
//! the allocations of step `t − 1` at prompt length `seq + 1` (the cache,
//! the ids and the mask one token longer; everything else the same size).
//! So step `t + k` at `seq` is the last recorded step with every size
//! evaluated at `seq + k`. Before extending, the template is checked for
//! this: the decode phase splits into equal steps, the last two steps have
//! the same events (allocations, and frees of allocations made in the same
//! or the previous step at the same position), nothing a step makes
//! outlives the step after it, and every size of the last step equals the
//! size of its counterpart in the step before evaluated one token further.
//! A static cache (preallocated for prompt + new tokens) fails the last
//! check's premise and is refused.
//!
//! Fewer tokens than recorded (at least 3) stop the decode after step
//! `new_tokens − 1`: the steps from there to the last are checked to be the
//! same steps, and the teardown frees the kept step's allocations where it
//! freed the last one's.

use crate::GenError;
use vramlab_traces::advice::OptionName;

use crate::opt::WorkloadOpt;

use super::{Scaling, TEvent, Template};

/// How `instantiate` extends the decode.
pub(super) struct Decode {
    /// First event of the last recorded decode step.
    pub(super) start: usize,
    /// Its end (exclusive).
    pub(super) end: usize,
    /// Decode steps beyond the recorded ones.
    pub(super) extra: u64,
    /// (allocation the step frees that the step before made, its
    /// counterpart this step makes).
    pub(super) pairs: Vec<(u32, u32)>,
    /// The allocations the last step makes (their sizes move on by one
    /// token per repetition).
    pub(super) made: Vec<u32>,
    /// Fewer tokens than recorded: the events from `start` to `end` are
    /// left out, and `pairs` are (allocation of the last recorded step,
    /// its counterpart in the last step kept), so that the teardown frees
    /// the kept step's.
    pub(super) truncated: bool,
}

/// An event of a decode step, relative to the steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rel {
    Alloc,
    /// A free (kind 0 free, 1 requested, 2 completed) of the allocation
    /// made at this position of the same step (`false`) or of the step
    /// before (`true`).
    Free(u8, bool, usize),
    /// A free of an allocation made before the step before.
    Older,
    EmptyCache,
}

impl Template {
    /// New tokens recorded (`# param.new_tokens:`), for generation
    /// workloads.
    pub(crate) fn recorded_new_tokens(&self) -> Option<u64> {
        self.header.extra.get("param.new_tokens")?.parse().ok()
    }

    /// The decode phase: from the phase `decode` to the next phase.
    fn decode_phase(&self) -> Option<(usize, usize)> {
        let i = self.phases.iter().position(|(_, l)| l == "decode")?;
        let start = self.phases.get(i)?.0;
        let end = self
            .phases
            .get(i + 1)
            .map_or(self.events.len(), |(e, _)| *e);
        Some((start, end))
    }

    /// Splits the decode phase into its steps (the events that happen at
    /// this batch).
    // Indexing: `present`, `made_in` and `events` are indexed by template
    // allocations and events (T1); block indices are below `steps`.
    #[allow(clippy::indexing_slicing)]
    fn decode_blocks(
        &self,
        (ds, de): (usize, usize),
        steps: usize,
        present: &[bool],
        ev_present: &[bool],
    ) -> Result<Blocks, String> {
        let on =
            |i: usize| ev_present[i] && self.events[i].alloc().is_none_or(|a| present[a as usize]);
        let eff: Vec<usize> = (ds..de).filter(|&i| on(i)).collect();
        if eff.is_empty() || eff.len() % steps != 0 {
            return Err(format!(
                "the {} decode events do not split into {steps} equal steps",
                eff.len()
            ));
        }
        let len = eff.len() / steps;
        // Per allocation: (step, position among the step's allocations).
        let mut made_in = vec![None; self.allocs.len()];
        let mut made: Vec<Vec<u32>> = vec![Vec::new(); steps];
        for (n, &i) in eff.iter().enumerate() {
            if let TEvent::Alloc(a) = self.events[i] {
                let k = n / len;
                made_in[a as usize] = Some((k, made[k].len()));
                made[k].push(a);
            }
        }
        let rel = |k: usize| -> Vec<Rel> {
            eff[k * len..(k + 1) * len]
                .iter()
                .map(|&i| {
                    let ev = self.events[i];
                    let kind = match ev {
                        TEvent::Alloc(_) => return Rel::Alloc,
                        TEvent::EmptyCache => return Rel::EmptyCache,
                        TEvent::Free(_) => 0,
                        TEvent::FreeRequested(_) => 1,
                        TEvent::FreeCompleted(_) => 2,
                    };
                    match ev.alloc().and_then(|a| made_in[a as usize]) {
                        Some((j, p)) if j == k => Rel::Free(kind, false, p),
                        Some((j, p)) if j + 1 == k => Rel::Free(kind, true, p),
                        _ => Rel::Older,
                    }
                })
                .collect()
        };
        let rels = (0..steps).map(rel).collect();
        // Per allocation of a step: whether the step or the next frees it.
        let mut died = vec![false; self.allocs.len()];
        for &i in &eff {
            if let Some(a) = self.events[i].alloc() {
                died[a as usize] |= !matches!(self.events[i], TEvent::Alloc(_));
            }
        }
        Ok(Blocks {
            eff,
            len,
            made,
            rels,
            died,
        })
    }

    /// Plans the decode for `new_tokens` in all (`None`: as recorded):
    /// more than recorded extends it, fewer (at least 3) stops it early.
    // Indexing: block indices are below `steps`, positions below the
    // blocks' lengths, allocations below `allocs.len()` (T1).
    #[allow(clippy::indexing_slicing)]
    pub(super) fn plan_decode(
        &self,
        new_tokens: Option<u64>,
        batch: u64,
        x: i128,
        present: &[bool],
        ev_present: &[bool],
    ) -> Result<Option<Decode>, GenError> {
        let Some(want) = new_tokens else {
            return Ok(None);
        };
        let err = |m: String| self.request_error(format!("{}: {m}", WorkloadOpt::NewTokens.bare()));
        let (Some(recorded), Some(phase), Scaling::Seq) = (
            self.recorded_new_tokens(),
            self.decode_phase(),
            self.scaling,
        ) else {
            return Err(err("this workload has no recorded decode steps".into()));
        };
        if want == recorded {
            return Ok(None);
        }
        if want < 3 {
            return Err(err(format!(
                "at least 3 (two decode steps after the first token); recorded with {recorded}"
            )));
        }
        let steps = recorded.saturating_sub(1) as usize;
        if steps < 3 {
            return Err(err(format!(
                "needs at least three recorded decode steps (has {steps})"
            )));
        }
        let b = self
            .decode_blocks(phase, steps, present, ev_present)
            .map_err(err)?;
        let last = steps - 1;
        // The steps to keep, or the last two, are the same steps.
        let from = if want < recorded {
            (want as usize).saturating_sub(2).max(1)
        } else {
            last - 1
        };
        if b.rels[from..].iter().any(|r| *r != b.rels[last]) || b.rels[last].contains(&Rel::Older) {
            return Err(err(format!(
                "decode steps {}..{steps} differ; the decode cannot be {}",
                from + 1,
                if want < recorded {
                    "shortened"
                } else {
                    "extended"
                }
            )));
        }
        // Nothing a step makes outlives the next one.
        if b.made[last - 1].iter().any(|&a| !b.died[a as usize]) {
            return Err(err(
                "an allocation of each decode step outlives the next one; the decode cannot be changed".into(),
            ));
        }
        let (mk, pk) = (&b.made[last], &b.made[last - 1]);
        if want < recorded {
            // Stop after step `from`: what the teardown frees of the last
            // step is that step's.
            return Ok(Some(Decode {
                start: b.eff[(from + 1) * b.len],
                end: phase.1,
                extra: 0,
                pairs: mk
                    .iter()
                    .copied()
                    .zip(b.made[from].iter().copied())
                    .collect(),
                made: Vec::new(),
                truncated: true,
            }));
        }
        // Every size of the last step is its counterpart's one token on.
        for (&d, &c) in mk.iter().zip(pk) {
            let (now, next) = (
                self.allocs[d as usize].size.eval(batch, x),
                self.allocs[c as usize].size.eval(batch, x + 1),
            );
            if now != next {
                return Err(err(format!(
                    "an allocation of the last decode step ({now} bytes) is not the one of the step before one token on ({next} bytes): the cache does not grow by one token per step"
                )));
            }
        }
        let pairs = b.rels[last]
            .iter()
            .zip(&b.eff[last * b.len..])
            .filter_map(|(r, &i)| match (r, self.events[i].alloc()) {
                (Rel::Free(_, true, p), Some(c)) => Some((c, mk[*p])),
                _ => None,
            })
            .collect();
        Ok(Some(Decode {
            start: b.eff[last * b.len],
            end: phase.1,
            extra: want - recorded,
            pairs,
            made: mk.clone(),
            truncated: false,
        }))
    }
}

/// The decode phase split into its steps.
struct Blocks {
    /// The template events of the phase that happen at this batch.
    eff: Vec<usize>,
    /// Events per step.
    len: usize,
    /// Per step: the allocations it makes, in order.
    made: Vec<Vec<u32>>,
    /// Per step: its events relative to the steps.
    rels: Vec<Vec<Rel>>,
    /// Per allocation: freed within the decode phase.
    died: Vec<bool>,
}
