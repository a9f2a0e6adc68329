//! Where an analysis that replays a trace many times gets its replays:
//! from the trace held in memory (a [`Trace`] is its own passes), or from a trace file read
//! again for each pass ([`TraceFile`], memory bounded by what is live).
//! A pass replays several scenarios at once (in parallel); the runs are the
//! same from either.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use vramlab_traces::{EventBlocks, StreamEnd, SummaryBuilder, Trace, TraceError, TraceSummary};

use super::run::Run;
use super::scenario::{Scenario, with_plans};
use super::start::Start;
use super::static_plan::{PlanBuilder, plan_buffers, static_plan};
use super::stream::{StreamError, replay_start_only, replay_streamed};
use super::{ReplayError, ReplayOptions};
use vramlab_allocator::policies::plan::StaticPlan;

/// The passes an analysis makes over a trace.
pub trait ReplayPasses {
    /// The trace's description: header, streams, initial state, pools,
    /// stacks (and, held in memory, its events).
    fn trace(&self) -> &Trace;

    /// One pass: the whole trace replayed under every scenario; the runs
    /// in the scenarios' order, or the first error in that order.
    fn replay(
        &self,
        scenarios: &[Scenario],
        opts: &ReplayOptions,
    ) -> Result<Vec<Run>, StreamError> {
        self.replay_counted(scenarios, opts, &|| {})
    }

    /// [`ReplayPasses::replay`], with `done` called once per scenario
    /// whose replay ended.
    fn replay_counted(
        &self,
        scenarios: &[Scenario],
        opts: &ReplayOptions,
        done: &(dyn Fn() + Sync),
    ) -> Result<Vec<Run>, StreamError>;

    /// What the state at the start of a mid-run trace alone reserves under
    /// `scenario` (no event replayed).
    fn start_reserved(&self, scenario: &Scenario, opts: &ReplayOptions)
    -> Result<u64, StreamError>;

    /// The peak of the bytes live at once (no setting can do with less).
    fn peak_live(&self) -> Result<u64, StreamError>;

    /// `scenarios`, each `plan` policy without a plan given the trace's
    /// static plan from `start` (made once): passes that replay the
    /// result plan nothing again.
    fn planned<'s>(
        &self,
        scenarios: &'s [Scenario],
        start: Start,
    ) -> Result<Cow<'s, [Scenario]>, StreamError>;
}

/// The error of `scenario`'s replay.
fn replay_error(scenario: &Scenario) -> impl Fn(ReplayError) -> StreamError + '_ {
    move |error| StreamError::Replay {
        scenario: scenario.label(),
        error,
    }
}

/// A trace held in memory: every pass replays its events.
impl ReplayPasses for Trace {
    fn trace(&self) -> &Trace {
        self
    }

    fn replay_counted(
        &self,
        scenarios: &[Scenario],
        opts: &ReplayOptions,
        done: &(dyn Fn() + Sync),
    ) -> Result<Vec<Run>, StreamError> {
        let scenarios = &*self.planned(scenarios, opts.start)?;
        let one = |s: &Scenario| {
            let run = s.run(self, opts).map_err(replay_error(s));
            done();
            run
        };
        if scenarios.len() == 1 {
            return scenarios.iter().map(one).collect();
        }
        scenarios
            .par_iter()
            .map(one)
            .collect::<Vec<_>>()
            .into_iter()
            .collect()
    }

    fn start_reserved(
        &self,
        scenario: &Scenario,
        opts: &ReplayOptions,
    ) -> Result<u64, StreamError> {
        let only_start = ReplayOptions {
            stop_before: Some(0),
            ..opts.clone()
        };
        let planned = self.planned(std::slice::from_ref(scenario), opts.start)?;
        let scenario = planned.first().unwrap_or(scenario);
        let run = scenario
            .run(self, &only_start)
            .map_err(replay_error(scenario))?;
        Ok(run.summary.peak_reserved_bytes)
    }

    fn peak_live(&self) -> Result<u64, StreamError> {
        Ok(TraceSummary::of(self).peak_live_bytes)
    }

    fn planned<'s>(
        &self,
        scenarios: &'s [Scenario],
        start: Start,
    ) -> Result<Cow<'s, [Scenario]>, StreamError> {
        with_plans(scenarios, || {
            static_plan(&plan_buffers(self, start))
                .map(Arc::new)
                .map_err(|e| StreamError::Replay {
                    scenario: "plan".into(),
                    error: ReplayError::Malformed(e),
                })
        })
    }
}

/// A trace file (native CSV, `.vlt`, an RMM log) that `open` opens, with
/// `IdUse::Recycled`, for each pass: the file is never held.
pub struct TraceFile<F, E> {
    open: F,
    /// The file as opened for its description, which the first pass reads
    /// instead of opening it again.
    opened: Mutex<Option<E>>,
    description: Trace,
    /// The end of the first pass that read the file through.
    first_end: Mutex<Option<StreamEnd>>,
    reads: AtomicU32,
    /// The live peak, once counted.
    peak_live: Mutex<Option<u64>>,
    /// The static plan of each start, once made (`plan` policies).
    plans: Mutex<Vec<(Start, Arc<StaticPlan>)>>,
}

