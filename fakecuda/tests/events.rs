//! Event completion under `VRAMLAB_FAKECUDA_EVENTS=sync` and the host
//! capacity (`VRAMLAB_FAKECUDA_HOST_CAPACITY`), called through the C ABI
//! as PyTorch's pinned host allocator calls them.
//!
//! One test: the settings are read from the environment once per process.

use std::ffi::{c_int, c_uint, c_void};
use std::ptr::null_mut;

use vramlab_fakecuda::*;

type H = *mut c_void;

unsafe extern "C" {
    fn cudaStreamCreate(s: *mut H) -> c_int;
    fn cudaEventCreateWithFlags(e: *mut H, flags: c_uint) -> c_int;
    safe fn cudaEventRecord(e: H, s: H) -> c_int;
    safe fn cudaEventRecordWithFlags(e: H, s: H, flags: c_uint) -> c_int;
    safe fn cudaEventQuery(e: H) -> c_int;
    safe fn cudaEventSynchronize(e: H) -> c_int;
    safe fn cudaEventDestroy(e: H) -> c_int;
    safe fn cudaStreamQuery(s: H) -> c_int;
    safe fn cudaStreamSynchronize(s: H) -> c_int;
    safe fn cudaStreamWaitEvent(s: H, e: H, flags: c_uint) -> c_int;
    safe fn cudaDeviceSynchronize() -> c_int;
    safe fn cudaGetLastError() -> c_int;
    safe fn cuEventQuery(e: H) -> c_int;
    safe fn cuEventRecord(e: H, s: H) -> c_int;
    safe fn cuCtxSynchronize() -> c_int;
    fn cudaGetErrorName(e: c_int) -> *const std::ffi::c_char;
    fn cudaHostAlloc(p: *mut H, n: usize, flags: c_uint) -> c_int;
    fn cudaMallocHost(p: *mut H, n: usize) -> c_int;
    fn cuMemHostAlloc(p: *mut H, n: usize, flags: c_uint) -> c_int;
    safe fn cudaFreeHost(p: H) -> c_int;
    safe fn cudaHostRegister(p: H, n: usize, flags: c_uint) -> c_int;
    safe fn cudaHostUnregister(p: H) -> c_int;
    safe fn cuMemHostRegister_v2(p: H, n: usize, flags: c_uint) -> c_int;
    safe fn cuMemHostUnregister(p: H) -> c_int;
}

const NOT_READY: c_int = 600;
const MIB: usize = 1 << 20;

fn stream() -> H {
    let mut s = null_mut();
    // SAFETY: a writable handle.
    assert_eq!(unsafe { cudaStreamCreate(&mut s) }, 0);
    s
}

fn event() -> H {
    let mut e = null_mut();
    // SAFETY: a writable handle; 2 is cudaEventDisableTiming.
    assert_eq!(unsafe { cudaEventCreateWithFlags(&mut e, 2) }, 0);
    e
}

fn host_alloc(n: usize) -> Result<H, c_int> {
    let mut p = null_mut();
    // SAFETY: a writable pointer.
    match unsafe { cudaHostAlloc(&mut p, n, 0) } {
        0 => Ok(p),
        e => Err(e),
    }
}

