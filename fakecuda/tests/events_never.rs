//! `VRAMLAB_FAKECUDA_EVENTS=never`: only a device-wide synchronize
//! completes an event. One test: the settings are read once per process.

use std::ffi::{c_int, c_uint, c_void};
use std::ptr::null_mut;

use vramlab_fakecuda::*;

type H = *mut c_void;

unsafe extern "C" {
    fn cudaStreamCreate(s: *mut H) -> c_int;
    fn cudaEventCreateWithFlags(e: *mut H, flags: c_uint) -> c_int;
    safe fn cudaEventRecord(e: H, s: H) -> c_int;
    safe fn cudaEventQuery(e: H) -> c_int;
    safe fn cudaEventSynchronize(e: H) -> c_int;
    safe fn cudaStreamSynchronize(s: H) -> c_int;
    safe fn cudaStreamQuery(s: H) -> c_int;
    safe fn cudaDeviceSynchronize() -> c_int;
}

#[test]
fn only_a_device_synchronize_completes_events() {
    // SAFETY: the only test in this binary sets the environment before any
    // other thread reads it.
    unsafe {
        std::env::set_var("VRAMLAB_FAKECUDA_EVENTS", "never");
        std::env::set_var("VRAMLAB_FAKECUDA_QUIET", "1");
    }
    vramlab_fakecuda_flush();
    let (mut s, mut e) = (null_mut(), null_mut());
    // SAFETY: writable handles.
    unsafe {
        assert_eq!(cudaStreamCreate(&mut s), 0);
        assert_eq!(cudaEventCreateWithFlags(&mut e, 2), 0);
    }
    assert_eq!(cudaEventQuery(e), 0);
    assert_eq!(cudaEventRecord(e, s), 0);
    assert_eq!(cudaEventSynchronize(e), 0);
    assert_eq!(cudaStreamSynchronize(s), 0);
    assert_eq!(cudaEventQuery(e), 600);
    assert_eq!(cudaStreamQuery(s), 600);
    assert_eq!(cudaDeviceSynchronize(), 0);
    assert_eq!(cudaEventQuery(e), 0);
    assert_eq!(cudaStreamQuery(s), 0);
}
