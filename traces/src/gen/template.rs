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
        let factor = self.bden + (b as i128 - self.bref) * self.bnum;
        let v = match f.checked_mul(factor) {
            Some(n) => div_round(n, self.bden),
            None => (f as f64 * factor as f64 / self.bden as f64).round() as i128,
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
        for w in series.windows(2) {
            if w[0].value == w[1].value {
                return Err(GenError::Request(format!(
                    "{name}: two recordings at batch {base_batch} and {}={} ({} and {})",
                    scaling.param(),
                    w[0].value,
                    w[0].rec.name,
                    w[1].rec.name
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
        let first = &shapes[0];
        for (k, sh) in shapes.iter().enumerate().skip(1) {
            let n = first.events.len().min(sh.events.len());
            let bad = (0..n).find(|&i| {
                let same = first.events[i] == sh.events[i];
                let stream_ok = match first.events[i] {
                    TEvent::Alloc(a) => first.streams[a as usize] == sh.streams[a as usize],
                    _ => true,
                };
                !(same && stream_ok)
            });
            let bad = bad.or((first.events.len() != sh.events.len()).then_some(n));
            if let Some(i) = bad {
                let theirs = first
                    .events
                    .get(i)
                    .map_or("the end".into(), |e| describe(*e));
                let ours = sh.events.get(i).map_or("the end".into(), |e| describe(*e));
                return Err(TraceError::new(
                    &series[k].rec.name,
                    Location::Entry(i as u64),
                    format!(
                        "does not line up with {}: event {i} is {ours} here but {theirs} there; a template needs recordings of the same code path at every size",
                        series[0].rec.name
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
        let (ref_k, pairs, other) = match others.first() {
            None => (
                0,
                (0..first.events.len())
                    .map(|i| (Some(i), None))
                    .collect::<Pairs>(),
                None,
            ),
            Some(o) => {
                let k = series.iter().position(|s| s.value == o.value).ok_or_else(|| {
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
                let pairs = align(&shapes[k], &vs, kmax, MAX_DIFF).ok_or_else(|| {
                    TraceError::new(
                        &o.rec.name,
                        Location::File,
                        format!(
                            "cannot align with {}: more than {MAX_DIFF} events differ",
                            series[k].rec.name
                        ),
                    )
                })?;
                (k, pairs, Some((*o, vs)))
            }
        };
        let rshape = &shapes[ref_k];

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
            let ev = match (ri, vi) {
                (Some(ri), _) => {
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
                                        reduce(sv - sr, sr * db)
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
                (None, Some(vi)) => {
                    let (o, vs) = other
                        .as_ref()
                        .expect("other events come from the other recording");
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
                (None, None) => continue,
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
        for (a, &t) in r_alloc.iter().enumerate() {
            if t != u32::MAX {
                allocs[t as usize].stream = stream_index(rshape.streams[a]);
            }
        }
        if let Some((_, vs)) = &other {
            for (b, &t) in v_alloc.iter().enumerate() {
                if t != u32::MAX && allocs[t as usize].presence == Presence::OtherBatchOnly {
                    allocs[t as usize].stream = stream_index(vs.streams[b]);
                }
            }
        }
        let phases = series[ref_k]
            .rec
            .phases
            .iter()
            .map(|(e, l)| {
                let pos = if *e == 0 { 0 } else { r_pos[*e - 1] + 1 };
                (pos.min(events.len()), l.clone())
            })
            .collect();
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
            header: series[0].rec.trace.header.clone(),
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
        let start = self
            .phases
            .iter()
            .position(|(_, l)| step_index(l) == Some(last))?;
        let end = self.phases[start..]
            .iter()
            .find(|(_, l)| step_index(l) != Some(last))
            .map_or(self.events.len(), |(e, _)| *e);
        Some((self.phases[start].0, end, last + 1, first))
    }

    /// Generates the trace at batch `batch` and scaling value `value`.
    ///
    /// `steps`, for workloads recorded with two or more steps, repeats the
    /// last recorded step until there are `steps` of them: every
    /// allocation that a step leaves to the next (latents, accumulated
    /// state) is paired with the one the previous step left, by size
    /// function; a request for fewer steps than recorded is refused.
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

        let extra = repeat
            .as_ref()
            .map_or(0, |(s, e, n, _, _)| (e - s) * *n as usize);
        let mut out = Vec::with_capacity(self.events.len() + extra);
        let mut id_of = vec![0 as AllocId; self.allocs.len()];
        let mut next: AllocId = 0;
        let no_skip: Vec<bool> = Vec::new();
        let mut emit = |range: std::ops::Range<usize>,
                        out: &mut Vec<Event>,
                        id_of: &mut Vec<AllocId>,
                        skip_frees: &[bool]|
         -> Result<(), GenError> {
            for (ev, &on) in self.events[range.clone()].iter().zip(&ev_present[range]) {
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
        for (n, ev) in self.events.iter().enumerate() {
            if !ev_present[n] {
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

fn remap(e: TEvent, map: &[u32]) -> TEvent {
    match e {
        TEvent::Free(a) => TEvent::Free(map[a as usize]),
        TEvent::FreeRequested(a) => TEvent::FreeRequested(map[a as usize]),
        TEvent::FreeCompleted(a) => TEvent::FreeCompleted(map[a as usize]),
        other => other,
    }
}

/// Peak of the sum of requested sizes of live allocations (a block whose
/// free was requested stays live until the free completes).
pub fn peak_live_bytes(trace: &Trace) -> u64 {
    let mut size = vec![0u64; trace.num_ids as usize];
    if let Some(init) = &trace.initial {
        for b in init.segments.iter().flat_map(|s| &s.blocks) {
            if let crate::model::InitialBlockState::Allocated(id)
            | crate::model::InitialBlockState::PendingFree(id) = b.state
            {
                if let Some(s) = size.get_mut(id as usize) {
                    *s = b.requested;
                }
            }
        }
    }
    let mut live: u64 = size.iter().sum();
    let mut peak = live;
    for ev in &trace.events {
        match *ev {
            Event::Alloc { id, size: s, .. } => {
                if let Some(slot) = size.get_mut(id as usize) {
                    *slot = s;
                }
                live += s;
                peak = peak.max(live);
            }
            Event::Free { id } | Event::FreeCompleted { id } => {
                live -= size.get(id as usize).copied().unwrap_or(0);
            }
            Event::FreeRequested { .. } | Event::EmptyCache => {}
        }
    }
    peak
}

/// (birth, death) event of each allocation, and which allocations are used.
type LifetimesAndUse = (Vec<(u32, u32)>, Vec<bool>);
