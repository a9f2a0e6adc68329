//! Device memory in the driver API (`cuMemAlloc`, …), which the CUDA
//! libraries call for their own buffers, outside PyTorch's allocator: the
//! same simulated devices and log as `cudaMalloc`. Copies and sets do
//! nothing.

use std::ffi::{c_int, c_uint, c_void};

use crate::ffi::{CuResult, INVALID_VALUE, SUCCESS, put};
use crate::memory::{device_free, device_malloc, device_mem_info, transfer};

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

/// `cuMemcpy` (unified addressing: the addresses say the direction).
///
/// # Safety
/// A host side is valid for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpy(dst: u64, src: u64, n: usize) -> CuResult {
    // SAFETY: caller's contract; 4 is `cudaMemcpyDefault`.
    unsafe { transfer(dst, src, n, 4) };
    SUCCESS
}

/// `cuMemcpyAsync` (done at once).
///
/// # Safety
/// As [`cuMemcpy`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyAsync(dst: u64, src: u64, n: usize, _s: *mut c_void) -> CuResult {
    // SAFETY: caller's contract.
    unsafe { cuMemcpy(dst, src, n) }
}

/// `cuMemcpyHtoD_v2`.
///
/// # Safety
/// `src` is valid for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoD_v2(dst: u64, src: *const c_void, n: usize) -> CuResult {
    // SAFETY: caller's contract; 1 is host to device.
    unsafe { transfer(dst, src as u64, n, 1) };
    SUCCESS
}

/// `cuMemcpyHtoDAsync_v2` (done at once).
///
/// # Safety
/// As [`cuMemcpyHtoD_v2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: u64,
    src: *const c_void,
    n: usize,
    _s: *mut c_void,
) -> CuResult {
    // SAFETY: caller's contract.
    unsafe { cuMemcpyHtoD_v2(dst, src, n) }
}

/// `cuMemcpyDtoH_v2`.
///
/// # Safety
/// `dst` is valid for a write of `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(dst: *mut c_void, src: u64, n: usize) -> CuResult {
    // SAFETY: caller's contract; 2 is device to host.
    unsafe { transfer(dst as u64, src, n, 2) };
    SUCCESS
}

/// `cuMemcpyDtoHAsync_v2` (done at once).
///
/// # Safety
/// As [`cuMemcpyDtoH_v2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: u64,
    n: usize,
    _s: *mut c_void,
) -> CuResult {
    // SAFETY: caller's contract.
    unsafe { cuMemcpyDtoH_v2(dst, src, n) }
}

/// `cuMemcpyDtoD_v2`.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemcpyDtoD_v2(dst: u64, src: u64, n: usize) -> CuResult {
    crate::values::copy(dst, src, n);
    SUCCESS
}

/// `cuMemcpyDtoDAsync_v2` (done at once).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemcpyDtoDAsync_v2(dst: u64, src: u64, n: usize, _s: *mut c_void) -> CuResult {
    cuMemcpyDtoD_v2(dst, src, n)
}

/// `count` elements of `width` bytes at `dst` set to the low bytes of `v`.
fn set_elements(dst: u64, v: u32, width: usize, count: usize) {
    let bytes = v.to_le_bytes();
    let pattern = bytes.get(..width).unwrap_or(&bytes);
    let len = count.saturating_mul(width);
    if pattern
        .iter()
        .all(|&b| b == pattern.first().copied().unwrap_or(0))
    {
        crate::values::set(dst, pattern.first().copied().unwrap_or(0), len);
    } else if len <= crate::values::KEPT {
        crate::values::write(dst, &pattern.repeat(count));
    } else {
        crate::values::forget(dst, len as u64);
    }
}

/// Memsets of the driver API (done at once): `(name, element width)`.
macro_rules! driver_memset {
    ($($name:ident($ty:ty, $width:expr $(, $stream:ident)?);)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`.")]
            #[unsafe(no_mangle)]
            pub extern "C" fn $name(dst: u64, v: $ty, n: usize $(, $stream: *mut c_void)?) -> CuResult {
                set_elements(dst, u32::from(v), $width, n);
                SUCCESS
            }
        )*
    };
}

driver_memset! {
    cuMemsetD8_v2(u8, 1);
    cuMemsetD16_v2(u16, 2);
    cuMemsetD32_v2(u32, 4);
    cuMemsetD8Async(u8, 1, _s);
    cuMemsetD16Async(u16, 2, _s);
    cuMemsetD32Async(u32, 4, _s);
}

/// `cuPointerGetAttribute`: device memory of the device its address falls
/// in, pinned host memory where it is (as `cudaPointerGetAttributes`
/// answers); Triton's launchers check each tensor argument with it.
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
            // memory type: host for pinned memory, else device
            2 => drop(put(
                data.cast::<c_uint>(),
                if crate::host_memory::is_pinned(ptr) {
                    1
                } else {
                    2
                },
            )),
            3 => drop(put(data.cast::<u64>(), ptr)), // device pointer
            8 => drop(put(data.cast::<c_int>(), 0)), // is managed: no
            9 => drop(put(data.cast::<c_int>(), d as c_int)), // device ordinal
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
