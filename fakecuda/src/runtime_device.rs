//! Devices in the runtime API: count, current device, properties and
//! attributes, versions, limits.

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::errors::ret;
use crate::ffi::{CudaError, INVALID_DEVICE, SUCCESS, put, put_str};
use crate::props;
use crate::state::{config, current_device, set_current_device, state};

/// A device attribute (`cudaDeviceAttr` and `CUdevice_attribute` share
/// their numbers).
pub(crate) fn attribute(attr: c_int) -> c_int {
    match attr {
        1 => 1024,       // max threads per block
        8 => 49_152,     // max shared memory per block
        10 => 32,        // warp size
        13 => 1_980_000, // clock rate, kHz
        16 => props::SM_COUNT,
        33 => 0x18,       // PCI bus id
        36 => 3_201_000,  // memory clock rate, kHz
        37 => 6144,       // global memory bus width
        38 => 52_428_800, // L2 cache size
        39 => 2048,       // max threads per multiprocessor
        41 => 1,          // unified addressing
        75 => props::MAJOR_VERSION,
        76 => props::MINOR_VERSION,
        81 => 233_472, // max shared memory per multiprocessor
        89 => 1,       // concurrent managed access
        97 => 232_448, // max shared memory per block, opt-in
        // Virtual memory management and its POSIX handle type: what
        // expandable segments ask for.
        102 | 103 => 1,
        115 => 1, // memory pools supported
        _ => 0,
    }
}

fn valid(d: c_int) -> bool {
    d >= 0 && (d as u32) < config().devices
}

/// `cudaGetDeviceCount`.
///
/// # Safety
/// `n` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaGetDeviceCount(n: *mut c_int) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(n, config().devices as c_int) };
    SUCCESS
}

/// `cudaGetDevice`.
///
/// # Safety
/// `d` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaGetDevice(d: *mut c_int) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(d, current_device() as c_int) };
    SUCCESS
}

/// `cudaSetDevice`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaSetDevice(d: c_int) -> CudaError {
    if !valid(d) {
        return ret(INVALID_DEVICE);
    }
    set_current_device(d as u32);
    SUCCESS
}

/// `cudaInitDevice`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaInitDevice(d: c_int, _flags: c_uint, _ctx_flags: c_uint) -> CudaError {
    if valid(d) {
        SUCCESS
    } else {
        ret(INVALID_DEVICE)
    }
}

/// `cudaGetDeviceFlags`.
///
/// # Safety
/// `f` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaGetDeviceFlags(f: *mut c_uint) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(f, 0) };
    SUCCESS
}

/// `cudaSetDeviceFlags`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaSetDeviceFlags(_f: c_uint) -> CudaError {
    SUCCESS
}

/// `cudaDeviceReset`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaDeviceReset() -> CudaError {
    SUCCESS
}

/// `cudaDeviceSynchronize` (nothing ever runs: always done).
#[unsafe(no_mangle)]
pub extern "C" fn cudaDeviceSynchronize() -> CudaError {
    SUCCESS
}

/// `cudaThreadSynchronize`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaThreadSynchronize() -> CudaError {
    SUCCESS
}

/// `cudaDriverGetVersion`: the runtime's own version.
///
/// # Safety
/// `v` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaDriverGetVersion(v: *mut c_int) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(v, config().runtime_version.max(13000)) };
    SUCCESS
}

/// `cudaRuntimeGetVersion`.
///
/// # Safety
/// `v` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaRuntimeGetVersion(v: *mut c_int) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(v, config().runtime_version) };
    SUCCESS
}

/// `cudaChooseDevice`: device 0.
///
/// # Safety
/// `d` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaChooseDevice(d: *mut c_int, _prop: *const c_void) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(d, 0) };
    SUCCESS
}

/// `cudaDeviceCanAccessPeer`: no peer access.
///
/// # Safety
/// `can` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaDeviceCanAccessPeer(
    can: *mut c_int,
    _d: c_int,
    _p: c_int,
) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(can, 0) };
    SUCCESS
}

/// `cudaDeviceEnablePeerAccess`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaDeviceEnablePeerAccess(_p: c_int, _f: c_uint) -> CudaError {
    SUCCESS
}

/// `cudaDeviceGetPCIBusId`.
///
/// # Safety
/// `s` is null or valid for writes of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaDeviceGetPCIBusId(s: *mut c_char, len: c_int, d: c_int) -> CudaError {
    let id = format!("0000:{:02x}:00.0", 0x18 + d.max(0));
    // SAFETY: `len` writable bytes at `s` (caller's contract).
    unsafe { put_str(s.cast(), len.max(0) as usize, &id) };
    SUCCESS
}

/// `cudaDeviceGetStreamPriorityRange`: 0 (least) to -5 (greatest).
///
/// # Safety
/// Both pointers are null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaDeviceGetStreamPriorityRange(
    least: *mut c_int,
    greatest: *mut c_int,
) -> CudaError {
    // SAFETY: output parameters (caller's contract).
    unsafe {
        put(least, 0);
        put(greatest, -5);
    }
    SUCCESS
}

/// `cudaDeviceGetLimit`: 0 for every limit.
///
/// # Safety
/// `v` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaDeviceGetLimit(v: *mut usize, _limit: c_int) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(v, 0) };
    SUCCESS
}

/// `cudaDeviceSetLimit`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaDeviceSetLimit(_limit: c_int, _v: usize) -> CudaError {
    SUCCESS
}

/// `cudaDeviceGetCacheConfig`.
///
/// # Safety
/// `c` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaDeviceGetCacheConfig(c: *mut c_int) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(c, 0) };
    SUCCESS
}

/// `cudaDeviceSetCacheConfig`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaDeviceSetCacheConfig(_c: c_int) -> CudaError {
    SUCCESS
}

/// `cudaGetDeviceProperties` (CUDA 12's name is `_v2`).
///
/// # Safety
/// `p` is null or points to a writable `cudaDeviceProp` of the caller's
/// CUDA version.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaGetDeviceProperties(p: *mut c_void, d: c_int) -> CudaError {
    if !valid(d) {
        return ret(INVALID_DEVICE);
    }
    let (major, name, total) = {
        let mut s = state();
        let major = s.config.cuda_major();
        let name = s.config.name.clone();
        let total = s.gpu(d as u32).map_or(0, |g| g.mem_info().1);
        (major, name, total)
    };
    // SAFETY: forwarded caller's contract.
    unsafe { props::fill(p, d as u32, major, &name, total) };
    SUCCESS
}

/// `cudaGetDeviceProperties_v2`.
///
/// # Safety
/// As [`cudaGetDeviceProperties`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaGetDeviceProperties_v2(p: *mut c_void, d: c_int) -> CudaError {
    // SAFETY: forwarded caller's contract.
    unsafe { cudaGetDeviceProperties(p, d) }
}

/// `cudaDeviceGetAttribute`.
///
/// # Safety
/// `v` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaDeviceGetAttribute(v: *mut c_int, attr: c_int, d: c_int) -> CudaError {
    if !valid(d) {
        return ret(INVALID_DEVICE);
    }
    // SAFETY: output parameter (caller's contract).
    unsafe { put(v, attribute(attr) + if attr == 33 { d } else { 0 }) };
    SUCCESS
}
