//! Several tenants on one GPU: each tenant is a process with its own
//! allocator (its trace, its policy, settings and release), and all of them
//! draw on one simulated device. A tenant's `cudaMalloc` sees what the
//! others hold; when it fails, the tenant's own allocator frees its cache
//! and retries (PyTorch's path), then raises its OOM. A schedule says whose
//! events run when (one step: a tenant's events up to its next phase mark,
//! or to its end).
//!
//! The replay is single-threaded and lock-step: the tenants' devices are
//! handles on one [`SimDevice`], each keeping its own call log.

use std::cell::RefCell;
use std::rc::Rc;

use vramlab_allocator::{
    Device, DeviceCall, DeviceError, DevicePtr, Inspect, MemInfo, NativeAllocator, Refusal,
    SimDevice,
};
use vramlab_traces::{Event, Trace};

use super::kv_rule;
use super::replayer::Replayer;
use super::run::Run;
use super::scenario::Scenario;
use super::{ReplayDevice, ReplayError, ReplayOptions};

/// One tenant's handle on the shared device: its calls land on the one
/// device, and are logged here too.
#[derive(Debug)]
pub struct TenantDevice {
    shared: Rc<RefCell<SimDevice>>,
    calls: Vec<DeviceCall>,
    /// Physical bytes this tenant holds on the device.
    held: u64,
    /// Its sleeping segments and their sizes.
    asleep: Vec<(DevicePtr, u64)>,
}

impl TenantDevice {
    /// A handle on `shared`.
    pub fn new(shared: Rc<RefCell<SimDevice>>) -> Self {
        TenantDevice {
            shared,
            calls: Vec::new(),
            held: 0,
            asleep: Vec::new(),
        }
    }

    /// Physical bytes this tenant holds on the device: its segments and
    /// mapped pages less its sleeping engine pools, and its memory outside
    /// PyTorch.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Runs `f` on the shared device and keeps the calls it made.
    fn with<R>(&mut self, f: impl FnOnce(&mut SimDevice) -> R) -> R {
        let mut d = self.shared.borrow_mut();
        let r = f(&mut d);
        self.calls.extend_from_slice(d.calls());
        d.forget_calls();
        r
    }
}

impl Device for TenantDevice {
    fn malloc(&mut self, size: u64) -> Result<DevicePtr, DeviceError> {
        let p = self.with(|d| d.malloc(size))?;
        self.held += size;
        Ok(p)
    }
    fn free(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError> {
        self.with(|d| d.free(ptr, size))?;
        match self.asleep.iter().position(|&(p, _)| p == ptr) {
            Some(i) => {
                self.asleep.swap_remove(i);
            }
            None => self.held = self.held.saturating_sub(size),
        }
        Ok(())
    }
    fn mem_info(&self) -> MemInfo {
        self.shared.borrow().mem_info()
    }
    fn synchronize(&mut self) {
        self.with(|d| d.synchronize());
    }
    fn granularity(&self) -> u64 {
        self.shared.borrow().granularity()
    }
    fn reserve(&mut self, size: u64) -> Result<DevicePtr, DeviceError> {
        self.with(|d| d.reserve(size))
    }
    fn map(&mut self, ptr: DevicePtr, size: u64, page: u64) -> Result<(), DeviceError> {
        self.with(|d| d.map(ptr, size, page))?;
        self.held += size;
        Ok(())
    }
    fn unmap(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError> {
        self.with(|d| d.unmap(ptr, size))?;
        self.held = self.held.saturating_sub(size);
        Ok(())
    }
    fn release(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError> {
        self.with(|d| d.release(ptr, size))
    }
    fn calls(&self) -> &[DeviceCall] {
        &self.calls
    }
    fn forget_calls(&mut self) {
        self.calls.clear();
    }
}

impl ReplayDevice for TenantDevice {
    fn place_next(&mut self, addr: u64) {
        self.shared.borrow_mut().place_next(addr);
    }
    fn clear_placements(&mut self) {
        self.shared.borrow_mut().clear_placements();
    }
    fn refuse(&mut self, refusal: Refusal) {
        self.shared.borrow_mut().refuse(refusal);
    }
    fn device_time_us(&self) -> f64 {
        self.shared.borrow().time_us()
    }
    fn take_outside(&mut self, size: u64) -> Result<(), DeviceError> {
        self.shared.borrow_mut().take_outside(size)?;
        self.held += size;
        Ok(())
    }
    fn give_outside(&mut self, size: u64) {
        self.shared.borrow_mut().give_outside(size);
        self.held = self.held.saturating_sub(size);
    }
    fn suspend(&mut self, ptr: DevicePtr) -> Result<u64, DeviceError> {
        let size = self.shared.borrow_mut().suspend(ptr)?;
        self.held = self.held.saturating_sub(size);
        self.asleep.push((ptr, size));
        Ok(size)
    }
    fn resume(&mut self, ptrs: &[DevicePtr]) -> Result<(), DeviceError> {
        self.shared.borrow_mut().resume(ptrs)?;
        for p in ptrs {
            if let Some(i) = self.asleep.iter().position(|&(q, _)| q == *p) {
                let (_, size) = self.asleep.swap_remove(i);
                self.held += size;
            }
        }
        Ok(())
    }
}

/// A process on the shared GPU.
#[derive(Debug, Clone)]
pub struct Tenant<'t> {
    /// Its name in schedules and results (`trainer`, `rollout`).
    pub name: String,
    /// What it asks of its allocator.
    pub trace: &'t Trace,
    /// Its allocator: the native policy's settings and release (capacity
    /// and placement come from the shared device).
    pub scenario: Scenario,
    /// An inference engine sized by vLLM's rule: the share of the
    /// device's total memory it may use (`gpu_memory_utilization`); the
    /// allocations of its [`KV_PHASE`](crate::KV_PHASE) phases get what is
    /// left of it.
    pub kv_util: Option<f64>,
}

/// One step of a schedule: a tenant runs its events up to its next phase
/// mark (`until_mark`), or all that are left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Index into the tenants.
    pub tenant: usize,
    /// Stop at the tenant's next phase mark (its phase ends there).
    pub until_mark: bool,
}

/// The device's use after a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepUse {
    /// The step's tenant.
    pub tenant: usize,
    /// The phase the tenant ran (its mark's label, `""` before the first).
    pub phase: String,
    /// Each tenant's reserved bytes after the step.
    pub reserved: Vec<u64>,
    /// Each tenant's bytes on the device after the step
    /// ([`TenantDevice::held`]).
    pub held: Vec<u64>,
    /// The peak of the device's used bytes during the step.
    pub device_peak: u64,
    /// The first event of the step at which its tenant ran out of memory.
    pub oom_event: Option<u64>,
    /// The device's used bytes after the step (`cudaMemGetInfo`'s total
    /// less free: every tenant's segments, pages, awake engine pools and
    /// memory outside PyTorch).
    pub device_used: u64,
}

