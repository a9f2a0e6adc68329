//! A replay fed block by block while the trace is read: ids recycled
//! (renamed by the reader), the stream table and the event count learnt as
//! the file is read.

use vramlab_traces::{InitialState, Trace};

use super::{IdSlot, Replayer};
use crate::engine::ReplayOptions;

impl<'t> Replayer<'t> {
    /// A replay of events handed over as they are read, with recycled ids
    /// (`trace` holds the header, pools and initial state). Its timeline
    /// keeps one point, at the end: its spacing needs the event count.
    pub(in crate::engine) fn streamed(
        trace: &'t Trace,
        initial_numbers: &[u32],
        opts: &'t ReplayOptions,
    ) -> Self {
        let mut r = Replayer::with_events(trace, opts, None);
        r.recycled = true;
        r.initial_numbers = initial_numbers.to_vec();
        // Slots for the initial state's ids (its live list and its
        // layout's blocks); the rest grow as ids are met.
        let n = trace.initial.as_ref().map_or(0, InitialState::id_bound);
        r.slots.resize(n, IdSlot::UNUSED);
        r
    }

    /// A streamed replay's stream table grew to `streams` (the whole
    /// table so far).
    pub(in crate::engine) fn add_streams(&mut self, streams: &[u64]) {
        if streams.len() > self.streams.len() {
            self.streams = std::borrow::Cow::Owned(streams.to_vec());
        }
    }

    /// The trace's own id of each `alloc` of the next block, in order
    /// (empty: numbered by their place among the `alloc`s).
    pub(in crate::engine) fn set_numbers(&mut self, numbers: &[u32]) {
        self.numbers.clear();
        self.numbers.extend_from_slice(numbers);
        self.next_number = 0;
    }

    /// A streamed replay's event count, known once the file is read.
    pub(in crate::engine) fn set_events(&mut self, events: u64) {
        self.total_events = events;
    }
}
