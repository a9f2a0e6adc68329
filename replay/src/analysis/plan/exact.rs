//! A better plan of a small trace, by branch and bound: buffers are placed
//! largest first, each at the lowest offset it fits or on top of any
//! buffer it conflicts with; a branch whose top already reaches the best
//! plan found is cut, and the search ends as soon as a plan reaches the
//! lower bound (peak live), which proves it optimal. The search keeps the
//! largest-first order, so a plan above the bound is the best of that
//! order, not proved optimal (MiniMalloc's search over orders is what
//! would prove it); it visits at most a budget of nodes.

use serde::Serialize;

use super::{Buffer, Placement, greedy, lower_bound, lowest_fit, size_order};

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExactOutcome {
    /// The best plan found (at least as good as greedy's).
    pub placement: Placement,
    /// It is proved optimal: it reaches the lower bound.
    pub proved: bool,
    /// The search tried every placement of the largest-first order within
    /// its budget.
    pub finished: bool,
    /// Nodes visited.
    pub nodes: u64,
}

struct Search<'a> {
    bufs: &'a [Buffer],
    order: Vec<usize>,
    bound: u64,
    best: Placement,
    nodes: u64,
    budget: u64,
    offsets: Vec<u64>,
    placed: Vec<(u64, Buffer)>,
}

impl Search<'_> {
    /// Places the `k`-th buffer of the order and those after it; `false`
    /// when the budget ran out.
    fn go(&mut self, k: usize, top: u64) -> bool {
        if self.best.peak <= self.bound {
            return true;
        }
        self.nodes += 1;
        if self.nodes > self.budget {
            return false;
        }
        let Some(&i) = self.order.get(k) else {
            if top < self.best.peak {
                self.best = Placement {
                    offsets: self.offsets.clone(),
                    peak: top,
                };
            }
            return true;
        };
        let Some(&b) = self.bufs.get(i) else {
            return true;
        };
        // Candidate offsets: the lowest fit, and on top of each conflicting
        // buffer where it fits, lowest first.
        let mut cands = vec![lowest_fit(&b, &self.placed)];
        for &(o, p) in &self.placed {
            if p.conflicts(&b) {
                cands.push(o + p.size);
            }
        }
        cands.sort_unstable();
        cands.dedup();
        for at in cands {
            let fits = self
                .placed
                .iter()
                .all(|&(o, p)| !p.conflicts(&b) || o >= at + b.size || o + p.size <= at);
            let new_top = top.max(at + b.size);
            if !fits || new_top >= self.best.peak {
                continue;
            }
            if let Some(o) = self.offsets.get_mut(i) {
                *o = at;
            }
            self.placed.push((at, b));
            self.placed.sort_unstable_by_key(|&(o, _)| o);
            let done = self.go(k + 1, new_top);
            if let Some(pos) = self.placed.iter().position(|&(o, p)| o == at && p == b) {
                self.placed.remove(pos);
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

/// The best plan of `bufs` within `budget` search nodes.
pub fn exact(bufs: &[Buffer], budget: u64) -> ExactOutcome {
    let start = greedy(bufs);
    let bound = lower_bound(bufs);
    let mut s = Search {
        bufs,
        order: size_order(bufs),
        bound,
        best: start,
        nodes: 0,
        budget,
        offsets: vec![0; bufs.len()],
        placed: Vec::with_capacity(bufs.len()),
    };
    let finished = s.go(0, 0);
    let proved = s.best.peak <= bound;
    ExactOutcome {
        placement: s.best,
        proved,
        finished,
        nodes: s.nodes,
    }
}

#[cfg(test)]
mod tests {
    use super::super::check;
    use super::*;

    fn b(size: u64, start: u64, end: u64) -> Buffer {
        Buffer { size, start, end }
    }

    /// The search reaches the bound, which proves its plan optimal.
    #[test]
    fn the_search_beats_greedy_where_greedy_is_not_optimal() {
        // Checked by hand: the two 3s share a column, the 2s stack on top.
        let bufs = vec![b(3, 0, 2), b(3, 2, 4), b(2, 1, 3), b(2, 0, 1), b(2, 3, 4)];
        let g = greedy(&bufs);
        let e = exact(&bufs, 1_000_000);
        check(&bufs, &e.placement).unwrap();
        assert!(e.proved);
        assert!(e.placement.peak <= g.peak);
        assert_eq!(e.placement.peak, lower_bound(&bufs));
    }

    #[test]
    fn a_spent_budget_is_no_proof() {
        let bufs: Vec<Buffer> = (0..12).map(|i| b(1 + i % 5, i, i + 7)).collect();
        let e = exact(&bufs, 3);
        check(&bufs, &e.placement).unwrap();
        assert_eq!(e.proved, e.placement.peak == lower_bound(&bufs));
        assert!(e.nodes <= 4);
    }
}
