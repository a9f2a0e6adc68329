//! Streams, stream capture and graphs. Streams are opaque numbers; nothing
//! ever runs, so a stream is idle unless an event recorded on it is not
//! complete yet (`events.rs`, which has the events). Capture keeps a status, an id and a graph per stream —
//! what PyTorch's allocator asks to route allocations made during capture
//! into the graph's private pool.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::errors::ret;
use crate::ffi::{
    CAPTURE_INVALIDATED, CAPTURE_UNSUPPORTED, CudaError, Handle, NOT_READY, SUCCESS, new_handle,
    put,
};
use crate::state::{config, current_device};

#[derive(Debug, Clone, Copy)]
struct Capture {
    id: u64,
    graph: usize,
    /// Work queued on the stream while it captured (launches, copies,
    /// sets): the graph's nodes.
    nodes: usize,
}

/// Streams capturing now (so that a launch outside any capture takes no lock).
static CAPTURING: AtomicUsize = AtomicUsize::new(0);

/// Nodes of each graph a capture ended in, by graph handle.
static GRAPH_NODES: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);

/// Work was queued on `stream`: a node of its graph if it is capturing
/// (PyTorch warns about a captured graph without nodes).
pub(crate) fn note_work(stream: Handle) {
    if CAPTURING.load(Ordering::Relaxed) == 0 {
        return;
    }
    with_captures(|_, m| {
        if let Some(c) = m.get_mut(&(stream as usize)) {
            c.nodes += 1;
        }
    });
}

static CAPTURES: Mutex<Option<(u64, HashMap<usize, Capture>)>> = Mutex::new(None);

fn with_captures<R>(f: impl FnOnce(&mut u64, &mut HashMap<usize, Capture>) -> R) -> R {
    let mut g = CAPTURES.lock().unwrap_or_else(|e| e.into_inner());
    let (next, map) = g.get_or_insert_with(|| (1, HashMap::new()));
    f(next, map)
}

fn capture_of(stream: Handle) -> Option<Capture> {
    with_captures(|_, m| m.get(&(stream as usize)).copied())
}

/// `cudaStreamCreate`.
///
/// # Safety
/// `s` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaStreamCreate(s: *mut Handle) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(s, new_handle()) };
    SUCCESS
}

/// `cudaStreamCreateWithFlags`.
///
/// # Safety
/// `s` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaStreamCreateWithFlags(s: *mut Handle, _f: c_uint) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(s, new_handle()) };
    SUCCESS
}

/// `cudaStreamCreateWithPriority`.
///
/// # Safety
/// `s` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaStreamCreateWithPriority(
    s: *mut Handle,
    _f: c_uint,
    _p: c_int,
) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(s, new_handle()) };
    SUCCESS
}

/// `cudaStreamDestroy`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaStreamDestroy(_s: Handle) -> CudaError {
    SUCCESS
}

/// `cudaStreamQuery` without the runtime's sticky error (the driver's):
/// idle unless an event recorded on it is pending (`events.rs`).
pub(crate) fn stream_query(s: Handle) -> CudaError {
    if crate::events::stream_idle(s) {
        SUCCESS
    } else {
        NOT_READY
    }
}

/// `cudaStreamQuery`: idle, or 600 (`cudaErrorNotReady`) while an event
/// recorded on it is pending.
#[unsafe(no_mangle)]
pub extern "C" fn cudaStreamQuery(s: Handle) -> CudaError {
    ret(stream_query(s))
}

/// `cudaStreamSynchronize`: the events recorded on it complete
/// (`events.rs`).
#[unsafe(no_mangle)]
pub extern "C" fn cudaStreamSynchronize(s: Handle) -> CudaError {
    crate::events::sync_stream(s);
    SUCCESS
}

/// `cudaStreamWaitEvent`: the device waits; nothing completes now
/// (`events.rs`).
#[unsafe(no_mangle)]
pub extern "C" fn cudaStreamWaitEvent(s: Handle, e: Handle, _f: c_uint) -> CudaError {
    crate::events::wait(s, e);
    SUCCESS
}

/// `cudaStreamGetPriority`.
///
/// # Safety
/// `p` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaStreamGetPriority(_s: Handle, p: *mut c_int) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(p, 0) };
    SUCCESS
}

/// `cudaStreamGetFlags`.
///
/// # Safety
/// `f` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaStreamGetFlags(_s: Handle, f: *mut c_uint) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(f, 0) };
    SUCCESS
}

/// `cudaStreamGetDevice`: the current device.
///
/// # Safety
/// `d` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaStreamGetDevice(_s: Handle, d: *mut c_int) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(d, current_device() as c_int) };
    SUCCESS
}

