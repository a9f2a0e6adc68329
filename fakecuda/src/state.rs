//! The fake devices' state: one [`SimDevice`] per GPU, the physical
//! handles of expandable segments, the current device of each thread, the
//! device-call log, and the device shared with other processes, if any
//! (`shared.rs`).

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::c_int;
use std::fs::File;
use std::io::Write;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use vramlab_allocator::{Device, DeviceError, SimDevice};

use crate::config::Config;
use crate::shared::{DeviceSettings, Sharing};

/// Device `d`'s addresses are its simulated device's plus `d` times this,
/// so that no two devices hand out the same address (CUDA's address space
/// is unified; PyTorch keys blocks by address across devices).
pub(crate) const DEVICE_STRIDE: u64 = 1 << 48;

/// A physical allocation of the virtual-memory API (`cuMemCreate`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PhysHandle {
    pub device: u32,
    pub size: u64,
    /// Where it is mapped (device-local address), if it is.
    pub mapped_at: Option<u64>,
}

/// One GPU.
#[derive(Debug)]
pub(crate) struct Gpu {
    pub sim: SimDevice,
    /// cudaMalloc results (device-local address → size).
    pub segments: HashMap<u64, u64>,
    /// Bytes of physical handles created but not mapped (the simulated
    /// device counts memory when it is mapped; the driver when created).
    pub unmapped: u64,
    /// Bytes other processes hold on a shared device, as read at the start
    /// of this call ([`device_state`]); 0 on a device of this process's own.
    pub others: u64,
}

impl Gpu {
    fn new(c: &Config) -> Gpu {
        let mut sim = SimDevice::with_capacity(c.capacity);
        if let Some(total) = c.total.or(c.capacity) {
            sim.set_total(total);
        }
        sim.set_placement(c.placement);
        Gpu {
            sim,
            segments: HashMap::new(),
            unmapped: 0,
            others: 0,
        }
    }

    /// Free and total bytes as `cudaMemGetInfo` reports them.
    pub(crate) fn mem_info(&self) -> (u64, u64) {
        let m = self.sim.mem_info();
        let free = m.free.min(m.total).saturating_sub(self.unmapped);
        (free.saturating_sub(self.others), m.total)
    }

    /// Bytes that can still be created or allocated.
    pub(crate) fn room(&self) -> u64 {
        let room = self.sim.mem_info().free.saturating_sub(self.unmapped);
        room.saturating_sub(self.others)
    }

    /// Bytes this process holds: segments, and handles mapped or not.
    fn held(&self) -> u64 {
        self.sim.used().saturating_add(self.unmapped)
    }
}

/// Everything the fake keeps.
#[derive(Debug)]
pub(crate) struct State {
    pub config: Config,
    pub gpus: Vec<Gpu>,
    pub handles: HashMap<u64, PhysHandle>,
    pub next_handle: u64,
    log: Option<File>,
    event: Option<u64>,
    sharing: Sharing,
}

static STATE: OnceLock<Mutex<State>> = OnceLock::new();

thread_local! {
    static CURRENT_DEVICE: Cell<u32> = const { Cell::new(0) };
}

/// The state, created from the environment at the first call.
pub(crate) fn state() -> MutexGuard<'static, State> {
    let m = STATE.get_or_init(|| {
        let config = Config::from_env();
        let log = config.log.as_ref().and_then(|p| match File::create(p) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("[vramlab-fakecuda] cannot create the log {p}: {e}");
                None
            }
        });
        let gpus: Vec<Gpu> = (0..config.devices).map(|_| Gpu::new(&config)).collect();
        let sharing = Sharing::new(
            config.shared.as_deref(),
            DeviceSettings {
                devices: config.devices,
                capacity: config.capacity,
                total: gpus.first().map_or(0, |g| g.mem_info().1),
                placement: config.placement.to_string(),
            },
        );
        Mutex::new(State {
            config,
            gpus,
            handles: HashMap::new(),
            next_handle: 1,
            log,
            event: None,
            sharing,
        })
    });
    // A panic while the lock was held cannot leave the state half-changed
    // in a way that matters more than stopping would: keep serving.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `cudaErrorInitializationError` / `CUDA_ERROR_NOT_INITIALIZED`: this
/// process was refused the shared device.
const NOT_INITIALIZED: c_int = 3;
/// `cudaErrorUnknown` / `CUDA_ERROR_UNKNOWN`: the shared device's file
/// could not be read.
const UNKNOWN: c_int = 999;

