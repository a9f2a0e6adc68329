//! Templates: a workload's allocation sequence with every size a function
//! of the scaling parameter and the batch size, learned from recordings of
//! the same code at a few sizes, instantiated at any size.
//!
//! Learning:
//!
//! 1. The *series* — recordings at the base batch (the smallest) and two
//!    or three values of the scaling parameter — must line up event by
//!    event: the same kinds of events, frees of the same allocations, the
//!    same streams. Only sizes may differ. Each allocation's size is then
//!    fitted exactly through its recorded points as a function of the
//!    scaling variable `x` ([`Scaling::variable`]) with [`fit`].
//! 2. An optional recording at another batch size and one of the series'
//!    values is aligned with that series member. Batch 1 often takes other
//!    code paths than larger batches (a view where batch 2 needs a copy),
//!    and frees some tensors at other points, so the alignment is a
//!    shortest edit script (Myers' diff) over events that match when their
//!    sizes are consistent with scaling by the batch ratio; frees must free
//!    matched allocations, else each side keeps its own. Matched allocations get a batch factor
//!    (`size(b) = f(x)·(1 + (b − b₀)·r)`, exact at both batches); events
//!    seen only at the other batch are emitted for every batch but the
//!    base one (their sizes follow the allocation of equal size just
//!    before them, usually the tensor they copy), events seen only at the
//!    base batch only for it.
//!
//! Instantiation evaluates every size once and emits the events, renaming
//! allocations densely; `steps` repeats the last recorded training or
//! denoising step (see [`Template::instantiate`]).

use std::fmt;

use crate::error::{Location, TraceError};
use crate::model::{AllocId, Event, Trace, TraceHeader};

use super::GenError;
use super::fit::{FitKind, Poly, div_round, fit};
use super::read::Recording;

/// How the scaling parameter becomes the variable sizes are fitted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scaling {
    /// Sequence length; `x = seq`.
    Seq,
    /// Square image side in pixels; `x = (resolution / 8)²`, the number of
    /// latent pixels (activations grow with it, attention scores with its
    /// square). The resolution must be a multiple of 8.
    Resolution,
}

impl Scaling {
    /// The parameter's name (`seq`, `resolution`).
    pub fn param(self) -> &'static str {
        match self {
            Scaling::Seq => "seq",
            Scaling::Resolution => "resolution",
        }
    }

    /// The fit variable for a parameter value.
    pub fn variable(self, value: u64) -> Result<i128, String> {
        if value == 0 {
            return Err(format!("--{} must be at least 1", self.param()));
        }
        match self {
            Scaling::Seq => Ok(value as i128),
            Scaling::Resolution => {
                if value % 8 != 0 {
                    return Err(format!(
                        "--resolution must be a multiple of 8 (the VAE works on 8x8 pixel latents), not {value}"
                    ));
                }
                let l = (value / 8) as i128;
                Ok(l * l)
            }
        }
    }
}

/// One recording and where it sits in the parameter space.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    /// The recording.
    pub rec: &'a Recording,
    /// Its batch size.
    pub batch: u64,
    /// Its value of the scaling parameter.
    pub value: u64,
}

/// For which batch sizes an allocation exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Every batch size.
    Always,
    /// Only the base batch size (seen only in the base recordings).
    BaseBatchOnly,
    /// Every batch size but the base one (seen only at the other batch).
    OtherBatchOnly,
}

/// An allocation's size as a function of the batch size `b` and the fit
/// variable `x`: `f(x) · (bden + (b − bref)·bnum) / bden`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeFn {
    /// `f(x)`, exact at the recorded points.
    pub poly: Poly,
    /// How `f` was fitted.
    pub kind: FitKind,
    bref: i128,
    bnum: i128,
    bden: i128,
}

impl SizeFn {
    /// The size in bytes at batch `b` and variable `x` (rounded, ≥ 0).
    pub fn eval(&self, b: u64, x: i128) -> u64 {
        let f = self.poly.eval(x);
        let db = b as i128 - self.bref;
        let exact = db
            .checked_mul(self.bnum)
            .and_then(|n| n.checked_add(self.bden))
            .and_then(|factor| f.checked_mul(factor));
        let v = match exact {
            Some(n) => div_round(n, self.bden),
            None => {
                let factor = self.bden as f64 + db as f64 * self.bnum as f64;
                (f as f64 * factor / self.bden as f64).round() as i128
            }
        };
        v.clamp(0, u64::MAX as i128) as u64
    }
}

