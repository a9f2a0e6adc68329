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
//!    scaling variable `x` ([`Scaling::variable`]) with [`fit`](super::fit::fit).
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
//! denoising step (see [`Template::instantiate`]), `new_tokens` the last
//! decode step one token further on each time
//! ([`Template::instantiate_with`]).
//!
//! The code follows those steps: `shape` reads a recording's structure,
//! `learn` checks and fits the series, `align` pairs the batch recording's
//! events with the series member's, `merge` turns the pairs into template
//! allocations and events, `instantiate` evaluates and emits them, and
//! `steps` repeats the last recorded step.

mod align;
mod decode;
mod instantiate;
mod items;
mod learn;
mod merge;
mod shape;
mod steps;

use std::fmt;

use vramlab_traces::advice::OptionName;

use crate::opt::WorkloadOpt;
use vramlab_traces::{Event, Trace, TraceHeader};

use super::fit::{FitKind, Poly, div_round};
use super::read::Recording;
use steps::step_index;

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

    /// The option that sets the parameter (`--seq`, `seq=`).
    pub fn opt(self) -> WorkloadOpt {
        match self {
            Scaling::Seq => WorkloadOpt::Seq,
            Scaling::Resolution => WorkloadOpt::Resolution,
        }
    }

    /// The fit variable for a parameter value.
    pub(crate) fn variable(self, value: u64) -> Result<i128, String> {
        if value == 0 {
            return Err(format!("{} must be at least 1", self.opt().bare()));
        }
        match self {
            Scaling::Seq => Ok(value as i128),
            Scaling::Resolution => {
                if value % 8 != 0 {
                    return Err(format!(
                        "{} must be a multiple of 8 (the VAE works on 8x8 pixel latents), not {value}",
                        WorkloadOpt::Resolution.bare()
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
pub(crate) struct Sample<'a> {
    /// The recording.
    pub rec: &'a Recording,
    /// Its batch size.
    pub batch: u64,
    /// Its value of the scaling parameter.
    pub value: u64,
}

/// For which batch sizes an allocation exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presence {
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
pub(crate) struct SizeFn {
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
    pub(crate) fn eval(&self, b: u64, x: i128) -> u64 {
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

impl Template {
    /// Number of training or denoising steps recorded (phases named
    /// `step N…` or `… step N`), if any.
    pub fn recorded_steps(&self) -> Option<u32> {
        self.phases
            .iter()
            .filter_map(|(_, l)| step_index(l))
            .max()
            .map(|m| m + 1)
    }
}

/// Peak of the sum of requested sizes of live allocations (a block whose
/// free was requested stays live until the free completes).
pub fn peak_live_bytes(trace: &Trace) -> u64 {
    let mut size = vec![0u64; trace.num_ids as usize];
    if let Some(init) = &trace.initial {
        for b in &init.live {
            if let vramlab_traces::InitialBlockState::Allocated(id)
            | vramlab_traces::InitialBlockState::PendingFree(id) = b.state
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
            _ => {}
        }
    }
    peak
}

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
