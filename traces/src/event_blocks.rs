//! Traces read block by block, whatever their format: the [`EventBlocks`]
//! interface that a streamed replay or summary reads from, and
//! [`TraceEvents`], a file (native CSV or binary, an RMM log) opened for it.

use std::io::{BufRead, Read};

use crate::binary::VltEvents;
use crate::csv::{CsvEvents, StreamEnd};
use crate::error::TraceError;
use crate::model::{AllocId, Event, Trace};
use crate::rmm::RmmEvents;

/// A trace whose events are handed over a block at a time: open, take
/// blocks until `next_block` says the end, then `finish`.
pub trait EventBlocks {
    /// Everything read so far but the events: header, streams met so far,
    /// initial state, pools, phases.
    fn trace(&self) -> &Trace;

    /// Moves the next events into `out` (cleared first; its capacity is
    /// kept). `Ok(false)` at the end.
    fn next_block(&mut self, out: &mut Vec<Event>) -> Result<bool, TraceError>;

    /// The trace's own id of each `alloc` of the last block, in order,
    /// when the ids handed over were renamed and the trace names its
    /// allocations otherwise than by their order; empty when an
    /// allocation's number is its place among the `alloc`s.
    fn numbers(&self) -> &[AllocId] {
        &[]
    }

    /// The trace's own id of each live block of the initial state, by the
    /// id [`EventBlocks::trace`] gives it, when the reader renamed them;
    /// empty when the ids are the trace's.
    fn initial_numbers(&self) -> &[AllocId] {
        &[]
    }

    /// Reads what is left and ends the read.
    fn finish(self) -> Result<StreamEnd, TraceError>
    where
        Self: Sized;
}

impl<R: Read> EventBlocks for CsvEvents<R> {
    fn trace(&self) -> &Trace {
        CsvEvents::trace(self)
    }
    fn next_block(&mut self, out: &mut Vec<Event>) -> Result<bool, TraceError> {
        CsvEvents::next_block(self, out)
    }
    fn finish(self) -> Result<StreamEnd, TraceError> {
        CsvEvents::finish(self)
    }
}

impl<R: BufRead> EventBlocks for VltEvents<R> {
    fn trace(&self) -> &Trace {
        VltEvents::trace(self)
    }
    fn next_block(&mut self, out: &mut Vec<Event>) -> Result<bool, TraceError> {
        VltEvents::next_block(self, out)
    }
    fn numbers(&self) -> &[AllocId] {
        VltEvents::numbers(self)
    }
    fn initial_numbers(&self) -> &[AllocId] {
        VltEvents::initial_numbers(self)
    }
    fn finish(self) -> Result<StreamEnd, TraceError> {
        VltEvents::finish(self)
    }
}

impl<R: BufRead> EventBlocks for RmmEvents<R> {
    fn trace(&self) -> &Trace {
        RmmEvents::trace(self)
    }
    fn next_block(&mut self, out: &mut Vec<Event>) -> Result<bool, TraceError> {
        RmmEvents::next_block(self, out)
    }
    fn finish(self) -> Result<StreamEnd, TraceError> {
        RmmEvents::finish(self)
    }
}

/// A trace file opened to be read block by block
/// ([`crate::open_events`]).
pub enum TraceEvents {
    /// A native CSV trace (`.csv`, `.csv.gz`).
    Csv(CsvEvents<Box<dyn Read + Send>>),
    /// A binary trace (`.vlt`, `.vlt.zst`).
    Vlt(VltEvents<Box<dyn BufRead + Send>>),
    /// A RAPIDS RMM log.
    Rmm(RmmEvents<Box<dyn BufRead + Send>>),
}

impl EventBlocks for TraceEvents {
    fn trace(&self) -> &Trace {
        match self {
            TraceEvents::Csv(e) => e.trace(),
            TraceEvents::Vlt(e) => e.trace(),
            TraceEvents::Rmm(e) => e.trace(),
        }
    }
    fn next_block(&mut self, out: &mut Vec<Event>) -> Result<bool, TraceError> {
        match self {
            TraceEvents::Csv(e) => e.next_block(out),
            TraceEvents::Vlt(e) => e.next_block(out),
            TraceEvents::Rmm(e) => e.next_block(out),
        }
    }
    fn numbers(&self) -> &[AllocId] {
        match self {
            TraceEvents::Csv(_) | TraceEvents::Rmm(_) => &[],
            TraceEvents::Vlt(e) => e.numbers(),
        }
    }
    fn initial_numbers(&self) -> &[AllocId] {
        match self {
            TraceEvents::Csv(_) | TraceEvents::Rmm(_) => &[],
            TraceEvents::Vlt(e) => e.initial_numbers(),
        }
    }
    fn finish(self) -> Result<StreamEnd, TraceError> {
        match self {
            TraceEvents::Csv(e) => e.finish(),
            TraceEvents::Vlt(e) => e.finish(),
            TraceEvents::Rmm(e) => e.finish(),
        }
    }
}
