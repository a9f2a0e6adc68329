//! The fake device's settings, read once from the environment.

use vramlab_allocator::Placement;

/// When an event recorded on a stream completes (`VRAMLAB_FAKECUDA_EVENTS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventMode {
    /// At once: nothing ever runs, so every event is complete (`complete`).
    Complete,
    /// When something synchronizes it: `cudaEventSynchronize` of it or of
    /// a later event of its stream, `cudaStreamSynchronize` of its stream,
    /// or a device-wide synchronize (`sync`).
    Sync,
    /// Only at a device-wide synchronize (`never`).
    Never,
}

impl EventMode {
    fn parse(v: &str) -> Option<EventMode> {
        match v.trim() {
            "complete" => Some(EventMode::Complete),
            "sync" => Some(EventMode::Sync),
            "never" => Some(EventMode::Never),
            _ => None,
        }
    }
}

/// What the fake device is.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Number of devices.
    pub devices: u32,
    /// Bytes each device can hold (`None`: unlimited).
    pub capacity: Option<u64>,
    /// Total memory reported by `cudaMemGetInfo` (`None`: the capacity, else
    /// the simulated device's default).
    pub total: Option<u64>,
    /// Where new segments and reservations go.
    pub placement: Placement,
    /// The device name.
    pub name: String,
    /// `cudaRuntimeGetVersion`, e.g. 13000; its major picks struct layouts.
    pub runtime_version: i32,
    /// Where device calls are logged.
    pub log: Option<String>,
    /// No "not faked" lines on stderr.
    pub quiet: bool,
    /// When recorded events complete.
    pub events: EventMode,
    /// Bytes of pinned host memory that can be live at once (`None`:
    /// unlimited): `cudaHostAlloc`ed and `cudaHostRegister`ed together.
    pub host_capacity: Option<u64>,
    /// The file of a device shared with other processes (`None`: this
    /// process's own device).
    pub shared: Option<String>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn number(name: &str) -> Option<u64> {
    let v = var(name)?;
    match v.trim().parse::<u64>() {
        Ok(n) => Some(n),
        Err(_) => {
            eprintln!("[vramlab-fakecuda] {name}={v} is not a whole number of bytes; ignored");
            None
        }
    }
}

impl Config {
    /// The settings the environment gives.
    pub(crate) fn from_env() -> Config {
        let placement = match var("VRAMLAB_FAKECUDA_PLACEMENT").map(|p| p.parse::<Placement>()) {
            Some(Ok(p)) => p,
            Some(Err(e)) => {
                eprintln!("[vramlab-fakecuda] VRAMLAB_FAKECUDA_PLACEMENT: {e}; using driver");
                Placement::Driver
            }
            None => Placement::Driver,
        };
        let runtime_version = number("VRAMLAB_FAKECUDA_RUNTIME_VERSION")
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(13000);
        let events = match var("VRAMLAB_FAKECUDA_EVENTS").map(|v| (EventMode::parse(&v), v)) {
            Some((Some(mode), _)) => mode,
            Some((None, v)) => {
                eprintln!(
                    "[vramlab-fakecuda] VRAMLAB_FAKECUDA_EVENTS={v} is not complete, sync or never; using complete"
                );
                EventMode::Complete
            }
            None => EventMode::Complete,
        };
        Config {
            devices: number("VRAMLAB_FAKECUDA_DEVICES")
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n >= 1)
                .unwrap_or(1),
            capacity: number("VRAMLAB_FAKECUDA_CAPACITY"),
            total: number("VRAMLAB_FAKECUDA_TOTAL"),
            placement,
            name: var("VRAMLAB_FAKECUDA_NAME").unwrap_or_else(|| "NVIDIA H200".into()),
            runtime_version,
            log: var("VRAMLAB_FAKECUDA_LOG"),
            quiet: var("VRAMLAB_FAKECUDA_QUIET").is_some_and(|v| v != "0"),
            events,
            host_capacity: number("VRAMLAB_FAKECUDA_HOST_CAPACITY"),
            shared: var("VRAMLAB_FAKECUDA_SHARED"),
        }
    }

    /// The CUDA major version the caller was built against (12, 13, …).
    pub(crate) fn cuda_major(&self) -> i32 {
        self.runtime_version / 1000
    }
}
