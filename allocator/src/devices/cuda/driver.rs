//! Thin wrappers over the CUDA driver calls this module makes. Each
//! wrapper turns a `CUresult` into a [`DriverError`] and keeps its `unsafe`
//! block (with the reason it is sound) in one place.
//!
//! The driver library is loaded at run time by cudarc, which panics when a
//! library or a symbol is missing; [`super::probe`] checks both before any
//! wrapper here is called.

use std::ffi::c_int;

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUcontext, CUdevice, CUdeviceptr, CUmemGenericAllocationHandle};

pub(crate) use cudarc::driver::result::DriverError;

/// Every driver entry point the cuda module calls. The probe checks that
/// the loaded library exports each one, so that no call can panic later.
pub(crate) const SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuCtxSynchronize",
    "cuMemGetInfo_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemsetD8_v2",
    "cuMemGetAllocationGranularity",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemCreate",
    "cuMemMap",
    "cuMemSetAccess",
    "cuMemUnmap",
    "cuMemRelease",
    "cuGetErrorName",
    "cuGetErrorString",
];

/// `true` if the CUDA driver library can be loaded.
pub(crate) fn library_present() -> bool {
    // SAFETY: `is_culib_present` only tries `dlopen` on the candidate names
    // and closes what it opened; it runs no library code besides the
    // library's initialisers, which the driver library supports.
    unsafe { sys::is_culib_present() }
}

/// The first entry point of [`SYMBOLS`] the loaded library lacks.
///
/// Must only be called after [`library_present`] returned `true`
/// (otherwise cudarc panics).
pub(crate) fn first_missing_symbol() -> Option<&'static str> {
    // SAFETY: the caller checked that the library loads, so `culib` returns
    // it instead of panicking; looking a symbol up as an opaque pointer
    // neither calls nor dereferences it.
    let lib = unsafe { sys::culib() };
    SYMBOLS.iter().copied().find(|name| {
        // SAFETY: see above: the symbol is only looked up, never used.
        unsafe { lib.get::<*const ()>(name.as_bytes()) }.is_err()
    })
}

/// `cuInit(0)`.
pub(crate) fn init() -> Result<(), DriverError> {
    result::init()
}

/// `cuDriverGetVersion` (e.g. 12080 for 12.8).
pub(crate) fn driver_version() -> Result<i32, DriverError> {
    let mut v: c_int = 0;
    // SAFETY: `v` is a valid, writable c_int for the duration of the call.
    unsafe { sys::cuDriverGetVersion(&mut v) }.result()?;
    Ok(v)
}

/// `cuDeviceGetCount`.
pub(crate) fn device_count() -> Result<i32, DriverError> {
    result::device::get_count()
}

/// `cuDeviceGet`.
pub(crate) fn device_get(ordinal: i32) -> Result<CUdevice, DriverError> {
    result::device::get(ordinal)
}

/// `cuDeviceGetName`.
pub(crate) fn device_name(dev: CUdevice) -> Result<String, DriverError> {
    result::device::get_name(dev)
}

/// `cuDeviceTotalMem`.
pub(crate) fn device_total_mem(dev: CUdevice) -> Result<u64, DriverError> {
    // SAFETY: `dev` was returned by `cuDeviceGet`.
    let n = unsafe { result::device::total_mem(dev) }?;
    Ok(n as u64)
}

/// `cuDevicePrimaryCtxRetain`.
pub(crate) fn primary_ctx_retain(dev: CUdevice) -> Result<CUcontext, DriverError> {
    // SAFETY: `dev` was returned by `cuDeviceGet`; the context is released
    // exactly once, by `primary_ctx_release` in `Gpu`'s `Drop`.
    unsafe { result::primary_ctx::retain(dev) }
}

/// `cuDevicePrimaryCtxRelease`.
pub(crate) fn primary_ctx_release(dev: CUdevice) -> Result<(), DriverError> {
    // SAFETY: `dev` was returned by `cuDeviceGet` and its primary context
    // was retained by `primary_ctx_retain` and not yet released.
    unsafe { result::primary_ctx::release(dev) }
}

/// `cuCtxSetCurrent`.
pub(crate) fn ctx_set_current(ctx: CUcontext) -> Result<(), DriverError> {
    // SAFETY: `ctx` is a primary context retained by the `Gpu` that passes
    // it and stays retained while that `Gpu` exists.
    unsafe { result::ctx::set_current(ctx) }
}

/// `cuCtxSynchronize` of the current context.
pub(crate) fn ctx_synchronize() -> Result<(), DriverError> {
    result::ctx::synchronize()
}

/// `cuMemGetInfo`: `(free, total)` of the current context's device.
pub(crate) fn mem_get_info() -> Result<(u64, u64), DriverError> {
    let (free, total) = result::mem_get_info()?;
    Ok((free as u64, total as u64))
}

/// `cuMemAlloc`.
pub(crate) fn mem_alloc(size: u64) -> Result<CUdeviceptr, DriverError> {
    // SAFETY: allocating device memory has no precondition besides a
    // current context, which every caller sets first; the pointer is freed
    // by `mem_free` exactly once.
    unsafe { result::malloc_sync(size as usize) }
}

