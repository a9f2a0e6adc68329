//! Pinned host memory, in the runtime and the driver API: ordinary heap
//! memory (the host side of a copy is real), counted against the host
//! capacity (`VRAMLAB_FAKECUDA_HOST_CAPACITY`, unlimited by default).
//!
//! The bytes counted are those asked for: each live `cudaHostAlloc`
//! (`cudaMallocHost`, `cuMemHostAlloc`, `cuMemAllocHost`) and each live
//! `cudaHostRegister` (`cuMemHostRegister`) range, from the call until
//! `cudaFreeHost` (`cuMemFreeHost`) or `cudaHostUnregister`
//! (`cuMemHostUnregister`). A call that would take them past the capacity
//! fails with 2 (`cudaErrorMemoryAllocation` / `CUDA_ERROR_OUT_OF_MEMORY`)
//! and changes nothing.

use std::alloc::Layout;
use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::Mutex;

use crate::errors::ret;
use crate::ffi::{CuResult, CudaError, INVALID_VALUE, OUT_OF_MEMORY, SUCCESS, put};

/// What is pinned now.
#[derive(Debug, Default)]
struct Pinned {
    /// Heap blocks handed out, with their layouts and the bytes asked for.
    allocs: HashMap<usize, (Layout, u64)>,
    /// Registered ranges: their bytes.
    registered: HashMap<usize, u64>,
    /// Bytes of both together.
    live: u64,
}

static PINNED: Mutex<Option<Pinned>> = Mutex::new(None);

fn with_pinned<R>(f: impl FnOnce(&mut Pinned) -> R) -> R {
    let mut g = PINNED.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(Pinned::default))
}

/// Whether `ptr` lies in pinned host memory (an allocation or a
/// registered range): what `cudaPointerGetAttributes` tells apart, and
/// PyTorch's `is_pinned()` asks.
pub(crate) fn is_pinned(ptr: u64) -> bool {
    with_pinned(|p| {
        let within = |base: usize, len: u64| {
            let base = base as u64;
            ptr >= base && ptr - base < len.max(1)
        };
        p.allocs.iter().any(|(&b, &(_, n))| within(b, n))
            || p.registered.iter().any(|(&b, &n)| within(b, n))
    })
}

/// Whether `n` more bytes fit under the host capacity.
fn fits(p: &Pinned, n: u64, capacity: Option<u64>) -> bool {
    capacity.is_none_or(|c| p.live.checked_add(n).is_some_and(|t| t <= c))
}

/// `n` bytes of pinned host memory, or the error code.
fn host_alloc(n: usize) -> Result<*mut c_void, c_int> {
    let capacity = crate::state::config().host_capacity;
    let layout = Layout::from_size_align(n.max(1), 64).map_err(|_| OUT_OF_MEMORY)?;
    with_pinned(|p| {
        if !fits(p, n as u64, capacity) {
            return Err(OUT_OF_MEMORY);
        }
        // SAFETY: the layout has a non-zero size.
        let mem = unsafe { std::alloc::alloc_zeroed(layout) };
        if mem.is_null() {
            return Err(OUT_OF_MEMORY);
        }
        p.allocs.insert(mem as usize, (layout, n as u64));
        p.live += n as u64;
        Ok(mem.cast())
    })
}

/// Frees a [`host_alloc`] result (null: nothing).
fn host_free(ptr: *mut c_void) -> c_int {
    if ptr.is_null() {
        return SUCCESS;
    }
    let freed = with_pinned(|p| {
        let (layout, n) = p.allocs.remove(&(ptr as usize))?;
        p.live = p.live.saturating_sub(n);
        Some(layout)
    });
    let Some(layout) = freed else {
        return INVALID_VALUE;
    };
    // SAFETY: `ptr` came from `alloc_zeroed` with this layout and is freed
    // once (it was removed from the table).
    unsafe { std::alloc::dealloc(ptr.cast(), layout) };
    SUCCESS
}

