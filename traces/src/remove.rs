//! An allocation taken out of a trace ([`Trace::without_allocation`]):
//! the counterfactual "what if this tensor had never been allocated".

use crate::model::{AllocId, Event, Trace};

impl Trace {
    /// The same trace without allocation `id`: its `Alloc` event and the
    /// frees of it are removed, phase marks keep pointing at the same
    /// events, and the expected record is dropped (its event indices no
    /// longer apply). A trace that starts mid-run is first given a fresh
    /// start ([`Trace::with_fresh_start`]), so that a block in use at the
    /// first entry is removed like any other allocation. Ids are not
    /// renumbered: `id` stays declared and unused.
    pub fn without_allocation(&self, id: AllocId) -> Trace {
        let fresh;
        let base = if self.initial.is_some() {
            fresh = self.with_fresh_start();
            &fresh
        } else {
            self
        };
        let mut out = Trace {
            events: Vec::with_capacity(base.events.len()),
            phases: Vec::with_capacity(base.phases.len()),
            expected: None,
            ..Trace::new(base.header.clone())
        };
        let used = base.events.iter().any(|e| e.id() == Some(id));
        out.streams.clone_from(&base.streams);
        out.num_ids = base.num_ids - u32::from(used && base.num_ids > id);
        out.notes.clone_from(&base.notes);
        out.frames.clone_from(&base.frames);
        out.alloc_frames.clone_from(&base.alloc_frames);
        if used && (id as usize) < out.alloc_frames.len() {
            out.alloc_frames.remove(id as usize);
        }
        out.pools.clone_from(&base.pools);
        let mut marks = base.phases.iter().peekable();
        for (i, ev) in base.events.iter().enumerate() {
            while let Some(m) = marks.next_if(|m| m.event_index <= i as u64) {
                out.phases.push(crate::model::PhaseMark {
                    event_index: out.events.len() as u64,
                    label: m.label.clone(),
                });
            }
            match ev.id() {
                Some(i) if i == id => {}
                Some(i) if i > id => out.events.push(one_down(*ev)),
                _ => out.events.push(*ev),
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

/// `ev` with its allocation id one lower (its id is above the removed one,
/// so at least 1).
fn one_down(ev: Event) -> Event {
    match ev {
        Event::Alloc { id, stream, size } => Event::Alloc {
            id: id.saturating_sub(1),
            stream,
            size,
        },
        Event::Free { id } => Event::Free {
            id: id.saturating_sub(1),
        },
        Event::FreeRequested { id } => Event::FreeRequested {
            id: id.saturating_sub(1),
        },
        Event::FreeCompleted { id } => Event::FreeCompleted {
            id: id.saturating_sub(1),
        },
        other => other,
    }
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
}
