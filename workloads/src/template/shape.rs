//! A recording's structure, the form `learn` and `align` compare
//! recordings in.

use vramlab_traces::{AllocId, Event};
use vramlab_traces::{Location, TraceError};

use crate::Recording;

use super::TEvent;

/// A recording's structure: events over dense allocation indices.
///
/// Invariant (S), for every `Shape` (only [`shape`] makes them): `sizes` and
/// `streams` have one entry per `Alloc` event, and every allocation an
/// event names is `< sizes.len()` and is named by an earlier `Alloc`. (An
/// `Alloc` takes the next index, `sizes.len()` before its push; the other
/// events take an index that an earlier `Alloc` stored in `index`, or fail.)
pub(super) struct Shape {
    pub(super) events: Vec<TEvent>,
    pub(super) sizes: Vec<u64>,
    pub(super) streams: Vec<u64>,
}

/// The structure of `rec`; refuses a recording that starts mid-run or names
/// an allocation it did not make.
pub(super) fn shape(rec: &Recording) -> Result<Shape, TraceError> {
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
            _ => {
                return Err(TraceError::new(
                    &rec.name,
                    Location::Entry(n as u64),
                    "a private-pool event (CUDA graph capture or MemPool): workload templates are learned from recordings that use only the default pool",
                ));
            }
        });
    }
    Ok(Shape {
        events,
        sizes,
        streams,
    })
}

/// An event as error messages name it.
pub(super) fn describe(ev: TEvent) -> String {
    match ev {
        TEvent::Alloc(a) => format!("the alloc of allocation #{a}"),
        TEvent::Free(a) => format!("the free of allocation #{a}"),
        TEvent::FreeRequested(a) => format!("the free_requested of allocation #{a}"),
        TEvent::FreeCompleted(a) => format!("the free_completed of allocation #{a}"),
        TEvent::EmptyCache => "empty_cache".into(),
    }
}