/// What a colocated replay gives.
#[derive(Debug, Clone)]
pub struct ColocatedRun {
    /// Each tenant's run (its figures, its OOM), in the tenants' order.
    pub runs: Vec<Run>,
    /// The device after each step.
    pub steps: Vec<StepUse>,
    /// The device's peak used bytes.
    pub device_peak: u64,
    /// The first tenant that ran out of memory, and at which of its events.
    pub first_oom: Option<(usize, u64)>,
}

/// A tenant being replayed.
struct Live<'t> {
    replayer: Replayer<'t>,
    alloc: NativeAllocator<TenantDevice>,
    /// The next event to replay.
    next: usize,
    /// The next phase mark not yet passed.
    mark: usize,
    stopped: bool,
    /// In a `kv_cache` phase of an engine sized by utilization: the bytes
    /// each of its allocations gets.
    kv_size: Option<u64>,
}

/// Replays `tenants` on one device of `capacity` bytes (`total`: what
/// `cudaMemGetInfo` reports; `None`: the capacity), in the order of
/// `schedule` (each tenant's remaining events run at the end, in the
/// tenants' order).
pub fn replay_colocated(
    tenants: &[Tenant<'_>],
    capacity: Option<u64>,
    total: Option<u64>,
    schedule: &[Step],
    opts: &ReplayOptions,
) -> Result<ColocatedRun, ReplayError> {
    let mut sim = SimDevice::with_capacity(capacity);
    if let Some(t) = total.or(capacity) {
        sim.set_total(t);
    }
    if let Some(p) = tenants.first().map(|t| t.scenario.placement) {
        sim.set_placement(p);
    }
    let shared = Rc::new(RefCell::new(sim));
    let mut live = Vec::with_capacity(tenants.len());
    for t in tenants {
        let conf = t.scenario.policy.native_conf().ok_or_else(|| {
            ReplayError::Malformed(format!(
                "tenant {}: colocation replays PyTorch's native allocator",
                t.name
            ))
        })?;
        let mut alloc = NativeAllocator::new(conf.clone(), TenantDevice::new(shared.clone()));
        if let Some(f) = t.scenario.memory_fraction {
            alloc.set_memory_fraction(f);
        }
        let mut replayer = Replayer::new(t.trace, opts);
        replayer.seed(&mut alloc)?;
        replayer.begin(&mut alloc);
        live.push(Live {
            replayer,
            alloc,
            next: 0,
            mark: 0,
            stopped: false,
            kv_size: None,
        });
    }
    let mut out = ColocatedRun {
        runs: Vec::new(),
        steps: Vec::new(),
        device_peak: 0,
        first_oom: None,
    };
    let rest = (0..tenants.len()).map(|tenant| Step {
        tenant,
        until_mark: false,
    });
    for step in schedule.iter().cloned().chain(rest) {
        let (Some(t), Some(l)) = (tenants.get(step.tenant), live.get_mut(step.tenant)) else {
            return Err(ReplayError::Malformed(format!(
                "the schedule names tenant {}, of {}",
                step.tenant,
                tenants.len()
            )));
        };
        let Some(ran) = run_step(t, l, step.until_mark, &shared)? else {
            continue;
        };
        out.device_peak = out.device_peak.max(ran.device_peak);
        if let (None, Some(e)) = (out.first_oom, ran.oom_event) {
            out.first_oom = Some((step.tenant, e));
        }
        out.steps.push(StepUse {
            tenant: step.tenant,
            phase: ran.phase,
            reserved: live
                .iter()
                .map(|l| l.alloc.stats().reserved_bytes.all.current.max(0) as u64)
                .collect(),
            held: live.iter().map(|l| l.alloc.device().held()).collect(),
            device_peak: ran.device_peak,
            oom_event: ran.oom_event,
            device_used: {
                let info = shared.borrow().mem_info();
                info.total.saturating_sub(info.free)
            },
        });
    }
    for l in live {
        out.runs.push(l.replayer.finish(&l.alloc));
    }
    Ok(out)
}

/// What one step did.
struct Ran {
    phase: String,
    device_peak: u64,
    /// The first event at which the tenant ran out of memory.
    oom_event: Option<u64>,
}

/// Runs one step of tenant `t` (`None`: it had nothing left to run).
fn run_step(
    t: &Tenant<'_>,
    l: &mut Live<'_>,
    until_mark: bool,
    shared: &Rc<RefCell<SimDevice>>,
) -> Result<Option<Ran>, ReplayError> {
    let events = &t.trace.events;
    if l.stopped || l.next >= events.len() {
        return Ok(None);
    }
    let marks = &t.trace.phases;
    // Marks at or before the next event open the phase this step runs.
    let mut ran = Ran {
        phase: String::new(),
        device_peak: 0,
        oom_event: None,
    };
    let first_step = l.next == 0;
    let mut phase_start = l.next;
    while let Some(m) = marks.get(l.mark).filter(|m| m.event_index <= l.next as u64) {
        ran.phase.clone_from(&m.label);
        l.mark += 1;
    }
    let end = match marks.get(l.mark) {
        Some(m) if until_mark => (m.event_index as usize).min(events.len()),
        _ => events.len(),
    };
    if let Some(util) = t.kv_util {
        let info = shared.borrow().mem_info();
        let requested = kv_rule::requested(info.total, util);
        if first_step && info.free < requested {
            // vLLM refuses to start: less free memory than it would use.
            let msg = kv_rule::start_refused(info.free, info.total, util);
            l.replayer
                .engine_failed(&l.alloc, 0, requested, info.free, msg);
            l.stopped = true;
            ran.oom_event = Some(0);
            return Ok(Some(ran));
        }
    }
    while l.next < end {
        let i = l.next;
        // A mark inside the step (a step that runs to the end) opens its
        // phase here.
        while let Some(m) = marks.get(l.mark).filter(|m| m.event_index <= i as u64) {
            ran.phase.clone_from(&m.label);
            l.mark += 1;
            phase_start = i;
        }
        if i == phase_start {
            l.kv_size = None;
            if let Some(util) = t.kv_util.filter(|_| ran.phase == kv_rule::KV_PHASE) {
                let now = kv_rule::EngineNow {
                    peak_allocated: l.alloc.stats().allocated_bytes.all.peak.max(0) as u64,
                    outside: l.replayer.outside_bytes(),
                    info: shared.borrow().mem_info(),
                };
                match kv_rule::size_each(t.trace, i, util, &now) {
                    Ok(size) => l.kv_size = Some(size),
                    Err((bytes, free, msg)) => {
                        l.replayer
                            .engine_failed(&l.alloc, i as u64, bytes, free, msg);
                        l.stopped = true;
                        ran.oom_event.get_or_insert(i as u64);
                        break;
                    }
                }
            }
        }
        l.next += 1;
        let Some(&ev) = events.get(i) else { break };
        let ev = match (ev, l.kv_size) {
            (Event::Alloc { id, stream, .. }, Some(size)) => Event::Alloc { id, stream, size },
            (ev, _) => ev,
        };
        let ooms = l.alloc.stats().num_ooms + l.replayer.outside_ooms();
        let stop = l.replayer.event(&mut l.alloc, i, &ev)?;
        let info = shared.borrow().mem_info();
        ran.device_peak = ran.device_peak.max(info.total.saturating_sub(info.free));
        // An OOM, whether the tenant stops at it or goes on.
        if l.alloc.stats().num_ooms + l.replayer.outside_ooms() > ooms && ran.oom_event.is_none() {
            ran.oom_event = Some(i as u64);
        }
        if stop {
            l.stopped = true;
            break;
        }
    }
    Ok(Some(ran))
}