/// `cudaStreamGetId`: the handle's value.
///
/// # Safety
/// `id` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaStreamGetId(s: Handle, id: *mut c_ulonglong) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(id, s as c_ulonglong) };
    SUCCESS
}

/// `cudaStreamBeginCapture` (the legacy default stream cannot capture).
#[unsafe(no_mangle)]
pub extern "C" fn cudaStreamBeginCapture(s: Handle, _mode: c_int) -> CudaError {
    if s.is_null() {
        return ret(CAPTURE_UNSUPPORTED);
    }
    let graph = new_handle() as usize;
    with_captures(|next, m| {
        let fresh = Capture {
            id: *next,
            graph,
            nodes: 0,
        };
        if m.insert(s as usize, fresh).is_none() {
            CAPTURING.fetch_add(1, Ordering::Relaxed);
        }
        *next += 1;
    });
    SUCCESS
}

/// `cudaStreamBeginCaptureToGraph`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaStreamBeginCaptureToGraph(
    s: Handle,
    _g: Handle,
    _deps: *const c_void,
    _edges: *const c_void,
    _n: usize,
    mode: c_int,
) -> CudaError {
    cudaStreamBeginCapture(s, mode)
}

/// `cudaStreamEndCapture`: the captured graph (its nodes counted, none run).
///
/// # Safety
/// `graph` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaStreamEndCapture(s: Handle, graph: *mut Handle) -> CudaError {
    match with_captures(|_, m| m.remove(&(s as usize))) {
        Some(c) => {
            CAPTURING.fetch_sub(1, Ordering::Relaxed);
            GRAPH_NODES
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(HashMap::new)
                .insert(c.graph, c.nodes);
            // SAFETY: output parameter (caller's contract).
            unsafe { put(graph, c.graph as Handle) };
            SUCCESS
        }
        None => ret(CAPTURE_INVALIDATED),
    }
}

/// `cudaStreamIsCapturing`: 1 (active) while a capture is under way.
///
/// # Safety
/// `status` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaStreamIsCapturing(s: Handle, status: *mut c_int) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(status, capture_of(s).is_some() as c_int) };
    SUCCESS
}

/// `cudaStreamGetCaptureInfo`. CUDA 13: `(stream, status*, id*, graph*,
/// deps**, edgeData**, numDeps*)`; CUDA 12: `(stream, status*, id*)` — the
/// later outputs are written only for a CUDA 13 caller.
///
/// # Safety
/// The outputs the caller's CUDA version has are null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaStreamGetCaptureInfo(
    s: Handle,
    status: *mut c_int,
    id: *mut c_ulonglong,
    graph: *mut Handle,
    deps: *mut *const c_void,
    edges: *mut *const c_void,
    n: *mut usize,
) -> CudaError {
    let c = capture_of(s);
    // SAFETY: output parameters of every CUDA version (caller's contract).
    unsafe {
        put(status, c.is_some() as c_int);
        put(id, c.map_or(0, |c| c.id));
    }
    if config().cuda_major() >= 13 {
        // SAFETY: a CUDA 13 caller passes all seven arguments.
        unsafe { capture_outputs(c, graph, deps, edges, n) };
    }
    SUCCESS
}

/// The graph and dependency outputs of the capture-info calls.
///
/// # Safety
/// Each pointer is null or valid for a write.
unsafe fn capture_outputs(
    c: Option<Capture>,
    graph: *mut Handle,
    deps: *mut *const c_void,
    edges: *mut *const c_void,
    n: *mut usize,
) {
    // SAFETY: output parameters (caller's contract).
    unsafe {
        put(graph, c.map_or(std::ptr::null_mut(), |c| c.graph as Handle));
        put(deps, std::ptr::null());
        put(edges, std::ptr::null());
        put(n, 0);
    }
}

/// `cudaStreamGetCaptureInfo_v2` (CUDA 12: no edge data).
///
/// # Safety
/// Each output is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaStreamGetCaptureInfo_v2(
    s: Handle,
    status: *mut c_int,
    id: *mut c_ulonglong,
    graph: *mut Handle,
    deps: *mut *const c_void,
    n: *mut usize,
) -> CudaError {
    let c = capture_of(s);
    // SAFETY: output parameters (caller's contract).
    unsafe {
        put(status, c.is_some() as c_int);
        put(id, c.map_or(0, |c| c.id));
        capture_outputs(c, graph, deps, std::ptr::null_mut(), n);
    }
    SUCCESS
}

