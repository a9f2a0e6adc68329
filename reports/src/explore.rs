//! What the report's explorer needs of the trace itself, per allocation id:
//! its requested size, when it was allocated and freed, its stream and the
//! stack that asked for it. The per-setting part (where each block went,
//! its block size, the device calls) comes from each setting's replay.

use vramlab_traces::{Event, InitialBlockState, Trace, code_frames};

/// Frames kept per stack in the page (innermost first; the rest are
/// counted in a last line).
const FRAMES_PER_STACK: usize = 12;

/// Event index of an id never allocated or never freed in the trace.
pub(crate) const NEVER: i32 = i32::MAX;

/// The most allocations the explorer draws. The page reads its packed
/// data as one string, and Chromium's (V8's) strings hold at most
/// 2^29 − 24 characters; the data takes ~50 base64 characters per
/// allocation with the five settings a default report shows (a 10M-event
/// trace of 5M allocations made a 249 MB page), so past ~10M allocations
/// the page could not be read. Above this limit the explorer is left out
/// and the page says so.
pub const EXPLORER_MAX_ALLOCATIONS: usize = 8_000_000;

/// The trace, as the explorer draws it: one entry per allocation id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExploreTrace {
    /// Number of events.
    pub(crate) events: u64,
    /// Caller's bytes per id.
    pub(crate) requested: Vec<u64>,
    /// The event that allocated each id (−1: live at the start; [`NEVER`]:
    /// never allocated).
    pub(crate) alloc_at: Vec<i32>,
    /// The event that freed each id, or asked for its free when it waited
    /// for other streams ([`NEVER`]: live at the end; −1: asked before the
    /// recording began).
    pub(crate) free_at: Vec<i32>,
    /// The event that completed a deferred free (empty when the trace has
    /// no deferred frees; else [`NEVER`] or equal to `free_at` for the
    /// others).
    pub(crate) free_completed_at: Vec<i32>,
    /// Index into `streams` per id.
    pub(crate) stream: Vec<u32>,
    /// The raw stream handles.
    pub(crate) streams: Vec<u64>,
    /// Index into `stacks` per id (−1: none recorded).
    pub(crate) stack: Vec<i32>,
    /// Each recorded stack as `file.py:LINE in fn` lines, the caller's
    /// code first (PyTorch's and Python's own frames left out).
    pub(crate) stacks: Vec<Vec<String>>,
    /// Phase marks: (first event, label).
    pub(crate) phases: Vec<(u64, String)>,
}

impl ExploreTrace {
    /// The explorer's view of `trace` (`None` when its event indices do not
    /// fit the page's 32-bit arrays, over 2^31 − 2 events, or it has more
    /// than [`EXPLORER_MAX_ALLOCATIONS`] allocation ids).
    pub fn of(trace: &Trace) -> Option<Self> {
        let events = trace.events.len();
        if events >= NEVER as usize || trace.num_ids as usize > EXPLORER_MAX_ALLOCATIONS {
            return None;
        }
        let n = trace.num_ids as usize;
        let mut t = ExploreTrace {
            events: events as u64,
            requested: vec![0; n],
            alloc_at: vec![NEVER; n],
            free_at: vec![NEVER; n],
            free_completed_at: Vec::new(),
            stream: vec![0; n],
            streams: trace.streams.clone(),
            stack: trace
                .alloc_frames
                .iter()
                .map(|f| f.and_then(|i| i32::try_from(i).ok()).unwrap_or(-1))
                .collect(),
            stacks: trace.frames.iter().map(|f| stack_lines(f)).collect(),
            phases: trace
                .phases
                .iter()
                .map(|p| (p.event_index, p.label.clone()))
                .collect(),
        };
        t.stack.resize(n, -1);
        // Blocks whose free was requested before the recording began (a
        // mid-run snapshot's `active_pending_free`): free_at −1, completed by
        // a later FreeCompleted.
        let mut pending_at_start = false;
        if let Some(init) = &trace.initial {
            for b in &init.live {
                t.set_alloc(b.id() as usize, -1, b.requested, b.stream);
                if matches!(b.state, InitialBlockState::PendingFree(_)) {
                    set(&mut t.free_at, b.id(), -1);
                    pending_at_start = true;
                }
            }
        }
        let deferred = pending_at_start
            || trace
                .events
                .iter()
                .any(|e| matches!(e, Event::FreeRequested { .. }));
        if deferred {
            t.free_completed_at = vec![NEVER; n];
        }
        for (i, ev) in trace.events.iter().enumerate() {
            let i = i as i32;
            match *ev {
                Event::Alloc { id, stream, size } => t.set_alloc(id as usize, i, size, stream),
                Event::Free { id } => {
                    set(&mut t.free_at, id, i);
                    set(&mut t.free_completed_at, id, i);
                }
                Event::FreeRequested { id } => set(&mut t.free_at, id, i),
                Event::FreeCompleted { id } => set(&mut t.free_completed_at, id, i),
                _ => {}
            }
        }
        Some(t)
    }

    fn set_alloc(&mut self, id: usize, at: i32, requested: u64, stream: u32) {
        if let Some(a) = self.alloc_at.get_mut(id) {
            *a = at;
        }
        if let Some(r) = self.requested.get_mut(id) {
            *r = requested;
        }
        if let Some(s) = self.stream.get_mut(id) {
            *s = stream;
        }
    }
}

fn set(v: &mut [i32], id: u32, at: i32) {
    if let Some(x) = v.get_mut(id as usize) {
        *x = at;
    }
}

/// A stack's lines: the caller's own code first; when it has none, every
/// Python frame; at most [`FRAMES_PER_STACK`], then how many more.
fn stack_lines(frames: &[vramlab_traces::Frame]) -> Vec<String> {
    let code = code_frames(frames);
    let mut lines: Vec<String> = code
        .iter()
        .take(FRAMES_PER_STACK)
        .map(|f| f.short())
        .collect();
    if code.len() > FRAMES_PER_STACK {
        lines.push(format!("… {} more frames", code.len() - FRAMES_PER_STACK));
    }
    if lines.is_empty() {
        lines = frames
            .iter()
            .take(FRAMES_PER_STACK)
            .map(|f| f.short())
            .collect();
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_explorer_draws_at_most_its_limit_of_allocations() {
        let mut trace = Trace::new(Default::default());
        trace.num_ids = 3;
        assert!(ExploreTrace::of(&trace).is_some());
        assert_eq!(crate::build::explorer_left_out(&trace), None);
        // (At the limit itself the view would take ~200 MB.)
        trace.num_ids = EXPLORER_MAX_ALLOCATIONS as u32 + 1;
        assert!(ExploreTrace::of(&trace).is_none());
        let note = crate::build::explorer_left_out(&trace).unwrap();
        assert!(note.starts_with(
            "The explorer is left out: the trace has 8000001 allocations, more than the 8000000"
        ));
    }
}
