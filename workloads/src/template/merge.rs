//! Merging the aligned recordings into the template's allocations and
//! events: matched allocations get a batch factor, those seen at one
//! batch only are kept for it (see the module documentation, step 2).

use crate::GenError;
use crate::fit::{FitKind, Poly};
use vramlab_traces::{Location, TraceError};

use super::align::Pairs;
use super::shape::Shape;
use super::{Presence, Sample, SizeFn, TAlloc, TEvent};

/// The template's allocations, events, their presence and streams, as
/// `merge` makes them.
pub(super) struct Merged {
    pub(super) allocs: Vec<TAlloc>,
    pub(super) events: Vec<TEvent>,
    pub(super) presence: Vec<Presence>,
    pub(super) streams: Vec<u64>,
    /// Per event of the series member the template follows, and one past
    /// its last: the position of the template event it became.
    pub(super) r_pos: Vec<usize>,
}

/// Merges the events of `rshape` (a series member, with the `fits` of the
/// series) and, if there is one, of the batch recording `other`, paired
/// by `pairs`, into template allocations and events.
// Indexing: `rshape.events[ri]`, `r_pos[ri]`, `vs.events[vi]`: the pairs
// hold positions of the two recordings' events (see `align`; without a
// batch recording, `0..rshape.events.len()`), and `r_pos` has one entry
// more than `rshape.events`, its last written after the loop.
#[allow(clippy::indexing_slicing)]
pub(super) fn merge(
    base_batch: u64,
    fits: &[(Poly, FitKind)],
    rshape: &Shape,
    pairs: &Pairs,
    other: Option<&(Sample<'_>, Shape)>,
) -> Result<Merged, GenError> {
    let other = other.map(|(o, vs)| (o, vs));
    let mut m = Merger {
        base_batch,
        fits,
        rshape,
        other,
        allocs: Vec::with_capacity(fits.len() + 16),
        r_alloc: vec![u32::MAX; rshape.sizes.len()],
        v_alloc: other.map_or(Vec::new(), |(_, vs)| vec![u32::MAX; vs.sizes.len()]),
        matched_sizes: Vec::new(),
        pending_donor: Vec::new(),
    };
    let mut events = Vec::with_capacity(pairs.len());
    let mut presence = Vec::with_capacity(pairs.len());
    let mut r_pos = vec![0usize; rshape.events.len() + 1];
    for &(ri, vi) in pairs {
        if let Some(ri) = ri {
            r_pos[ri] = events.len();
        }
        let ev = match (ri, vi, other) {
            (Some(ri), _, _) => match rshape.events[ri] {
                TEvent::Alloc(a) => m.base_alloc(a, vi)?,
                other_ev => remap(other_ev, &m.r_alloc),
            },
            (None, Some(vi), Some((o, vs))) => match vs.events[vi] {
                TEvent::Alloc(b) => m.other_batch_alloc(o, vs, b),
                other_ev => remap(other_ev, &m.v_alloc),
            },
            // Only `align` makes pairs without a base event, and only
            // when there is a batch recording.
            (None, _, _) => continue,
        };
        presence.push(match (ri, vi) {
            _ if other.is_none() => Presence::Always,
            (Some(_), Some(_)) => Presence::Always,
            (Some(_), None) => Presence::BaseBatchOnly,
            _ => Presence::OtherBatchOnly,
        });
        events.push(ev);
    }
    r_pos[rshape.events.len()] = events.len();
    m.take_later_donors();
    let streams = m.assign_streams();
    Ok(Merged {
        allocs: m.allocs,
        events,
        presence,
        streams,
        r_pos,
    })
}

/// The merge in progress.
struct Merger<'m> {
    base_batch: u64,
    fits: &'m [(Poly, FitKind)],
    rshape: &'m Shape,
    other: Option<(&'m Sample<'m>, &'m Shape)>,
    allocs: Vec<TAlloc>,
    /// Template allocation of each allocation of `rshape` (`u32::MAX`:
    /// none yet).
    r_alloc: Vec<u32>,
    /// Template allocation of each allocation of the batch recording.
    v_alloc: Vec<u32>,
    /// (template alloc, size at the other batch) of matched allocations,
    /// for donors.
    matched_sizes: Vec<(u32, u64)>,
    /// Allocations of the other batch only that found no donor before
    /// them: (template alloc, size).
    pending_donor: Vec<(u32, u64)>,
}

// Indexing in the methods: `allocs[t]` for `t` in `matched_sizes`,
// `pending_donor`, or in `r_alloc`/`v_alloc` other than `u32::MAX`: each
// such `t` is `allocs.len()` just before a push to `allocs`, which never
// shrinks.
impl Merger<'_> {
    /// The allocation `a` of `rshape` (event pair `(_, vi)`) as a template
    /// allocation: fitted over the series, with a batch factor when it is
    /// matched to an allocation of the batch recording.
    // Indexing: `fits[a]`, `rshape.sizes[a]`, `r_alloc[a]` for an
    // allocation `a` that an event of `rshape` names: `a <
    // rshape.sizes.len()` (S), which is `r_alloc.len()`, and `fits.len()` as
    // `rshape` is a series member; `vs.events[vi]`: the pairs hold
    // positions of `vs`'s events; `vs.sizes[b]`, `v_alloc[b]` for an
    // allocation of `vs`, likewise.
    #[allow(clippy::indexing_slicing)]
    fn base_alloc(&mut self, a: u32, vi: Option<usize>) -> Result<TEvent, GenError> {
        let b0 = self.base_batch as i128;
        let t = self.allocs.len() as u32;
        self.r_alloc[a as usize] = t;
        let mut size = SizeFn {
            poly: self.fits[a as usize].0,
            kind: self.fits[a as usize].1,
            bref: b0,
            bnum: 0,
            bden: 1,
        };
        let mut presence = Presence::BaseBatchOnly;
        if self.other.is_none() {
            presence = Presence::Always;
        }
        if let (Some(vi), Some((o, vs))) = (vi, self.other) {
            if let TEvent::Alloc(b) = vs.events[vi] {
                self.v_alloc[b as usize] = t;
                let (sr, sv) = (
                    self.rshape.sizes[a as usize] as i128,
                    vs.sizes[b as usize] as i128,
                );
                let (n, d) = self.batch_factor(o, vi, sr, sv)?;
                size.bnum = n;
                size.bden = d;
                presence = Presence::Always;
                self.matched_sizes.push((t, sv as u64));
            }
        }
        self.allocs.push(TAlloc {
            size,
            stream: 0,
            presence,
        });
        Ok(TEvent::Alloc(t))
    }

    /// `(bnum, bden)` of an allocation of `sr` bytes at the base batch and
    /// `sv` at the batch of `o` (its event `vi`): exact at both batches.
    fn batch_factor(
        &self,
        o: &Sample<'_>,
        vi: usize,
        sr: i128,
        sv: i128,
    ) -> Result<(i128, i128), GenError> {
        let base_batch = self.base_batch;
        let db = o.batch as i128 - base_batch as i128;
        if sr == 0 {
            return Ok((0, 1));
        }
        let d = sr.checked_mul(db).ok_or_else(|| {
            TraceError::new(
                &o.rec.name,
                Location::Entry(vi as u64),
                format!(
                    "an allocation of {sr} bytes at batch {base_batch} and {sv} at batch {} is too large to scale",
                    o.batch
                ),
            )
        })?;
        Ok(reduce(sv - sr, d))
    }

    /// The allocation `b` of the batch recording `vs` (at the batch of
    /// `o`), seen only there, as a template allocation: its size follows
    /// the closest matched allocation of equal size before it (the tensor
    /// it copies), else one after it (see `take_later_donors`), else stays
    /// proportional to the batch.
    // Indexing: `vs.sizes[b]`, `v_alloc[b]` for an allocation `b` that an
    // event of `vs` names: `b < vs.sizes.len()` (S), which is
    // `v_alloc.len()`; `allocs[d]`: see the `impl`.
    #[allow(clippy::indexing_slicing)]
    fn other_batch_alloc(&mut self, o: &Sample<'_>, vs: &Shape, b: u32) -> TEvent {
        let t = self.allocs.len() as u32;
        self.v_alloc[b as usize] = t;
        let sv = vs.sizes[b as usize];
        // Follows the closest matched allocation of equal size before it
        // (the tensor it copies), else after it.
        let donor = self
            .matched_sizes
            .iter()
            .rev()
            .take(256)
            .find(|(_, s)| *s == sv)
            .map(|(d, _)| self.allocs[*d as usize].size);
        let size = donor.unwrap_or(SizeFn {
            poly: Poly::constant(sv as i128),
            kind: FitKind::Constant,
            bref: o.batch as i128,
            bnum: 1,
            bden: o.batch as i128,
        });
        if donor.is_none() {
            self.pending_donor.push((t, sv));
        }
        self.allocs.push(TAlloc {
            size,
            stream: 0,
            presence: Presence::OtherBatchOnly,
        });
        TEvent::Alloc(t)
    }

    /// Donors after the allocation, for those that had none before.
    // Indexing: see the `impl`.
    #[allow(clippy::indexing_slicing)]
    fn take_later_donors(&mut self) {
        for &(t, sv) in &self.pending_donor {
            if let Some((d, _)) = self.matched_sizes.iter().find(|(d, s)| *s == sv && *d > t) {
                self.allocs[t as usize].size = self.allocs[*d as usize].size;
            }
        }
    }

    /// Numbers the streams and sets each allocation's: the raw handles of
    /// the series (the other batch's for its own). Returns the raw handles
    /// by number, the default stream (0) first.
    // Indexing: see the `impl`.
    #[allow(clippy::indexing_slicing)]
    fn assign_streams(&mut self) -> Vec<u64> {
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
        for (&t, &raw) in self.r_alloc.iter().zip(&self.rshape.streams) {
            if t != u32::MAX {
                self.allocs[t as usize].stream = stream_index(raw);
            }
        }
        if let Some((_, vs)) = self.other {
            for (&t, &raw) in self.v_alloc.iter().zip(&vs.streams) {
                if t != u32::MAX && self.allocs[t as usize].presence == Presence::OtherBatchOnly {
                    self.allocs[t as usize].stream = stream_index(raw);
                }
            }
        }
        streams
    }
}

/// `n / d` in lowest terms.
fn reduce(n: i128, d: i128) -> (i128, i128) {
    let mut g = (n.abs(), d.abs());
    while g.1 != 0 {
        g = (g.1, g.0 % g.1);
    }
    let g = g.0.max(1);
    (n / g, d / g)
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