/// `cuMemFree`.
pub(crate) fn mem_free(ptr: CUdeviceptr) -> Result<(), DriverError> {
    // SAFETY: `ptr` came from `mem_alloc` and is freed once (the device
    // removes it from its segment table first); no host reference into
    // device memory exists.
    unsafe { result::free_sync(ptr) }
}

/// `cuMemsetD8(ptr, value, n)`.
pub(crate) fn memset_d8(ptr: CUdeviceptr, value: u8, n: u64) -> Result<(), DriverError> {
    // SAFETY: the caller passes a range it just allocated or mapped with
    // read-write access; nothing else uses that memory.
    unsafe { result::memset_d8_sync(ptr, value, n as usize) }
}

/// The allocation properties of pinned device memory on `ordinal`.
fn device_prop(ordinal: i32) -> sys::CUmemAllocationProp {
    sys::CUmemAllocationProp {
        type_: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        requestedHandleTypes: sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
        location: device_location(ordinal),
        win32HandleMetaData: std::ptr::null_mut(),
        allocFlags: sys::CUmemAllocationProp_st__bindgen_ty_1 {
            compressionType: 0,
            gpuDirectRDMACapable: 0,
            usage: 0,
            reserved: [0; 4],
        },
    }
}

fn device_location(ordinal: i32) -> sys::CUmemLocation {
    sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: ordinal,
    }
}

/// `cuMemGetAllocationGranularity` (minimum) for pinned memory on `ordinal`.
pub(crate) fn allocation_granularity(ordinal: i32) -> Result<u64, DriverError> {
    let prop = device_prop(ordinal);
    let mut g: usize = 0;
    // SAFETY: `g` and `prop` are valid for the call; the driver only reads
    // `prop` and writes `g`.
    unsafe {
        sys::cuMemGetAllocationGranularity(
            &mut g,
            &prop,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
        )
    }
    .result()?;
    Ok(g as u64)
}

/// `cuMemAddressReserve(size, alignment)` anywhere.
pub(crate) fn address_reserve(size: u64, alignment: u64) -> Result<CUdeviceptr, DriverError> {
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: `ptr` is valid for writing; reserving virtual addresses maps
    // nothing, and the range is freed once by `address_free`.
    unsafe { sys::cuMemAddressReserve(&mut ptr, size as usize, alignment as usize, 0, 0) }
        .result()?;
    Ok(ptr)
}

/// `cuMemAddressFree`.
pub(crate) fn address_free(ptr: CUdeviceptr, size: u64) -> Result<(), DriverError> {
    // SAFETY: `[ptr, ptr+size)` is a range from `address_reserve` with no
    // page mapped in it (the device checks both before calling).
    unsafe { sys::cuMemAddressFree(ptr, size as usize) }.result()
}

/// `cuMemCreate` of `size` bytes of pinned memory on `ordinal`.
pub(crate) fn mem_create(
    size: u64,
    ordinal: i32,
) -> Result<CUmemGenericAllocationHandle, DriverError> {
    let prop = device_prop(ordinal);
    let mut h: CUmemGenericAllocationHandle = 0;
    // SAFETY: `h` is valid for writing and `prop` for reading; the handle
    // is released once by `mem_release`.
    unsafe { sys::cuMemCreate(&mut h, size as usize, &prop, 0) }.result()?;
    Ok(h)
}

/// `cuMemRelease`.
pub(crate) fn mem_release(h: CUmemGenericAllocationHandle) -> Result<(), DriverError> {
    // SAFETY: `h` came from `mem_create`, is released once, and is no
    // longer mapped (the device unmaps before releasing).
    unsafe { sys::cuMemRelease(h) }.result()
}

/// `cuMemMap(ptr, size, 0, handle)`.
pub(crate) fn mem_map(
    ptr: CUdeviceptr,
    size: u64,
    h: CUmemGenericAllocationHandle,
) -> Result<(), DriverError> {
    // SAFETY: `[ptr, ptr+size)` lies in a reserved range where nothing is
    // mapped (the device checks) and `h` is a live handle of `size` bytes.
    unsafe { sys::cuMemMap(ptr, size as usize, 0, h, 0) }.result()
}

/// `cuMemUnmap`.
pub(crate) fn mem_unmap(ptr: CUdeviceptr, size: u64) -> Result<(), DriverError> {
    // SAFETY: `[ptr, ptr+size)` is exactly one mapping made by `mem_map`;
    // no host reference into it exists.
    unsafe { sys::cuMemUnmap(ptr, size as usize) }.result()
}

/// `cuMemSetAccess`: read-write for `ordinal` on `[ptr, ptr+size)`.
pub(crate) fn mem_set_access(ptr: CUdeviceptr, size: u64, ordinal: i32) -> Result<(), DriverError> {
    let desc = sys::CUmemAccessDesc {
        location: device_location(ordinal),
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: `desc` is valid for reading for the call; the range is mapped.
    unsafe { sys::cuMemSetAccess(ptr, size as usize, &desc, 1) }.result()
}

/// `true` for `CUDA_ERROR_OUT_OF_MEMORY`.
pub(crate) fn is_oom(e: &DriverError) -> bool {
    e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY
}

/// `CUDA_ERROR_OUT_OF_MEMORY (out of memory)`: the error's name and the
/// driver's description.
pub(crate) fn describe(e: &DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name} ({})", s.to_string_lossy()),
        Err(_) => name,
    }
}
