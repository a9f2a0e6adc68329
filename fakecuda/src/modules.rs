//! Code objects and kernels: modules (`cuModule*`), libraries
//! (`cuLibrary*`), kernels and functions, their attributes, occupancy and
//! launches. Nothing is loaded or run: every module, library, kernel and
//! function is a distinct handle, so that the libraries that keep them
//! (the static runtime of cuBLAS and cuDNN, Triton's launchers) find what
//! they were given; launches succeed and do nothing.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::ffi::{CuResult, INVALID_VALUE, SUCCESS, c_str, put};

/// Handles are addresses of nothing: multiples of 16 from here on.
static NEXT_HANDLE: AtomicUsize = AtomicUsize::new(0x7f00_0000_0000);

fn new_handle() -> *mut c_void {
    NEXT_HANDLE.fetch_add(16, Ordering::Relaxed) as *mut c_void
}

/// What the handles stand for.
#[derive(Default)]
struct Registry {
    /// (module or library, name) → function or kernel.
    named: HashMap<(usize, Vec<u8>), usize>,
    /// function or kernel → the module or library it came from.
    owner: HashMap<usize, usize>,
    /// (function or kernel, attribute) → a value set by the caller.
    attributes: HashMap<(usize, c_int), c_int>,
    /// Context limits set by the caller (`cuCtxSetLimit`).
    limits: HashMap<c_int, usize>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut r = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    f(r.get_or_insert_with(Registry::default))
}

/// A new module into `out`.
pub(crate) fn new_module(out: *mut *mut c_void) -> CuResult {
    if out.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: checked not null; the caller's output parameter.
    unsafe { put(out, new_handle()) };
    SUCCESS
}

/// The function or kernel called `name` in `owner`, the same handle each time.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
unsafe fn named(out: *mut *mut c_void, owner: *mut c_void, name: *const c_char) -> CuResult {
    // SAFETY: forwarded caller's contract.
    let Some(name) = (unsafe { c_str(name) }) else {
        return INVALID_VALUE;
    };
    if out.is_null() || owner.is_null() {
        return INVALID_VALUE;
    }
    let h = with(|r| {
        let h = *r
            .named
            .entry((owner as usize, name.to_vec()))
            .or_insert_with(|| new_handle() as usize);
        r.owner.insert(h, owner as usize);
        h
    });
    // SAFETY: checked not null; the caller's output parameter.
    unsafe { put(out, h as *mut c_void) };
    SUCCESS
}

/// `cuModuleLoad`.
#[unsafe(no_mangle)]
pub extern "C" fn cuModuleLoad(module: *mut *mut c_void, _path: *const c_char) -> CuResult {
    new_module(module)
}

/// `cuModuleLoadData`.
#[unsafe(no_mangle)]
pub extern "C" fn cuModuleLoadData(module: *mut *mut c_void, _image: *const c_void) -> CuResult {
    new_module(module)
}

/// `cuModuleLoadDataEx`: JIT options are not read.
#[unsafe(no_mangle)]
pub extern "C" fn cuModuleLoadDataEx(
    module: *mut *mut c_void,
    _image: *const c_void,
    _n: c_uint,
    _options: *mut c_int,
    _values: *mut *mut c_void,
) -> CuResult {
    new_module(module)
}

/// `cuModuleLoadFatBinary`.
#[unsafe(no_mangle)]
pub extern "C" fn cuModuleLoadFatBinary(
    module: *mut *mut c_void,
    _fatbin: *const c_void,
) -> CuResult {
    new_module(module)
}

/// `cuModuleUnload`: handles are never reused, so nothing to forget.
#[unsafe(no_mangle)]
pub extern "C" fn cuModuleUnload(_module: *mut c_void) -> CuResult {
    SUCCESS
}

/// `cuModuleGetLoadingMode`: lazy, the default since CUDA 12.2.
///
/// # Safety
/// `mode` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleGetLoadingMode(mode: *mut c_int) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(mode, 2) }; // CU_MODULE_LAZY_LOADING
    SUCCESS
}

/// `cuModuleGetFunction`.
///
/// # Safety
/// `name` is null or a NUL-terminated string; `f` null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleGetFunction(
    f: *mut *mut c_void,
    module: *mut c_void,
    name: *const c_char,
) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { named(f, module, name) }
}

