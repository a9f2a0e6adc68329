//! Events, and when the work before them is done.
//!
//! Nothing ever runs on the fake device, so by default
//! (`VRAMLAB_FAKECUDA_EVENTS=complete`) every event is complete and every
//! stream idle. The other modes let a caller's waiting be tested — that of
//! PyTorch's pinned host allocator, which reuses a freed block only once
//! the events recorded at its free have completed:
//!
//! * `sync`: an event recorded on a stream (`cudaEventRecord`,
//!   `cudaEventRecordWithFlags`, their driver twins) is not ready
//!   (`cudaEventQuery` answers 600, `cudaErrorNotReady`) until something
//!   waits for it on the host: `cudaEventSynchronize` of it or of a later
//!   event of the same stream (a stream's work completes in order),
//!   `cudaStreamSynchronize` of its stream, or a device-wide synchronize
//!   (`cudaDeviceSynchronize`, `cudaThreadSynchronize`, `cuCtxSynchronize`).
//!   A stream that waits for it on the device (`cudaStreamWaitEvent`)
//!   completes nothing then; once that stream's work after the wait is
//!   synchronized, the event (and its stream's earlier work) is complete
//!   too, as on a GPU. An event never recorded is complete; one recorded
//!   again is pending again. The events of a destroyed stream stay
//!   pending until a device-wide synchronize.
//! * `never`: only a device-wide synchronize completes events.
//!
//! The default stream's three handles — 0 (what PyTorch's default stream
//! is), `cudaStreamLegacy` (0x1) and `cudaStreamPerThread` (0x2) — are one
//! stream here: synchronizing any of them completes what was recorded on
//! any of them, and nothing recorded on other streams (PyTorch's streams
//! are created non-blocking, so the legacy stream's implicit
//! synchronization with blocking streams does not apply to them).
//! `cudaStreamQuery` is not ready while an event recorded on the stream
//! is. Synchronous copies (`cudaMemcpy`) complete nothing.

use std::collections::BTreeMap;
use std::ffi::c_uint;
use std::sync::{Mutex, OnceLock};

use crate::config::EventMode;
use crate::errors::ret;
use crate::ffi::{CudaError, Handle, NOT_READY, SUCCESS, new_handle, put};

/// An event recorded and not yet complete.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// The stream it was recorded on (the default stream's handles as 0).
    stream: usize,
    /// Its record's place among all records and waits (a stream's work
    /// completes in order).
    seq: u64,
}

/// A stream told to wait for a pending event (`cudaStreamWaitEvent`):
/// once the stream's work after the wait completes, so has the event's.
#[derive(Debug, Clone, Copy)]
struct Wait {
    stream: usize,
    seq: u64,
    /// The event's stream and record, as they were at the wait.
    on: Pending,
}

/// What is pending.
#[derive(Debug)]
struct Events {
    /// The next record's or wait's number.
    next: u64,
    /// Pending events by handle.
    pending: BTreeMap<usize, Pending>,
    /// Waits whose stream has not completed past them.
    waits: Vec<Wait>,
}

