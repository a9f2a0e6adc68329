//! Replaying a trace while it is read: one thread parses the file into
//! blocks of events, the caller's thread replays each block under every
//! scenario in turn, and the blocks' buffers go back to the reader to be
//! filled again. Memory is bounded by a few blocks and what is live, not
//! by the length of the trace; on two cores the read and the replay
//! overlap.
//!
//! The answers are those of a replay of the trace read whole
//! ([`crate::engine::replay`]), but for the timeline, which keeps one
//! point (its spacing needs the event count before the first event).

use std::sync::mpsc;

use rayon::prelude::*;

use vramlab_allocator::Allocator;
use vramlab_traces::{Event, EventBlocks, StreamEnd, Trace, TraceError};

use super::replayer::Replayer;
use super::run::Run;
use super::scenario::Scenario;
use super::{ReplayDevice, ReplayError, ReplayOptions};

/// Blocks of events in flight between the reader and the replay: enough
/// that neither waits on the other for long, few enough to bound memory.
const BLOCKS_IN_FLIGHT: usize = 3;

/// Why a streamed replay failed.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The file could not be read, or a line is malformed.
    #[error(transparent)]
    Read(#[from] TraceError),
    /// A scenario's replay failed.
    #[error("replaying under {scenario}: {error}")]
    Replay {
        /// The scenario's label.
        scenario: String,
        /// What went wrong.
        error: ReplayError,
    },
}

/// What a streamed replay gives: one run per scenario (in their order) and
/// the end of the read (the trace without its events, and its counts).
#[derive(Debug, Clone)]
pub struct Streamed {
    /// One run per scenario.
    pub runs: Vec<Run>,
    /// The trace as read: header, streams, pools, phases (no events) and
    /// the counts of events and allocations.
    pub end: StreamEnd,
}

/// One block of events, the trace's own id of each of its `alloc`s when
/// the reader renamed them, and, when it met new streams, the stream table.
struct Block {
    events: Vec<Event>,
    numbers: Vec<u32>,
    streams: Option<Vec<u64>>,
}

/// A block's buffers, going back to the reader.
type Buffers = (Vec<Event>, Vec<u32>);

/// One scenario's replay, fed block by block (from any thread: the
/// scenarios of a block are replayed in parallel).
trait Stepper: Send {
    fn add_streams(&mut self, streams: &[u64]);
    /// Replays `events`, the first of which is event `first`, whose
    /// `alloc`s the trace names `numbers` (empty: by their place);
    /// `Ok(true)` when the replay stopped (an OOM, or `stop_before`).
    fn events(
        &mut self,
        first: usize,
        events: &[Event],
        numbers: &[u32],
    ) -> Result<bool, ReplayError>;
    fn finish(self: Box<Self>, events: u64) -> Run;
}

struct Step<'t, A> {
    alloc: A,
    replayer: Replayer<'t>,
    stop_before: usize,
}

impl<'t, A> Step<'t, A>
where
    A: Allocator,
    A::Dev: ReplayDevice,
{
    /// The replay, seeded; `.1` is `true` when it stopped at the start.
    fn new(
        mut alloc: A,
        trace: &'t Trace,
        initial_numbers: &[u32],
        opts: &'t ReplayOptions,
    ) -> Result<(Self, bool), ReplayError> {
        let mut replayer = Replayer::streamed(trace, initial_numbers, opts);
        let start_oom = replayer.seed(&mut alloc)?;
        replayer.begin(&mut alloc);
        let mut stopped = false;
        if let Some(o) = start_oom {
            replayer.oom_at_start(&alloc, o);
            stopped = opts.stop_at_oom;
        }
        let stop_before = opts.stop_before.map_or(usize::MAX, |n| n as usize);
        let step = Step {
            alloc,
            replayer,
            stop_before,
        };
        Ok((step, stopped || stop_before == 0))
    }
}

