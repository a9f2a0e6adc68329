//! Device memory in the driver API (`cuMemAlloc`, …), which the CUDA
//! libraries call for their own buffers, outside PyTorch's allocator: the
//! same simulated devices and log as `cudaMalloc`. Copies and sets do
//! nothing.

use std::ffi::{c_int, c_uint, c_void};

use crate::ffi::{CuResult, INVALID_VALUE, SUCCESS, put};
use crate::memory::{device_free, device_malloc, device_mem_info};

/// `cuMemAlloc_v2` on the current device.
///
/// # Safety
/// `p` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAlloc_v2(p: *mut u64, size: usize) -> CuResult {
    if p.is_null() || size == 0 {
        return INVALID_VALUE;
    }
    let result = device_malloc(size);
    // SAFETY: checked not null; output parameter (caller's contract).
    unsafe { put(p, result.unwrap_or(0)) };
    result.map_or_else(|e| e, |_| SUCCESS)
}

/// `cuMemFree_v2`.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemFree_v2(p: u64) -> CuResult {
    device_free(p).map_or_else(|e| e, |()| SUCCESS)
}

/// `cuMemGetInfo_v2` of the current device.
///
/// # Safety
/// Both pointers are null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CuResult {
    match device_mem_info() {
        Ok((f, t)) => {
            // SAFETY: output parameters (caller's contract).
            unsafe {
                put(free, f as usize);
                put(total, t as usize);
            }
            SUCCESS
        }
        Err(e) => e,
    }
}

/// `cuMemAllocHost_v2`: pinned host memory, as `cudaMallocHost`.
///
/// # Safety
/// `p` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocHost_v2(p: *mut *mut c_void, size: usize) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { crate::memory::cudaHostAlloc(p, size, 0) }
}

/// `cuMemHostAlloc`.
///
/// # Safety
/// As [`cuMemAllocHost_v2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostAlloc(
    p: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { crate::memory::cudaHostAlloc(p, size, flags) }
}

/// `cuMemFreeHost`.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemFreeHost(p: *mut c_void) -> CuResult {
    crate::memory::cudaFreeHost(p)
}

/// Copies and sets of the driver API: nothing moves.
macro_rules! driver_no_op {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: nothing is copied or written.")]
            #[unsafe(no_mangle)]
            pub extern "C" fn $name($($arg: $ty),*) -> CuResult {
                let _ = ($($arg,)*);
                SUCCESS
            }
        )*
    };
}

driver_no_op! {
    cuMemcpy(dst: u64, src: u64, n: usize);
    cuMemcpyAsync(dst: u64, src: u64, n: usize, s: *mut c_void);
    cuMemcpyHtoD_v2(dst: u64, src: *const c_void, n: usize);
    cuMemcpyDtoH_v2(dst: *mut c_void, src: u64, n: usize);
    cuMemcpyDtoD_v2(dst: u64, src: u64, n: usize);
    cuMemcpyHtoDAsync_v2(dst: u64, src: *const c_void, n: usize, s: *mut c_void);
    cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: u64, n: usize, s: *mut c_void);
    cuMemcpyDtoDAsync_v2(dst: u64, src: u64, n: usize, s: *mut c_void);
    cuMemsetD8_v2(dst: u64, v: u8, n: usize);
    cuMemsetD16_v2(dst: u64, v: u16, n: usize);
    cuMemsetD32_v2(dst: u64, v: u32, n: usize);
    cuMemsetD8Async(dst: u64, v: u8, n: usize, s: *mut c_void);
    cuMemsetD16Async(dst: u64, v: u16, n: usize, s: *mut c_void);
}

/// `cuPointerGetAttribute`: every pointer is device memory of the device
/// its address falls in (as `cudaPointerGetAttributes` answers), which is
/// what Triton's launchers check of each tensor argument.
///
/// # Safety
/// `data` is null or valid for a write of the attribute's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerGetAttribute(
    data: *mut c_void,
    attr: c_int,
    ptr: u64,
) -> CuResult {
    let (d, _) = crate::state::split_address(ptr);
    // SAFETY (every arm): `data` holds the attribute's type (caller's contract).
    unsafe {
        match attr {
            1 => drop(put(data.cast(), crate::driver::context())), // context
            2 => drop(put(data.cast::<c_uint>(), 2)),              // memory type: device
            3 => drop(put(data.cast::<u64>(), ptr)),               // device pointer
            8 => drop(put(data.cast::<c_int>(), 0)),               // is managed: no
            9 => drop(put(data.cast::<c_int>(), d as c_int)),      // device ordinal
            _ => return INVALID_VALUE,
        }
    }
    SUCCESS
}

/// `cuMemHostGetDevicePointer_v2`: the host address itself (unified
/// addressing).
///
/// # Safety
/// `dev` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostGetDevicePointer_v2(
    dev: *mut u64,
    host: *mut c_void,
    _flags: c_uint,
) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(dev, host as u64) };
    SUCCESS
}