impl Events {
    fn number(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// The work of `stream` up to number `upto` is done: its events up to
    /// there complete, and so, through its waits, do those of the streams
    /// it waited for.
    fn complete(&mut self, stream: usize, upto: u64) {
        let mut work = vec![Pending { stream, seq: upto }];
        while let Some(done) = work.pop() {
            self.pending
                .retain(|_, p| p.stream != done.stream || p.seq > done.seq);
            let (due, keep) = std::mem::take(&mut self.waits)
                .into_iter()
                .partition::<Vec<Wait>, _>(|w| w.stream == done.stream && w.seq <= done.seq);
            self.waits = keep;
            work.extend(due.iter().map(|w| w.on));
        }
    }
}

static EVENTS: Mutex<Events> = Mutex::new(Events {
    next: 0,
    pending: BTreeMap::new(),
    waits: Vec::new(),
});

static MODE: OnceLock<EventMode> = OnceLock::new();

fn mode() -> EventMode {
    *MODE.get_or_init(|| crate::state::config().events)
}

fn with_events<R>(f: impl FnOnce(&mut Events) -> R) -> R {
    f(&mut EVENTS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The stream a handle names: the default stream's three handles are one.
fn stream_key(s: Handle) -> usize {
    match s as usize {
        0..=2 => 0,
        s => s,
    }
}

/// `e` was recorded on `s`.
fn record(e: Handle, s: Handle) {
    if mode() == EventMode::Complete || e.is_null() {
        return;
    }
    with_events(|ev| {
        let seq = ev.number();
        let stream = stream_key(s);
        ev.pending.insert(e as usize, Pending { stream, seq });
    });
}

/// Stream `s` waits on the device for `e` (`sync` mode): nothing
/// completes now.
pub(crate) fn wait(s: Handle, e: Handle) {
    if mode() != EventMode::Sync {
        return;
    }
    with_events(|ev| {
        if let Some(on) = ev.pending.get(&(e as usize)).copied() {
            let seq = ev.number();
            let stream = stream_key(s);
            ev.waits.push(Wait { stream, seq, on });
        }
    });
}

/// Whether the work before `e`'s last record is done.
pub(crate) fn event_complete(e: Handle) -> bool {
    mode() == EventMode::Complete || with_events(|ev| !ev.pending.contains_key(&(e as usize)))
}

/// Whether every event recorded on `s` is complete.
pub(crate) fn stream_idle(s: Handle) -> bool {
    if mode() == EventMode::Complete {
        return true;
    }
    let key = stream_key(s);
    with_events(|ev| ev.pending.values().all(|p| p.stream != key))
}

/// The host waited for `e` (`sync` mode): its stream's work up to it is
/// done.
fn sync_event(e: Handle) {
    if mode() != EventMode::Sync {
        return;
    }
    with_events(|ev| {
        if let Some(p) = ev.pending.get(&(e as usize)).copied() {
            ev.complete(p.stream, p.seq);
        }
    });
}

/// The host waited for stream `s` (`sync` mode): all its work is done.
pub(crate) fn sync_stream(s: Handle) {
    if mode() != EventMode::Sync {
        return;
    }
    with_events(|ev| ev.complete(stream_key(s), u64::MAX));
}

/// The host waited for the whole device: every event completes.
pub(crate) fn sync_device() {
    if mode() == EventMode::Complete {
        return;
    }
    with_events(|ev| {
        ev.pending.clear();
        ev.waits.clear();
    });
}

/// `cudaEventQuery` without the runtime's sticky error (the driver's).
pub(crate) fn query(e: Handle) -> CudaError {
    if event_complete(e) {
        SUCCESS
    } else {
        NOT_READY
    }
}

/// `cudaEventCreate`.
///
/// # Safety
/// `e` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaEventCreate(e: *mut Handle) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(e, new_handle()) };
    SUCCESS
}

/// `cudaEventCreateWithFlags`.
///
/// # Safety
/// `e` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaEventCreateWithFlags(e: *mut Handle, _f: c_uint) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(e, new_handle()) };
    SUCCESS
}

/// `cudaEventDestroy`: its pending record is forgotten.
#[unsafe(no_mangle)]
pub extern "C" fn cudaEventDestroy(e: Handle) -> CudaError {
    if mode() != EventMode::Complete {
        with_events(|ev| ev.pending.remove(&(e as usize)));
    }
    SUCCESS
}

/// `cudaEventRecord`: pending until synchronized, outside `complete` mode.
#[unsafe(no_mangle)]
pub extern "C" fn cudaEventRecord(e: Handle, s: Handle) -> CudaError {
    record(e, s);
    SUCCESS
}

/// `cudaEventRecordWithFlags`: as [`cudaEventRecord`].
#[unsafe(no_mangle)]
pub extern "C" fn cudaEventRecordWithFlags(e: Handle, s: Handle, _f: c_uint) -> CudaError {
    record(e, s);
    SUCCESS
}

/// `cudaEventQuery`: complete, or 600 (`cudaErrorNotReady`), which the
/// runtime also keeps as the thread's last error (PyTorch clears it).
#[unsafe(no_mangle)]
pub extern "C" fn cudaEventQuery(e: Handle) -> CudaError {
    ret(query(e))
}

/// `cudaEventSynchronize`: the event, and the earlier ones of its stream,
/// complete (`sync` mode; `never` mode completes nothing).
#[unsafe(no_mangle)]
pub extern "C" fn cudaEventSynchronize(e: Handle) -> CudaError {
    sync_event(e);
    SUCCESS
}

/// `cudaEventElapsedTime`: 0 ms.
///
/// # Safety
/// `ms` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaEventElapsedTime(ms: *mut f32, _a: Handle, _b: Handle) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(ms, 0.0) };
    SUCCESS
}
