//! `colocate --what-if`: the remedies people try on a shared card, each
//! replayed on the whole job: one tenant with `expandable_segments:True`,
//! or emptying its cache at the end of every phase (`empty_cache()` at a
//! phase boundary, the fix of verl#6912 and sglang#24905). An engine's
//! utilization is what `--search-util` answers; sleep level 1 or 2 frees
//! the same device memory (level 1 keeps the weights in host RAM), so it
//! is no device variant.

use anyhow::Result;
use serde::Serialize;
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{ReplayOptions, Scenario, Step, Tenant, replay_colocated};
use vramlab_traces::{Event, PhaseMark, Trace};

use super::TenantSpec;
use crate::render::table::{Table, bytes, count};

/// One variant of the job, replayed.
#[derive(Debug, Clone, Serialize)]
pub(super) struct WhatIf {
    /// What changed (`as given`, `rollout: expandable_segments:True`, …).
    pub variant: String,
    /// The first tenant to run out of memory, and at which of its events.
    pub first_oom: Option<(String, u64)>,
    /// The device's peak used bytes.
    pub device_peak_bytes: u64,
    /// Each tenant's peak reserved bytes.
    pub peak_reserved_bytes: Vec<u64>,
}

/// `trace` with `empty_cache()` at the end of every phase (before each
/// phase mark after the first event), and where the calls went (indices in
/// the new trace, in order).
pub(super) fn with_empty_cache_at_phase_ends(trace: &Trace) -> (Trace, Vec<u64>) {
    let mut t = trace.clone();
    let cuts: Vec<u64> = trace
        .phases
        .iter()
        .map(|m| m.event_index)
        .filter(|&i| i > 0)
        .collect();
    let mut events = Vec::with_capacity(trace.events.len() + cuts.len());
    let mut added = Vec::new();
    let mut k = 0usize;
    for (i, ev) in trace.events.iter().enumerate() {
        let mut cut = false;
        while cuts.get(k).is_some_and(|&c| c <= i as u64) {
            cut = true;
            k += 1;
        }
        if cut {
            added.push(events.len() as u64);
            events.push(Event::EmptyCache);
        }
        events.push(*ev);
    }
    if cuts.get(k).is_some() {
        added.push(events.len() as u64);
        events.push(Event::EmptyCache);
    }
    // Each mark moves past the empty_cache() calls put in at or before it.
    t.phases = trace
        .phases
        .iter()
        .map(|m| PhaseMark {
            event_index: m.event_index + dedup_count(&cuts, |c| c <= m.event_index) as u64,
            label: m.label.clone(),
        })
        .collect();
    t.events = events;
    (t, added)
}

/// Distinct values of `cuts` (sorted) that `keep` keeps.
fn dedup_count(cuts: &[u64], keep: impl Fn(u64) -> bool) -> usize {
    let mut n = 0;
    let mut last = None;
    for &c in cuts {
        if keep(c) && last != Some(c) {
            n += 1;
        }
        last = Some(c);
    }
    n
}

/// The settings `conf` with expandable segments on (`None`: already on).
fn with_es(conf: &str) -> Option<String> {
    if conf.contains("expandable_segments:True") || conf.contains("expandable_segments:true") {
        return None;
    }
    if conf.contains("expandable_segments") {
        // expandable_segments:False: turned on instead.
        return Some(
            conf.replace("expandable_segments:False", "expandable_segments:True")
                .replace("expandable_segments:false", "expandable_segments:True"),
        );
    }
    Some(if conf == "default" || conf.is_empty() {
        "expandable_segments:True".into()
    } else {
        format!("{conf},expandable_segments:True")
    })
}