#[derive(Debug, Clone, Copy)]
struct TAlloc {
    size: SizeFn,
    stream: u32,
    presence: Presence,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TEvent {
    Alloc(u32),
    Free(u32),
    FreeRequested(u32),
    FreeCompleted(u32),
    EmptyCache,
}

impl TEvent {
    /// The allocation the event names, if any.
    fn alloc(self) -> Option<u32> {
        match self {
            TEvent::Alloc(a)
            | TEvent::Free(a)
            | TEvent::FreeRequested(a)
            | TEvent::FreeCompleted(a) => Some(a),
            TEvent::EmptyCache => None,
        }
    }
}

/// A learned template. See the module documentation.
#[derive(Debug, Clone)]
pub struct Template {
    /// What it was learned for (a preset or family name).
    pub name: String,
    /// The scaling parameter.
    pub scaling: Scaling,
    /// Batch size of the series.
    pub base_batch: u64,
    /// Batch size of the aligned batch recording, if any.
    pub other_batch: Option<u64>,
    /// Values of the scaling parameter recorded at the base batch.
    pub values: Vec<u64>,
    /// File names of the recordings it was learned from.
    pub sources: Vec<String>,
    header: TraceHeader,
    streams: Vec<u64>,
    allocs: Vec<TAlloc>,
    events: Vec<TEvent>,
    /// For which batch sizes each event happens.
    presence: Vec<Presence>,
    phases: Vec<(usize, String)>,
}

// Invariants of a `Template` (only `Template::learn` makes one, and checks
// them before returning it; the fields are private):
//
// (T1) every allocation an event names is `< allocs.len()`;
// (T2) `presence.len() == events.len()`;
// (T3) phase positions are in order and `<= events.len()`.

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} events, {} allocations, {} recorded at batch {} (",
            self.name,
            self.events.len(),
            self.allocs.len(),
            self.scaling.param(),
            self.base_batch
        )?;
        let vals: Vec<String> = self.values.iter().map(u64::to_string).collect();
        write!(f, "{})", vals.join(", "))?;
        if let Some(b) = self.other_batch {
            write!(f, ", batch {b} aligned")?;
        }
        Ok(())
    }
}

/// A recording's structure: events over dense allocation indices.
///
/// Invariant (S), for every `Shape` (only [`shape`] makes them): `sizes` and
/// `streams` have one entry per `Alloc` event, and every allocation an
/// event names is `< sizes.len()` and is named by an earlier `Alloc`. (An
/// `Alloc` takes the next index, `sizes.len()` before its push; the other
/// events take an index that an earlier `Alloc` stored in `index`, or fail.)
struct Shape {
    events: Vec<TEvent>,
    sizes: Vec<u64>,
    streams: Vec<u64>,
}

fn shape(rec: &Recording) -> Result<Shape, TraceError> {
    let t = &rec.trace;
    if let Some(init) = &t.initial {
        if init.live_blocks() > 0 {
            return Err(TraceError::new(
                &rec.name,
                Location::File,
                "the trace starts mid-run (blocks were allocated before recording began); templates need recordings from an empty allocator",
            ));
        }
    }
    let mut index = vec![u32::MAX; t.num_ids as usize];
    let mut sizes = Vec::new();
    let mut streams = Vec::new();
    let mut events = Vec::with_capacity(t.events.len());
    for (n, ev) in t.events.iter().enumerate() {
        let lookup = |id: AllocId| -> Result<u32, TraceError> {
            match index.get(id as usize) {
                Some(&i) if i != u32::MAX => Ok(i),
                _ => Err(TraceError::new(
                    &rec.name,
                    Location::Entry(n as u64),
                    format!(
                        "event refers to allocation {id}, which was not allocated in the trace"
                    ),
                )),
            }
        };
        events.push(match *ev {
            Event::Alloc { id, stream, size } => {
                let i = sizes.len() as u32;
                if let Some(slot) = index.get_mut(id as usize) {
                    *slot = i;
                }
                sizes.push(size);
                streams.push(t.streams.get(stream as usize).copied().unwrap_or(0));
                TEvent::Alloc(i)
            }
            Event::Free { id } => TEvent::Free(lookup(id)?),
            Event::FreeRequested { id } => TEvent::FreeRequested(lookup(id)?),
            Event::FreeCompleted { id } => TEvent::FreeCompleted(lookup(id)?),
            Event::EmptyCache => TEvent::EmptyCache,
        });
    }
    Ok(Shape {
        events,
        sizes,
        streams,
    })
}

fn describe(ev: TEvent) -> String {
    match ev {
        TEvent::Alloc(a) => format!("the alloc of allocation #{a}"),
        TEvent::Free(a) => format!("the free of allocation #{a}"),
        TEvent::FreeRequested(a) => format!("the free_requested of allocation #{a}"),
        TEvent::FreeCompleted(a) => format!("the free_completed of allocation #{a}"),
        TEvent::EmptyCache => "empty_cache".into(),
    }
}

