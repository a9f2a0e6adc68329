//! Aligning two recordings of the same code at two batch sizes: which of
//! their events correspond.

use super::TEvent;
use super::shape::Shape;

/// Which of two recordings' events correspond: (base event, other event).
pub(super) type Pairs = Vec<(Option<usize>, Option<usize>)>;

/// Most events two batch sizes' recordings may differ by.
pub(super) const MAX_DIFF: usize = 20_000;

/// Aligns two recordings of the same code at two batch sizes: a shortest
/// edit script (Myers' O((N+M)·D) diff) over events that match when they
/// are of the same kind and their allocation sizes are consistent with the
/// batch ratio (`s₀ ≤ s₁ ≤ ⌈b₁/b₀⌉·s₀`, same stream). Matched frees of
/// allocations that were not matched to each other are split into a free
/// for each side. `None` when more than `max_d` events differ.
///
/// The pairs list every event of `r` and every event of `v` exactly once,
/// each side in order, and a pair of two events is of two events of the
/// same kind.
pub(super) fn align(r: &Shape, v: &Shape, kmax: u128, max_d: usize) -> Option<Pairs> {
    let script = edit_script(r, v, kmax, max_d)?;
    Some(split_unmatched_frees(r, v, script))
}

/// Myers' shortest edit script over the events of `r` and `v` (see
/// [`align`] for when two events match), as pairs in event order; `None`
/// when more than `max_d` events differ.
// Indexing: whatever the recordings hold,
// - `r.sizes`, `r.streams` are indexed by allocations that `r`'s events
//   name, `v.sizes`, `v.streams` by those of `v`'s: in bounds by (S);
// - `eq(x, y)` is only called with `x < n`, `y < m`, the event counts;
// - Myers' bounds: `d <= max_d` and `-d <= k <= d`, so
//   `i = k + off` is in `1..=2·max_d + 1` and `i ± 1` in `vx` (`2·max_d + 3`
//   long), as is `off ± d`. `hist` gets one row per `d` in `0..=end_d`, row
//   `d` holding diagonals `-d..=d`. Backtracking from `d` reads row `d - 1`
//   at `kk + d - 1` for `kk` in `k ± 1` (only for `-d < k < d`) and at
//   `pk = k ± 1`, which lies in `-(d - 1)..=d - 1`; and it moves to `pk`,
//   so `-d <= k <= d` holds for the next `d` too (it holds at the start: the
//   end point was reached on a diagonal of the last row).
#[allow(clippy::indexing_slicing)]
fn edit_script(r: &Shape, v: &Shape, kmax: u128, max_d: usize) -> Option<Pairs> {
    let size_ok = |a: u32, b: u32| {
        let (sr, sv) = (r.sizes[a as usize] as u128, v.sizes[b as usize] as u128);
        sr <= sv && sv <= sr * kmax && r.streams[a as usize] == v.streams[b as usize]
    };
    let eq = |i: usize, j: usize| match (r.events[i], v.events[j]) {
        (TEvent::Alloc(a), TEvent::Alloc(b))
        | (TEvent::Free(a), TEvent::Free(b))
        | (TEvent::FreeRequested(a), TEvent::FreeRequested(b))
        | (TEvent::FreeCompleted(a), TEvent::FreeCompleted(b)) => size_ok(a, b),
        (TEvent::EmptyCache, TEvent::EmptyCache) => true,
        _ => false,
    };
    let (n, m) = (r.events.len() as isize, v.events.len() as isize);
    let max_d = max_d.min((n + m) as usize) as isize;
    let off = max_d + 1;
    let mut vx = vec![0isize; (2 * max_d + 3) as usize];
    let mut hist: Vec<Vec<isize>> = Vec::new();
    let mut end_d = None;
    'outer: for d in 0..=max_d {
        let mut k = -d;
        while k <= d {
            let i = (k + off) as usize;
            let mut x = if d == 0 {
                0
            } else if k == -d || (k != d && vx[i - 1] < vx[i + 1]) {
                vx[i + 1]
            } else {
                vx[i - 1] + 1
            };
            let mut y = x - k;
            while x < n && y < m && eq(x as usize, y as usize) {
                x += 1;
                y += 1;
            }
            vx[i] = x;
            if x >= n && y >= m {
                hist.push(vx[(off - d) as usize..=(off + d) as usize].to_vec());
                end_d = Some(d);
                break 'outer;
            }
            k += 2;
        }
        hist.push(vx[(off - d) as usize..=(off + d) as usize].to_vec());
    }
    let end_d = end_d?;
    let mut out: Pairs = Vec::with_capacity((n.max(m) + end_d) as usize);
    let (mut x, mut y) = (n, m);
    for d in (1..=end_d).rev() {
        let k = x - y;
        let prev = &hist[(d - 1) as usize];
        let get = |kk: isize| prev[(kk + d - 1) as usize];
        let pk = if k == -d || (k != d && get(k - 1) < get(k + 1)) {
            k + 1
        } else {
            k - 1
        };
        let px = get(pk);
        let py = px - pk;
        while x > px && y > py {
            out.push((Some((x - 1) as usize), Some((y - 1) as usize)));
            x -= 1;
            y -= 1;
        }
        if x == px {
            out.push((None, Some((y - 1) as usize)));
        } else {
            out.push((Some((x - 1) as usize), None));
        }
        x = px;
        y = py;
    }
    while x > 0 && y > 0 {
        out.push((Some((x - 1) as usize), Some((y - 1) as usize)));
        x -= 1;
        y -= 1;
    }
    out.reverse();
    Some(out)
}

/// Frees must free allocations matched to each other: a pair of frees of
/// allocations that were not matched to each other is split into a free
/// for each side.
// Indexing: the pairs hold positions of `r`'s and `v`'s events (`x - 1`
// for `0 < x <= n` and `y - 1` for `0 < y <= m`, the event counts, see
// `edit_script`); `r2v` (`r.sizes.len()` long) is indexed by allocations
// that `r`'s events name: in bounds by (S).
#[allow(clippy::indexing_slicing)]
fn split_unmatched_frees(r: &Shape, v: &Shape, script: Pairs) -> Pairs {
    let mut r2v = vec![u32::MAX; r.sizes.len()];
    let mut fixed: Pairs = Vec::with_capacity(script.len() + 16);
    for (ri, vi) in script {
        if let (Some(i), Some(j)) = (ri, vi) {
            match (r.events[i], v.events[j]) {
                (TEvent::Alloc(a), TEvent::Alloc(b)) => r2v[a as usize] = b,
                (TEvent::Free(a), TEvent::Free(b))
                | (TEvent::FreeRequested(a), TEvent::FreeRequested(b))
                | (TEvent::FreeCompleted(a), TEvent::FreeCompleted(b))
                    if r2v[a as usize] != b =>
                {
                    fixed.push((Some(i), None));
                    fixed.push((None, Some(j)));
                    continue;
                }
                _ => {}
            }
        }
        fixed.push((ri, vi));
    }
    fixed
}