/// The state, for a call that reads or changes device memory. On a shared
/// device the device's file is locked and the bytes the other processes
/// hold are in each [`Gpu::others`] until the guard is dropped, which
/// records this process's bytes and unlocks. `Err`: the code to return
/// (this process was refused the shared device, or its file is unreadable).
pub(crate) fn device_state() -> Result<DeviceState, c_int> {
    let mut s = state();
    let State { sharing, gpus, .. } = &mut *s;
    match sharing {
        Sharing::Private => {}
        Sharing::Refused => return Err(NOT_INITIALIZED),
        Sharing::Shared(dev) => match dev.begin() {
            Ok(others) => {
                for (g, o) in gpus.iter_mut().zip(others) {
                    g.others = o;
                }
            }
            Err(e) => {
                static SAID: AtomicBool = AtomicBool::new(false);
                if !SAID.swap(true, Ordering::Relaxed) {
                    let path = s.config.shared.as_deref().unwrap_or_default();
                    eprintln!("[vramlab-fakecuda] VRAMLAB_FAKECUDA_SHARED={path}: {e}");
                }
                return Err(UNKNOWN);
            }
        },
    }
    Ok(DeviceState(s))
}

/// The state with the shared device (if any) locked: see [`device_state`].
pub(crate) struct DeviceState(MutexGuard<'static, State>);

impl Deref for DeviceState {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0
    }
}

impl DerefMut for DeviceState {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.0
    }
}

impl Drop for DeviceState {
    fn drop(&mut self) {
        let State { sharing, gpus, .. } = &mut *self.0;
        if let Sharing::Shared(dev) = sharing {
            let held: Vec<u64> = gpus.iter().map(Gpu::held).collect();
            dev.end(&held);
        }
    }
}

/// The settings (a copy, for calls that only read them).
pub(crate) fn config() -> Config {
    state().config.clone()
}

/// The calling thread's current device.
pub(crate) fn current_device() -> u32 {
    CURRENT_DEVICE.with(Cell::get)
}

/// Makes `d` the calling thread's current device.
pub(crate) fn set_current_device(d: u32) {
    CURRENT_DEVICE.with(|c| c.set(d));
}

/// Splits a global address into (device, device-local address).
pub(crate) fn split_address(ptr: u64) -> (u32, u64) {
    ((ptr / DEVICE_STRIDE) as u32, ptr % DEVICE_STRIDE)
}

/// The global address of device `d`'s local address `local`.
pub(crate) fn global_address(d: u32, local: u64) -> u64 {
    u64::from(d) * DEVICE_STRIDE + local
}

impl State {
    /// Device `d`, if it exists.
    pub(crate) fn gpu(&mut self, d: u32) -> Option<&mut Gpu> {
        self.gpus.get_mut(d as usize)
    }

    /// Writes one line to the device-call log.
    pub(crate) fn log(&mut self, kind: &str, device: u32, ptr: u64, size: u64) {
        let event = self.event;
        if let Some(f) = self.log.as_mut() {
            let line = match event {
                Some(e) => format!("{e} {kind} {device} {ptr:#x} {size}\n"),
                None => format!("- {kind} {device} {ptr:#x} {size}\n"),
            };
            if let Err(e) = f.write_all(line.as_bytes()) {
                eprintln!("[vramlab-fakecuda] cannot write the log: {e}");
                self.log = None;
            }
        }
    }
}

/// A device error as a CUDA error code.
pub(crate) fn error_code(e: &DeviceError) -> i32 {
    match e {
        DeviceError::OutOfMemory { .. } => crate::ffi::OUT_OF_MEMORY,
        DeviceError::Other(_) => crate::ffi::INVALID_VALUE,
    }
}

/// Tells the fake which trace event the replay is at: later log lines
/// carry it, so a device call can be tied to the event that caused it.
#[unsafe(no_mangle)]
pub extern "C" fn vramlab_fakecuda_mark(event: u64) {
    state().event = Some(event);
}

/// Flushes the device-call log (the log is written unbuffered; this is for
/// callers that want to be sure).
#[unsafe(no_mangle)]
pub extern "C" fn vramlab_fakecuda_flush() {
    let mut s = state();
    if let Some(f) = s.log.as_mut() {
        let _ = f.flush();
    }
}
