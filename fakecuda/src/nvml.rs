//! NVML, as much as expandable segments need: PyTorch asks whether the GPU
//! is on an NVLink fabric (`get_fabric_access`: `nvmlInit_v2`, then
//! `nvmlDeviceGetHandleByPciBusId_v2`) and calls a null pointer when NVML
//! is missing. The answer is "no fabric" (a null device handle), as for a
//! single H200 without NVSwitch.

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::ffi::put;
use crate::state::config;

/// `NVML_SUCCESS`.
const OK: c_int = 0;
/// `NVML_ERROR_NOT_SUPPORTED`.
const NOT_SUPPORTED: c_int = 3;

/// `nvmlInit_v2`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> c_int {
    OK
}

/// `nvmlInit`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> c_int {
    OK
}

/// `nvmlInitWithFlags`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_f: c_uint) -> c_int {
    OK
}

/// `nvmlShutdown`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> c_int {
    OK
}

/// `nvmlErrorString`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(r: c_int) -> *const c_char {
    if r == OK {
        c"success".as_ptr()
    } else {
        c"not supported (vramlab-fakecuda)".as_ptr()
    }
}

/// `nvmlDeviceGetCount_v2`.
///
/// # Safety
/// `n` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(n: *mut c_uint) -> c_int {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(n, config().devices) };
    OK
}

/// `nvmlDeviceGetCount`.
///
/// # Safety
/// As [`nvmlDeviceGetCount_v2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount(n: *mut c_uint) -> c_int {
    // SAFETY: forwarded caller's contract.
    unsafe { nvmlDeviceGetCount_v2(n) }
}

/// `nvmlSystemGetCudaDriverVersion_v2`.
///
/// # Safety
/// `v` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(v: *mut c_int) -> c_int {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(v, config().runtime_version.max(13000)) };
    OK
}

/// `nvmlSystemGetCudaDriverVersion`.
///
/// # Safety
/// As [`nvmlSystemGetCudaDriverVersion_v2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(v: *mut c_int) -> c_int {
    // SAFETY: forwarded caller's contract.
    unsafe { nvmlSystemGetCudaDriverVersion_v2(v) }
}

/// `nvmlDeviceGetHandleByPciBusId_v2`: a null handle ("no NVML device").
///
/// # Safety
/// `dev` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    _pci: *const c_char,
    dev: *mut *mut c_void,
) -> c_int {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(dev, std::ptr::null_mut()) };
    OK
}

/// `nvmlDeviceGetComputeRunningProcesses`: none.
///
/// # Safety
/// `n` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses(
    _d: *mut c_void,
    n: *mut c_uint,
    _p: *mut c_void,
) -> c_int {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(n, 0) };
    OK
}

macro_rules! nvml_not_supported {
    ($($name:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: not supported.")]
            #[unsafe(no_mangle)]
            pub extern "C" fn $name() -> c_int {
                NOT_SUPPORTED
            }
        )*
    };
}

nvml_not_supported!(
    nvmlDeviceGetHandleByIndex_v2,
    nvmlDeviceGetGpuFabricInfoV,
    nvmlDeviceGetNvLinkRemoteDeviceType,
    nvmlDeviceGetNvLinkRemotePciInfo_v2,
    nvmlDeviceGetUUID,
    nvmlDeviceGetMemoryInfo,
);
