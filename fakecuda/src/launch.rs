//! Kernel registration (the static constructors of every CUDA library
//! call these at load time) and launches, which succeed and do nothing:
//! PyTorch operators that only allocate and launch then go through, with
//! results nobody looks at.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

use crate::ffi::{CudaError, Handle, SUCCESS, put, zero};

/// `dim3`, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dim3 {
    x: c_uint,
    y: c_uint,
    z: c_uint,
}

/// The handle every fat binary gets (the runtime only passes it back).
fn fatbin_handle() -> *mut *mut c_void {
    static HANDLE: OnceLock<usize> = OnceLock::new();
    *HANDLE.get_or_init(|| Box::into_raw(Box::new([0usize; 4])) as usize) as *mut *mut c_void
}

/// `__cudaRegisterFatBinary`.
#[unsafe(no_mangle)]
pub extern "C" fn __cudaRegisterFatBinary(_fatbin: *mut c_void) -> *mut *mut c_void {
    fatbin_handle()
}

/// `__cudaRegisterFatBinaryEnd`.
#[unsafe(no_mangle)]
pub extern "C" fn __cudaRegisterFatBinaryEnd(_h: *mut *mut c_void) {}

/// `__cudaUnregisterFatBinary`.
#[unsafe(no_mangle)]
pub extern "C" fn __cudaUnregisterFatBinary(_h: *mut *mut c_void) {}

/// `__cudaRegisterFunction`.
#[unsafe(no_mangle)]
pub extern "C" fn __cudaRegisterFunction(
    _h: *mut *mut c_void,
    _host_fun: *const c_char,
    _device_fun: *mut c_char,
    _device_name: *const c_char,
    _thread_limit: c_int,
    _tid: *mut c_void,
    _bid: *mut c_void,
    _block_dim: *mut c_void,
    _grid_dim: *mut c_void,
    _wsize: *mut c_int,
) {
}

/// `__cudaRegisterVar`.
#[unsafe(no_mangle)]
pub extern "C" fn __cudaRegisterVar(
    _h: *mut *mut c_void,
    _host_var: *mut c_char,
    _device_address: *mut c_char,
    _device_name: *const c_char,
    _ext: c_int,
    _size: usize,
    _constant: c_int,
    _global: c_int,
) {
}

/// `__cudaRegisterManagedVar`.
#[unsafe(no_mangle)]
pub extern "C" fn __cudaRegisterManagedVar(
    _h: *mut *mut c_void,
    _host_var: *mut *mut c_void,
    _device_address: *mut c_char,
    _device_name: *const c_char,
    _ext: c_int,
    _size: usize,
    _constant: c_int,
    _global: c_int,
) {
}

/// `__cudaInitModule`.
#[unsafe(no_mangle)]
pub extern "C" fn __cudaInitModule(_h: *mut *mut c_void) -> c_char {
    0
}

/// `__cudaPushCallConfiguration`.
#[unsafe(no_mangle)]
pub extern "C" fn __cudaPushCallConfiguration(
    _g: Dim3,
    _b: Dim3,
    _sm: usize,
    _s: Handle,
) -> c_uint {
    0
}

/// `__cudaPopCallConfiguration`.
#[unsafe(no_mangle)]
pub extern "C" fn __cudaPopCallConfiguration(
    _g: *mut Dim3,
    _b: *mut Dim3,
    _sm: *mut usize,
    _s: *mut Handle,
) -> CudaError {
    SUCCESS
}

/// `cudaLaunchKernel`: nothing runs.
#[unsafe(no_mangle)]
pub extern "C" fn cudaLaunchKernel(
    _f: *const c_void,
    _g: Dim3,
    _b: Dim3,
    _args: *mut *mut c_void,
    _sm: usize,
    s: Handle,
) -> CudaError {
    crate::streams::note_work(s);
    SUCCESS
}

