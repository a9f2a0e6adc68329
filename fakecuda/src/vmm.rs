//! The driver's virtual-memory calls that expandable segments make:
//! reserve an address range, create physical handles, map and unmap them,
//! release. Ranges and mapped bytes are the simulated device's; a handle's
//! memory counts from `cuMemCreate` to `cuMemRelease`, as on a GPU.

use std::ffi::{c_int, c_ulonglong, c_void};

use vramlab_allocator::Device;

use crate::ffi::{CuResult, INVALID_VALUE, OUT_OF_MEMORY, SUCCESS, put};
use crate::state::{
    PhysHandle, current_device, device_state, error_code, global_address, split_address, state,
};

/// `cuMemGetAllocationGranularity`: 2 MiB.
///
/// # Safety
/// `g` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetAllocationGranularity(
    g: *mut usize,
    _prop: *const c_void,
    _option: c_int,
) -> CuResult {
    let gran = state().gpu(0).map_or(2 << 20, |g| g.sim.granularity());
    // SAFETY: output parameter (caller's contract).
    unsafe { put(g, gran as usize) };
    SUCCESS
}

/// `cuMemAddressReserve` on the calling thread's current device (the
/// address space is shared; the simulated device of the current GPU places
/// the range).
///
/// # Safety
/// `ptr` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAddressReserve(
    ptr: *mut u64,
    size: usize,
    _align: usize,
    _addr: u64,
    _flags: c_ulonglong,
) -> CuResult {
    let d = current_device();
    let mut s = state();
    let Some(gpu) = s.gpu(d) else {
        return INVALID_VALUE;
    };
    match gpu.sim.reserve(size as u64) {
        Ok(local) => {
            s.log("reserve", d, local, size as u64);
            // SAFETY: output parameter (caller's contract).
            unsafe { put(ptr, global_address(d, local)) };
            SUCCESS
        }
        Err(e) => error_code(&e),
    }
}

/// `cuMemAddressFree`.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemAddressFree(ptr: u64, size: usize) -> CuResult {
    let (d, local) = split_address(ptr);
    let mut s = state();
    let Some(gpu) = s.gpu(d) else {
        return INVALID_VALUE;
    };
    match gpu.sim.release(local, size as u64) {
        Ok(()) => {
            s.log("release", d, local, size as u64);
            SUCCESS
        }
        Err(e) => error_code(&e),
    }
}

/// The device of a `CUmemAllocationProp` (`location.id`, at byte 12).
///
/// # Safety
/// `prop` is null or points to a `CUmemAllocationProp`.
unsafe fn prop_device(prop: *const c_void) -> u32 {
    if prop.is_null() {
        return current_device();
    }
    // SAFETY: `location.id` is the int at offset 12 of the struct (after
    // `type`, `requestedHandleTypes` and `location.type`).
    let id = unsafe { prop.cast::<u8>().add(12).cast::<c_int>().read_unaligned() };
    id.max(0) as u32
}

/// `cuMemCreate`: a physical handle of `size` bytes on the device the
/// properties name, or out of memory.
///
/// # Safety
/// `h` is null or valid for a write; `prop` null or a `CUmemAllocationProp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemCreate(
    h: *mut u64,
    size: usize,
    prop: *const c_void,
    _flags: c_ulonglong,
) -> CuResult {
    // SAFETY: forwarded caller's contract.
    let d = unsafe { prop_device(prop) };
    let mut s = match device_state() {
        Ok(s) => s,
        Err(e) => return e,
    };
    let Some(gpu) = s.gpu(d) else {
        return INVALID_VALUE;
    };
    if size as u64 > gpu.room() {
        return OUT_OF_MEMORY;
    }
    gpu.unmapped += size as u64;
    let handle = s.next_handle;
    s.next_handle += 1;
    s.handles.insert(
        handle,
        PhysHandle {
            device: d,
            size: size as u64,
            mapped_at: None,
        },
    );
    // SAFETY: output parameter (caller's contract).
    unsafe { put(h, handle) };
    SUCCESS
}

/// `cuMemRelease`: the handle's memory goes back once it is unmapped.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemRelease(h: u64) -> CuResult {
    let mut s = match device_state() {
        Ok(s) => s,
        Err(e) => return e,
    };
    let Some(ph) = s.handles.remove(&h) else {
        return INVALID_VALUE;
    };
    if ph.mapped_at.is_none() {
        if let Some(gpu) = s.gpu(ph.device) {
            gpu.unmapped = gpu.unmapped.saturating_sub(ph.size);
        }
    }
    SUCCESS
}

/// `cuMemMap`: maps handle `h` at `ptr` (inside a reservation).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemMap(
    ptr: u64,
    size: usize,
    _offset: usize,
    h: u64,
    _flags: c_ulonglong,
) -> CuResult {
    let (d, local) = split_address(ptr);
    let mut s = match device_state() {
        Ok(s) => s,
        Err(e) => return e,
    };
    let Some(ph) = s.handles.get(&h).copied() else {
        return INVALID_VALUE;
    };
    if ph.mapped_at.is_some() || ph.size != size as u64 || ph.device != d {
        return INVALID_VALUE;
    }
    let Some(gpu) = s.gpu(d) else {
        return INVALID_VALUE;
    };
    // The handle's bytes move from "created" to "mapped" on the simulated
    // device, which counts mapped memory.
    gpu.unmapped = gpu.unmapped.saturating_sub(ph.size);
    if let Err(e) = gpu.sim.map(local, ph.size, ph.size) {
        gpu.unmapped += ph.size;
        return error_code(&e);
    }
    if let Some(p) = s.handles.get_mut(&h) {
        p.mapped_at = Some(local);
    }
    s.log("map", d, local, ph.size);
    SUCCESS
}

/// `cuMemUnmap` of one mapped handle's range.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemUnmap(ptr: u64, size: usize) -> CuResult {
    let (d, local) = split_address(ptr);
    let mut s = match device_state() {
        Ok(s) => s,
        Err(e) => return e,
    };
    let mapped: Vec<u64> = s
        .handles
        .iter()
        .filter(|(_, p)| {
            p.device == d
                && p.mapped_at
                    .is_some_and(|a| a >= local && a < local + size as u64)
        })
        .map(|(&h, _)| h)
        .collect();
    let Some(gpu) = s.gpu(d) else {
        return INVALID_VALUE;
    };
    if let Err(e) = gpu.sim.unmap(local, size as u64) {
        return error_code(&e);
    }
    // Unmapped but not yet released: still held, as on a GPU.
    gpu.unmapped += size as u64;
    for h in mapped {
        if let Some(p) = s.handles.get_mut(&h) {
            p.mapped_at = None;
        }
    }
    s.log("unmap", d, local, size as u64);
    SUCCESS
}

/// `cuMemSetAccess`.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemSetAccess(
    _ptr: u64,
    _size: usize,
    _desc: *const c_void,
    _count: usize,
) -> CuResult {
    SUCCESS
}
