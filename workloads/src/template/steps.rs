//! Step repetition (`--steps`): the last recorded training or denoising
//! step, and how the allocations one step leaves to the next pair up so
//! that it can be repeated.

use crate::GenError;
use vramlab_traces::advice::OptionName;

use crate::opt::WorkloadOpt;

use super::{TEvent, Template};

/// How `instantiate` repeats the last recorded step.
pub(super) struct Repeat {
    /// First event of the last recorded step.
    pub(super) start: usize,
    /// Its end (exclusive).
    pub(super) end: usize,
    /// Repetitions beyond the recorded ones.
    pub(super) extra: u32,
    /// Carry pairs: (allocation the step frees that an earlier step made,
    /// the one this step makes for a later phase); see `carry_pairs`.
    pub(super) pairs: Vec<(u32, u32)>,
    /// Per allocation: made before the steps and freed by the last one.
    pub(super) once: Vec<bool>,
    /// Allocations the last step makes that outlive the steps without a
    /// counterpart it frees from the step before: they accumulate (a list
    /// that grows each step, freed at the end), one more per repetition.
    pub(super) accumulated: Vec<u32>,
}

/// (carry pairs, allocations made before the first step that the last one
/// frees, accumulating allocations); see [`Template::carry_pairs`].
type CarryPairs = (Vec<(u32, u32)>, Vec<bool>, Vec<u32>);

/// `N` of a phase label `step N…` or `… step N`.
pub(super) fn step_index(label: &str) -> Option<u32> {
    let mut words = label.split_whitespace();
    while let Some(w) = words.next() {
        if w == "step" {
            let n = words.next()?.trim_end_matches(':');
            return n.parse().ok();
        }
    }
    None
}

impl Template {
    /// How to repeat the last recorded step for `steps` steps in all
    /// (`None`: no repetition, as when `steps` is what was recorded);
    /// refuses fewer steps than recorded, and workloads recorded with
    /// fewer than two.
    pub(super) fn plan_repeat(
        &self,
        steps: Option<u32>,
        present: &[bool],
        ev_present: &[bool],
        sizes: &[u64],
    ) -> Result<Option<Repeat>, GenError> {
        let Some(want) = steps else {
            return Ok(None);
        };
        let Some((start, end, recorded, first)) = self.step_block() else {
            return Err(self.request_error(format!(
                "{}: this workload was not recorded with repeated steps",
                WorkloadOpt::Steps.bare()
            )));
        };
        if want < recorded {
            return Err(self.request_error(format!(
                "{}: recorded with {recorded} steps (the first differs: optimizer state, warm-up); ask for {recorded} or more",
                WorkloadOpt::Steps.bare()
            )));
        }
        if recorded < 2 {
            return Err(self.request_error(format!(
                "{}: needs at least two recorded steps",
                WorkloadOpt::Steps.bare()
            )));
        }
        if want > recorded {
            let (pairs, once, accumulated) =
                self.carry_pairs(start, end, first, present, ev_present, sizes)?;
            return Ok(Some(Repeat {
                start,
                end,
                extra: want - recorded,
                pairs,
                once,
                accumulated,
            }));
        }
        Ok(None)
    }

    /// Event range of the last recorded step.
    /// (start of the last step, its end, steps recorded, start of the first step).
    fn step_block(&self) -> Option<(usize, usize, u32, usize)> {
        let last = self.recorded_steps()? - 1;
        let first = self
            .phases
            .iter()
            .find(|(_, l)| step_index(l).is_some())
            .map(|(e, _)| *e)?;
        let mut block = self
            .phases
            .iter()
            .skip_while(|(_, l)| step_index(l) != Some(last));
        let &(start, _) = block.next()?;
        let end = block
            .find(|(_, l)| step_index(l) != Some(last))
            .map_or(self.events.len(), |(e, _)| *e);
        Some((start, end, last + 1, first))
    }

    /// Pairs each allocation a step frees but an earlier step made with the
    /// one this step makes and a later phase frees.
    /// Also returns, per allocation, whether it was made before the first
    /// step and is freed in the last one (it is freed once, at the end), and
    /// the allocations the step leaves to later phases beyond the pairs
    /// (they accumulate).
    // Indexing: `born`, `died`, `once`, and `present` and `sizes` (which
    // `instantiate` made from `allocs`), have one entry per template
    // allocation; `t` runs over those, and every allocation an event names
    // is one (T1), as are those in `carried_in` and `carried_out`. `used`
    // is as long as `carried_out`, and `k` an index into both.
    #[allow(clippy::indexing_slicing)]
    fn carry_pairs(
        &self,
        start: usize,
        end: usize,
        first: usize,
        present: &[bool],
        ev_present: &[bool],
        sizes: &[u64],
    ) -> Result<CarryPairs, GenError> {
        let mut born = vec![usize::MAX; self.allocs.len()];
        let mut died = vec![usize::MAX; self.allocs.len()];
        for (n, (ev, &on)) in self.events.iter().zip(ev_present).enumerate() {
            if !on {
                continue;
            }
            match *ev {
                TEvent::Alloc(t) => born[t as usize] = n,
                TEvent::Free(t) | TEvent::FreeCompleted(t) => died[t as usize] = n,
                _ => {}
            }
        }
        let live = |t: usize| present[t];
        let mut once = vec![false; self.allocs.len()];
        let mut carried_in: Vec<(usize, u32)> = Vec::new();
        for t in 0..self.allocs.len() {
            if live(t) && born[t] < start && died[t] >= start && died[t] < end {
                if born[t] < first {
                    once[t] = true;
                } else {
                    carried_in.push((died[t], t as u32));
                }
            }
        }
        carried_in.sort_unstable();
        let carried_out: Vec<u32> = (0..self.allocs.len())
            .filter(|&t| {
                live(t)
                    && born[t] >= start
                    && born[t] < end
                    && died[t] >= end
                    && died[t] != usize::MAX
            })
            .map(|t| t as u32)
            .collect();
        if carried_in.len() > carried_out.len() {
            return Err(GenError::Request(format!(
                "{}: {}: the last recorded step frees {} allocations of earlier steps but leaves {} to later ones; it cannot be repeated",
                self.name,
                WorkloadOpt::Steps.bare(),
                carried_in.len(),
                carried_out.len()
            )));
        }
        let mut used = vec![false; carried_out.len()];
        let mut pairs = Vec::with_capacity(carried_in.len());
        for &(_, c) in &carried_in {
            let cf = &self.allocs[c as usize].size;
            let k = (0..carried_out.len())
                .find(|&k| !used[k] && self.allocs[carried_out[k] as usize].size == *cf)
                .or_else(|| {
                    (0..carried_out.len())
                        .find(|&k| !used[k] && sizes[carried_out[k] as usize] == sizes[c as usize])
                })
                .ok_or_else(|| {
                    GenError::Request(format!(
                        "{}: {}: an allocation of {} bytes carried into the last step has no counterpart it leaves to the next",
                        self.name,
                        WorkloadOpt::Steps.bare(),
                        sizes[c as usize]
                    ))
                })?;
            used[k] = true;
            pairs.push((c, carried_out[k]));
        }
        let accumulated = carried_out
            .iter()
            .zip(&used)
            .filter(|(_, u)| !**u)
            .map(|(&t, _)| t)
            .collect();
        Ok((pairs, once, accumulated))
    }
}
