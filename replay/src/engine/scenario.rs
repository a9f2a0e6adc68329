//! A scenario: which policy, with which settings, on which simulated device.
//! The one entry point the CLI, sweeps and searches use to replay a trace.

use vramlab_allocator::{AllocConf, NativeAllocator};
use vramlab_traces::Trace;

use crate::engine::run::Run;
use crate::engine::static_plan::{needs_plan, planned};
use crate::engine::timed::TimedAllocator;
use crate::engine::{ReplayError, ReplayOptions, replay};
use std::borrow::Cow;
use std::sync::Arc;
use vramlab_allocator::Allocator;
use vramlab_allocator::LatencySummary;
use vramlab_allocator::Placement;
use vramlab_allocator::PolicySpec;
use vramlab_allocator::policies::plan::StaticPlan;
use vramlab_allocator::{CostModel, SimDevice};

/// Applies the scenario's memory fraction, if any.
fn set_fraction(a: &mut impl Allocator, fraction: Option<f64>) -> Result<(), ReplayError> {
    match fraction {
        Some(f) => a
            .set_memory_fraction(f)
            .map_err(|e| ReplayError::Initial(e.to_string())),
        None => Ok(()),
    }
}

/// What `empty_cache()` did at the end of a replay
/// ([`Scenario::run_then_empty_cache`]).
#[derive(Debug, Clone)]
pub(crate) struct EmptyCacheOutcome {
    /// Reserved bytes it gave back to the device.
    pub released_bytes: u64,
    /// The segments left after it.
    pub segments_after: Vec<vramlab_allocator::SegmentView>,
}

/// Everything that defines one replay besides the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The policy and its settings.
    pub policy: PolicySpec,
    /// Device capacity in bytes (`None` = unlimited).
    pub capacity: Option<u64>,
    /// Total memory the device reports (`None`: the capacity, else the
    /// trace's recorded device total, else 1 TiB).
    pub device_total: Option<u64>,
    /// `torch.cuda.set_per_process_memory_fraction` applied before the
    /// first event (native policy only).
    pub memory_fraction: Option<f64>,
    /// Simulated driver-call costs.
    pub cost: CostModel,
    /// Where the simulated device puts new segments and reservations.
    pub placement: Placement,
}

impl Scenario {
    /// A scenario of `policy` on an unlimited device.
    pub fn new(policy: PolicySpec) -> Self {
        Scenario {
            policy,
            capacity: None,
            device_total: None,
            memory_fraction: None,
            cost: CostModel::default(),
            placement: Placement::default(),
        }
    }

    /// The native policy with `conf` on an unlimited device.
    pub fn native(conf: AllocConf) -> Self {
        Scenario::new(PolicySpec::Native(conf))
    }

    /// The same scenario with another capacity.
    pub fn with_capacity(mut self, capacity: Option<u64>) -> Self {
        self.capacity = capacity;
        self
    }

    /// The same scenario with another placement policy.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// A short label: the settings string (`default` for PyTorch's
    /// defaults), the policy name for other policies, and the fraction.
    pub fn label(&self) -> String {
        let mut s = self.policy.to_string();
        if let Some(f) = self.memory_fraction {
            s.push_str(&format!(" (fraction {f})"));
        }
        s
    }

    /// The simulated device this scenario runs on, for `trace`.
    pub fn device(&self, trace: &Trace) -> SimDevice {
        let mut dev = SimDevice::with_capacity(self.capacity);
        if let Some(total) = self
            .device_total
            .or(self.capacity)
            .or(trace.header.device_total)
        {
            dev.set_total(total);
        }
        dev.set_cost_model(self.cost);
        dev.set_placement(self.placement);
        dev
    }

    /// The native allocator of this scenario (`None` for other policies).
    pub fn native_allocator(&self, trace: &Trace) -> Option<NativeAllocator<SimDevice>> {
        let conf = self.policy.native_conf()?;
        let mut a = NativeAllocator::new(conf.clone(), self.device(trace));
        if let Some(f) = self.memory_fraction {
            a.set_memory_fraction(f);
        }
        Some(a)
    }

