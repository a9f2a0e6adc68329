//! An allocation taken out of a trace ([`Trace::without_allocation`]):
//! the counterfactual "what if this tensor had never been allocated".

use crate::model::{AllocId, Event, Trace};

impl Trace {
    /// The same trace without allocation `id`: its `Alloc` event and the
    /// frees of it are removed, phase marks keep pointing at the same
    /// events, and the expected record is dropped (its event indices no
    /// longer apply). A trace that starts mid-run is first given a fresh
    /// start ([`Trace::with_fresh_start`]), so that a block in use at the
    /// first entry is removed like any other allocation. The ids above it
    /// move down by one, as a CSV without its rows numbers them.
    pub fn without_allocation(&self, id: AllocId) -> Trace {
        self.without_allocations(&[id])
    }

    /// [`Trace::without_allocation`] for several allocations at once (a
    /// source line's, say): every one of `ids` that the trace uses is
    /// removed, and each id above them moves down by the number of removed
    /// ids below it.
    pub fn without_allocations(&self, ids: &[AllocId]) -> Trace {
        let fresh;
        let base = if self.initial.is_some() {
            fresh = self.with_fresh_start();
            &fresh
        } else {
            self
        };
        let mut removed: Vec<AllocId> = ids.to_vec();
        removed.sort_unstable();
        removed.dedup();
        // Only the ids the trace uses count: the others move nothing.
        let mut used: Vec<AllocId> = base
            .events
            .iter()
            .filter_map(|ev| ev.id())
            .filter(|i| removed.binary_search(i).is_ok())
            .collect();
        used.sort_unstable();
        used.dedup();
        let removed = used;
        let mut out = Trace {
            events: Vec::with_capacity(base.events.len()),
            phases: Vec::with_capacity(base.phases.len()),
            expected: None,
            ..Trace::new(base.header.clone())
        };
        out.streams.clone_from(&base.streams);
        out.num_ids = base.num_ids - (removed.len() as u32).min(base.num_ids);
        out.notes.clone_from(&base.notes);
        out.frames.clone_from(&base.frames);
        out.alloc_frames = base
            .alloc_frames
            .iter()
            .enumerate()
            .filter(|(i, _)| removed.binary_search(&(*i as AllocId)).is_err())
            .map(|(_, f)| *f)
            .collect();
        out.pools.clone_from(&base.pools);
        out.host_events = base.host_events;
        out.tenant_events = base.tenant_events;
        let mut marks = base.phases.iter().peekable();
        for (i, ev) in base.events.iter().enumerate() {
            while let Some(m) = marks.next_if(|m| m.event_index <= i as u64) {
                out.phases.push(crate::model::PhaseMark {
                    event_index: out.events.len() as u64,
                    label: m.label.clone(),
                });
            }
            match ev.id() {
                Some(i) => match removed.binary_search(&i) {
                    Ok(_) => {}
                    Err(0) => out.events.push(*ev),
                    Err(below) => out.events.push(moved_down(*ev, below as u32)),
                },
                None => out.events.push(*ev),
            }
        }
        for m in marks {
            out.phases.push(crate::model::PhaseMark {
                event_index: out.events.len() as u64,
                label: m.label.clone(),
            });
        }
        out
    }
}

/// `ev` with its allocation id `by` lower (`by` removed ids are below it).
fn moved_down(ev: Event, by: u32) -> Event {
    ev.with_id(|id| id.saturating_sub(by))
}

#[cfg(test)]
mod tests {
    use crate::model::{Event, PhaseMark, Trace, TraceHeader};

    fn alloc(id: u32, size: u64) -> Event {
        Event::Alloc {
            id,
            stream: 0,
            size,
        }
    }

    #[test]
    fn removes_the_allocation_and_its_frees_and_keeps_phase_marks_on_their_events() {
        let mut t = Trace::new(TraceHeader::default());
        t.num_ids = 3;
        t.events = vec![
            alloc(0, 512),
            alloc(1, 1024),
            Event::FreeRequested { id: 1 },
            alloc(2, 2048),
            Event::FreeCompleted { id: 1 },
            Event::Free { id: 0 },
        ];
        t.phases = vec![
            PhaseMark {
                event_index: 1,
                label: "forward".into(),
            },
            PhaseMark {
                event_index: 3,
                label: "backward".into(),
            },
            PhaseMark {
                event_index: 6,
                label: "end".into(),
            },
        ];
        let w = t.without_allocation(1);
        assert_eq!(
            w.events,
            vec![alloc(0, 512), alloc(1, 2048), Event::Free { id: 0 }]
        );
        let at: Vec<u64> = w.phases.iter().map(|m| m.event_index).collect();
        assert_eq!(at, vec![1, 1, 3]);
        assert_eq!(w.num_ids, 2);
        // An id the trace does not use changes nothing.
        assert_eq!(t.without_allocation(7).events, t.events);
    }

    #[test]
    fn several_allocations_go_at_once_and_the_ids_above_close_up() {
        let mut t = Trace::new(TraceHeader::default());
        t.num_ids = 4;
        t.events = vec![
            alloc(0, 1),
            alloc(1, 2),
            alloc(2, 3),
            alloc(3, 4),
            Event::Free { id: 2 },
            Event::Free { id: 3 },
        ];
        t.alloc_frames = vec![Some(0), Some(1), Some(2), Some(3)];
        let w = t.without_allocations(&[2, 0, 9, 0]);
        assert_eq!(
            w.events,
            vec![alloc(0, 2), alloc(1, 4), Event::Free { id: 1 }]
        );
        assert_eq!(w.num_ids, 2);
        assert_eq!(w.alloc_frames, vec![Some(1), Some(3)]);
        // One at a time gives the same trace.
        assert_eq!(
            t.without_allocation(2).without_allocation(0).events,
            w.events
        );
    }
}