/// `cuLibraryLoadData`: options are not read.
#[unsafe(no_mangle)]
pub extern "C" fn cuLibraryLoadData(
    library: *mut *mut c_void,
    _code: *const c_void,
    _jit_options: *mut c_int,
    _jit_values: *mut *mut c_void,
    _n_jit: c_uint,
    _options: *mut c_int,
    _values: *mut *mut c_void,
    _n: c_uint,
) -> CuResult {
    new_module(library)
}

/// `cuLibraryLoadFromFile`.
#[unsafe(no_mangle)]
pub extern "C" fn cuLibraryLoadFromFile(
    library: *mut *mut c_void,
    _path: *const c_char,
    _jit_options: *mut c_int,
    _jit_values: *mut *mut c_void,
    _n_jit: c_uint,
    _options: *mut c_int,
    _values: *mut *mut c_void,
    _n: c_uint,
) -> CuResult {
    new_module(library)
}

/// `cuLibraryUnload`.
#[unsafe(no_mangle)]
pub extern "C" fn cuLibraryUnload(_library: *mut c_void) -> CuResult {
    SUCCESS
}

/// `cuLibraryGetKernel`.
///
/// # Safety
/// As [`cuModuleGetFunction`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLibraryGetKernel(
    k: *mut *mut c_void,
    library: *mut c_void,
    name: *const c_char,
) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { named(k, library, name) }
}

/// `cuLibraryGetModule`: the library is its own module.
///
/// # Safety
/// `module` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLibraryGetModule(
    module: *mut *mut c_void,
    library: *mut c_void,
) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(module, library) };
    SUCCESS
}

/// `cuKernelGetFunction`: a kernel is its own function.
///
/// # Safety
/// `f` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuKernelGetFunction(f: *mut *mut c_void, kernel: *mut c_void) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(f, kernel) };
    SUCCESS
}

/// `cuFuncGetModule`.
///
/// # Safety
/// `module` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncGetModule(module: *mut *mut c_void, f: *mut c_void) -> CuResult {
    let owner = with(|r| r.owner.get(&(f as usize)).copied());
    // SAFETY: output parameter (caller's contract).
    unsafe { put(module, owner.unwrap_or(0) as *mut c_void) };
    SUCCESS
}

/// A function attribute: what the caller set, else what a kernel without
/// a cubin to read reports (`CUfunction_attribute` numbering).
fn function_attribute(f: *mut c_void, attr: c_int) -> c_int {
    if let Some(v) = with(|r| r.attributes.get(&(f as usize, attr)).copied()) {
        return v;
    }
    match attr {
        0 => 1024, // max threads per block
        4 => 32,   // registers per thread
        5 | 6 => crate::cards::card().major * 10 + crate::cards::card().minor, // PTX and binary version
        9 => -1, // preferred shared-memory carveout: none
        _ => 0,  // static shared, constant, local memory; max dynamic shared memory; …
    }
}

/// `cuFuncGetAttribute`.
///
/// # Safety
/// `v` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncGetAttribute(
    v: *mut c_int,
    attr: c_int,
    f: *mut c_void,
) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(v, function_attribute(f, attr)) };
    SUCCESS
}

/// `cuFuncSetAttribute`.
#[unsafe(no_mangle)]
pub extern "C" fn cuFuncSetAttribute(f: *mut c_void, attr: c_int, v: c_int) -> CuResult {
    with(|r| r.attributes.insert((f as usize, attr), v));
    SUCCESS
}

/// `cuKernelGetAttribute`.
///
/// # Safety
/// `v` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuKernelGetAttribute(
    v: *mut c_int,
    attr: c_int,
    k: *mut c_void,
    _d: c_int,
) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { cuFuncGetAttribute(v, attr, k) }
}

/// `cuKernelSetAttribute`.
#[unsafe(no_mangle)]
pub extern "C" fn cuKernelSetAttribute(
    attr: c_int,
    v: c_int,
    k: *mut c_void,
    _d: c_int,
) -> CuResult {
    cuFuncSetAttribute(k, attr, v)
}

/// `cuFuncSetCacheConfig`.
#[unsafe(no_mangle)]
pub extern "C" fn cuFuncSetCacheConfig(_f: *mut c_void, _config: c_int) -> CuResult {
    SUCCESS
}

