//! Learning a template (steps 1 and 2 of the module documentation): pick
//! the series and the batch recording, check that the series lines up,
//! fit every allocation's size, align the batch recording, merge (in
//! `merge`), and place the phase marks.

use crate::GenError;
use crate::fit::{FitKind, Poly, fit};
use vramlab_traces::{Location, TraceError};

use super::align::{MAX_DIFF, Pairs, align};
use super::merge::{Merged, merge};
use super::shape::{Shape, describe, shape};
use super::{Sample, Scaling, TEvent, Template};

impl Template {
    /// Learns a template from samples. See the module documentation.
    pub(crate) fn learn(
        name: &str,
        scaling: Scaling,
        samples: &[Sample<'_>],
    ) -> Result<Template, GenError> {
        let Recordings {
            base_batch,
            series,
            other,
        } = pick_recordings(name, scaling, samples)?;
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
        check_series_lines_up(first, first_sample, &series, &shapes)?;
        let fits = fit_sizes(name, &xs, &shapes, first.sizes.len())?;

        // The base member the batch recording is aligned with.
        let (ref_sample, rshape, pairs, other) = match other {
            None => (
                first_sample,
                first,
                (0..first.events.len())
                    .map(|i| (Some(i), None))
                    .collect::<Pairs>(),
                None,
            ),
            Some(o) => {
                let (ref_sample, rshape, vs, pairs) =
                    align_other_batch(name, scaling, base_batch, &series, &shapes, o)?;
                (ref_sample, rshape, pairs, Some((*o, vs)))
            }
        };

        let merged = merge(base_batch, &fits, rshape, &pairs, other.as_ref())?;
        let phases = place_phases(ref_sample, &merged)?;
        check_invariants(name, first_sample, &merged, &phases)?;
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
            streams: merged.streams,
            allocs: merged.allocs,
            events: merged.events,
            presence: merged.presence,
            phases,
        })
    }
}

/// The recordings a template is learned from.
struct Recordings<'s, 'a> {
    /// The smallest batch size.
    base_batch: u64,
    /// The recordings at the base batch, by value (two or more, at
    /// distinct values).
    series: Vec<&'s Sample<'a>>,
    /// The recording at another batch, if any (at most one).
    other: Option<&'s Sample<'a>>,
}

/// Sorts the samples into [`Recordings`], refusing sets that do not make
/// one.
fn pick_recordings<'s, 'a>(
    name: &str,
    scaling: Scaling,
    samples: &'s [Sample<'a>],
) -> Result<Recordings<'s, 'a>, GenError> {
    let base_batch = samples
        .iter()
        .map(|s| s.batch)
        .min()
        .ok_or_else(|| GenError::Request(format!("{name}: no recordings to learn from")))?;
    let mut series: Vec<&Sample<'_>> = samples.iter().filter(|s| s.batch == base_batch).collect();
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
    Ok(Recordings {
        base_batch,
        series,
        other: others.first().copied(),
    })
}

/// Refuses a series member whose events differ from the first member's in
/// kind, allocation or stream (only sizes may differ), naming the first
/// event that does.
fn check_series_lines_up(
    first: &Shape,
    first_sample: &Sample<'_>,
    series: &[&Sample<'_>],
    shapes: &[Shape],
) -> Result<(), GenError> {
    for (sample, sh) in series.iter().zip(shapes).skip(1) {
        let n = first.events.len().min(sh.events.len());
        // The first event that differs in kind, allocation or stream.
        let bad = first
            .events
            .iter()
            .zip(&sh.events)
            .position(|(&theirs, &ours)| match theirs {
                _ if theirs != ours => true,
                TEvent::Alloc(a) => first.streams.get(a as usize) != sh.streams.get(a as usize),
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
    Ok(())
}

/// Fits each of the `n` allocations of the series exactly through its
/// sizes at the series' variables `xs`.
// Indexing: `sh.sizes[a]` for `a < n`, the first member's number of
// allocations: once the series lines up, all its members have the same
// events, hence (S) as many sizes.
#[allow(clippy::indexing_slicing)]
fn fit_sizes(
    name: &str,
    xs: &[i128],
    shapes: &[Shape],
    n: usize,
) -> Result<Vec<(Poly, FitKind)>, GenError> {
    let mut fits = Vec::with_capacity(n);
    let mut pts = Vec::with_capacity(xs.len());
    for a in 0..n {
        pts.clear();
        pts.extend(
            xs.iter()
                .zip(shapes)
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
    Ok(fits)
}

/// Aligns the batch recording `o` with the series member at its value:
/// returns that member, its shape, `o`'s shape and the pairs.
fn align_other_batch<'s, 'a>(
    name: &str,
    scaling: Scaling,
    base_batch: u64,
    series: &[&'s Sample<'a>],
    shapes: &'s [Shape],
    o: &Sample<'_>,
) -> Result<(&'s Sample<'a>, &'s Shape, Shape, Pairs), GenError> {
    let (&ref_sample, rshape) = series
        .iter()
        .zip(shapes)
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
    Ok((ref_sample, rshape, vs, pairs))
}

/// The phase marks of the series member the template follows, moved to
/// the template's event positions (a mark after the last event goes at the
/// end); refused when they are out of event order.
fn place_phases(
    ref_sample: &Sample<'_>,
    merged: &Merged,
) -> Result<Vec<(usize, String)>, GenError> {
    let rec = ref_sample.rec;
    if !rec.phases.is_sorted_by_key(|(e, _)| *e) {
        return Err(TraceError::new(
            &rec.name,
            Location::File,
            "the phase marks are not in event order",
        )
        .into());
    }
    let events = merged.events.len();
    Ok(rec
        .phases
        .iter()
        .map(|(e, l)| {
            let pos = match e.checked_sub(1) {
                None => 0,
                // A mark after the last event goes at the end.
                Some(i) => merged.r_pos.get(i).map_or(events, |p| p + 1),
            };
            (pos.min(events), l.clone())
        })
        .collect())
}

/// (T1)–(T3) hold by construction; checked, as `instantiate` indexes by
/// them.
fn check_invariants(
    name: &str,
    first_sample: &Sample<'_>,
    merged: &Merged,
    phases: &[(usize, String)],
) -> Result<(), GenError> {
    let events = &merged.events;
    let names_missing = events
        .iter()
        .any(|e| e.alloc().is_some_and(|a| a as usize >= merged.allocs.len()));
    let phases_ok = phases.is_sorted_by_key(|(p, _)| *p)
        && phases.last().is_none_or(|(p, _)| *p <= events.len());
    if names_missing || !phases_ok || merged.presence.len() != events.len() {
        return Err(GenError::Request(format!(
            "{name}: internal error: the template learned from {} is inconsistent",
            first_sample.rec.name
        )));
    }
    Ok(())
}
