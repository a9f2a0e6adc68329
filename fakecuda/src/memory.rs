//! Device memory in the runtime API: `cudaMalloc`, `cudaFree`,
//! `cudaMemGetInfo` on the simulated devices; copies and sets, which keep
//! small values ([`values`](crate::values)). Pinned host memory is
//! `host_memory.rs`'s.

use std::ffi::{c_int, c_uint, c_void};

use vramlab_allocator::Device;

use crate::errors::ret;
use crate::ffi::{CudaError, Handle, INVALID_DEVICE, INVALID_VALUE, OUT_OF_MEMORY, SUCCESS, put};
use crate::state::{
    current_device, device_state, error_code, global_address, split_address, state,
};

/// `size` bytes on the current device: its address, or the error code
/// (the same number in the runtime and the driver API).
pub(crate) fn device_malloc(size: usize) -> Result<u64, c_int> {
    let d = current_device();
    let mut s = device_state()?;
    let Some(gpu) = s.gpu(d) else {
        return Err(INVALID_DEVICE);
    };
    let size = size as u64;
    if size == 0 {
        return Ok(0);
    }
    if size > gpu.room() {
        return Err(OUT_OF_MEMORY);
    }
    match gpu.sim.malloc(size) {
        Ok(local) => {
            gpu.segments.insert(local, size);
            s.log("malloc", d, local, size);
            Ok(global_address(d, local))
        }
        Err(e) => Err(error_code(&e)),
    }
}

/// Frees a [`device_malloc`] result (0: nothing).
pub(crate) fn device_free(addr: u64) -> Result<(), c_int> {
    if addr == 0 {
        return Ok(());
    }
    let (d, local) = split_address(addr);
    let mut s = device_state()?;
    let gpu = s.gpu(d).ok_or(INVALID_VALUE)?;
    let size = gpu.segments.remove(&local).ok_or(INVALID_VALUE)?;
    gpu.sim.free(local, size).map_err(|_| INVALID_VALUE)?;
    s.log("free", d, local, size);
    Ok(())
}

/// Free and total bytes of the current device.
pub(crate) fn device_mem_info() -> Result<(u64, u64), c_int> {
    device_state()?
        .gpu(current_device())
        .map(|g| g.mem_info())
        .ok_or(INVALID_DEVICE)
}

/// `cudaMalloc` on the current device.
///
/// # Safety
/// `p` is null or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaMalloc(p: *mut *mut c_void, size: usize) -> CudaError {
    if p.is_null() {
        return ret(INVALID_VALUE);
    }
    let result = device_malloc(size);
    // SAFETY: checked non-null; output parameter (caller's contract).
    unsafe { put(p, result.unwrap_or(0) as *mut c_void) };
    match result {
        Ok(_) => SUCCESS,
        Err(e) => ret(e),
    }
}

/// `cudaFree` of a `cudaMalloc` result (null: nothing).
#[unsafe(no_mangle)]
pub extern "C" fn cudaFree(p: *mut c_void) -> CudaError {
    match device_free(p as u64) {
        Ok(()) => SUCCESS,
        Err(e) => ret(e),
    }
}

/// `cudaMemGetInfo` of the current device.
///
/// # Safety
/// Both pointers are null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> CudaError {
    let (f, t) = match device_mem_info() {
        Ok(info) => info,
        Err(e) => return ret(e),
    };
    // SAFETY: output parameters (caller's contract).
    unsafe {
        put(free, f as usize);
        put(total, t as usize);
    }
    SUCCESS
}

/// `cudaMemcpyKind`: host to host.
const HOST_TO_HOST: c_int = 0;
/// `cudaMemcpyKind`: host to device.
const HOST_TO_DEVICE: c_int = 1;
/// `cudaMemcpyKind`: device to host.
const DEVICE_TO_HOST: c_int = 2;
/// `cudaMemcpyKind`: device to device.
const DEVICE_TO_DEVICE: c_int = 3;

/// Whether `ptr` lies in device memory: in a `cudaMalloc` segment or a
/// mapped range of a device (for `cudaMemcpyDefault`, which leaves the
/// direction to the addresses).
pub(crate) fn is_device(ptr: u64) -> bool {
    let (d, local) = split_address(ptr);
    let mut s = state();
    let mapped = s.handles.values().any(|h| {
        h.device == d
            && h.mapped_at
                .is_some_and(|m| m <= local && local - m < h.size)
    });
    mapped
        || s.gpu(d).is_some_and(|g| {
            g.segments
                .iter()
                .any(|(&a, &n)| a <= local && local - a < n)
        })
}