/// `cuKernelSetCacheConfig`.
#[unsafe(no_mangle)]
pub extern "C" fn cuKernelSetCacheConfig(_k: *mut c_void, _config: c_int, _d: c_int) -> CuResult {
    SUCCESS
}

/// `cuLaunchKernel`: nothing runs.
#[unsafe(no_mangle)]
pub extern "C" fn cuLaunchKernel(
    _f: *mut c_void,
    _gx: c_uint,
    _gy: c_uint,
    _gz: c_uint,
    _bx: c_uint,
    _by: c_uint,
    _bz: c_uint,
    _shared: c_uint,
    stream: *mut c_void,
    _params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CuResult {
    crate::streams::note_work(stream);
    SUCCESS
}

/// `cuLaunchKernelEx`: nothing runs.
///
/// # Safety
/// `config` is null or points to a `CUlaunchConfig`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLaunchKernelEx(
    config: *const LaunchConfig,
    _f: *mut c_void,
    _params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CuResult {
    // SAFETY: null or a readable CUlaunchConfig (caller's contract).
    if let Some(c) = unsafe { config.as_ref() } {
        crate::streams::note_work(c.stream);
    }
    SUCCESS
}

/// `cuLaunchCooperativeKernel`: nothing runs.
#[unsafe(no_mangle)]
pub extern "C" fn cuLaunchCooperativeKernel(
    _f: *mut c_void,
    _gx: c_uint,
    _gy: c_uint,
    _gz: c_uint,
    _bx: c_uint,
    _by: c_uint,
    _bz: c_uint,
    _shared: c_uint,
    _stream: *mut c_void,
    _params: *mut *mut c_void,
) -> CuResult {
    SUCCESS
}

/// Blocks of `block` threads that fit on one SM (threads only: registers
/// and shared memory are not known without the cubin).
fn blocks_per_sm(block: c_int) -> c_int {
    if block <= 0 {
        0
    } else {
        (2048 / block).clamp(0, 32)
    }
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessor`.
///
/// # Safety
/// `n` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuOccupancyMaxActiveBlocksPerMultiprocessor(
    n: *mut c_int,
    _f: *mut c_void,
    block: c_int,
    _shared: usize,
) -> CuResult {
    // SAFETY: output parameter (caller's contract).
    unsafe { put(n, blocks_per_sm(block)) };
    SUCCESS
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`.
///
/// # Safety
/// As [`cuOccupancyMaxActiveBlocksPerMultiprocessor`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    n: *mut c_int,
    f: *mut c_void,
    block: c_int,
    shared: usize,
    _flags: c_uint,
) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { cuOccupancyMaxActiveBlocksPerMultiprocessor(n, f, block, shared) }
}

/// `cuOccupancyMaxPotentialBlockSize`: full blocks of 1024 threads.
///
/// # Safety
/// Both outputs are null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuOccupancyMaxPotentialBlockSize(
    grid: *mut c_int,
    block: *mut c_int,
    _f: *mut c_void,
    _shared_of: *const c_void,
    _shared: usize,
    limit: c_int,
) -> CuResult {
    let b = if limit > 0 { limit.min(1024) } else { 1024 };
    // SAFETY: output parameters (caller's contract).
    unsafe {
        put(block, b);
        put(grid, blocks_per_sm(b) * crate::cards::card().sm_count);
    }
    SUCCESS
}

/// `cuCtxSetLimit`.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSetLimit(limit: c_int, value: usize) -> CuResult {
    with(|r| r.limits.insert(limit, value));
    SUCCESS
}

/// `cuCtxGetLimit`: what was set, else the driver's defaults
/// (`CUlimit` numbering).
///
/// # Safety
/// `v` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetLimit(v: *mut usize, limit: c_int) -> CuResult {
    let set = with(|r| r.limits.get(&limit).copied());
    let value = set.unwrap_or(match limit {
        0 => 1024,    // stack size
        1 => 1 << 20, // printf FIFO
        2 => 8 << 20, // malloc heap
        3 => 2,       // device-runtime sync depth
        4 => 2048,    // pending launches
        5 => 32,      // max L2 fetch granularity
        _ => 0,
    });
    // SAFETY: output parameter (caller's contract).
    unsafe { put(v, value) };
    SUCCESS
}

