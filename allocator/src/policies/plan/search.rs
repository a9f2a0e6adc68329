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

/// One partial plan on the search's stack: the buffers that may go next
/// (at their canonical offsets, lowest first), the one being tried, and
/// the floors it raised, to be put back.
struct Frame {
    next: Vec<(u64, usize)>,
    pos: usize,
    /// The top of the partial plan.
    top: u64,
    /// The buffer placed for the branch being explored, and each floor it
    /// raised with its value before.
    tried: Option<(usize, Vec<(usize, u64)>)>,
}

/// What entering a partial plan gives.
enum Entered {
    /// The branch is settled: `false` when the budget ran out.
    Settled(bool),
    /// The buffers to try next.
    Branch(Vec<(u64, usize)>),
}

impl Search<'_> {
    /// Visits the partial plan of `placed` buffers, the last at `floor`,
    /// index `last`, top `top`.
    fn enter(&mut self, placed: usize, floor: u64, last: usize, top: u64) -> Entered {
        if self.best.peak <= self.bound {
            return Entered::Settled(true);
        }
        self.nodes += 1;
        if self.nodes > self.budget {
            return Entered::Settled(false);
        }
        if placed == self.bufs.len() {
            if top < self.best.peak {
                self.best = Placement {
                    offsets: self.offsets.iter().map(|o| o.unwrap_or(0)).collect(),
                    peak: top,
                };
            }
            return Entered::Settled(true);
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
        Entered::Branch(next)
    }

    /// Places buffer `i` at `at`, raising the floors of the buffers it
    /// conflicts with; returns the floors raised and their old values.
    fn place(&mut self, i: usize, at: u64) -> Vec<(usize, u64)> {
        let size = self.bufs.get(i).map_or(0, |b| b.size);
        if let Some(o) = self.offsets.get_mut(i) {
            *o = Some(at);
        }
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
        raised
    }

    /// Takes buffer `i` out of the plan and puts the floors back.
    fn unplace(&mut self, i: usize, raised: Vec<(usize, u64)>) {
        for (j, f) in raised {
            if let Some(x) = self.floors.get_mut(j) {
                *x = f;
            }
        }
        if let Some(o) = self.offsets.get_mut(i) {
            *o = None;
        }
    }

    /// Depth-first search over canonical plans, with its own stack (a plan
    /// has as many levels as buffers: thousands); `false` when the budget
    /// ran out.
    fn run(&mut self) -> bool {
        let mut stack = match self.enter(0, 0, 0, 0) {
            Entered::Settled(done) => return done,
            Entered::Branch(next) => vec![Frame {
                next,
                pos: 0,
                top: 0,
                tried: None,
            }],
        };
        loop {
            let placed = stack.len();
            let Some(frame) = stack.last_mut() else {
                return true;
            };
            let tried = frame.tried.take();
            let top = frame.top;
            let choice = frame.next.get(frame.pos).copied();
            frame.pos += 1;
            if let Some((i, raised)) = tried {
                self.unplace(i, raised);
                if self.best.peak <= self.bound {
                    return true;
                }
            }
            let Some((at, i)) = choice else {
                stack.pop();
                continue;
            };
            let raised = self.place(i, at);
            let size = self.bufs.get(i).map_or(0, |b| b.size);
            let child_top = top.max(at + size);
            if let Some(frame) = stack.last_mut() {
                frame.tried = Some((i, raised));
            }
            match self.enter(placed, at, i, child_top) {
                Entered::Settled(true) => {}
                Entered::Settled(false) => return false,
                Entered::Branch(next) => stack.push(Frame {
                    next,
                    pos: 0,
                    top: child_top,
                    tried: None,
                }),
            }
        }
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
    let finished = s.run();
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
    use super::super::layout::tests::{b, numbers};
    use super::*;

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
        let mut next = numbers(7);
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

    #[test]
    fn a_plan_thousands_of_buffers_deep_keeps_to_a_small_stack() {
        // A tiny instance greedy cannot fit in its bound (so the search
        // runs), then 2,000 buffers after it, each alone: the search goes
        // one level per buffer.
        let mut next = numbers(11);
        let mut bufs: Vec<Buffer> = loop {
            let bufs: Vec<Buffer> = (0..6)
                .map(|_| {
                    let s = next(6);
                    b(1 + next(4), s, s + 1 + next(4))
                })
                .collect();
            if greedy(&bufs).peak > lower_bound(&bufs) {
                break bufs;
            }
        };
        bufs.extend((0..2_000).map(|k| b(1, 100 + k, 101 + k)));
        let outcome = std::thread::Builder::new()
            .stack_size(128 << 10)
            .spawn(move || {
                let e = exact(&bufs, 8_000);
                check(&bufs, &e.placement).map(|()| e)
            })
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert!(outcome.nodes > 2_000, "{}", outcome.nodes);
    }
}
