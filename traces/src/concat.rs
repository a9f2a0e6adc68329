//! Two jobs in one process, one after the other: trace A, optionally an
//! `empty_cache()`, then trace B. What is still allocated at the end of A
//! stays allocated while B runs, as it would in one Python process; the
//! cache A leaves behind is what B starts with, unless it is emptied.

use crate::model::{Event, PhaseMark, Trace, TraceHeader};

/// Why two traces cannot be joined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConcatError {
    /// Together they hold more allocation ids than a trace can.
    #[error("together the traces hold {0} allocation ids; a trace holds at most 2^32 - 1")]
    TooManyIds(u64),
    /// Together they hold more events than a trace can.
    #[error("together the traces hold {0} events; a trace holds at most 2^32 - 1")]
    TooManyEvents(u64),
    /// Both route requests to private pools (graphs, MemPools, engine
    /// pools), whose ids would clash.
    #[error(
        "both traces use private pools (CUDA graphs, MemPools, engine pools); concat keeps the pools of one trace only"
    )]
    PoolsInBoth,
}

/// The phase marks of `t`, each label prefixed with `job` and shifted by
/// `offset` events; a trace without marks gets one mark, `job`, at its
/// start.
fn marks_of(t: &Trace, job: &str, offset: u64) -> Vec<PhaseMark> {
    if t.phases.is_empty() {
        return vec![PhaseMark {
            event_index: offset,
            label: job.to_string(),
        }];
    }
    t.phases
        .iter()
        .map(|p| PhaseMark {
            event_index: p.event_index + offset,
            label: format!("{job}: {}", p.label),
        })
        .collect()
}

