//! Streams, events and contexts in the driver API, as the CUDA libraries
//! call them: the same streams, events and capture state as the runtime's
//! (`streams.rs`), one primary context per process (`driver.rs`).

use std::ffi::{c_int, c_uint, c_ulonglong, c_void};

use crate::events::*;
use crate::ffi::{CuResult, Handle, SUCCESS, put};
use crate::streams::*;

/// Driver functions that are a runtime function under another name (the
/// error codes they can return are the same numbers in both APIs).
macro_rules! same_as_runtime {
    ($($name:ident($($arg:ident: $ty:ty),*) => $runtime:ident;)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: as `", stringify!($runtime), "`.")]
            ///
            /// # Safety
            /// As the runtime function's: output parameters are null or valid.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> CuResult {
                // SAFETY: forwarded caller's contract.
                #[allow(unused_unsafe)]
                unsafe { $runtime($($arg),*) }
            }
        )*
    };
}

same_as_runtime! {
    cuStreamCreate(s: *mut Handle, flags: c_uint) => cudaStreamCreateWithFlags;
    cuStreamCreateWithPriority(s: *mut Handle, flags: c_uint, priority: c_int) => cudaStreamCreateWithPriority;
    cuStreamDestroy_v2(s: Handle) => cudaStreamDestroy;
    cuStreamSynchronize(s: Handle) => cudaStreamSynchronize;
    cuStreamWaitEvent(s: Handle, e: Handle, flags: c_uint) => cudaStreamWaitEvent;
    cuStreamGetPriority(s: Handle, p: *mut c_int) => cudaStreamGetPriority;
    cuStreamGetFlags(s: Handle, f: *mut c_uint) => cudaStreamGetFlags;
    cuStreamGetId(s: Handle, id: *mut c_ulonglong) => cudaStreamGetId;
    cuStreamBeginCapture_v2(s: Handle, mode: c_int) => cudaStreamBeginCapture;
    cuStreamEndCapture(s: Handle, graph: *mut Handle) => cudaStreamEndCapture;
    cuStreamIsCapturing(s: Handle, status: *mut c_int) => cudaStreamIsCapturing;
    cuStreamGetCaptureInfo_v2(s: Handle, status: *mut c_int, id: *mut c_ulonglong, graph: *mut Handle, deps: *mut *const c_void, n: *mut usize) => cudaStreamGetCaptureInfo_v2;
    cuStreamGetCaptureInfo_v3(s: Handle, status: *mut c_int, id: *mut c_ulonglong, graph: *mut Handle, deps: *mut *const c_void, edges: *mut *const c_void, n: *mut usize) => cudaStreamGetCaptureInfo_v3;
    cuEventCreate(e: *mut Handle, flags: c_uint) => cudaEventCreateWithFlags;
    cuEventDestroy_v2(e: Handle) => cudaEventDestroy;
    cuEventRecord(e: Handle, s: Handle) => cudaEventRecord;
    cuEventRecordWithFlags(e: Handle, s: Handle, flags: c_uint) => cudaEventRecordWithFlags;
    cuEventSynchronize(e: Handle) => cudaEventSynchronize;
    cuEventElapsedTime_v2(ms: *mut f32, a: Handle, b: Handle) => cudaEventElapsedTime;
}

/// `cuStreamQuery`: as `cudaStreamQuery`, without a sticky error (the
/// driver has none).
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamQuery(s: Handle) -> CuResult {
    stream_query(s)
}

/// `cuEventQuery`: as `cudaEventQuery`, without a sticky error.
#[unsafe(no_mangle)]
pub extern "C" fn cuEventQuery(e: Handle) -> CuResult {
    query(e)
}

/// `cuStreamGetCaptureInfo` (CUDA 10.1's form): the status and id.
///
/// # Safety
/// Both outputs are null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetCaptureInfo(
    s: Handle,
    status: *mut c_int,
    id: *mut c_ulonglong,
) -> CuResult {
    let null = std::ptr::null_mut();
    // SAFETY: forwarded caller's contract; the other outputs are null.
    unsafe { cudaStreamGetCaptureInfo_v2(s, status, id, null, null.cast(), null.cast()) }
}

/// `cuDevicePrimaryCtxRelease_v2`: the primary context stays.
#[unsafe(no_mangle)]
pub extern "C" fn cuDevicePrimaryCtxRelease_v2(_d: c_int) -> CuResult {
    SUCCESS
}

/// `cuDevicePrimaryCtxReset_v2`: nothing to reset.
#[unsafe(no_mangle)]
pub extern "C" fn cuDevicePrimaryCtxReset_v2(_d: c_int) -> CuResult {
    SUCCESS
}

/// `cuDevicePrimaryCtxSetFlags_v2`: flags are not kept.
#[unsafe(no_mangle)]
pub extern "C" fn cuDevicePrimaryCtxSetFlags_v2(_d: c_int, _flags: c_uint) -> CuResult {
    SUCCESS
}

/// `cuCtxGetApiVersion`: the runtime's version.
///
/// # Safety
/// `v` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetApiVersion(_ctx: *mut c_void, v: *mut c_uint) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(v, crate::state::config().runtime_version.max(0) as c_uint) };
    SUCCESS
}

/// `cuCtxGetFlags`: the primary context's default flags.
///
/// # Safety
/// `f` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetFlags(f: *mut c_uint) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(f, 0) };
    SUCCESS
}

/// `cuCtxGetStreamPriorityRange`: as `cudaDeviceGetStreamPriorityRange`.
///
/// # Safety
/// Both outputs are null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetStreamPriorityRange(
    least: *mut c_int,
    greatest: *mut c_int,
) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { crate::runtime_device::cudaDeviceGetStreamPriorityRange(least, greatest) }
}

/// `cuCtxGetCacheConfig`: no preference.
///
/// # Safety
/// `c` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetCacheConfig(c: *mut c_int) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(c, 0) };
    SUCCESS
}

/// `cuCtxSetCacheConfig`: accepted, not kept.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSetCacheConfig(_c: c_int) -> CuResult {
    SUCCESS
}

/// `cuCtxGetId`: the one context's id.
///
/// # Safety
/// `id` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetId(_ctx: *mut c_void, id: *mut c_ulonglong) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(id, 1) };
    SUCCESS
}

/// `cuDevicePrimaryCtxRelease` (before CUDA 11): as `_v2`.
#[unsafe(no_mangle)]
pub extern "C" fn cuDevicePrimaryCtxRelease(d: c_int) -> CuResult {
    cuDevicePrimaryCtxRelease_v2(d)
}

/// `cuLogsRegisterCallback` (PyTorch registers one at start): taken, with
/// a handle; the fake driver never logs, so it is never called.
///
/// # Safety
/// `handle` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLogsRegisterCallback(
    _callback: *const c_void,
    _user_data: *mut c_void,
    handle: *mut *mut c_void,
) -> CuResult {
    // SAFETY: null or the caller's output parameter.
    unsafe { put(handle, 0x10c5 as *mut c_void) };
    SUCCESS
}

/// `cuLogsUnregisterCallback`.
#[unsafe(no_mangle)]
pub extern "C" fn cuLogsUnregisterCallback(_handle: *mut c_void) -> CuResult {
    SUCCESS
}