impl<F, E> TraceFile<F, E>
where
    F: Fn() -> Result<E, TraceError>,
    E: EventBlocks + Send,
{
    /// Opens the file once for its description (what is read before its
    /// first event).
    pub fn new(open: F) -> Result<Self, TraceError> {
        let events = open()?;
        Ok(Self::opened(open, events))
    }

    /// The file `events` was opened from (by `open`), described by what
    /// was read before its first event; the first pass reads `events`.
    pub fn opened(open: F, events: E) -> Self {
        let mut description = events.trace().clone();
        description.events = Vec::new();
        TraceFile {
            open,
            opened: Mutex::new(Some(events)),
            description,
            first_end: Mutex::new(None),
            reads: AtomicU32::new(0),
            peak_live: Mutex::new(None),
            plans: Mutex::new(Vec::new()),
        }
    }

    /// The end of the first read through the file (its notes, streams,
    /// phases and counts); `None` before one.
    pub fn first_end(&self) -> Option<StreamEnd> {
        self.first_end.lock().ok().and_then(|e| e.clone())
    }

    /// How many times the file was read through.
    pub fn reads(&self) -> u32 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The file for a pass: as first opened, else opened again.
    fn events(&self) -> Result<E, TraceError> {
        match self.opened.lock().ok().and_then(|mut e| e.take()) {
            Some(events) => Ok(events),
            None => (self.open)(),
        }
    }

    /// The static plan of the file replayed from `start`, made in a read
    /// of its own the first time.
    fn plan(&self, start: Start) -> Result<Arc<StaticPlan>, StreamError> {
        let cached = self.plans.lock().ok().and_then(|p| {
            p.iter()
                .find(|(s, _)| *s == start)
                .map(|(_, plan)| Arc::clone(plan))
        });
        if let Some(plan) = cached {
            return Ok(plan);
        }
        let mut events = self.events()?;
        let mut builder = PlanBuilder::new(events.trace(), start);
        let mut block = Vec::new();
        while events.next_block(&mut block)? {
            builder.events(&block);
        }
        let end = events.finish()?;
        self.read_through(end);
        let plan =
            static_plan(&builder.finish())
                .map(Arc::new)
                .map_err(|e| StreamError::Replay {
                    scenario: "plan".into(),
                    error: ReplayError::Malformed(e),
                })?;
        if let Ok(mut p) = self.plans.lock() {
            p.push((start, Arc::clone(&plan)));
        }
        Ok(plan)
    }

    fn read_through(&self, end: StreamEnd) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut first) = self.first_end.lock() {
            first.get_or_insert(end);
        }
    }
}

impl<F, E> ReplayPasses for TraceFile<F, E>
where
    F: Fn() -> Result<E, TraceError>,
    E: EventBlocks + Send,
{
    fn trace(&self) -> &Trace {
        &self.description
    }

    fn replay_counted(
        &self,
        scenarios: &[Scenario],
        opts: &ReplayOptions,
        done: &(dyn Fn() + Sync),
    ) -> Result<Vec<Run>, StreamError> {
        let scenarios = &*self.planned(scenarios, opts.start)?;
        let streamed = replay_streamed(self.events()?, scenarios, opts)?;
        self.read_through(streamed.end);
        // Every replay ends with the read.
        for _ in &streamed.runs {
            done();
        }
        Ok(streamed.runs)
    }

    fn start_reserved(
        &self,
        scenario: &Scenario,
        opts: &ReplayOptions,
    ) -> Result<u64, StreamError> {
        let planned = self.planned(std::slice::from_ref(scenario), opts.start)?;
        let scenario = planned.first().unwrap_or(scenario);
        let events = self.events()?;
        let run = replay_start_only(&events, scenario, opts).map_err(replay_error(scenario))?;
        Ok(run.summary.peak_reserved_bytes)
    }

    /// Counted in a read of its own, the first time only.
    fn peak_live(&self) -> Result<u64, StreamError> {
        if let Some(peak) = self.peak_live.lock().ok().and_then(|p| *p) {
            return Ok(peak);
        }
        let mut events = self.events()?;
        let mut summary = SummaryBuilder::streamed(events.trace());
        let mut block = Vec::new();
        while events.next_block(&mut block)? {
            summary.events(&block, &events.trace().phases);
        }
        let end = events.finish()?;
        let peak = summary.finish(&end.trace).peak_live_bytes;
        self.read_through(end);
        if let Ok(mut p) = self.peak_live.lock() {
            *p = Some(peak);
        }
        Ok(peak)
    }

    fn planned<'s>(
        &self,
        scenarios: &'s [Scenario],
        start: Start,
    ) -> Result<Cow<'s, [Scenario]>, StreamError> {
        with_plans(scenarios, || self.plan(start))
    }
}