/// `cudaStreamGetCaptureInfo_v3` (CUDA 12.3+).
///
/// # Safety
/// Each output is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaStreamGetCaptureInfo_v3(
    s: Handle,
    status: *mut c_int,
    id: *mut c_ulonglong,
    graph: *mut Handle,
    deps: *mut *const c_void,
    edges: *mut *const c_void,
    n: *mut usize,
) -> CudaError {
    let c = capture_of(s);
    // SAFETY: output parameters (caller's contract).
    unsafe {
        put(status, c.is_some() as c_int);
        put(id, c.map_or(0, |c| c.id));
        capture_outputs(c, graph, deps, edges, n);
    }
    SUCCESS
}

/// `cudaStreamUpdateCaptureDependencies`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaStreamUpdateCaptureDependencies(
    _s: Handle,
    _d: *mut c_void,
    _n: usize,
    _f: c_uint,
) -> CudaError {
    SUCCESS
}

/// `cudaStreamUpdateCaptureDependencies_v2`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaStreamUpdateCaptureDependencies_v2(
    _s: Handle,
    _d: *mut c_void,
    _e: *const c_void,
    _n: usize,
    _f: c_uint,
) -> CudaError {
    SUCCESS
}

/// `cudaThreadExchangeStreamCaptureMode`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaThreadExchangeStreamCaptureMode(_m: *mut c_int) -> CudaError {
    SUCCESS
}

/// `cudaGraphCreate`.
///
/// # Safety
/// `g` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaGraphCreate(g: *mut Handle, _f: c_uint) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(g, new_handle()) };
    SUCCESS
}

/// `cudaGraphInstantiate`.
///
/// # Safety
/// `exec` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaGraphInstantiate(
    exec: *mut Handle,
    _g: Handle,
    _f: c_ulonglong,
) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(exec, new_handle()) };
    SUCCESS
}

/// `cudaGraphInstantiateWithFlags`.
///
/// # Safety
/// `exec` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaGraphInstantiateWithFlags(
    exec: *mut Handle,
    g: Handle,
    f: c_ulonglong,
) -> CudaError {
    // SAFETY: forwarded caller's contract.
    unsafe { cudaGraphInstantiate(exec, g, f) }
}

/// `cudaGraphUpload`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaGraphUpload(_e: Handle, _s: Handle) -> CudaError {
    SUCCESS
}

/// `cudaGraphLaunch`: nothing runs.
#[unsafe(no_mangle)]
pub extern "C" fn cudaGraphLaunch(_e: Handle, _s: Handle) -> CudaError {
    SUCCESS
}

/// `cudaGraphDestroy`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaGraphDestroy(g: Handle) -> CudaError {
    if let Some(m) = GRAPH_NODES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
    {
        m.remove(&(g as usize));
    }
    SUCCESS
}

/// `cudaGraphExecDestroy`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaGraphExecDestroy(_e: Handle) -> CudaError {
    SUCCESS
}

/// `cudaGraphGetNodes`: as many nodes as work was captured (opaque
/// handles where the caller asks for them).
///
/// # Safety
/// `n` is null or valid for a read and a write; `nodes` is null or valid
/// for `*n` handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaGraphGetNodes(
    g: Handle,
    nodes: *mut Handle,
    n: *mut usize,
) -> CudaError {
    if n.is_null() {
        return ret(crate::ffi::INVALID_VALUE);
    }
    let count = GRAPH_NODES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&(g as usize)).copied())
        .unwrap_or(0);
    if nodes.is_null() {
        // SAFETY: checked non-null; output parameter (caller's contract).
        unsafe { put(n, count) };
        return SUCCESS;
    }
    // SAFETY: `n` is readable; `nodes` holds `*n` handles (caller's contract).
    unsafe {
        let room = *n;
        let written = room.min(count);
        for i in 0..written {
            nodes.add(i).write(new_handle());
        }
        put(n, written);
    }
    SUCCESS
}

/// `cudaGraphDebugDotPrint`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaGraphDebugDotPrint(
    _g: Handle,
    _path: *const c_char,
    _f: c_uint,
) -> CudaError {
    SUCCESS
}

/// `cudaDeviceGraphMemTrim`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaDeviceGraphMemTrim(_d: c_int) -> CudaError {
    SUCCESS
}

/// `cudaDeviceGetGraphMemAttribute`: 0.
///
/// # Safety
/// `v` is null or valid for a write of 8 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaDeviceGetGraphMemAttribute(
    _d: c_int,
    _a: c_int,
    v: *mut c_void,
) -> CudaError {
    // SAFETY: every graph-memory attribute is a 64-bit value (caller's contract).
    unsafe { put(v.cast::<u64>(), 0) };
    SUCCESS
}

/// `cudaDeviceSetGraphMemAttribute`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaDeviceSetGraphMemAttribute(
    _d: c_int,
    _a: c_int,
    _v: *mut c_void,
) -> CudaError {
    SUCCESS
}