/// Job `a`, then (with `empty_cache_between`) an `empty_cache()`, then job
/// `b`, as one trace. Header lines both traces share are kept. Traces recorded mid-run start fresh (the blocks in
/// use at their first entry become their first allocations). B's
/// allocation ids come after A's, its streams are matched to A's by
/// handle, its stacks are kept. Phase marks are prefixed `A:` and `B:`.
/// The recorded addresses (for `fidelity`) are dropped: they no longer
/// describe one run.
pub fn concat(a: &Trace, b: &Trace, empty_cache_between: bool) -> Result<Trace, ConcatError> {
    let (a, b) = (a.with_fresh_start(), b.with_fresh_start());
    if !a.pools.is_empty() && !b.pools.is_empty() {
        return Err(ConcatError::PoolsInBoth);
    }
    let ids = u64::from(a.num_ids) + u64::from(b.num_ids);
    let id_offset = a.num_ids;
    if ids > u64::from(u32::MAX) {
        return Err(ConcatError::TooManyIds(ids));
    }
    let between = u64::from(empty_cache_between);
    let events = (a.events.len() + b.events.len()) as u64 + between;
    if events > u64::from(u32::MAX) {
        return Err(ConcatError::TooManyEvents(events));
    }
    let mut streams = a.streams.clone();
    let stream_map: Vec<u32> = b
        .streams
        .iter()
        .map(|raw| match streams.iter().position(|s| s == raw) {
            Some(i) => i as u32,
            None => {
                streams.push(*raw);
                (streams.len() - 1) as u32
            }
        })
        .collect();
    let restream = |s: u32| stream_map.get(s as usize).copied().unwrap_or(0);
    let mut out = Trace {
        header: TraceHeader {
            source: format!(
                "{} then{} {}",
                a.header.source,
                if empty_cache_between {
                    " empty_cache(), then"
                } else {
                    ""
                },
                b.header.source
            ),
            device_total: a.header.device_total.or(b.header.device_total),
            alloc_conf: a.header.alloc_conf.clone().or(b.header.alloc_conf.clone()),
            framework: a.header.framework.clone().or(b.header.framework.clone()),
            device: a.header.device,
            // What both say of themselves (the PyTorch release, the
            // recorded settings) still holds of the pair.
            extra: a
                .header
                .extra
                .iter()
                .filter(|(k, v)| b.header.extra.get(*k) == Some(*v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        },
        streams,
        num_ids: ids as u32,
        host_events: a.host_events || b.host_events,
        tenant_events: a.tenant_events || b.tenant_events,
        // One of them has none: the other's pool indices stay as they are.
        pools: if a.pools.is_empty() {
            b.pools.clone()
        } else {
            a.pools.clone()
        },
        ..Default::default()
    };
    out.events.reserve(events as usize);
    out.events.extend_from_slice(&a.events);
    if empty_cache_between {
        out.events.push(Event::EmptyCache);
    }
    out.events
        .extend(b.events.iter().map(|e| match e.with_id_offset(id_offset) {
            Event::Alloc { id, stream, size } => Event::Alloc {
                id,
                stream: restream(stream),
                size,
            },
            other => other,
        }));
    out.phases = marks_of(&a, "A", 0);
    let b_start = a.events.len() as u64;
    if empty_cache_between {
        out.phases.push(PhaseMark {
            event_index: b_start,
            label: "empty_cache()".into(),
        });
    }
    out.phases.extend(marks_of(&b, "B", b_start + between));
    // Stacks: B's frame lists after A's.
    let frame_offset = a.frames.len() as u32;
    if !a.frames.is_empty() || !b.frames.is_empty() {
        out.frames = a.frames.iter().chain(&b.frames).cloned().collect();
        out.alloc_frames = a.alloc_frames.clone();
        out.alloc_frames.resize(a.num_ids as usize, None);
        out.alloc_frames
            .extend(b.alloc_frames.iter().map(|f| f.map(|i| i + frame_offset)));
    }
    out.notes = a
        .notes
        .iter()
        .map(|n| format!("A: {n}"))
        .chain(b.notes.iter().map(|n| format!("B: {n}")))
        .collect();
    Ok(out)
}

/// `t` repeated until it holds at least `min_events` events, ids renamed
/// per repetition and the expected record dropped (a long trace for
/// throughput measurements: `vramlab bench`, the criterion benches). A
/// trace that starts mid-run, or is already long enough, comes back as it
/// is.
pub fn repeat(t: &Trace, min_events: usize) -> Trace {
    if t.initial.is_some() || t.events.is_empty() || t.events.len() >= min_events {
        return t.clone();
    }
    let mut out = t.clone();
    out.expected = None;
    out.expected_host = None;
    out.events.clear();
    let mut offset = 0u32;
    while out.events.len() < min_events {
        out.events
            .extend(t.events.iter().map(|e| e.with_id_offset(offset)));
        offset += t.num_ids;
    }
    out.num_ids = offset;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csv::read_csv;
    use crate::summary::TraceSummary;

    fn trace(text: &str) -> Trace {
        read_csv(text.as_bytes(), "t.csv").unwrap()
    }

    #[test]
    fn repeat_renames_ids_per_copy_until_long_enough() {
        let t = trace("action,id,size,stream\nalloc,a,100,0\nalloc,b,50,0\nfree,a\nfree,b\n");
        let r = repeat(&t, 9);
        assert_eq!(r.events.len(), 12);
        assert_eq!(r.num_ids, 6);
        assert_eq!(
            r.events[4],
            Event::Alloc {
                id: 2,
                stream: 0,
                size: 100
            }
        );
        assert_eq!(r.events[11], Event::Free { id: 5 });
        assert!(r.expected.is_none());
        // Long enough already, or empty: as it is.
        assert_eq!(repeat(&t, 4).events, t.events);
    }

    #[test]
    fn b_runs_after_a_with_its_leftovers_live() {
        let a = trace("action,id,size,stream\nalloc,x,100,0\nalloc,keep,40,0\nfree,x\n");
        let b = trace("action,id,size,stream\n# phase: forward\nalloc,y,70,5\nfree,y\n");
        let t = concat(&a, &b, true).unwrap();
        assert_eq!(t.num_ids, 3);
        assert_eq!(t.streams, vec![0, 5]);
        assert_eq!(t.events.len(), 3 + 1 + 2);
        assert_eq!(t.events[3], Event::EmptyCache);
        assert_eq!(
            t.events[4],
            Event::Alloc {
                id: 2,
                stream: 1,
                size: 70
            }
        );
        let labels: Vec<(u64, &str)> = t
            .phases
            .iter()
            .map(|p| (p.event_index, p.label.as_str()))
            .collect();
        assert_eq!(
            labels,
            vec![(0, "A"), (3, "empty_cache()"), (4, "B: forward")]
        );
        // A's 40 bytes stay live under B's 70.
        assert_eq!(TraceSummary::of(&t).peak_live_bytes, 140);
        let plain = concat(&a, &b, false).unwrap();
        assert_eq!(plain.events.len(), 5);
        assert!(!plain.events.contains(&Event::EmptyCache));
    }
}