impl<A> Stepper for Step<'_, A>
where
    A: Allocator + Send,
    A::Dev: ReplayDevice,
{
    fn add_streams(&mut self, streams: &[u64]) {
        self.replayer.add_streams(streams);
    }

    fn events(
        &mut self,
        first: usize,
        events: &[Event],
        numbers: &[u32],
    ) -> Result<bool, ReplayError> {
        self.replayer.set_numbers(numbers);
        for (k, ev) in events.iter().enumerate() {
            let i = first + k;
            if i >= self.stop_before {
                return Ok(true);
            }
            if self.replayer.event(&mut self.alloc, i, ev)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn finish(mut self: Box<Self>, events: u64) -> Run {
        self.replayer.set_events(events);
        self.replayer.finish(&self.alloc)
    }
}

impl Scenario {
    /// This scenario's replay of events handed over block by block.
    fn stepper<'t>(
        &self,
        trace: &'t Trace,
        initial_numbers: &[u32],
        opts: &'t ReplayOptions,
    ) -> Result<(Box<dyn Stepper + 't>, bool), ReplayError> {
        if let Some(a) = self.native_allocator(trace) {
            let (mut step, stopped) = Step::new(a, trace, initial_numbers, opts)?;
            if opts.host_rules.is_none() {
                step.replayer.set_host_rules(self.host_rules());
            }
            return Ok((Box::new(step), stopped));
        }
        if crate::engine::static_plan::needs_plan(&self.policy) {
            return Err(ReplayError::Malformed(
                "the plan policy needs the whole trace before it replays: make its plan first (a trace file's passes do)".into(),
            ));
        }
        let dev = self.device(trace);
        Ok(vramlab_allocator::with_policy!(&self.policy, dev, |a| {
            let (step, stopped) = Step::new(a, trace, initial_numbers, opts)?;
            (Box::new(step) as Box<dyn Stepper + 't>, stopped)
        }))
    }
}

/// The replay of the state at the start of a mid-run trace alone (no
/// event), as [`replay_streamed`] would seed it from `events`: what that
/// state reserves under `scenario`.
pub(crate) fn replay_start_only<E: EventBlocks>(
    events: &E,
    scenario: &Scenario,
    opts: &ReplayOptions,
) -> Result<Run, ReplayError> {
    let start = skeleton(events.trace());
    let opts = ReplayOptions {
        stop_before: Some(0),
        ..opts.clone()
    };
    let (step, _) = scenario.stepper(&start, events.initial_numbers(), &opts)?;
    let mut run = step.finish(0);
    run.conf = scenario.label();
    run.capacity = scenario.capacity;
    Ok(run)
}

/// The trace a streamed replay starts from: `t` without its events.
fn skeleton(t: &Trace) -> Trace {
    Trace {
        header: t.header.clone(),
        streams: t.streams.clone(),
        initial: t.initial.clone(),
        pools: t.pools.clone(),
        ..Trace::default()
    }
}

/// Replays the trace `events` (a CSV or binary trace opened with
/// `IdUse::Recycled`) under every scenario while it is read, the read on a
/// thread of its own. The whole file is read even when every replay
/// stopped early, so that a malformed line anywhere is an error, as it is
/// for a trace read whole.
pub fn replay_streamed<E: EventBlocks + Send>(
    mut events: E,
    scenarios: &[Scenario],
    opts: &ReplayOptions,
) -> Result<Streamed, StreamError> {
    let start = skeleton(events.trace());
    let initial_numbers = events.initial_numbers().to_vec();
    // Events parsed with the header are the first block.
    let mut first = Vec::new();
    events.next_block(&mut first)?;
    // Streams met in the first block (a reader may have read only its
    // header when it opened).
    let table = &events.trace().streams;
    let head = Block {
        events: first,
        numbers: events.numbers().to_vec(),
        streams: (table.len() > start.streams.len()).then(|| table.clone()),
    };
    let (to_replay, from_reader) = mpsc::sync_channel::<Block>(BLOCKS_IN_FLIGHT);
    let (to_reader, spare) = mpsc::channel::<Buffers>();
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || read_blocks(events, &to_replay, &spare));
        let replayed = start_all(scenarios, &start, &initial_numbers, opts).and_then(|mut live| {
            replay_blocks(&mut live, scenarios, head, &from_reader, &to_reader)?;
            Ok(live)
        });
        // Drain what is left, so that the reader finishes the file.
        drop(to_reader);
        for _ in from_reader.iter() {}
        let end = match reader.join() {
            Ok(end) => end?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        // A read error outranks a replay error, as for a trace read whole.
        let runs = replayed?
            .into_iter()
            .zip(scenarios)
            .map(|((step, _), s)| {
                let mut run = step.finish(end.counts.events);
                run.conf = s.label();
                run.capacity = s.capacity;
                run
            })
            .collect();
        Ok(Streamed { runs, end })
    })
}

