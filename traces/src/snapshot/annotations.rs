//! A snapshot's `external_annotations` (PyTorch 2.5+: the START and END of
//! each `torch.profiler.record_function` scope while history is recorded,
//! with its time) made into the trace's phases and an engine's sleeps:
//!
//! * a scope that is not inside another begins a phase named after it
//!   (`# phase: NAME`), before the first device entry at or after its
//!   start, and its end begins the phase `after NAME` (unless another
//!   scope begins there);
//! * a `vramlab.pool_sleep A,B` or `vramlab.pool_wake A,B` scope (written
//!   by `workloads/record/engine_pool.py` around an engine pool's sleep
//!   and wake) becomes [`Event::PoolSleep`] or [`Event::PoolWake`] of the
//!   pool with that id there, and that pool an engine pool.
//!
//! Entries or annotations without a time place nothing; a sleep of a pool
//! the trace does not know is left out with a note.

use crate::model::{Event, PhaseMark, Trace};
use crate::pools::PrivatePoolKind;
use crate::snapshot::model::Annotation;

/// The scope name that marks an engine pool's sleep (then ` A,B`).
pub const SLEEP_SCOPE: &str = "vramlab.pool_sleep";
/// The scope name that marks an engine pool's wake (then ` A,B`).
pub const WAKE_SCOPE: &str = "vramlab.pool_wake";

/// Applies `annotations` of `device` to `t`, whose device events before
/// entry `k` are `starts[k]`, at the entries' `times`; `starts` is moved
/// past the events put in.
pub(super) fn apply(
    t: &mut Trace,
    annotations: &[Annotation],
    device: u32,
    starts: &mut [u32],
    times: &[Option<i64>],
) {
    let total = t.events.len() as u64;
    // Where a time falls: before the first entry at or after it.
    let at = |time: i64| -> u64 {
        let k = times.partition_point(|x| x.is_none_or(|x| x < time));
        starts.get(k).map_or(total, |&s| u64::from(s))
    };
    let mut depth = 0usize;
    let mut marks: Vec<(PhaseMark, usize)> = Vec::new();
    let mut inserts: Vec<(u64, Event)> = Vec::new();
    let mut unknown = 0usize;
    let mut redundant = 0usize;
    let mut asleep: Vec<u32> = Vec::new();
    for a in annotations {
        let mine = a
            .get("device")
            .and_then(|d| d.parse::<u32>().ok())
            .is_none_or(|d| d == device);
        let (Some(stage), Some(name), Some(time)) = (
            a.get("stage"),
            a.get("name"),
            a.get("time_us").and_then(|s| s.parse::<i64>().ok()),
        ) else {
            continue;
        };
        if !mine {
            continue;
        }
        if stage == "END" {
            depth = depth.saturating_sub(1);
            let engine = name.starts_with(SLEEP_SCOPE) || name.starts_with(WAKE_SCOPE);
            if depth == 0 && !engine {
                let i = at(time);
                let before = inserts.iter().filter(|(a, _)| *a == i).count();
                marks.push((
                    PhaseMark {
                        event_index: i,
                        label: format!("after {name}"),
                    },
                    before,
                ));
            }
            continue;
        }
        if stage != "START" {
            continue;
        }
        depth += 1;
        let engine = [(SLEEP_SCOPE, true), (WAKE_SCOPE, false)]
            .into_iter()
            .find_map(|(scope, sleep)| name.strip_prefix(scope).map(|rest| (rest, sleep)));
        if let Some((rest, sleep)) = engine {
            match pool_named(t, rest.trim()) {
                // A sleep of a sleeping pool, or a wake of an awake one,
                // does nothing (the allocator passes over it).
                Some(pool) if asleep.contains(&pool) == sleep => redundant += 1,
                Some(pool) => {
                    if sleep {
                        asleep.push(pool);
                    } else {
                        asleep.retain(|&p| p != pool);
                    }
                    if let Some(d) = t.pools.get_mut(pool as usize) {
                        d.kind = PrivatePoolKind::Engine;
                    }
                    let ev = if sleep {
                        Event::PoolSleep { pool }
                    } else {
                        Event::PoolWake { pool }
                    };
                    inserts.push((at(time), ev));
                }
                None => unknown += 1,
            }
        } else if depth == 1 {
            let i = at(time);
            let before = inserts.iter().filter(|(a, _)| *a == i).count();
            // The `after` mark of the scope before, where this one begins
            // at once, would name an empty phase.
            if marks.last().is_some_and(|(m, b): &(PhaseMark, usize)| {
                m.event_index == i && *b == before && m.label.starts_with("after ")
            }) {
                marks.pop();
            }
            marks.push((
                PhaseMark {
                    event_index: i,
                    label: name.clone(),
                },
                before,
            ));
        }
    }
    let engines: Vec<String> = t
        .pools
        .iter()
        .filter(|d| d.kind == PrivatePoolKind::Engine)
        .map(|d| d.id_text())
        .collect();
    if !engines.is_empty() {
        t.notes.push(format!(
            "engine pool(s) {}: the recording's vramlab.pool_sleep and vramlab.pool_wake scopes put their sleeps and wakes among the events",
            engines.join(", ")
        ));
    }
    if redundant > 0 {
        t.notes.push(format!(
            "{redundant} engine pool sleeps of a sleeping pool, or wakes of an awake one, do nothing and were left out"
        ));
    }
    if unknown > 0 {
        t.notes.push(format!(
            "{unknown} engine pool sleeps or wakes name a pool with no segment in the recording and were left out"
        ));
    }
    insert(t, &inserts);
    let moved = |i: u64| i + inserts.iter().filter(|(at, _)| *at < i).count() as u64;
    for s in starts.iter_mut() {
        // An event put in before entry k's first event precedes entry k.
        let n = inserts
            .iter()
            .filter(|(at, _)| *at <= u64::from(*s))
            .count();
        *s += n as u32;
    }
    let mut all: Vec<PhaseMark> = marks
        .into_iter()
        .map(|(mut m, before)| {
            // After the sleeps and wakes put in at its entry before it
            // began, before the others.
            m.event_index = moved(m.event_index) + before as u64;
            m
        })
        .collect();
    all.append(&mut t.phases);
    all.sort_by_key(|m| m.event_index);
    t.phases = all;
}

