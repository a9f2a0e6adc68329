//! A scenario: which policy, with which settings, on which simulated device.
//! The one entry point the CLI, sweeps and searches use to replay a trace.

use vramlab_allocator::{AllocConf, NativeAllocator};
use vramlab_traces::Trace;

use crate::device::{CostModel, SimDevice};
use crate::replay::{ReplayError, ReplayOptions, replay};
use crate::run::Run;

/// Everything that defines one replay besides the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The native policy's settings.
    pub conf: AllocConf,
    /// Device capacity in bytes (`None` = unlimited).
    pub capacity: Option<u64>,
    /// Total memory the device reports (`None`: the capacity, else the
    /// trace's recorded device total, else 1 TiB).
    pub device_total: Option<u64>,
    /// `torch.cuda.set_per_process_memory_fraction` applied before the
    /// first event.
    pub memory_fraction: Option<f64>,
    /// Simulated driver-call costs.
    pub cost: CostModel,
}

impl Scenario {
    /// The native policy with `conf` on an unlimited device.
    pub fn native(conf: AllocConf) -> Self {
        Scenario {
            conf,
            capacity: None,
            device_total: None,
            memory_fraction: None,
            cost: CostModel::default(),
        }
    }

    /// The same scenario with another capacity.
    pub fn with_capacity(mut self, capacity: Option<u64>) -> Self {
        self.capacity = capacity;
        self
    }

    /// A short label: the settings string, or `default`.
    pub fn label(&self) -> String {
        let mut s = self.conf.to_string();
        if s.is_empty() {
            s = "default".into();
        }
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
        dev
    }

    /// Builds the allocator.
    pub fn allocator(&self, trace: &Trace) -> NativeAllocator<SimDevice> {
        let mut a = NativeAllocator::new(self.conf.clone(), self.device(trace));
        if let Some(f) = self.memory_fraction {
            a.set_memory_fraction(f);
        }
        a
    }

    /// Replays `trace` under this scenario.
    pub fn run(&self, trace: &Trace, opts: &ReplayOptions) -> Result<Run, ReplayError> {
        let mut a = self.allocator(trace);
        let mut run = replay(trace, &mut a, opts)?;
        run.conf = self.label();
        run.capacity = self.capacity;
        Ok(run)
    }
}