/// A replay per scenario, seeded, each with whether it already stopped.
type Live<'t> = Vec<(Box<dyn Stepper + 't>, bool)>;

fn start_all<'t>(
    scenarios: &[Scenario],
    trace: &'t Trace,
    initial_numbers: &[u32],
    opts: &'t ReplayOptions,
) -> Result<Live<'t>, StreamError> {
    scenarios
        .iter()
        .map(|s| {
            s.stepper(trace, initial_numbers, opts)
                .map_err(|error| StreamError::Replay {
                    scenario: s.label(),
                    error,
                })
        })
        .collect()
}

/// The reader's side: fills buffers (the returned ones, or new ones while
/// fewer than [`BLOCKS_IN_FLIGHT`] are out) and sends them until the end
/// of the file; then the end of the read.
fn read_blocks<E: EventBlocks>(
    mut events: E,
    to_replay: &mpsc::SyncSender<Block>,
    spare: &mpsc::Receiver<Buffers>,
) -> Result<StreamEnd, TraceError> {
    let mut streams_sent = events.trace().streams.len();
    let mut made = 0usize;
    loop {
        let (mut buf, mut numbers) = match spare.try_recv() {
            Ok(b) => b,
            Err(_) if made < BLOCKS_IN_FLIGHT + 1 => {
                made += 1;
                Default::default()
            }
            Err(_) => spare.recv().unwrap_or_default(),
        };
        if !events.next_block(&mut buf)? {
            break;
        }
        numbers.clear();
        numbers.extend_from_slice(events.numbers());
        let table = &events.trace().streams;
        let streams = (table.len() > streams_sent).then(|| {
            streams_sent = table.len();
            table.clone()
        });
        if to_replay
            .send(Block {
                events: buf,
                numbers,
                streams,
            })
            .is_err()
        {
            break;
        }
    }
    events.finish()
}

/// The replay's side: every block through every scenario still running
/// (in parallel when there are several), each buffer sent back; the first
/// replay error in scenario order ends it, as it would replayed in turn.
fn replay_blocks(
    live: &mut Live<'_>,
    scenarios: &[Scenario],
    head: Block,
    from_reader: &mpsc::Receiver<Block>,
    to_reader: &mpsc::Sender<Buffers>,
) -> Result<(), StreamError> {
    let step = |live: &mut Live<'_>, block: &Block, next: usize| -> Result<(), StreamError> {
        let one = |(stepper, stopped): &mut (Box<dyn Stepper + '_>, bool)| {
            if let Some(table) = &block.streams {
                stepper.add_streams(table);
            }
            if !*stopped {
                *stopped = stepper.events(next, &block.events, &block.numbers)?;
            }
            Ok(())
        };
        let done: Vec<Result<(), ReplayError>> = if live.len() > 1 {
            live.par_iter_mut().map(one).collect()
        } else {
            live.iter_mut().map(one).collect()
        };
        done.into_iter().zip(scenarios).try_for_each(|(r, s)| {
            r.map_err(|error| StreamError::Replay {
                scenario: s.label(),
                error,
            })
        })
    };
    step(live, &head, 0)?;
    let mut next = head.events.len();
    for block in from_reader.iter() {
        step(live, &block, next)?;
        next += block.events.len();
        // The reader may have finished: a failed send only drops a buffer.
        let _ = to_reader.send((block.events, block.numbers));
    }
    Ok(())
}