/// `cudaLaunchKernel_ptsz`: nothing runs.
#[unsafe(no_mangle)]
pub extern "C" fn cudaLaunchKernel_ptsz(
    f: *const c_void,
    g: Dim3,
    b: Dim3,
    args: *mut *mut c_void,
    sm: usize,
    s: Handle,
) -> CudaError {
    cudaLaunchKernel(f, g, b, args, sm, s)
}

/// `cudaLaunchKernelExC`: nothing runs.
#[unsafe(no_mangle)]
pub extern "C" fn cudaLaunchKernelExC(
    _cfg: *const c_void,
    _f: *const c_void,
    _args: *mut *mut c_void,
) -> CudaError {
    SUCCESS
}

/// `__cudaLaunchKernel`: nothing runs.
#[unsafe(no_mangle)]
pub extern "C" fn __cudaLaunchKernel(
    f: *const c_void,
    g: Dim3,
    b: Dim3,
    args: *mut *mut c_void,
    sm: usize,
    s: Handle,
) -> CudaError {
    cudaLaunchKernel(f, g, b, args, sm, s)
}

/// `__cudaLaunchKernel_ptsz`: nothing runs.
#[unsafe(no_mangle)]
pub extern "C" fn __cudaLaunchKernel_ptsz(
    f: *const c_void,
    g: Dim3,
    b: Dim3,
    args: *mut *mut c_void,
    sm: usize,
    s: Handle,
) -> CudaError {
    cudaLaunchKernel(f, g, b, args, sm, s)
}

/// `__cudaGetKernel`: the entry itself.
///
/// # Safety
/// `k` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __cudaGetKernel(k: *mut *const c_void, entry: *const c_void) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(k, entry) };
    SUCCESS
}

/// `cudaGetFuncBySymbol`: the symbol itself.
///
/// # Safety
/// `f` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaGetFuncBySymbol(
    f: *mut *const c_void,
    sym: *const c_void,
) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(f, sym) };
    SUCCESS
}

/// `cudaOccupancyMaxActiveBlocksPerMultiprocessor`: 8.
///
/// # Safety
/// `n` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    n: *mut c_int,
    _f: *const c_void,
    _bs: c_int,
    _sm: usize,
) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(n, 8) };
    SUCCESS
}

/// `cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`: 8.
///
/// # Safety
/// `n` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    n: *mut c_int,
    _f: *const c_void,
    _bs: c_int,
    _sm: usize,
    _flags: c_uint,
) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(n, 8) };
    SUCCESS
}

/// `cudaFuncSetAttribute`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaFuncSetAttribute(_f: *const c_void, _a: c_int, _v: c_int) -> CudaError {
    SUCCESS
}

/// `cudaFuncGetAttributes`: 1024 threads per block, PTX and binary
/// version of the card's compute capability (90 on an H100: the wheels
/// carry code for it, and CUB picks its tuning policy by this PTX version —
/// zero made it answer 98, "invalid device function"), 48 KiB of dynamic
/// shared memory; sizes and registers zero.
///
/// # Safety
/// `a` is null or points to a writable `cudaFuncAttributes` (at least the
/// 76 bytes of its fields before `clusterSchedulingPolicyPreference`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaFuncGetAttributes(a: *mut c_void, _f: *const c_void) -> CudaError {
    // SAFETY: see the function's contract; maxThreadsPerBlock is at 24,
    // ptxVersion at 32, binaryVersion at 36, maxDynamicSharedSizeBytes at 44.
    unsafe {
        zero(a, 76);
        if !a.is_null() {
            let at = |offset: usize| a.cast::<u8>().add(offset).cast::<c_int>();
            put(at(24), 1024);
            let card = crate::cards::card();
            let version = card.major * 10 + card.minor;
            put(at(32), version);
            put(at(36), version);
            put(at(44), 48 << 10);
        }
    }
    SUCCESS
}

/// `cudaProfilerStart`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaProfilerStart() -> CudaError {
    SUCCESS
}

/// `cudaProfilerStop`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaProfilerStop() -> CudaError {
    SUCCESS
}
