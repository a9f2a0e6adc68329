//! The optimal plan of a small trace, by branch and bound over placements
//! in the order of their offsets (MiniMalloc's canonical form): any plan
//! can be pushed down until every buffer rests at 0 or on a buffer it
//! conflicts with, and then, taken in offset order, each buffer sits at
//! the top of the highest conflicting buffer below it. The search builds
//! plans in that order — at each step, any buffer not yet placed goes at
//! the top of the highest placed buffer it conflicts with, never below the
//! last one placed — so it meets an optimal plan; branches whose top
//! reaches the best plan found are cut, and the search ends at once when a
//! plan reaches the lower bound. Within its budget of nodes the answer is
//! proved optimal.

use serde::Serialize;

use super::layout::{Buffer, Placement, greedy, lower_bound};

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExactOutcome {
    /// The best plan found (at least as good as greedy's).
    pub placement: Placement,
    /// It is proved optimal: the search finished within its budget, or the
    /// plan reaches the lower bound.
    pub proved: bool,
    /// The search tried every canonical plan within its budget.
    pub finished: bool,
    /// Nodes visited.
    pub nodes: u64,
}

struct Search<'a> {
    bufs: &'a [Buffer],
    /// Each buffer's conflicting buffers.
    adj: Vec<Vec<usize>>,
    bound: u64,
    best: Placement,
    nodes: u64,
    budget: u64,
    /// Each buffer's offset once placed.
    offsets: Vec<Option<u64>>,
    /// Each buffer's canonical offset: the top of the highest placed
    /// buffer it conflicts with.
    floors: Vec<u64>,
}

impl Search<'_> {
    /// Extends the partial plan (`placed` buffers, the last at `floor`,
    /// index `last`, top `top`); `false` when the budget ran out.
    fn go(&mut self, placed: usize, floor: u64, last: usize, top: u64) -> bool {
        if self.best.peak <= self.bound {
            return true;
        }
        self.nodes += 1;
        if self.nodes > self.budget {
            return false;
        }
        if placed == self.bufs.len() {
            if top < self.best.peak {
                self.best = Placement {
                    offsets: self.offsets.iter().map(|o| o.unwrap_or(0)).collect(),
                    peak: top,
                };
            }
            return true;
        }
        // Each unplaced buffer at its canonical offset, lowest first.
        let mut next: Vec<(u64, usize)> = Vec::new();
        for (i, b) in self.bufs.iter().enumerate() {
            if self.offsets.get(i).copied().flatten().is_some() {
                continue;
            }
            let at = self.floors.get(i).copied().unwrap_or(0);
            // Offset order, ties by index: each plan is built once.
            if at < floor || (at == floor && placed > 0 && i < last) {
                continue;
            }
            if top.max(at + b.size) >= self.best.peak {
                continue;
            }
            next.push((at, i));
        }
        next.sort_unstable();
        for (at, i) in next {
            let size = self.bufs.get(i).map_or(0, |b| b.size);
            if let Some(o) = self.offsets.get_mut(i) {
                *o = Some(at);
            }
            // Raise the floors of the buffers it conflicts with.
            let mut raised: Vec<(usize, u64)> = Vec::new();
            if let Some(adj) = self.adj.get(i) {
                for &j in adj {
                    if let Some(f) = self.floors.get_mut(j) {
                        if *f < at + size {
                            raised.push((j, *f));
                            *f = at + size;
                        }
                    }
                }
            }
            let done = self.go(placed + 1, at, i, top.max(at + size));
            for (j, f) in raised {
                if let Some(x) = self.floors.get_mut(j) {
                    *x = f;
                }
            }
            if let Some(o) = self.offsets.get_mut(i) {
                *o = None;
            }
            if !done {
                return false;
            }
            if self.best.peak <= self.bound {
                return true;
            }
        }
        true
    }
}