    /// `opts` with the pinned host allocator's rules of this scenario: the
    /// native policy's release and `pinned_*` settings (other policies
    /// replace the device allocator only: their host requests go to
    /// PyTorch's host allocator with the trace's release defaults).
    fn with_host_rules<'o>(&self, opts: &'o ReplayOptions) -> std::borrow::Cow<'o, ReplayOptions> {
        match self.host_rules() {
            Some(rules) if opts.host_rules.is_none() => {
                let mut o = opts.clone();
                o.host_rules = Some(rules);
                std::borrow::Cow::Owned(o)
            }
            _ => std::borrow::Cow::Borrowed(opts),
        }
    }

    /// The pinned host allocator's rules of the native policy's settings.
    pub(crate) fn host_rules(&self) -> Option<vramlab_allocator::host::HostRules> {
        self.policy
            .native_conf()
            .map(vramlab_allocator::host::HostRules::of)
    }

    /// Replays `trace` and measures the host time of every caller-level
    /// malloc and free of the policy (`replay --latency`).
    pub fn run_timed(
        &self,
        trace: &Trace,
        opts: &ReplayOptions,
    ) -> Result<(Run, LatencySummary, LatencySummary), ReplayError> {
        let opts = &*self.with_host_rules(opts);
        let dev = self.device(trace);
        let policy = planned(&self.policy, trace, opts.start)?;
        let (mut run, m, f) = vramlab_allocator::with_policy!(&*policy, dev, |a| {
            let mut t = TimedAllocator::new(a);
            set_fraction(&mut t, self.memory_fraction)?;
            let run = replay(trace, &mut t, opts)?;
            (run, t.malloc.summary(), t.free.summary())
        });
        run.conf = self.label();
        run.capacity = self.capacity;
        Ok((run, m, f))
    }

    /// Replays `trace` as [`Scenario::run`] does, then calls
    /// `torch.cuda.empty_cache()`: the run, and what that call gave back
    /// where the replay stopped.
    pub(crate) fn run_then_empty_cache(
        &self,
        trace: &Trace,
        opts: &ReplayOptions,
    ) -> Result<(Run, EmptyCacheOutcome), ReplayError> {
        fn release<A: Allocator>(a: &mut A, run: &Run) -> Result<EmptyCacheOutcome, ReplayError> {
            let before = a.stats().reserved_bytes.all.current;
            a.empty_cache().map_err(|e| ReplayError::Allocator {
                event_index: run.summary.events_replayed,
                message: format!("empty_cache: {e}"),
            })?;
            let after = a.stats().reserved_bytes.all.current;
            Ok(EmptyCacheOutcome {
                released_bytes: before.saturating_sub(after).max(0) as u64,
                segments_after: a.segments(),
            })
        }
        let opts = &*self.with_host_rules(opts);
        let (mut run, outcome) = if let Some(mut a) = self.native_allocator(trace) {
            let run = replay(trace, &mut a, opts)?;
            let outcome = release(&mut a, &run)?;
            (run, outcome)
        } else {
            let dev = self.device(trace);
            let policy = planned(&self.policy, trace, opts.start)?;
            vramlab_allocator::with_policy!(&*policy, dev, |a| {
                let run = replay(trace, &mut a, opts)?;
                let outcome = release(&mut a, &run)?;
                (run, outcome)
            })
        };
        run.conf = self.label();
        run.capacity = self.capacity;
        Ok((run, outcome))
    }

    /// Replays `trace` under this scenario.
    pub fn run(&self, trace: &Trace, opts: &ReplayOptions) -> Result<Run, ReplayError> {
        let opts = &*self.with_host_rules(opts);
        let mut run = if let Some(mut a) = self.native_allocator(trace) {
            replay(trace, &mut a, opts)?
        } else {
            let dev = self.device(trace);
            let policy = planned(&self.policy, trace, opts.start)?;
            vramlab_allocator::with_policy!(&*policy, dev, |a| replay(trace, &mut a, opts)?)
        };
        run.conf = self.label();
        run.capacity = self.capacity;
        Ok(run)
    }
}

/// `scenarios`, each `plan` policy without a plan given the one `make`
/// makes (made once, and only if one needs it).
pub(crate) fn with_plans<'s, E>(
    scenarios: &'s [Scenario],
    make: impl FnOnce() -> Result<Arc<StaticPlan>, E>,
) -> Result<Cow<'s, [Scenario]>, E> {
    if !scenarios.iter().any(|s| needs_plan(&s.policy)) {
        return Ok(Cow::Borrowed(scenarios));
    }
    let plan = make()?;
    Ok(Cow::Owned(
        scenarios
            .iter()
            .map(|s| match &s.policy {
                PolicySpec::Plan(p) if p.plan.is_none() => {
                    let mut s = s.clone();
                    s.policy = PolicySpec::Plan(p.with_plan(Arc::clone(&plan)));
                    s
                }
                _ => s.clone(),
            })
            .collect(),
    ))
}