/// Events on two streams and the default stream, each completed only by
/// what waits for it on the host.
fn events_complete_when_synchronized() {
    let (s1, s2) = (stream(), stream());
    let (a, b, c, d) = (event(), event(), event(), event());
    // Never recorded: complete.
    assert_eq!(cudaEventQuery(a), 0);
    assert_eq!(cudaEventRecord(a, s1), 0);
    assert_eq!(cudaEventRecordWithFlags(b, s2, 0), 0);
    assert_eq!(cudaEventQuery(a), NOT_READY);
    // The runtime keeps 600 as the last error (PyTorch clears it); the
    // driver twin does not.
    assert_eq!(cudaGetLastError(), NOT_READY);
    assert_eq!(cudaGetLastError(), 0);
    assert_eq!(cuEventQuery(b), NOT_READY);
    assert_eq!(cudaGetLastError(), 0);
    // SAFETY: a code the runtime names.
    let name = unsafe { std::ffi::CStr::from_ptr(cudaGetErrorName(NOT_READY)) };
    assert_eq!(name.to_bytes(), b"cudaErrorNotReady");
    assert_eq!(cudaStreamQuery(s1), NOT_READY);
    let _ = cudaGetLastError();
    // A device-side wait completes nothing.
    assert_eq!(cudaStreamWaitEvent(s2, a, 0), 0);
    assert_eq!(cudaEventQuery(a), NOT_READY);
    // Synchronizing s1 completes a only; s2 is still busy.
    assert_eq!(cudaStreamSynchronize(s1), 0);
    assert_eq!(cudaEventQuery(a), 0);
    assert_eq!(cudaEventQuery(b), NOT_READY);
    assert_eq!(cudaStreamSynchronize(s2), 0);
    assert_eq!(cudaEventQuery(b), 0);
    assert_eq!(cudaStreamQuery(s2), 0);
    // An event synchronize completes it and the earlier events of its
    // stream, not the later ones.
    assert_eq!(cudaEventRecord(a, s1), 0);
    assert_eq!(cudaEventRecord(c, s1), 0);
    assert_eq!(cuEventRecord(d, s1), 0);
    assert_eq!(cudaEventSynchronize(c), 0);
    assert_eq!(cudaEventQuery(a), 0);
    assert_eq!(cudaEventQuery(c), 0);
    assert_eq!(cudaEventQuery(d), NOT_READY);
    // Recorded again: pending again.
    assert_eq!(cudaEventRecord(a, s1), 0);
    assert_eq!(cudaEventQuery(a), NOT_READY);
    // The default stream's handles (0, legacy 0x1, per-thread 0x2) are one.
    let (e0, e2) = (event(), event());
    assert_eq!(cudaEventRecord(e0, null_mut()), 0);
    assert_eq!(cudaEventRecord(e2, 2 as H), 0);
    assert_eq!(cudaStreamSynchronize(1 as H), 0);
    assert_eq!((cudaEventQuery(e0), cudaEventQuery(e2)), (0, 0));
    assert_eq!(cudaEventQuery(a), NOT_READY);
    // A device-wide synchronize completes everything (the driver's too).
    assert_eq!(cudaDeviceSynchronize(), 0);
    assert_eq!((cudaEventQuery(a), cudaEventQuery(d)), (0, 0));
    assert_eq!(cudaStreamQuery(s1), 0);
    assert_eq!(cudaEventRecord(a, s2), 0);
    assert_eq!(cuCtxSynchronize(), 0);
    assert_eq!(cudaEventQuery(a), 0);
    // Once a stream that waited for an event is synchronized, the event
    // and the earlier work of its stream are done; later work is not.
    let (w, x, y) = (event(), event(), event());
    assert_eq!(cudaEventRecord(w, s2), 0);
    assert_eq!(cudaEventRecord(x, s2), 0);
    assert_eq!(cudaStreamWaitEvent(s1, x, 0), 0);
    assert_eq!(cudaEventRecord(y, s2), 0);
    assert_eq!(cudaEventQuery(w), NOT_READY);
    assert_eq!(cudaEventRecord(a, s1), 0);
    assert_eq!(cudaEventSynchronize(a), 0);
    assert_eq!((cudaEventQuery(w), cudaEventQuery(x)), (0, 0));
    assert_eq!(cudaEventQuery(y), NOT_READY);
    assert_eq!(cudaDeviceSynchronize(), 0);
    // A destroyed event is forgotten.
    assert_eq!(cudaEventRecord(b, s2), 0);
    assert_eq!(cudaEventDestroy(b), 0);
    assert_eq!(cudaStreamQuery(s2), 0);
    let _ = cudaGetLastError();
}

/// Pinned bytes are counted from allocation or registration to the free or
/// unregistration; past the capacity a call fails with 2 and changes nothing.
fn host_memory_has_a_capacity() {
    let a = host_alloc(6 * MIB).unwrap();
    assert_eq!(host_alloc(5 * MIB), Err(2));
    assert_eq!(cudaGetLastError(), 2);
    let mut p = null_mut();
    // SAFETY: writable pointers.
    unsafe {
        assert_eq!(cudaMallocHost(&mut p, 5 * MIB), 2);
        assert_eq!(cuMemHostAlloc(&mut p, 5 * MIB, 0), 2);
    }
    let b = host_alloc(4 * MIB).unwrap();
    // Full: registering fails too, in both APIs; a zero-byte block fits.
    let mut heap = vec![0u8; 4096];
    let h = heap.as_mut_ptr().cast::<c_void>();
    assert_eq!(cudaHostRegister(h, 4096, 0), 2);
    assert_eq!(cuMemHostRegister_v2(h, 4096, 0), 2);
    let z = host_alloc(0).unwrap();
    assert_eq!(cudaFreeHost(z), 0);
    // A free makes room; a registration counts until it is undone.
    assert_eq!(cudaFreeHost(b), 0);
    assert_eq!(cudaHostRegister(h, 4096, 0), 0);
    assert_eq!(host_alloc(4 * MIB), Err(2));
    assert_eq!(cudaHostUnregister(h), 0);
    let b = host_alloc(4 * MIB).unwrap();
    assert_eq!(cudaFreeHost(b), 0);
    assert_eq!(cuMemHostRegister_v2(h, 4 * MIB, 0), 0);
    assert_eq!(cuMemHostUnregister(h), 0);
    // A pointer that is not pinned memory.
    assert_eq!(cudaFreeHost(h), 1);
    assert_eq!(cudaFreeHost(a), 0);
    let all = host_alloc(10 * MIB).unwrap();
    assert_eq!(cudaFreeHost(all), 0);
    let _ = cudaGetLastError();
}

#[test]
fn events_wait_for_a_synchronize_and_host_memory_has_a_capacity() {
    // SAFETY: the only test in this binary sets the environment before any
    // other thread reads it.
    unsafe {
        std::env::set_var("VRAMLAB_FAKECUDA_EVENTS", "sync");
        std::env::set_var("VRAMLAB_FAKECUDA_HOST_CAPACITY", (10 * MIB).to_string());
        std::env::set_var("VRAMLAB_FAKECUDA_QUIET", "1");
    }
    vramlab_fakecuda_flush();
    events_complete_when_synchronized();
    host_memory_has_a_capacity();
}