/// `n` bytes from `src` to `dst`, in the direction `kind` says (or the
/// addresses say, for `cudaMemcpyDefault`): device memory holds what
/// [`values`](crate::values) keeps; host memory is real.
///
/// # Safety
/// A host side is valid for `n` bytes (read for the source, written for
/// the destination).
pub(crate) unsafe fn transfer(dst: u64, src: u64, n: usize, kind: c_int) {
    let kind = match kind {
        HOST_TO_HOST | HOST_TO_DEVICE | DEVICE_TO_HOST | DEVICE_TO_DEVICE => kind,
        _ => match (is_device(src), is_device(dst)) {
            (false, false) => HOST_TO_HOST,
            (false, true) => HOST_TO_DEVICE,
            (true, false) => DEVICE_TO_HOST,
            (true, true) => DEVICE_TO_DEVICE,
        },
    };
    if n == 0 {
        return;
    }
    match kind {
        // SAFETY: both sides are host memory valid for `n` bytes (caller's
        // contract); `copy` allows overlap.
        HOST_TO_HOST => unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, n) },
        HOST_TO_DEVICE if n <= crate::values::KEPT => {
            // SAFETY: the source is host memory valid for `n` bytes.
            let bytes = unsafe { std::slice::from_raw_parts(src as *const u8, n) };
            crate::values::write(dst, bytes);
        }
        HOST_TO_DEVICE => crate::values::forget(dst, n as u64),
        DEVICE_TO_HOST => {
            // SAFETY: the destination is host memory valid for `n` bytes.
            let out = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, n) };
            crate::values::read(src, out);
        }
        _ => crate::values::copy(dst, src, n),
    }
}

/// `cudaMemcpy`.
///
/// # Safety
/// As the runtime's: host sides valid for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaMemcpy(
    d: *mut c_void,
    s: *const c_void,
    n: usize,
    k: c_int,
) -> CudaError {
    // SAFETY: caller's contract.
    unsafe { transfer(d as u64, s as u64, n, k) };
    SUCCESS
}

/// `cudaMemcpyAsync` (done at once: the fake has no queue).
///
/// # Safety
/// As [`cudaMemcpy`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaMemcpyAsync(
    d: *mut c_void,
    s: *const c_void,
    n: usize,
    k: c_int,
    stream: Handle,
) -> CudaError {
    // SAFETY: caller's contract.
    unsafe { transfer(d as u64, s as u64, n, k) };
    crate::streams::note_work(stream);
    SUCCESS
}

/// `cudaMemcpyPeerAsync`: device to device.
#[unsafe(no_mangle)]
pub extern "C" fn cudaMemcpyPeerAsync(
    d: *mut c_void,
    _dd: c_int,
    s: *const c_void,
    _sd: c_int,
    n: usize,
    _stream: Handle,
) -> CudaError {
    crate::values::copy(d as u64, s as u64, n);
    SUCCESS
}

/// `cudaMemset`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaMemset(d: *mut c_void, v: c_int, n: usize) -> CudaError {
    crate::values::set(d as u64, v as u8, n);
    SUCCESS
}

/// `cudaMemsetAsync` (done at once).
#[unsafe(no_mangle)]
pub extern "C" fn cudaMemsetAsync(
    d: *mut c_void,
    v: c_int,
    n: usize,
    _stream: Handle,
) -> CudaError {
    crate::values::set(d as u64, v as u8, n);
    SUCCESS
}

/// `cudaHostGetDevicePointer`: the host address itself.
///
/// # Safety
/// `d` is null or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaHostGetDevicePointer(
    d: *mut *mut c_void,
    h: *mut c_void,
    _f: c_uint,
) -> CudaError {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(d, h) };
    SUCCESS
}

/// `struct cudaPointerAttributes` (the same in CUDA 12 and 13).
#[repr(C)]
struct PointerAttributes {
    kind: c_int,
    device: c_int,
    device_pointer: *mut c_void,
    host_pointer: *mut c_void,
}

/// `cudaPointerGetAttributes`: pinned host memory for an address in a
/// pinned allocation or registered range (mapped: its device pointer is
/// itself, as with unified addressing), else device memory of the device
/// the address belongs to.
///
/// # Safety
/// `a` is null or points to a writable `cudaPointerAttributes`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaPointerGetAttributes(a: *mut c_void, p: *const c_void) -> CudaError {
    let (d, _) = split_address(p as u64);
    let host = crate::host_memory::is_pinned(p as u64);
    let attrs = PointerAttributes {
        kind: if host { 1 } else { 2 }, // cudaMemoryTypeHost / Device
        device: if host { 0 } else { d as c_int },
        device_pointer: p.cast_mut(),
        host_pointer: if host {
            p.cast_mut()
        } else {
            std::ptr::null_mut()
        },
    };
    // SAFETY: output parameter (caller's contract).
    unsafe { put(a.cast::<PointerAttributes>(), attrs) };
    SUCCESS
}