/// Each buffer's conflicting buffers (a sweep over starts).
fn conflicts(bufs: &[Buffer]) -> Vec<Vec<usize>> {
    let mut by_start: Vec<usize> = (0..bufs.len()).collect();
    by_start.sort_by_key(|&i| bufs.get(i).map_or(0, |b| b.start));
    let mut adj = vec![Vec::new(); bufs.len()];
    let mut live: Vec<usize> = Vec::new();
    for &i in &by_start {
        let Some(b) = bufs.get(i) else { continue };
        live.retain(|&j| bufs.get(j).is_some_and(|p| p.end > b.start));
        for &j in &live {
            if let Some(a) = adj.get_mut(i) {
                a.push(j);
            }
            if let Some(a) = adj.get_mut(j) {
                a.push(i);
            }
        }
        live.push(i);
    }
    adj
}

/// The best plan of `bufs` within `budget` search nodes.
pub fn exact(bufs: &[Buffer], budget: u64) -> ExactOutcome {
    let bound = lower_bound(bufs);
    let best = greedy(bufs);
    if best.peak <= bound {
        return ExactOutcome {
            placement: best,
            proved: true,
            finished: true,
            nodes: 0,
        };
    }
    let mut s = Search {
        bufs,
        adj: conflicts(bufs),
        bound,
        best,
        nodes: 0,
        budget,
        offsets: vec![None; bufs.len()],
        floors: vec![0; bufs.len()],
    };
    let finished = s.go(0, 0, 0, 0);
    let proved = finished || s.best.peak <= bound;
    ExactOutcome {
        placement: s.best,
        proved,
        finished,
        nodes: s.nodes,
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::check;
    use super::*;

    fn b(size: u64, start: u64, end: u64) -> Buffer {
        Buffer { size, start, end }
    }

    /// Every plan of a tiny instance, tried by brute force over offsets,
    /// is no better than the search's.
    fn brute(bufs: &[Buffer], cap: u64) -> u64 {
        fn rec(bufs: &[Buffer], k: usize, offs: &mut Vec<u64>, cap: u64, best: &mut u64) {
            let Some(b) = bufs.get(k) else {
                let top = bufs
                    .iter()
                    .zip(offs.iter())
                    .map(|(b, o)| o + b.size)
                    .max()
                    .unwrap_or(0);
                *best = (*best).min(top);
                return;
            };
            for o in 0..=cap.saturating_sub(b.size) {
                let ok = bufs
                    .iter()
                    .zip(offs.iter())
                    .all(|(p, &po)| !p.conflicts(b) || po >= o + b.size || po + p.size <= o);
                if ok {
                    offs.push(o);
                    rec(bufs, k + 1, offs, cap, best);
                    offs.pop();
                }
            }
        }
        let mut best = u64::MAX;
        rec(bufs, 0, &mut Vec::new(), cap, &mut best);
        best
    }

    #[test]
    fn the_search_equals_brute_force_on_small_instances() {
        // A fixed family of instances (a linear congruential sequence).
        let mut x = 7u64;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for _ in 0..40 {
            let n = 3 + next(4) as usize;
            let bufs: Vec<Buffer> = (0..n)
                .map(|_| {
                    let s = next(6);
                    b(1 + next(4), s, s + 1 + next(4))
                })
                .collect();
            let e = exact(&bufs, 1_000_000);
            check(&bufs, &e.placement).unwrap();
            assert!(e.proved && e.finished);
            assert_eq!(
                e.placement.peak,
                brute(&bufs, greedy(&bufs).peak),
                "{bufs:?}"
            );
        }
    }

    #[test]
    fn a_spent_budget_is_no_proof() {
        let bufs: Vec<Buffer> = (0..14).map(|i| b(1 + i % 5, i, i + 9)).collect();
        let e = exact(&bufs, 3);
        check(&bufs, &e.placement).unwrap();
        assert_eq!(
            e.proved,
            e.finished || e.placement.peak == lower_bound(&bufs)
        );
        assert!(e.nodes <= 4);
    }
}