/// The index of the pool whose id reads `A,B` (or `(A, B)`).
fn pool_named(t: &Trace, text: &str) -> Option<u32> {
    let inner = text.trim_start_matches('(').trim_end_matches(')');
    let (a, b) = inner.split_once(',')?;
    let id = (a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?);
    t.pools.iter().position(|d| d.id == id).map(|i| i as u32)
}

/// Puts each `(position, event)` of `inserts` (positions in order) before
/// the event at that position, and moves every event index the trace keeps.
fn insert(t: &mut Trace, inserts: &[(u64, Event)]) {
    if inserts.is_empty() {
        return;
    }
    t.tenant_events = true;
    let mut sorted: Vec<(u64, Event)> = inserts.to_vec();
    sorted.sort_by_key(|&(at, _)| at);
    let mut events = Vec::with_capacity(t.events.len() + sorted.len());
    let mut k = 0usize;
    for (i, ev) in t.events.iter().enumerate() {
        while let Some(&(_, e)) = sorted.get(k).filter(|(at, _)| *at <= i as u64) {
            events.push(e);
            k += 1;
        }
        events.push(*ev);
    }
    events.extend(sorted.iter().skip(k).map(|&(_, e)| e));
    // Old event index -> new (an inserted event sits before the old one).
    let moved = |i: u64| i + sorted.iter().filter(|(at, _)| *at <= i).count() as u64;
    t.move_event_indices(moved);
    t.events = events;
}
