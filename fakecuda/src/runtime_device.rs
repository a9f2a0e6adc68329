//! Devices in the runtime API: count, current device, properties and
//! attributes, versions, limits.

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::errors::ret;
use crate::ffi::{CudaError, INVALID_DEVICE, SUCCESS, put, put_str};
use crate::props;
use crate::state::{config, current_device, set_current_device, state};

/// Device `d`'s attribute `attr` (`cudaDeviceAttr` and `CUdevice_attribute`
/// share their numbers): the card of [`cards::card`](crate::cards::card),
/// as `cudaGetDeviceProperties` reports it; 0 for what it does not have.
/// Limits the CUDA libraries size their launches by (grid and block
/// dimensions, shared memory, registers) are the card's, never 0.
pub(crate) fn attribute(attr: c_int, d: c_int) -> c_int {
    let card = crate::cards::card();
    match attr {
        1..=3 => 1024,         // max threads per block; max block dim x, y
        4 => 64,               // max block dim z
        5 | 11 => i32::MAX,    // max grid dim x; max pitch
        6 | 7 => 65_535,       // max grid dim y, z
        8 => 49_152,           // max shared memory per block
        9 | 12 | 82 => 65_536, // constant memory; registers per block, per SM
        10 => 32,              // warp size
        13 => card.clock_khz,  // clock rate, kHz
        14 | 30 => 512,        // texture and surface alignment
        15 | 19 | 31 => 1,     // copy overlap, host mapping, concurrent kernels
        32 => c_int::from(card.ecc),
        16 => card.sm_count,
        21 | 22 | 56 | 70 => 131_072, // 1D/2D texture and surface widths
        23 | 57 => 65_536,            // 2D texture and surface heights
        24..=26 | 58..=60 => 16_384,  // 3D textures and surfaces
        27 | 28 | 42 | 45 | 46 | 52 | 53 | 55 | 61 | 63 | 64 | 66 | 67 | 73 | 74 | 77 => 32_768,
        29 | 43 | 62 | 65 => 2048,   // layered texture and surface layers
        54 | 68 => 2046,             // cubemap layers
        33 => 0x18 + d,              // PCI bus id
        36 => card.memory_clock_khz, // memory clock rate, kHz
        37 => card.bus_width,        // global memory bus width
        38 => card.l2_bytes,         // L2 cache size
        39 => card.threads_per_sm,   // max threads per multiprocessor
        40 => 3,                     // async engines
        47 | 48 => 8192,             // 3D texture alternates
        49 => 32_768,
        51 => 32,        // texture pitch alignment
        69 => 1 << 28,   // 1D linear texture width
        71 => 65_000,    // 2D linear texture height
        72 => 2_097_120, // 2D linear texture pitch
        75 => card.major,
        76 => card.minor,
        81 => card.shared_per_sm,  // max shared memory per multiprocessor
        87 => 2,                   // single- to double-precision ratio
        97 => card.shared_optin,   // max shared memory per block, opt-in
        106 => card.blocks_per_sm, // max blocks per multiprocessor
        108 => card.l2_bytes / 4 * 3, // max persisting L2 (three quarters of L2)
        109 => 134_213_632,        // max access-policy window
        111 => 1024,               // shared memory reserved per block
        119 => 1,                  // memory-pool handle types: POSIX fd
        125 => 4,                  // memory sync domains
        130 => -1,                 // NUMA id: none
        120 => c_int::from(card.clusters), // cluster launch
        // Supported: integrated no (18); L1 caches, managed memory,
        // preemption, stream ops, cooperative launch, host registration,
        // virtual memory and its POSIX handles, compression, RDMA, memory
        // pools, clusters, IPC events, tensor maps, unified function pointers.
        41
        | 44
        | 78..=80
        | 83
        | 89..=91
        | 93..=96
        | 99
        | 102
        | 103
        | 107
        | 110
        | 112..=117
        | 121..=124
        | 126
        | 128 => 1,
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

/// `cudaDeviceSynchronize`: every recorded event completes (`events.rs`).
#[unsafe(no_mangle)]
pub extern "C" fn cudaDeviceSynchronize() -> CudaError {
    crate::events::sync_device();
    SUCCESS
}

/// `cudaThreadSynchronize`: as [`cudaDeviceSynchronize`].
#[unsafe(no_mangle)]
pub extern "C" fn cudaThreadSynchronize() -> CudaError {
    cudaDeviceSynchronize()
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
    unsafe { put(v, attribute(attr, d)) };
    SUCCESS
}
