//! `cudaGetDriverEntryPoint[ByVersion]`: how PyTorch 2.7+ finds the
//! driver functions. Every name resolves to this library's own function;
//! a name that is not faked at all resolves to a function that answers
//! "not supported" (said once on stderr), never to a null pointer.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

use crate::driver::*;
use crate::ffi::{CudaError, SUCCESS, c_str, put};
use crate::vmm::*;

/// The faked driver function called `name`.
fn faked(name: &[u8]) -> Option<*const c_void> {
    let f: *const c_void = match name {
        b"cuInit" => cuInit as *const c_void,
        b"cuDriverGetVersion" => cuDriverGetVersion as *const c_void,
        b"cuDeviceGetCount" => cuDeviceGetCount as *const c_void,
        b"cuDeviceGet" => cuDeviceGet as *const c_void,
        b"cuDeviceGetAttribute" => cuDeviceGetAttribute as *const c_void,
        b"cuDeviceGetName" => cuDeviceGetName as *const c_void,
        b"cuDeviceTotalMem" | b"cuDeviceTotalMem_v2" => cuDeviceTotalMem_v2 as *const c_void,
        b"cuDeviceGetUuid" => cuDeviceGetUuid as *const c_void,
        b"cuDeviceGetUuid_v2" => cuDeviceGetUuid_v2 as *const c_void,
        b"cuCtxGetCurrent" => cuCtxGetCurrent as *const c_void,
        b"cuCtxSetCurrent" => cuCtxSetCurrent as *const c_void,
        b"cuCtxPushCurrent" => cuCtxPushCurrent as *const c_void,
        b"cuCtxPushCurrent_v2" => cuCtxPushCurrent_v2 as *const c_void,
        b"cuCtxPopCurrent" => cuCtxPopCurrent as *const c_void,
        b"cuCtxPopCurrent_v2" => cuCtxPopCurrent_v2 as *const c_void,
        b"cuCtxGetDevice" => cuCtxGetDevice as *const c_void,
        b"cuCtxSynchronize" => cuCtxSynchronize as *const c_void,
        b"cuDevicePrimaryCtxGetState" => cuDevicePrimaryCtxGetState as *const c_void,
        b"cuDevicePrimaryCtxRetain" => cuDevicePrimaryCtxRetain as *const c_void,
        b"cuStreamGetCtx" => cuStreamGetCtx as *const c_void,
        b"cuStreamWriteValue32" => cuStreamWriteValue32 as *const c_void,
        b"cuMemsetD32Async" => cuMemsetD32Async as *const c_void,
        b"cuGetErrorString" => crate::errors::cuGetErrorString as *const c_void,
        b"cuGetErrorName" => crate::errors::cuGetErrorName as *const c_void,
        b"cuMemGetAllocationGranularity" => cuMemGetAllocationGranularity as *const c_void,
        b"cuMemAddressReserve" => cuMemAddressReserve as *const c_void,
        b"cuMemAddressFree" => cuMemAddressFree as *const c_void,
        b"cuMemCreate" => cuMemCreate as *const c_void,
        b"cuMemRelease" => cuMemRelease as *const c_void,
        b"cuMemMap" => cuMemMap as *const c_void,
        b"cuMemUnmap" => cuMemUnmap as *const c_void,
        b"cuMemSetAccess" => cuMemSetAccess as *const c_void,
        _ => return not_faked_entry(name),
    };
    Some(f)
}

/// The function for `name`; names nobody faked get one that says so.
fn lookup(name: &[u8]) -> *const c_void {
    faked(name).unwrap_or_else(|| {
        if !crate::state::config().quiet {
            eprintln!(
                "[vramlab-fakecuda] driver entry point {} is not faked: it returns 801 (not supported)",
                String::from_utf8_lossy(name)
            );
        }
        driver_not_supported as *const c_void
    })
}

/// `cudaGetDriverEntryPointByVersion`.
///
/// # Safety
/// `sym` is null or a NUL-terminated string; `f` and `status` are null or
/// valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaGetDriverEntryPointByVersion(
    sym: *const c_char,
    f: *mut *const c_void,
    _version: c_uint,
    _flags: c_ulonglong,
    status: *mut c_int,
) -> CudaError {
    // SAFETY: the caller passes a C string or null.
    let name = unsafe { c_str(sym) }.unwrap_or_default();
    // SAFETY: output parameters (caller's contract).
    unsafe {
        put(f, lookup(name));
        put(status, 0); // cudaDriverEntryPointSuccess
    }
    SUCCESS
}

/// `cudaGetDriverEntryPoint`.
///
/// # Safety
/// As [`cudaGetDriverEntryPointByVersion`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudaGetDriverEntryPoint(
    sym: *const c_char,
    f: *mut *const c_void,
    flags: c_ulonglong,
    status: *mut c_int,
) -> CudaError {
    // SAFETY: forwarded caller's contract.
    unsafe { cudaGetDriverEntryPointByVersion(sym, f, 0, flags, status) }
}