/// Which of two recordings' events correspond: (base event, other event).
type Pairs = Vec<(Option<usize>, Option<usize>)>;

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
// Indexing: whatever the recordings hold,
// - `r.sizes`, `r.streams`, `r2v` (`r.sizes.len()` long) are indexed by
//   allocations that `r`'s events name, `v.sizes`, `v.streams` by those of
//   `v`'s: in bounds by (S);
// - `eq(x, y)` is only called with `x < n`, `y < m`, the event counts, and
//   the pairs hold `x - 1` for `0 < x <= n` and `y - 1` for `0 < y <= m`;
// - Myers' bounds: `d <= max_d` and `-d <= k <= d`, so
//   `i = k + off` is in `1..=2·max_d + 1` and `i ± 1` in `vx` (`2·max_d + 3`
//   long), as is `off ± d`. `hist` gets one row per `d` in `0..=end_d`, row
//   `d` holding diagonals `-d..=d`. Backtracking from `d` reads row `d - 1`
//   at `kk + d - 1` for `kk` in `k ± 1` (only for `-d < k < d`) and at
//   `pk = k ± 1`, which lies in `-(d - 1)..=d - 1`; and it moves to `pk`,
//   so `-d <= k <= d` holds for the next `d` too (it holds at the start: the
//   end point was reached on a diagonal of the last row).
#[allow(clippy::indexing_slicing)]
fn align(r: &Shape, v: &Shape, kmax: u128, max_d: usize) -> Option<Pairs> {
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
    // Frees must free allocations matched to each other.
    let mut r2v = vec![u32::MAX; r.sizes.len()];
    let mut fixed: Pairs = Vec::with_capacity(out.len() + 16);
    for (ri, vi) in out {
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
    Some(fixed)
}

/// Most events two batch sizes' recordings may differ by.
const MAX_DIFF: usize = 20_000;

fn reduce(n: i128, d: i128) -> (i128, i128) {
    let mut g = (n.abs(), d.abs());
    while g.1 != 0 {
        g = (g.1, g.0 % g.1);
    }
    let g = g.0.max(1);
    (n / g, d / g)
}

fn step_index(label: &str) -> Option<u32> {
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
    /// Learns a template from samples. See the module documentation.
    // Indexing: what is left indexes by positions and allocation numbers
    // that this code made itself:
    // - `sh.sizes[a]` for `a < first.sizes.len()`: once the series lines up,
    //   all its members have the same events, hence (S) as many sizes;
    // - `fits[a]`, `rshape.sizes[a]`, `r_alloc[a]` for an allocation `a`
    //   that an event of `rshape` names: `a < rshape.sizes.len()` (S), which
    //   is `r_alloc.len()`, and `fits.len()` as `rshape` is a series member;
    //   `vs.sizes[b]`, `v_alloc[b]` likewise for `vs`;
    // - `rshape.events[ri]`, `r_pos[ri]`, `vs.events[vi]`: the pairs hold
    //   positions of the two recordings' events (see `align`; without a
    //   batch recording, `0..first.events.len()` with `rshape` = `first`),
    //   and `r_pos` has one entry more than `rshape.events`, its last
    //   written after the loop;
    // - `allocs[t]` for `t` in `matched_sizes`, `pending_donor`, or in
    //   `r_alloc`/`v_alloc` other than `u32::MAX`: each such `t` is
    //   `allocs.len()` just before a push to `allocs`, which never shrinks.
    #[allow(clippy::indexing_slicing)]
    pub fn learn(
        name: &str,
        scaling: Scaling,
        samples: &[Sample<'_>],
    ) -> Result<Template, GenError> {
        let base_batch = samples
            .iter()
            .map(|s| s.batch)
            .min()
            .ok_or_else(|| GenError::Request(format!("{name}: no recordings to learn from")))?;
        let mut series: Vec<&Sample<'_>> =
            samples.iter().filter(|s| s.batch == base_batch).collect();
        series.sort_by_key(|s| s.value);
        for (a, b) in series.iter().zip(series.iter().skip(1)) {
            if a.value == b.value {
                return Err(GenError::Request(format!(
                    "{name}: two recordings at batch {base_batch} and {}={} ({} and {})",
                    scaling.param(),
                    a.value,
                    a.rec.name,
                    b.rec.name
                )));
            }
        }
        if series.len() < 2 {
            return Err(GenError::Request(format!(
                "{name}: needs recordings at two or three values of {} at batch {base_batch}, found {}",
                scaling.param(),
                series.len()
            )));
        }
        let others: Vec<&Sample<'_>> = samples.iter().filter(|s| s.batch != base_batch).collect();
        if others.len() > 1 {
            return Err(GenError::Request(format!(
                "{name}: at most one recording at a batch other than {base_batch} can be aligned; found {}",
                others
                    .iter()
                    .map(|s| s.rec.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let xs: Vec<i128> = series
            .iter()
            .map(|s| scaling.variable(s.value))
            .collect::<Result<_, _>>()
            .map_err(|m| GenError::Request(format!("{name}: {m}")))?;
        let shapes: Vec<Shape> = series
            .iter()
            .map(|s| shape(s.rec))
            .collect::<Result<_, _>>()?;
        let (Some(first), Some(&first_sample)) = (shapes.first(), series.first()) else {
            return Err(GenError::Request(format!(
                "{name}: no recordings at batch {base_batch}"
            )));
        };
        for (sample, sh) in series.iter().zip(&shapes).skip(1) {
            let n = first.events.len().min(sh.events.len());
            // The first event that differs in kind, allocation or stream.
            let bad =
                first
                    .events
                    .iter()
                    .zip(&sh.events)
                    .position(|(&theirs, &ours)| match theirs {
                        _ if theirs != ours => true,
                        TEvent::Alloc(a) => {
                            first.streams.get(a as usize) != sh.streams.get(a as usize)
                        }
                        _ => false,
                    });
            let bad = bad.or((first.events.len() != sh.events.len()).then_some(n));
            if let Some(i) = bad {
                let theirs = first
                    .events
                    .get(i)
                    .map_or("the end".into(), |e| describe(*e));
                let ours = sh.events.get(i).map_or("the end".into(), |e| describe(*e));
                return Err(TraceError::new(
                    &sample.rec.name,
                    Location::Entry(i as u64),
                    format!(
                        "does not line up with {}: event {i} is {ours} here but {theirs} there; a template needs recordings of the same code path at every size",
                        first_sample.rec.name
                    ),
                )
                .into());
            }
        }
        // Fit every allocation of the series.
        let mut fits = Vec::with_capacity(first.sizes.len());
        let mut pts = Vec::with_capacity(xs.len());
        for a in 0..first.sizes.len() {
            pts.clear();
            pts.extend(
                xs.iter()
                    .zip(&shapes)
                    .map(|(&x, sh)| (x, sh.sizes[a] as i128)),
            );
            let f = fit(&pts).ok_or_else(|| {
                GenError::Request(format!(
                    "{name}: cannot fit allocation #{a} (sizes {:?}) exactly",
                    pts.iter().map(|p| p.1).collect::<Vec<_>>()
                ))
            })?;
            fits.push(f);
        }
        let b0 = base_batch as i128;
        let plain = |a: usize| SizeFn {
            poly: fits[a].0,
            kind: fits[a].1,
            bref: b0,
            bnum: 0,
            bden: 1,
        };

        // The base member the batch recording is aligned with.
        let (ref_sample, rshape, pairs, other) = match others.first() {
            None => (
                first_sample,
                first,
                (0..first.events.len())
                    .map(|i| (Some(i), None))
                    .collect::<Pairs>(),
                None,
            ),
            Some(o) => {
                let (&ref_sample, rshape) = series
                    .iter()
                    .zip(&shapes)
                    .find(|(s, _)| s.value == o.value)
                    .ok_or_else(|| {
                        GenError::Request(format!(
                            "{name}: the batch-{} recording {} is at {}={}, which the batch-{base_batch} recordings do not cover",
                            o.batch,
                            o.rec.name,
                            scaling.param(),
                            o.value
                        ))
                    })?;
                let vs = shape(o.rec)?;
                let kmax = o.batch.div_ceil(base_batch) as u128;
                let pairs = align(rshape, &vs, kmax, MAX_DIFF).ok_or_else(|| {
                    TraceError::new(
                        &o.rec.name,
                        Location::File,
                        format!(
                            "cannot align with {}: more than {MAX_DIFF} events differ",
                            ref_sample.rec.name
                        ),
                    )
                })?;
                (ref_sample, rshape, pairs, Some((*o, vs)))
            }
        };

        // Merge into template allocations and events.
        let mut allocs: Vec<TAlloc> = Vec::with_capacity(first.sizes.len() + 16);
        let mut events = Vec::with_capacity(pairs.len());
        let mut presence_of = Vec::with_capacity(pairs.len());
        let mut r_alloc = vec![u32::MAX; rshape.sizes.len()];
        let mut v_alloc: Vec<u32> = other
            .as_ref()
            .map_or(Vec::new(), |(_, vs)| vec![u32::MAX; vs.sizes.len()]);
        let mut r_pos = vec![0usize; rshape.events.len() + 1];
        // (template alloc, size at the other batch) of matched allocations, for donors.
        let mut matched_sizes: Vec<(u32, u64)> = Vec::new();
        let mut pending_donor: Vec<(u32, u64)> = Vec::new();
        for (ri, vi) in &pairs {
            if let Some(ri) = ri {
                r_pos[*ri] = events.len();
            }
            let ev = match (ri, vi, &other) {
                (Some(ri), _, _) => {
                    let e = rshape.events[*ri];
                    match e {
                        TEvent::Alloc(a) => {
                            let t = allocs.len() as u32;
                            r_alloc[a as usize] = t;
                            let mut size = plain(a as usize);
                            let mut presence = Presence::BaseBatchOnly;
                            if other.is_none() {
                                presence = Presence::Always;
                            }
                            if let (Some(vi), Some((o, vs))) = (vi, &other) {
                                if let TEvent::Alloc(b) = vs.events[*vi] {
                                    v_alloc[b as usize] = t;
                                    let (sr, sv) = (
                                        rshape.sizes[a as usize] as i128,
                                        vs.sizes[b as usize] as i128,
                                    );
                                    let db = o.batch as i128 - b0;
                                    let (n, d) = if sr == 0 {
                                        (0, 1)
                                    } else {
                                        let d = sr.checked_mul(db).ok_or_else(|| {
                                            TraceError::new(
                                                &o.rec.name,
                                                Location::Entry(*vi as u64),
                                                format!(
                                                    "an allocation of {sr} bytes at batch {base_batch} and {sv} at batch {} is too large to scale",
                                                    o.batch
                                                ),
                                            )
                                        })?;
                                        reduce(sv - sr, d)
                                    };
                                    size.bnum = n;
                                    size.bden = d;
                                    presence = Presence::Always;
                                    matched_sizes.push((t, sv as u64));
                                }
                            }
                            allocs.push(TAlloc {
                                size,
                                stream: 0,
                                presence,
                            });
                            TEvent::Alloc(t)
                        }
                        other_ev => remap(other_ev, &r_alloc),
                    }
                }
                (None, Some(vi), Some((o, vs))) => {
                    let e = vs.events[*vi];
                    match e {
                        TEvent::Alloc(b) => {
                            let t = allocs.len() as u32;
                            v_alloc[b as usize] = t;
                            let sv = vs.sizes[b as usize];
                            // Follows the closest matched allocation of equal size
                            // before it (the tensor it copies), else after it.
                            let donor = matched_sizes
                                .iter()
                                .rev()
                                .take(256)
                                .find(|(_, s)| *s == sv)
                                .map(|(d, _)| allocs[*d as usize].size);
                            let size = donor.unwrap_or(SizeFn {
                                poly: Poly::constant(sv as i128),
                                kind: FitKind::Constant,
                                bref: o.batch as i128,
                                bnum: 1,
                                bden: o.batch as i128,
                            });
                            if donor.is_none() {
                                pending_donor.push((t, sv));
                            }
                            allocs.push(TAlloc {
                                size,
                                stream: 0,
                                presence: Presence::OtherBatchOnly,
                            });
                            TEvent::Alloc(t)
                        }
                        other_ev => remap(other_ev, &v_alloc),
                    }
                }
                // Only `align` makes pairs without a base event, and only
                // when there is a batch recording.
                (None, _, _) => continue,
            };
            presence_of.push(match (ri, vi) {
                _ if other.is_none() => Presence::Always,
                (Some(_), Some(_)) => Presence::Always,
                (Some(_), None) => Presence::BaseBatchOnly,
                _ => Presence::OtherBatchOnly,
            });
            events.push(ev);
        }
        r_pos[rshape.events.len()] = events.len();
        // Donors after the allocation, for those that had none before.
        for (t, sv) in pending_donor {
            if let Some((d, _)) = matched_sizes.iter().find(|(d, s)| *s == sv && *d > t) {
                allocs[t as usize].size = allocs[*d as usize].size;
            }
        }
        // Streams: the raw handles of the series (the other batch's for its own).
        let mut streams: Vec<u64> = vec![0];
        let mut stream_index = |raw: u64| -> u32 {
            match streams.iter().position(|&s| s == raw) {
                Some(i) => i as u32,
                None => {
                    streams.push(raw);
                    (streams.len() - 1) as u32
                }
            }
        };
        for (&t, &raw) in r_alloc.iter().zip(&rshape.streams) {
            if t != u32::MAX {
                allocs[t as usize].stream = stream_index(raw);
            }
        }
        if let Some((_, vs)) = &other {
            for (&t, &raw) in v_alloc.iter().zip(&vs.streams) {
                if t != u32::MAX && allocs[t as usize].presence == Presence::OtherBatchOnly {
                    allocs[t as usize].stream = stream_index(raw);
                }
            }
        }
        let rec = ref_sample.rec;
        if !rec.phases.is_sorted_by_key(|(e, _)| *e) {
            return Err(TraceError::new(
                &rec.name,
                Location::File,
                "the phase marks are not in event order",
            )
            .into());
        }
        let phases: Vec<(usize, String)> = rec
            .phases
            .iter()
            .map(|(e, l)| {
                let pos = match e.checked_sub(1) {
                    None => 0,
                    // A mark after the last event goes at the end.
                    Some(i) => r_pos.get(i).map_or(events.len(), |p| p + 1),
                };
                (pos.min(events.len()), l.clone())
            })
            .collect();
        // (T1)–(T3) hold by construction; checked, as `instantiate` indexes
        // by them.
        let names_missing = events
            .iter()
            .any(|e| e.alloc().is_some_and(|a| a as usize >= allocs.len()));
        let phases_ok = phases.is_sorted_by_key(|(p, _)| *p)
            && phases.last().is_none_or(|(p, _)| *p <= events.len());
        if names_missing || !phases_ok || presence_of.len() != events.len() {
            return Err(GenError::Request(format!(
                "{name}: internal error: the template learned from {} is inconsistent",
                first_sample.rec.name
            )));
        }
        let mut sources: Vec<String> = series.iter().map(|s| s.rec.name.clone()).collect();
        if let Some((o, _)) = &other {
            sources.push(o.rec.name.clone());
        }
        Ok(Template {
            name: name.to_string(),
            scaling,
            base_batch,
            other_batch: other.as_ref().map(|(o, _)| o.batch),
            values: series.iter().map(|s| s.value).collect(),
            sources,
            header: first_sample.rec.trace.header.clone(),
            streams,
            allocs,
            events,
            presence: presence_of,
            phases,
        })
    }

    /// Events of the template (at the base batch some may be left out).
    pub fn num_events(&self) -> usize {
        self.events.len()
    }

    /// The template's allocations' size functions, in allocation order.
    pub fn size_fns(&self) -> impl Iterator<Item = (&SizeFn, Presence)> + '_ {
        self.allocs.iter().map(|a| (&a.size, a.presence))
    }

    /// Number of training or denoising steps recorded (phases named
    /// `step N…` or `… step N`), if any.
    pub fn recorded_steps(&self) -> Option<u32> {
        self.phases
            .iter()
            .filter_map(|(_, l)| step_index(l))
            .max()
            .map(|m| m + 1)
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

    /// Generates the trace at batch `batch` and scaling value `value`.
    ///
    /// `steps`, for workloads recorded with two or more steps, repeats the
    /// last recorded step until there are `steps` of them: every
    /// allocation that a step leaves to the next (latents, accumulated
    /// state) is paired with the one the previous step left, by size
    /// function; a request for fewer steps than recorded is refused.
    // Indexing: `present`, `sizes` and `id_of` have one entry per template
    // allocation; every allocation an event names is one (T1), and so are
    // those `carry_pairs` pairs.
    #[allow(clippy::indexing_slicing)]
    pub fn instantiate(
        &self,
        batch: u64,
        value: u64,
        steps: Option<u32>,
    ) -> Result<Trace, GenError> {
        let req = |m: String| GenError::Request(format!("{}: {m}", self.name));
        if batch == 0 {
            return Err(req("--batch must be at least 1".into()));
        }
        if batch != self.base_batch && self.other_batch.is_none() {
            return Err(req(format!(
                "recorded at batch {} only; --batch {batch} needs a recording at another batch size",
                self.base_batch
            )));
        }
        let x = self.scaling.variable(value).map_err(req)?;
        let base = batch == self.base_batch;
        let here = |p: Presence| match p {
            Presence::Always => true,
            Presence::BaseBatchOnly => base,
            Presence::OtherBatchOnly => !base,
        };
        let ev_present: Vec<bool> = self.presence.iter().map(|&p| here(p)).collect();
        let present: Vec<bool> = self.allocs.iter().map(|a| here(a.presence)).collect();
        let sizes: Vec<u64> = self
            .allocs
            .iter()
            .zip(&present)
            .map(|(a, &p)| if p { a.size.eval(batch, x) } else { 0 })
            .collect();

        // Step repetition.
        // (first event, end event, extra repetitions, carry pairs, allocations
        // made before the steps that the last step frees)
        type Repeat = (usize, usize, u32, Vec<(u32, u32)>, Vec<bool>);
        let mut repeat: Option<Repeat> = None;
        if let Some(want) = steps {
            let Some((start, end, recorded, first)) = self.step_block() else {
                return Err(req(
                    "--steps: this workload was not recorded with repeated steps".into(),
                ));
            };
            if want < recorded {
                return Err(req(format!(
                    "--steps: recorded with {recorded} steps (the first differs: optimizer state, warm-up); ask for {recorded} or more"
                )));
            }
            if recorded < 2 {
                return Err(req("--steps: needs at least two recorded steps".into()));
            }
            if want > recorded {
                let (pairs, once) =
                    self.carry_pairs(start, end, first, &present, &ev_present, &sizes)?;
                repeat = Some((start, end, want - recorded, pairs, once));
            }
        }

        // The events to generate: ids are 32-bit, and the memory is
        // reserved up front, so a huge --steps is an error, not an abort.
        let total = repeat
            .as_ref()
            .map_or(Some(0), |(s, e, n, _, _)| {
                e.saturating_sub(*s).checked_mul(*n as usize)
            })
            .and_then(|extra| extra.checked_add(self.events.len()))
            .filter(|&t| t <= u32::MAX as usize)
            .ok_or_else(|| req("--steps: more than 4294967295 events".into()))?;
        let mut out = Vec::new();
        out.try_reserve_exact(total).map_err(|_| {
            req(format!(
                "--steps: {total} events ({} bytes) do not fit in memory",
                total.saturating_mul(std::mem::size_of::<Event>())
            ))
        })?;
        let mut id_of = vec![0 as AllocId; self.allocs.len()];
        let mut next: AllocId = 0;
        let no_skip: Vec<bool> = Vec::new();
        let mut emit = |range: std::ops::Range<usize>,
                        out: &mut Vec<Event>,
                        id_of: &mut Vec<AllocId>,
                        skip_frees: &[bool]|
         -> Result<(), GenError> {
            // Phase positions are in order and within the events (T2, T3).
            let (Some(evs), Some(evs_present)) = (
                self.events.get(range.clone()),
                ev_present.get(range.clone()),
            ) else {
                return Err(req(format!(
                    "internal error: events {range:?} are not in the template"
                )));
            };
            for (ev, &on) in evs.iter().zip(evs_present) {
                if !on {
                    continue;
                }
                if let TEvent::Free(t) | TEvent::FreeRequested(t) | TEvent::FreeCompleted(t) = *ev {
                    if skip_frees.get(t as usize).copied().unwrap_or(false) {
                        continue;
                    }
                }
                let e = match *ev {
                    TEvent::Alloc(t) => {
                        if !present[t as usize] {
                            continue;
                        }
                        let id = next;
                        next = next.checked_add(1).ok_or_else(|| {
                            GenError::Request("more than 4294967295 allocations".into())
                        })?;
                        id_of[t as usize] = id;
                        Event::Alloc {
                            id,
                            stream: self.allocs[t as usize].stream,
                            size: sizes[t as usize],
                        }
                    }
                    TEvent::Free(t) if present[t as usize] => Event::Free {
                        id: id_of[t as usize],
                    },
                    TEvent::FreeRequested(t) if present[t as usize] => Event::FreeRequested {
                        id: id_of[t as usize],
                    },
                    TEvent::FreeCompleted(t) if present[t as usize] => Event::FreeCompleted {
                        id: id_of[t as usize],
                    },
                    TEvent::EmptyCache => Event::EmptyCache,
                    _ => continue,
                };
                out.push(e);
            }
            Ok(())
        };
        match &repeat {
            None => emit(0..self.events.len(), &mut out, &mut id_of, &no_skip)?,
            Some((start, end, n, pairs, once)) => {
                emit(0..*start, &mut out, &mut id_of, &no_skip)?;
                // The recorded last step, then n more; what the steps leave to
                // each other is renamed, what came from before the steps is
                // freed in the last one only.
                for j in 0..=*n {
                    if j > 0 {
                        for &(c, p) in pairs {
                            id_of[c as usize] = id_of[p as usize];
                        }
                    }
                    let skip = if j < *n { once.as_slice() } else { &no_skip };
                    emit(*start..*end, &mut out, &mut id_of, skip)?;
                }
                emit(*end..self.events.len(), &mut out, &mut id_of, &no_skip)?;
            }
        }

        let mut header = self.header.clone();
        header.extra.retain(|k, _| {
            !(k.starts_with("param.")
                || matches!(
                    k.as_str(),
                    "events" | "allocs" | "peak_live_bytes" | "command" | "source"
                ))
        });
        for (k, v) in &self.header.extra {
            if let Some(p) = k.strip_prefix("param.") {
                if p != "batch" && p != self.scaling.param() && p != "steps" {
                    header.extra.insert(k.clone(), v.clone());
                }
            }
        }
        header.extra.insert("param.batch".into(), batch.to_string());
        header
            .extra
            .insert(format!("param.{}", self.scaling.param()), value.to_string());
        if let Some(s) = steps {
            header.extra.insert("param.steps".into(), s.to_string());
        }
        header.extra.insert(
            "generator".into(),
            format!("vramlab gen (template {})", self.name),
        );
        header
            .extra
            .insert("template_sources".into(), self.sources.join(" "));
        header.source = format!(
            "vramlab gen {} --batch {batch} --{} {value}{}: generated from recordings at {} {}",
            self.name,
            self.scaling.param(),
            steps.map_or(String::new(), |s| format!(" --steps {s}")),
            self.scaling.param(),
            self.values
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join("/")
        );
        let mut trace = Trace::new(header);
        trace.streams = self.streams.clone();
        trace.events = out;
        trace.num_ids = next;
        Ok(trace)
    }

    /// Pairs each allocation a step frees but an earlier step made with the
    /// one this step makes and a later phase frees.
    /// Also returns, per allocation, whether it was made before the first
    /// step and is freed in the last one (it is freed once, at the end).
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
    ) -> Result<LifetimesAndUse, GenError> {
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
        if carried_in.len() != carried_out.len() {
            return Err(GenError::Request(format!(
                "{}: --steps: the last recorded step frees {} allocations of earlier steps but leaves {} to later ones; it cannot be repeated",
                self.name,
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
                        "{}: --steps: an allocation of {} bytes carried into the last step has no counterpart it leaves to the next",
                        self.name, sizes[c as usize]
                    ))
                })?;
            used[k] = true;
            pairs.push((c, carried_out[k]));
        }
        Ok((pairs, once))
    }
}

/// `e` with its allocation renamed by `map`; `u32::MAX` (no allocation,
/// which `learn` rejects) where `map` has none.
fn remap(e: TEvent, map: &[u32]) -> TEvent {
    let m = |a: u32| map.get(a as usize).copied().unwrap_or(u32::MAX);
    match e {
        TEvent::Free(a) => TEvent::Free(m(a)),
        TEvent::FreeRequested(a) => TEvent::FreeRequested(m(a)),
        TEvent::FreeCompleted(a) => TEvent::FreeCompleted(m(a)),
        other => other,
    }
}

/// Peak of the sum of requested sizes of live allocations (a block whose
/// free was requested stays live until the free completes).
pub fn peak_live_bytes(trace: &Trace) -> u64 {
    let mut size = vec![0u64; trace.num_ids as usize];
    if let Some(init) = &trace.initial {
        for b in &init.live {
            if let crate::model::InitialBlockState::Allocated(id)
            | crate::model::InitialBlockState::PendingFree(id) = b.state
            {
                if let Some(s) = size.get_mut(id as usize) {
                    *s = b.requested;
                }
            }
        }
    }
    // Sizes come from the file (up to 2^64 - 1): sums saturate.
    let mut live: u64 = size.iter().fold(0, |a, &s| a.saturating_add(s));
    let mut peak = live;
    for ev in &trace.events {
        match *ev {
            Event::Alloc { id, size: s, .. } => {
                if let Some(slot) = size.get_mut(id as usize) {
                    *slot = s;
                }
                live = live.saturating_add(s);
                peak = peak.max(live);
            }
            Event::Free { id } | Event::FreeCompleted { id } => {
                live = live.saturating_sub(size.get(id as usize).copied().unwrap_or(0));
            }
            Event::FreeRequested { .. } | Event::EmptyCache => {}
        }
    }
    peak
}

/// (birth, death) event of each allocation, and which allocations are used.
type LifetimesAndUse = (Vec<(u32, u32)>, Vec<bool>);

#[cfg(test)]
mod tests {
    use super::super::read::read_recording_bytes;
    use super::*;

    fn rec(name: &str, events: &str) -> Recording {
        let text = format!("# vramlab trace v1\naction,id,size,stream\n{events}");
        read_recording_bytes(text.as_bytes(), name).unwrap()
    }

    fn at(rec: &Recording, batch: u64, value: u64) -> Sample<'_> {
        Sample { rec, batch, value }
    }

    #[test]
    fn a_series_that_diverges_at_an_alloc_is_an_error() {
        // At event 1 the first recording makes its allocation #1 while the
        // second, which has only #0, frees it. The streams of allocation #1
        // used to be compared before the events were, reading past the
        // second recording's allocations.
        let a = rec("a.csv", "alloc,x,10,0\nalloc,y,20,0\nfree,x\nfree,y\n");
        let b = rec("b.csv", "alloc,x,20,0\nfree,x\n");
        let e = Template::learn("t", Scaling::Seq, &[at(&a, 1, 128), at(&b, 1, 256)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("b.csv") && e.contains("does not line up with a.csv: event 1"),
            "{e}"
        );
    }

    #[test]
    fn phase_marks_after_unicode_blank_lines_count_events() {
        // Lines of a vertical tab or a no-break space are blank to the CSV
        // reader; counted as events, they put the mark past the last event,
        // where learning indexed out of bounds.
        let body = "alloc,x,10,0\n\u{b}\n\u{a0}\n \u{3000}\n# phase: step 0\nfree,x\n";
        let a = rec("a.csv", body);
        assert_eq!(a.phases, vec![(1, "step 0".to_string())]);
        let b = rec("b.csv", &body.replace(",10,", ",20,"));
        let t = Template::learn("t", Scaling::Seq, &[at(&a, 1, 1), at(&b, 1, 2)]).unwrap();
        assert_eq!(t.phases, vec![(1, "step 0".to_string())]);
        let g = t.instantiate(1, 3, None).unwrap();
        assert_eq!(g.events.len(), 2);
    }

    #[test]
    fn hand_made_phase_marks_cannot_break_instantiation() {
        let mut a = rec("a.csv", "alloc,x,10,0\nfree,x\n");
        let mut b = rec("b.csv", "alloc,x,20,0\nfree,x\n");
        // Past the end: placed at the end.
        a.phases = vec![(0, "step 0".into()), (9, "step 1".into())];
        b.phases = a.phases.clone();
        let t = Template::learn("t", Scaling::Seq, &[at(&a, 1, 1), at(&b, 1, 2)]).unwrap();
        assert_eq!(t.phases, vec![(0, "step 0".into()), (2, "step 1".into())]);
        assert!(t.instantiate(1, 3, Some(4)).is_ok());
        // Out of order: refused.
        a.phases.reverse();
        let e = Template::learn("t", Scaling::Seq, &[at(&a, 1, 1), at(&b, 1, 2)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a.csv") && e.contains("not in event order"),
            "{e}"
        );
    }

    #[test]
    fn huge_sizes_and_batches_do_not_overflow() {
        let max = u64::MAX;
        let a = rec("a.csv", &format!("alloc,x,{},0\nfree,x\n", max - 1));
        let b = rec("b.csv", &format!("alloc,x,{},0\nfree,x\n", max - 1));
        let c = rec("c.csv", &format!("alloc,x,{max},0\nfree,x\n"));
        // The batch factor's denominator, size × batch difference, is
        // beyond i128.
        let s = [at(&a, 1, 1), at(&b, 1, 2), at(&c, max, 1)];
        let e = Template::learn("t", Scaling::Seq, &s)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c.csv") && e.contains("too large to scale"),
            "{e}"
        );
        // Just within i128: evaluating the size at a huge batch overflows
        // the exact arithmetic and falls back to floating point.
        let s = [at(&a, 1, 1), at(&b, 1, 2), at(&c, (1 << 63) + 1, 1)];
        let t = Template::learn("t", Scaling::Seq, &s).unwrap();
        for batch in [1, 2, 1 << 62, max] {
            let g = t.instantiate(batch, 1, None).unwrap();
            assert_eq!(g.events.len(), 2);
        }
        assert_eq!(div_round(i128::MAX - 1, i128::MAX), 1);
        assert_eq!(div_round(-(i128::MAX - 1), i128::MAX), -1);
    }

    #[test]
    fn peak_live_bytes_saturates() {
        let max = u64::MAX;
        let r = rec(
            "a.csv",
            &format!("alloc,x,{max},0\nalloc,y,{max},0\nfree,x\n"),
        );
        assert_eq!(peak_live_bytes(&r.trace), max);
    }
}
