//! Error codes: the runtime's sticky last error, names and messages, and
//! the answer of every function that is not faked.

use std::cell::Cell;
use std::collections::HashSet;
use std::ffi::{CStr, c_char, c_int};
use std::sync::Mutex;

use crate::ffi::{CuResult, CudaError, NOT_SUPPORTED, SUCCESS, put};

thread_local! {
    static LAST_ERROR: Cell<CudaError> = const { Cell::new(SUCCESS) };
}

/// Returns `e`, remembering it as the thread's last error when it is one.
pub(crate) fn ret(e: CudaError) -> CudaError {
    if e != SUCCESS {
        LAST_ERROR.with(|c| c.set(e));
    }
    e
}

static NOT_FAKED_SEEN: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);

/// What every runtime stub returns: 801, said once per function on
/// stderr, and kept as the thread's last error (as the runtime does).
pub(crate) fn not_faked(name: &'static str) -> c_int {
    say_not_faked(name);
    ret(NOT_SUPPORTED)
}

/// What a driver function that is not faked returns: 801, said once on
/// stderr. The driver API has no sticky error: the runtime's last error is
/// left alone (libraries call some of these, e.g. `cuKernelGetParamCount`,
/// and carry on).
pub(crate) fn driver_not_faked(name: &'static str) -> c_int {
    say_not_faked(name);
    NOT_SUPPORTED
}

fn say_not_faked(name: &'static str) {
    let first = {
        let mut seen = NOT_FAKED_SEEN.lock().unwrap_or_else(|e| e.into_inner());
        seen.get_or_insert_with(HashSet::new).insert(name)
    };
    if first && !crate::state::config().quiet {
        eprintln!("[vramlab-fakecuda] {name} is not faked: it returns 801 (not supported)");
    }
}

fn message(e: c_int) -> (&'static CStr, &'static CStr) {
    match e {
        0 => (c"cudaSuccess", c"no error"),
        1 => (c"cudaErrorInvalidValue", c"invalid argument"),
        2 => (c"cudaErrorMemoryAllocation", c"out of memory"),
        3 => (c"cudaErrorInitializationError", c"initialization error"),
        101 => (c"cudaErrorInvalidDevice", c"invalid device ordinal"),
        400 => (
            c"cudaErrorInvalidResourceHandle",
            c"invalid resource handle",
        ),
        600 => (c"cudaErrorNotReady", c"device not ready"),
        801 => (
            c"cudaErrorNotSupported",
            c"operation not supported (vramlab-fakecuda: not faked)",
        ),
        900 => (
            c"cudaErrorStreamCaptureUnsupported",
            c"operation not permitted when stream is capturing",
        ),
        901 => (
            c"cudaErrorStreamCaptureInvalidated",
            c"operation failed due to a previous error during capture",
        ),
        _ => (c"cudaErrorUnknown", c"unknown error (vramlab-fakecuda)"),
    }
}

fn driver_message(e: c_int) -> (&'static CStr, &'static CStr) {
    match e {
        0 => (c"CUDA_SUCCESS", c"no error"),
        1 => (c"CUDA_ERROR_INVALID_VALUE", c"invalid argument"),
        2 => (c"CUDA_ERROR_OUT_OF_MEMORY", c"out of memory"),
        600 => (c"CUDA_ERROR_NOT_READY", c"device not ready"),
        801 => (
            c"CUDA_ERROR_NOT_SUPPORTED",
            c"operation not supported (vramlab-fakecuda: not faked)",
        ),
        _ => (c"CUDA_ERROR_UNKNOWN", c"unknown error (vramlab-fakecuda)"),
    }
}

/// `cudaGetLastError`: the last error, then reset.
#[unsafe(no_mangle)]
pub extern "C" fn cudaGetLastError() -> CudaError {
    LAST_ERROR.with(|c| c.replace(SUCCESS))
}

/// `cudaPeekAtLastError`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaPeekAtLastError() -> CudaError {
    LAST_ERROR.with(Cell::get)
}

/// `cudaGetErrorString`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaGetErrorString(e: CudaError) -> *const c_char {
    message(e).1.as_ptr()
}

/// `cudaGetErrorName`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaGetErrorName(e: CudaError) -> *const c_char {
    message(e).0.as_ptr()
}

/// `cuGetErrorString`.
///
/// # Safety
/// `s` is null or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorString(e: CuResult, s: *mut *const c_char) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(s, driver_message(e).1.as_ptr()) };
    SUCCESS
}

/// `cuGetErrorName`.
///
/// # Safety
/// `s` is null or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorName(e: CuResult, s: *mut *const c_char) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(s, driver_message(e).0.as_ptr()) };
    SUCCESS
}