/// Registers `n` bytes at `ptr` (again: the new size replaces the old).
fn host_register(ptr: *mut c_void, n: usize) -> c_int {
    let capacity = crate::state::config().host_capacity;
    with_pinned(|p| {
        let old = p.registered.get(&(ptr as usize)).copied().unwrap_or(0);
        let others = p.live.saturating_sub(old);
        if capacity.is_some_and(|c| others.saturating_add(n as u64) > c) {
            return OUT_OF_MEMORY;
        }
        p.registered.insert(ptr as usize, n as u64);
        p.live = others + n as u64;
        SUCCESS
    })
}

/// Unregisters the range at `ptr` (one never registered: nothing).
fn host_unregister(ptr: *mut c_void) -> c_int {
    with_pinned(|p| {
        if let Some(n) = p.registered.remove(&(ptr as usize)) {
            p.live = p.live.saturating_sub(n);
        }
    });
    SUCCESS
}

/// Writes `result`'s address through `out` and returns its code.
///
/// # Safety
/// `out` is null or valid for a write of a pointer.
unsafe fn hand_out(out: *mut *mut c_void, result: Result<*mut c_void, c_int>) -> c_int {
    match result {
        Ok(mem) => {
            // SAFETY: output parameter (caller's contract).
            unsafe { put(out, mem) };
            SUCCESS
        }
        Err(e) => e,
    }
}

/// `cudaHostAlloc`: heap memory, within the host capacity.
///
/// # Safety
/// `p` is null or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaHostAlloc(p: *mut *mut c_void, n: usize, _flags: c_uint) -> CudaError {
    // SAFETY: forwarded caller's contract.
    ret(unsafe { hand_out(p, host_alloc(n)) })
}

/// `cudaMallocHost`.
///
/// # Safety
/// As [`cudaHostAlloc`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaMallocHost(p: *mut *mut c_void, n: usize) -> CudaError {
    // SAFETY: forwarded caller's contract.
    unsafe { cudaHostAlloc(p, n, 0) }
}

/// `cudaFreeHost` of a [`cudaHostAlloc`] result.
#[unsafe(no_mangle)]
pub extern "C" fn cudaFreeHost(p: *mut c_void) -> CudaError {
    ret(host_free(p))
}

/// `cudaHostRegister`: counted against the host capacity.
#[unsafe(no_mangle)]
pub extern "C" fn cudaHostRegister(p: *mut c_void, n: usize, _f: c_uint) -> CudaError {
    ret(host_register(p, n))
}

/// `cudaHostUnregister`.
#[unsafe(no_mangle)]
pub extern "C" fn cudaHostUnregister(p: *mut c_void) -> CudaError {
    ret(host_unregister(p))
}

/// `cuMemAllocHost_v2`: as `cudaMallocHost` (the driver has no sticky error).
///
/// # Safety
/// `p` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocHost_v2(p: *mut *mut c_void, size: usize) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { hand_out(p, host_alloc(size)) }
}

/// `cuMemHostAlloc`.
///
/// # Safety
/// As [`cuMemAllocHost_v2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostAlloc(
    p: *mut *mut c_void,
    size: usize,
    _flags: c_uint,
) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { hand_out(p, host_alloc(size)) }
}

/// `cuMemFreeHost`.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemFreeHost(p: *mut c_void) -> CuResult {
    host_free(p)
}

/// `cuMemHostRegister_v2`: as `cudaHostRegister`.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemHostRegister_v2(p: *mut c_void, size: usize, _f: c_uint) -> CuResult {
    host_register(p, size)
}

/// `cuMemHostRegister` (before CUDA 6.5): as `_v2`.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemHostRegister(p: *mut c_void, size: usize, f: c_uint) -> CuResult {
    cuMemHostRegister_v2(p, size, f)
}

/// `cuMemHostUnregister`.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemHostUnregister(p: *mut c_void) -> CuResult {
    host_unregister(p)
}
