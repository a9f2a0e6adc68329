//! The driver API (`cu*`) outside virtual memory: init, devices, contexts.
//! PyTorch reaches these through `cudaGetDriverEntryPoint[ByVersion]`
//! (answered in the entry module) or, up to 2.6, `dlopen("libcuda.so.1")` + `dlsym`.

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::ffi::{CuResult, Handle, INVALID_DEVICE, SUCCESS, put, put_str, zero};
use crate::runtime_device::attribute;
use crate::state::{config, current_device, state};

/// The one context every device shares.
static CONTEXT: u64 = 0;

pub(crate) fn context() -> Handle {
    std::ptr::addr_of!(CONTEXT).cast_mut().cast()
}

/// `cuInit`.
#[unsafe(no_mangle)]
pub extern "C" fn cuInit(_flags: c_uint) -> CuResult {
    SUCCESS
}

/// `cuDriverGetVersion`.
///
/// # Safety
/// `v` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDriverGetVersion(v: *mut c_int) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(v, config().runtime_version.max(13000)) };
    SUCCESS
}

/// `cuDeviceGetCount`.
///
/// # Safety
/// `n` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetCount(n: *mut c_int) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(n, config().devices as c_int) };
    SUCCESS
}

/// `cuDeviceGet`: device handles are ordinals.
///
/// # Safety
/// `d` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGet(d: *mut c_int, ordinal: c_int) -> CuResult {
    if ordinal < 0 || ordinal as u32 >= config().devices {
        return INVALID_DEVICE;
    }
    // SAFETY: output parameter (caller's contract).
    unsafe { put(d, ordinal) };
    SUCCESS
}

/// `cuDeviceGetAttribute`.
///
/// # Safety
/// `v` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetAttribute(v: *mut c_int, attr: c_int, d: c_int) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(v, attribute(attr, d)) };
    SUCCESS
}

/// `cuDeviceGetName`.
///
/// # Safety
/// `name` is null or valid for writes of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, _d: c_int) -> CuResult {
    // SAFETY: `len` writable bytes (caller's contract).
    unsafe { put_str(name.cast(), len.max(0) as usize, &config().name) };
    SUCCESS
}

/// `cuDeviceTotalMem_v2`.
///
/// # Safety
/// `bytes` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, d: c_int) -> CuResult {
    let total = state().gpu(d.max(0) as u32).map_or(0, |g| g.mem_info().1);
    // SAFETY: output parameter (caller's contract).
    unsafe { put(bytes, total as usize) };
    SUCCESS
}

/// `cuDeviceGetUuid`: 16 bytes, the first one the ordinal + 1.
///
/// # Safety
/// `uuid` is null or valid for writes of 16 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetUuid(uuid: *mut c_void, d: c_int) -> CuResult {
    // SAFETY: a CUuuid is 16 writable bytes (caller's contract).
    unsafe {
        zero(uuid, 16);
        put(uuid.cast::<u8>(), d as u8 + 1);
    }
    SUCCESS
}

/// `cuDeviceGetUuid_v2`.
///
/// # Safety
/// As [`cuDeviceGetUuid`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(uuid: *mut c_void, d: c_int) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { cuDeviceGetUuid(uuid, d) }
}

/// `cuCtxGetCurrent`.
///
/// # Safety
/// `ctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetCurrent(ctx: *mut Handle) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(ctx, context()) };
    SUCCESS
}

/// `cuCtxSetCurrent`.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSetCurrent(_ctx: Handle) -> CuResult {
    SUCCESS
}

/// `cuCtxPushCurrent`.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxPushCurrent(_ctx: Handle) -> CuResult {
    SUCCESS
}

/// `cuCtxPushCurrent_v2`.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxPushCurrent_v2(_ctx: Handle) -> CuResult {
    SUCCESS
}

/// `cuCtxPopCurrent`.
///
/// # Safety
/// `ctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPopCurrent(ctx: *mut Handle) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(ctx, context()) };
    SUCCESS
}

/// `cuCtxPopCurrent_v2`.
///
/// # Safety
/// As [`cuCtxPopCurrent`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(ctx: *mut Handle) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { cuCtxPopCurrent(ctx) }
}

/// `cuCtxGetDevice`: the calling thread's current device.
///
/// # Safety
/// `d` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetDevice(d: *mut c_int) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(d, current_device() as c_int) };
    SUCCESS
}

/// `cuCtxSynchronize`: every recorded event completes (`events.rs`).
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSynchronize() -> CuResult {
    crate::events::sync_device();
    SUCCESS
}

/// `cuDevicePrimaryCtxGetState`: active.
///
/// # Safety
/// Both outputs are null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxGetState(
    _d: c_int,
    flags: *mut c_uint,
    active: *mut c_int,
) -> CuResult {
    // SAFETY: output parameters (caller's contract).
    unsafe {
        put(flags, 0);
        put(active, 1);
    }
    SUCCESS
}

/// `cuDevicePrimaryCtxRetain`.
///
/// # Safety
/// `ctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut Handle, _d: c_int) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(ctx, context()) };
    SUCCESS
}

/// `cuStreamGetCtx`.
///
/// # Safety
/// `ctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetCtx(_s: Handle, ctx: *mut Handle) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(ctx, context()) };
    SUCCESS
}

/// `cuStreamWriteValue32`: nothing is written.
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamWriteValue32(_s: Handle, _addr: u64, _v: c_uint, _f: c_uint) -> CuResult {
    SUCCESS
}

/// `cuCtxGetDevice_v2` (CUDA 13): the device of `ctx`, or of the current
/// context when `ctx` is null; every context here is the current device's.
///
/// # Safety
/// `d` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetDevice_v2(d: *mut c_int, _ctx: Handle) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { cuCtxGetDevice(d) }
}

/// `cuCtxSynchronize_v2` (CUDA 13): as `cuCtxSynchronize` (one context).
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSynchronize_v2(_ctx: Handle) -> CuResult {
    cuCtxSynchronize()
}

/// `cuStreamGetCtx_v2`: the context, and no green context.
///
/// # Safety
/// Both outputs are null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetCtx_v2(
    s: Handle,
    ctx: *mut Handle,
    green: *mut Handle,
) -> CuResult {
    // SAFETY: output parameters (caller's contract).
    unsafe {
        put(green, std::ptr::null_mut());
        cuStreamGetCtx(s, ctx)
    }
}

/// `cuStreamWriteValue32_v2`: nothing is written.
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamWriteValue32_v2(s: Handle, addr: u64, v: c_uint, f: c_uint) -> CuResult {
    cuStreamWriteValue32(s, addr, v, f)
}