/// Every variant of the job, replayed.
#[allow(clippy::too_many_arguments)]
pub(super) fn explore(
    tenants: &[Tenant<'_>],
    specs: &[TenantSpec],
    release: TorchVersion,
    capacity: u64,
    total: Option<u64>,
    schedule: &[Step],
    opts: &ReplayOptions,
) -> Result<Vec<WhatIf>> {
    // `added`: the empty_cache() calls put into tenant `.0`'s trace, so
    // that its events are numbered as in the job's own.
    let run =
        |variant: String, ts: &[Tenant<'_>], added: Option<(usize, &[u64])>| -> Result<WhatIf> {
            let r = replay_colocated(ts, Some(capacity), total, schedule, opts)?;
            let own = |t: usize, e: u64| match added {
                Some((i, at)) if i == t => e - at.iter().filter(|&&a| a < e).count() as u64,
                _ => e,
            };
            Ok(WhatIf {
                variant,
                first_oom: r.first_oom.map(|(t, e)| {
                    (
                        ts.get(t).map_or(String::new(), |x| x.name.clone()),
                        own(t, e),
                    )
                }),
                device_peak_bytes: r.device_peak,
                peak_reserved_bytes: r
                    .runs
                    .iter()
                    .map(|x| x.summary.peak_reserved_bytes)
                    .collect(),
            })
        };
    let mut out = vec![run("as given".into(), tenants, None)?];
    for (i, spec) in specs.iter().enumerate() {
        if let Some(conf) = with_es(&spec.conf) {
            let parsed =
                AllocConf::parse(&conf, release).map_err(|e| anyhow::anyhow!("{conf}: {e}"))?;
            let mut ts = tenants.to_vec();
            if let Some(t) = ts.get_mut(i) {
                t.scenario = Scenario::native(parsed).with_placement(t.scenario.placement);
            }
            out.push(run(
                format!("{}: expandable_segments:True", spec.name),
                &ts,
                None,
            )?);
        }
        let Some(t) = tenants.get(i) else { continue };
        if t.trace.phases.iter().any(|m| m.event_index > 0) {
            let (emptied, added) = with_empty_cache_at_phase_ends(t.trace);
            let mut ts = tenants.to_vec();
            if let Some(x) = ts.get_mut(i) {
                x.trace = &emptied;
            }
            let variant = format!("{}: empty_cache() at every phase end", spec.name);
            out.push(run(variant, &ts, Some((i, &added)))?);
        }
    }
    Ok(out)
}

/// The variants as a table.
pub(super) fn print(rows: &[WhatIf], names: &[String]) {
    let mut head = vec![
        "what if".to_string(),
        "first OOM".into(),
        "device peak".into(),
    ];
    head.extend(names.iter().map(|n| format!("{n} peak reserved")));
    let mut t = Table::new(head).left(0).left(1);
    for r in rows {
        let mut row = vec![
            r.variant.clone(),
            r.first_oom
                .as_ref()
                .map_or("none".into(), |(t, e)| format!("{t}, event {}", count(*e))),
            bytes(r.device_peak_bytes),
        ];
        row.extend(r.peak_reserved_bytes.iter().map(|&b| bytes(b)));
        t.row(row);
    }
    out!("{}", t.render());
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramlab_traces::TraceHeader;

    #[test]
    fn empty_cache_goes_before_each_later_mark_and_the_marks_follow() {
        let mut t = Trace::new(TraceHeader::default());
        t.events = vec![Event::Free { id: 0 }; 4];
        t.phases = [(0, "a"), (2, "b"), (2, "c"), (4, "d")]
            .into_iter()
            .map(|(i, l)| PhaseMark {
                event_index: i,
                label: l.into(),
            })
            .collect();
        let (e, added) = with_empty_cache_at_phase_ends(&t);
        assert_eq!(added, vec![2, 5]);
        assert_eq!(e.events.len(), 6);
        assert_eq!(e.events.get(2), Some(&Event::EmptyCache));
        assert_eq!(e.events.get(5), Some(&Event::EmptyCache));
        let at: Vec<u64> = e.phases.iter().map(|m| m.event_index).collect();
        assert_eq!(at, vec![0, 3, 3, 6]);
    }
}