/// `cuOccupancyAvailableDynamicSMemPerBlock`: the multiprocessor's shared
/// memory shared by `blocks` blocks, less the 1 KiB the driver reserves
/// per block, at most the per-block opt-in limit.
///
/// # Safety
/// `bytes` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuOccupancyAvailableDynamicSMemPerBlock(
    bytes: *mut usize,
    _f: *mut c_void,
    blocks: c_int,
    _block: c_int,
) -> CuResult {
    let per_sm = crate::runtime_device::attribute(81, 0).max(0) as usize;
    let opt_in = crate::runtime_device::attribute(97, 0).max(0) as usize;
    let n = blocks.max(1) as usize;
    // SAFETY: output parameter (caller's contract).
    unsafe { put(bytes, (per_sm / n).saturating_sub(1024).min(opt_in)) };
    SUCCESS
}

/// `CUlaunchConfig`'s head: what a cluster query reads.
#[repr(C)]
pub struct LaunchConfig {
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared: c_uint,
    stream: *mut c_void,
    attrs: *const LaunchAttribute,
    num_attrs: c_uint,
}

/// `CUlaunchAttribute`: an id and a 64-byte value.
#[repr(C)]
pub struct LaunchAttribute {
    id: c_uint,
    _pad: c_uint,
    value: [c_uint; 16],
}

/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`.
const CLUSTER_DIMENSION: c_uint = 4;

/// `cuOccupancyMaxActiveClusters`: one cluster per its size in
/// multiprocessors (a model: the real answer also depends on how the
/// card's multiprocessors are grouped).
///
/// # Safety
/// `n` is null or valid for a write; `config` is null or a valid
/// `CUlaunchConfig` whose `attrs` holds `numAttrs` attributes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuOccupancyMaxActiveClusters(
    n: *mut c_int,
    _f: *mut c_void,
    config: *const LaunchConfig,
) -> CuResult {
    if config.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: a valid launch configuration (caller's contract).
    let c = unsafe { &*config };
    let attrs: &[LaunchAttribute] = if c.attrs.is_null() {
        &[]
    } else {
        // SAFETY: `num_attrs` attributes at `attrs` (caller's contract).
        unsafe { std::slice::from_raw_parts(c.attrs, c.num_attrs as usize) }
    };
    let size: c_uint = attrs
        .iter()
        .find(|a| a.id == CLUSTER_DIMENSION)
        .map_or(1, |a| a.value.iter().take(3).map(|v| (*v).max(1)).product());
    // SAFETY: output parameter (caller's contract).
    unsafe { put(n, crate::cards::card().sm_count / size.max(1) as c_int) };
    SUCCESS
}

/// Device addresses of module globals: above every device's range, 1 MiB
/// apart (nothing reads or writes them).
static NEXT_GLOBAL: AtomicUsize = AtomicUsize::new(0x00f0_0000_0000_0000);

/// The global `name` of a module or library: a distinct address each
/// time a name is first asked for, the same one after.
///
/// # Safety
/// `name` is null or a NUL-terminated string; the outputs are null or
/// valid for a write.
unsafe fn global(
    ptr: *mut u64,
    bytes: *mut usize,
    owner: *mut c_void,
    name: *const c_char,
) -> CuResult {
    // SAFETY: forwarded caller's contract.
    let Some(name) = (unsafe { c_str(name) }) else {
        return INVALID_VALUE;
    };
    let mut key = b"global:".to_vec();
    key.extend_from_slice(name);
    let addr = with(|r| {
        *r.named
            .entry((owner as usize, key))
            .or_insert_with(|| NEXT_GLOBAL.fetch_add(1 << 20, Ordering::Relaxed))
    });
    // SAFETY: output parameters (caller's contract).
    unsafe {
        put(ptr, addr as u64);
        put(bytes, 8);
    }
    SUCCESS
}

/// `cuLibraryGetGlobal`.
///
/// # Safety
/// As [`global`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLibraryGetGlobal(
    ptr: *mut u64,
    bytes: *mut usize,
    library: *mut c_void,
    name: *const c_char,
) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { global(ptr, bytes, library, name) }
}

/// `cuModuleGetGlobal_v2`.
///
/// # Safety
/// As [`global`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleGetGlobal_v2(
    ptr: *mut u64,
    bytes: *mut usize,
    module: *mut c_void,
    name: *const c_char,
) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { global(ptr, bytes, module, name) }
}
