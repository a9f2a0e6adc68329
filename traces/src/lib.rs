//! vramlab-traces: the allocation trace model and its file formats.
//!
//! The public surface is the crate root plus two namespaces:
//!
//! - the root: the trace model ([`Trace`], [`Event`], [`TraceHeader`], the
//!   recorded start [`InitialState`], the recording's [`ExpectedRecord`]),
//!   errors ([`TraceError`], [`Location`]), every format's reader and writer
//!   ([`read_traces`] / [`write_trace`] by [`Format`]; [`read_csv`],
//!   [`read_binary`], [`read_rmm`], …), what a trace holds
//!   ([`TraceSummary`]), joining traces ([`concat`](fn@concat), [`repeat`]) and the
//!   pickle document ([`PickleDoc`] to read, [`Value`] and
//!   [`PickleWriter`] to write), and a multi-rank job's manifest ([`Job`]);
//! - [`snapshot`]: PyTorch memory snapshots, their typed model and their
//!   conversion to traces;
//! - [`advice`]: options named in messages, as data.
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
#![warn(missing_docs)]

pub mod advice;
mod binary;
mod concat;
mod csv;
mod error;
mod event;
mod event_blocks;
mod fresh_start;
mod io;
mod job;
mod lines;
mod model;
mod pickle;
mod pool_summary;
mod pools;
mod remove;
mod rmm;
mod short_reads;
pub mod snapshot;
mod state_summary;
mod summary;
#[cfg(test)]
mod test_rng;

pub use binary::{VltEvents, VltWriter, read_binary, validate, write_binary};
pub use concat::{ConcatError, concat, repeat};
pub use csv::{CsvEvents, CsvWriter, IdUse, StreamCounts, StreamEnd, read_csv, write_csv};
pub use error::{Location, TraceError};
pub use event_blocks::{EventBlocks, TraceEvents};
pub use io::{
    Format, PROGRESS_STEP, ReadProgress, TraceWriter, open_events, read_snapshot_file, read_traces,
    write_trace,
};
pub use job::{
    Basis, JOB_FILE, JOB_VERSION, Job, JobError, JobTrace, MAX_WORLD_SIZE, OutsideAllocator,
    RankSource, rank_ranges, ranks_phrase,
};
pub use model::{
    AllocId, Event, ExpectedOom, ExpectedRecord, ExpectedSegmentEvent, FinalSegment, Frame,
    InitialBlock, InitialBlockState, InitialLive, InitialReservation, InitialSegment, InitialState,
    PhaseMark, SegmentEventKind, StreamIndex, Trace, TraceHeader, code_frames,
};
pub use pickle::{BigInt, DictBuilder, PickleDoc, PickleError, PickleWriter, Value, ValueRef};
pub use pool_summary::PoolSummary;
pub use pools::{PoolDecl, PrivatePoolKind};
pub use rmm::{RmmEvents, read_rmm};
#[doc(hidden)]
pub use short_reads::ShortReads;
pub use state_summary::StateSummary;
pub use summary::{PhaseSummary, SizeBucket, SummaryBuilder, TraceSummary};
