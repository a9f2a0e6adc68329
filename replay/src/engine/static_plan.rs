//! The plan a `plan` policy replays a trace with: the trace's allocations
//! as buffers with lifetimes ([`PlanBuilder`]), placed by greedy by size
//! (and, on a small trace, a short search for better) into a
//! [`StaticPlan`] whose slots follow the order the replay will ask for
//! them.
//!
//! A trace that starts mid-run starts as the replay does: started fresh,
//! the blocks in use at its first entry are allocated first, in the order
//! [`Start::Fresh`] allocates them, and are planned too (their frees are in
//! the trace); started from the recorded layout, they are the fallback's
//! and the plan covers the trace's own requests.

use std::borrow::Cow;
use std::sync::Arc;

use vramlab_allocator::PolicySpec;
use vramlab_allocator::policies::plan::{
    Buffer, REQUEST_LIMIT, ROUND, Slot, StaticPlan, check, exact, greedy,
};
use vramlab_traces::{Event, InitialBlockState, Trace};

use crate::engine::ReplayError;
use crate::engine::start::Start;

/// The buffers of a trace, fed its events block by block.
#[derive(Debug, Clone, Default)]
pub struct PlanBuilder {
    /// The time of the next event (the blocks of a fresh start come
    /// first).
    now: u64,
    /// The open buffer of each id.
    open: Vec<Option<u32>>,
    bufs: Vec<Buffer>,
}

fn rounded(size: u64) -> u64 {
    size.div_ceil(ROUND) * ROUND
}

impl PlanBuilder {
    /// A builder for `trace` (its description is enough) replayed from
    /// `start` when it starts mid-run.
    pub fn new(trace: &Trace, start: Start) -> PlanBuilder {
        let mut b = PlanBuilder::default();
        let Some(init) = trace.initial.as_ref().filter(|_| start == Start::Fresh) else {
            return b;
        };
        for live in &init.live {
            let id = match live.state {
                InitialBlockState::Allocated(id) | InitialBlockState::PendingFree(id) => id,
                InitialBlockState::Free => continue,
            };
            if live.requested > 0 && live.requested < REQUEST_LIMIT {
                b.open_buffer(id, live.requested);
            }
        }
        b
    }

    fn open_buffer(&mut self, id: u32, size: u64) {
        let i = id as usize;
        if self.open.len() <= i {
            self.open.resize(i + 1, None);
        }
        if let Some(slot) = self.open.get_mut(i) {
            *slot = Some(self.bufs.len() as u32);
        }
        self.bufs.push(Buffer {
            size: rounded(size),
            start: self.now,
            end: u64::MAX,
        });
        self.now += 1;
    }

    fn close_buffer(&mut self, id: u32) {
        if let Some(b) = self.open.get_mut(id as usize).and_then(Option::take) {
            if let Some(buf) = self.bufs.get_mut(b as usize) {
                buf.end = self.now;
            }
        }
    }

    /// The next events of the trace.
    pub fn events(&mut self, events: &[Event]) {
        for ev in events {
            match *ev {
                // (Empty requests and those of 2^60 bytes or more are not
                // placed: the policy does not count them either.)
                Event::Alloc { id, size, .. } if size > 0 && size < REQUEST_LIMIT => {
                    // `open_buffer` counts the event.
                    self.open_buffer(id, size);
                    continue;
                }
                Event::Free { id } | Event::FreeCompleted { id } => self.close_buffer(id),
                _ => {}
            }
            self.now += 1;
        }
    }

    /// The buffers, in the order the replay allocates them (never freed:
    /// live to the end).
    pub fn finish(self) -> Vec<Buffer> {
        self.bufs
    }
}

/// The buffers of `trace` replayed from `start`.
pub(crate) fn plan_buffers(trace: &Trace, start: Start) -> Vec<Buffer> {
    let mut b = PlanBuilder::new(trace, start);
    b.events(&trace.events);
    b.finish()
}

/// Traces up to this many allocations get a search for a better plan
/// than greedy's.
pub const SEARCH_UP_TO: usize = 5_000;

/// The search's budget, in nodes (a node costs a pass over the
/// allocations: at most about 10^8 steps).
pub const SEARCH_BUDGET: u64 = 20_000;

/// The static plan of `bufs`, checked: greedy by size, improved by a
/// search of [`SEARCH_BUDGET`] nodes when there are at most
/// [`SEARCH_UP_TO`] allocations.
pub fn static_plan(bufs: &[Buffer]) -> Result<StaticPlan, String> {
    let p = if bufs.len() <= SEARCH_UP_TO {
        exact(bufs, SEARCH_BUDGET).placement
    } else {
        greedy(bufs)
    };
    check(bufs, &p)?;
    let slots = bufs
        .iter()
        .zip(&p.offsets)
        .map(|(b, &offset)| Slot {
            size: b.size,
            offset,
        })
        .collect();
    StaticPlan::new(slots, p.peak)
}

/// `policy` with the plan of `trace` when it is a `plan` policy without
/// one (else `policy` itself).
pub(crate) fn planned<'p>(
    policy: &'p PolicySpec,
    trace: &Trace,
    start: Start,
) -> Result<Cow<'p, PolicySpec>, ReplayError> {
    match policy {
        PolicySpec::Plan(s) if s.plan.is_none() => {
            let plan = static_plan(&plan_buffers(trace, start)).map_err(ReplayError::Malformed)?;
            Ok(Cow::Owned(PolicySpec::Plan(s.with_plan(Arc::new(plan)))))
        }
        _ => Ok(Cow::Borrowed(policy)),
    }
}

/// `true` for a `plan` policy still without its plan.
pub(crate) fn needs_plan(policy: &PolicySpec) -> bool {
    matches!(policy, PolicySpec::Plan(s) if s.plan.is_none())
}
