//! `cuGetExportTable`: the driver's private interfaces, tables of function
//! pointers named by a UUID, which the CUDA runtime statically linked into
//! NVIDIA's libraries (cuBLAS, cuDNN, …) asks for when it starts. Their
//! layouts are not documented; what is answered here is what the runtime
//! was observed to ask and to accept (the same facts ZLUDA and others
//! recorded): the first slot of most tables is the table's size in bytes.
//!
//! | table | UUID | answered with |
//! |---|---|---|
//! | runtime interface | `6bd5fb6c-…` | modules from fatbins, the primary context |
//! | tools callback hooks | `a094798c-…` | two buffers the runtime writes into |
//! | tools TLS | `42d85a81-…` | the thread's current context |
//! | context-local storage | `c693336e-…` | a key–value store per context |
//! | context identity | `21318c60-…` | a context's device and id (as `cuCtxGetId`) |
//! | context checks | `263e8860-…` | "nothing to report" |
//! | integrity check | `d4082055-…` | the runtime's HMAC-MD2 over the process, its tables and the devices |
//! | cuBLASLt's | `1734dc26-…` | slot 4 declined: cuBLASLt then picks its algorithms itself |
//! | tools function | `6e163fbe-…` | nothing yet: every slot says its number once and answers 801. cuFFT's plans call slot 7, which walks the kernels of a loaded module; answering it needs the module's functions, read from its fatbin, which the fake does not parse yet, so `torch.fft` on the fake GPU stops with `CUFFT_INTERNAL_ERROR` |
//!
//! Any other table is "not found", as a driver without it answers. Two are
//! asked for and done without on every run (`f8cff951-…` by the runtime
//! first, `da9151d3-…` by cuBLASLt), and three slots are called and
//! declined with "not supported" on every run, after which the caller takes
//! its own path (tools hooks 1 and 4, `1734dc26-…` 4): these are said
//! nowhere; any other unanswered table or slot is said once on stderr.

use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::Mutex;

use hmac::{Hmac, Mac};

use crate::ffi::{CuResult, INVALID_VALUE, SUCCESS, put};

/// `CUDA_ERROR_NOT_FOUND`.
const NOT_FOUND: CuResult = 500;
/// `CUDA_ERROR_INVALID_HANDLE`.
const INVALID_HANDLE: CuResult = 400;

/// One slot of a table: a function, a size, or nothing.
#[repr(transparent)]
struct Slot(*const c_void);

// SAFETY: the slots are written once, at compile time, and only read.
unsafe impl Sync for Slot {}

/// The first slot of a table of `n` slots: its size in bytes.
const fn size_of_table(n: usize) -> Slot {
    Slot((n * std::mem::size_of::<usize>()) as *const c_void)
}

/// A slot nobody was seen calling: it says which, once, and answers "not
/// supported", rather than being a null pointer to crash on.
macro_rules! unanswered {
    ($name:ident, $what:literal) => {{
        extern "C" fn $name() -> CuResult {
            crate::errors::driver_not_faked($what)
        }
        Slot($name as *const c_void)
    }};
}

/// A slot seen called on every run and declined ("not supported", 801),
/// after which its caller goes its own way: nothing is said.
macro_rules! declined {
    ($name:ident) => {{
        extern "C" fn $name() -> CuResult {
            crate::ffi::NOT_SUPPORTED
        }
        Slot($name as *const c_void)
    }};
}

static RUNTIME_INTERFACE: [Slot; 13] = [
    size_of_table(13),
    Slot(module_from_fatbin as *const c_void),
    Slot(primary_context as *const c_void),
    unanswered!(runtime_slot_3, "export table runtime slot 3"),
    unanswered!(runtime_slot_4, "export table runtime slot 4"),
    unanswered!(runtime_slot_5, "export table runtime slot 5"),
    Slot(module_from_fatbin_ext as *const c_void),
    Slot(runtime_note as *const c_void),
    Slot(module_from_fatbin_header as *const c_void),
    unanswered!(runtime_slot_9, "export table runtime slot 9"),
    unanswered!(runtime_slot_10, "export table runtime slot 10"),
    unanswered!(runtime_slot_11, "export table runtime slot 11"),
    Slot(load_compilers as *const c_void),
];

static TOOLS_HOOKS: [Slot; 7] = [
    size_of_table(7),
    declined!(hooks_slot_1),
    Slot(tools_buffer_large as *const c_void),
    unanswered!(hooks_slot_3, "export table hooks slot 3"),
    declined!(hooks_slot_4),
    unanswered!(hooks_slot_5, "export table hooks slot 5"),
    Slot(tools_buffer_small as *const c_void),
];

static TOOLS_TLS: [Slot; 4] = [
    size_of_table(4),
    unanswered!(tls_slot_1, "export table tls slot 1"),
    Slot(current_context as *const c_void),
    unanswered!(tls_slot_3, "export table tls slot 3"),
];

static CONTEXT_IDENTITY: [Slot; 5] = [
    size_of_table(5),
    unanswered!(identity_slot_1, "export table identity slot 1"),
    unanswered!(identity_slot_2, "export table identity slot 2"),
    Slot(context_device as *const c_void),
    Slot(crate::driver_streams::cuCtxGetId as *const c_void),
];

static CONTEXT_STORAGE: [Slot; 4] = [
    Slot(storage_put as *const c_void),
    Slot(storage_delete as *const c_void),
    Slot(storage_get as *const c_void),
    unanswered!(storage_slot_3, "export table storage slot 3"),
];

static CONTEXT_CHECKS: [Slot; 4] = [
    size_of_table(4),
    unanswered!(checks_slot_1, "export table checks slot 1"),
    Slot(context_check as *const c_void),
    Slot(context_check_count as *const c_void),
];

static INTEGRITY: [Slot; 3] = [
    size_of_table(3),
    Slot(integrity_check as *const c_void),
    unanswered!(integrity_slot_2, "export table integrity slot 2"),
];

/// A table cuBLASLt asks for (`1734dc26-…`) and calls slot 4 of while it
/// picks matmul algorithms; "not supported" there sends it down the path it
/// takes on its own.
static LT_CACHE: [Slot; 8] = [
    size_of_table(8),
    unanswered!(lt_slot_1, "export table 1734dc26 slot 1"),
    unanswered!(lt_slot_2, "export table 1734dc26 slot 2"),
    unanswered!(lt_slot_3, "export table 1734dc26 slot 3"),
    declined!(lt_slot_4),
    unanswered!(lt_slot_5, "export table 1734dc26 slot 5"),
    unanswered!(lt_slot_6, "export table 1734dc26 slot 6"),
    unanswered!(lt_slot_7, "export table 1734dc26 slot 7"),
];

/// Slot `N` of the tools' function table, unanswered: says so once, 801.
extern "C" fn function_slot<const N: usize>() -> CuResult {
    static SEEN: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.contains(&N) {
        seen.push(N);
        if !crate::state::config().quiet {
            eprintln!(
                "[vramlab-fakecuda] export table 6e163fbe slot {N} is not faked: it returns 801 (not supported)"
            );
        }
    }
    crate::ffi::NOT_SUPPORTED
}

/// The tools' function table (`6e163fbe-…`: a function's name, arguments,
/// cache configuration; what cuFFT asks for).
static TOOLS_FUNCTION: [Slot; 64] = [
    size_of_table(64),
    Slot(function_slot::<1> as *const c_void),
    Slot(function_slot::<2> as *const c_void),
    Slot(function_slot::<3> as *const c_void),
    Slot(function_slot::<4> as *const c_void),
    Slot(function_slot::<5> as *const c_void),
    Slot(function_slot::<6> as *const c_void),
    Slot(function_slot::<7> as *const c_void),
    Slot(function_slot::<8> as *const c_void),
    Slot(function_slot::<9> as *const c_void),
    Slot(function_slot::<10> as *const c_void),
    Slot(function_slot::<11> as *const c_void),
    Slot(function_slot::<12> as *const c_void),
    Slot(function_slot::<13> as *const c_void),
    Slot(function_slot::<14> as *const c_void),
    Slot(function_slot::<15> as *const c_void),
    Slot(function_slot::<16> as *const c_void),
    Slot(function_slot::<17> as *const c_void),
    Slot(function_slot::<18> as *const c_void),
    Slot(function_slot::<19> as *const c_void),
    Slot(function_slot::<20> as *const c_void),
    Slot(function_slot::<21> as *const c_void),
    Slot(function_slot::<22> as *const c_void),
    Slot(function_slot::<23> as *const c_void),
    Slot(function_slot::<24> as *const c_void),
    Slot(function_slot::<25> as *const c_void),
    Slot(function_slot::<26> as *const c_void),
    Slot(function_slot::<27> as *const c_void),
    Slot(function_slot::<28> as *const c_void),
    Slot(function_slot::<29> as *const c_void),
    Slot(function_slot::<30> as *const c_void),
    Slot(function_slot::<31> as *const c_void),
    Slot(function_slot::<32> as *const c_void),
    Slot(function_slot::<33> as *const c_void),
    Slot(function_slot::<34> as *const c_void),
    Slot(function_slot::<35> as *const c_void),
    Slot(function_slot::<36> as *const c_void),
    Slot(function_slot::<37> as *const c_void),
    Slot(function_slot::<38> as *const c_void),
    Slot(function_slot::<39> as *const c_void),
    Slot(function_slot::<40> as *const c_void),
    Slot(function_slot::<41> as *const c_void),
    Slot(function_slot::<42> as *const c_void),
    Slot(function_slot::<43> as *const c_void),
    Slot(function_slot::<44> as *const c_void),
    Slot(function_slot::<45> as *const c_void),
    Slot(function_slot::<46> as *const c_void),
    Slot(function_slot::<47> as *const c_void),
    Slot(function_slot::<48> as *const c_void),
    Slot(function_slot::<49> as *const c_void),
    Slot(function_slot::<50> as *const c_void),
    Slot(function_slot::<51> as *const c_void),
    Slot(function_slot::<52> as *const c_void),
    Slot(function_slot::<53> as *const c_void),
    Slot(function_slot::<54> as *const c_void),
    Slot(function_slot::<55> as *const c_void),
    Slot(function_slot::<56> as *const c_void),
    Slot(function_slot::<57> as *const c_void),
    Slot(function_slot::<58> as *const c_void),
    Slot(function_slot::<59> as *const c_void),
    Slot(function_slot::<60> as *const c_void),
    Slot(function_slot::<61> as *const c_void),
    Slot(function_slot::<62> as *const c_void),
    Slot(function_slot::<63> as *const c_void),
];

/// The table named `uuid`.
fn table(uuid: &[u8; 16]) -> Option<*const c_void> {
    const fn id(hex: u128) -> [u8; 16] {
        hex.to_be_bytes()
    }
    let t: *const c_void = match *uuid {
        u if u == id(0x6bd5fb6c_5bf4_e74a_8987_d93912fd9df9) => RUNTIME_INTERFACE.as_ptr().cast(),
        u if u == id(0xa094798c_2e74_2e74_93f2_0800200c0a66) => TOOLS_HOOKS.as_ptr().cast(),
        u if u == id(0x42d85a81_23f6_cb47_8298_f6e78a3aecdc) => TOOLS_TLS.as_ptr().cast(),
        u if u == id(0xc693336e_1121_df11_a8c3_68f355d89593) => CONTEXT_STORAGE.as_ptr().cast(),
        u if u == id(0x21318c60_9714_3248_8ca6_41ff7324c8f2) => CONTEXT_IDENTITY.as_ptr().cast(),
        u if u == id(0x263e8860_7cd2_6143_92f6_bbd5006dfa7e) => CONTEXT_CHECKS.as_ptr().cast(),
        u if u == id(0xd4082055_bde6_704b_8d34_ba123c66e1f2) => INTEGRITY.as_ptr().cast(),
        u if u == id(0x1734dc26_800d_4745_8726_c0f1e7dd8bca) => LT_CACHE.as_ptr().cast(),
        u if u == id(0x6e163fbe_b958_444d_835c_e182aff1991e) => TOOLS_FUNCTION.as_ptr().cast(),
        _ => return None,
    };
    Some(t)
}

/// Says once per table that a library asked for one this fake does not
/// have (it gets 500, "not found", as from a driver without it).
fn say_unknown(uuid: &[u8; 16]) {
    static SEEN: std::sync::Mutex<Vec<[u8; 16]>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.contains(uuid) {
        seen.push(*uuid);
        if !crate::state::config().quiet {
            let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
            eprintln!(
                "[vramlab-fakecuda] export table {hex} is not faked: it returns 500 (not found)"
            );
        }
    }
}

/// `cuGetExportTable`.
///
/// # Safety
/// `out` is null or valid for a write; `id` is null or points to 16 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetExportTable(
    out: *mut *const c_void,
    id: *const [u8; 16],
) -> CuResult {
    if out.is_null() || id.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: 16 readable bytes (caller's contract).
    let uuid = unsafe { &*id };
    let found = table(uuid);
    // Tables asked for and done without on every run (see the module docs).
    const ABSENT: [u128; 2] = [
        0xf8cff951_2146_8b4e_b9e2_fb469e7c0dd9,
        0xda9151d3_3ae6_cc41_a5c0_4f26d533e328,
    ];
    if found.is_none() && !ABSENT.contains(&u128::from_be_bytes(*uuid)) {
        say_unknown(uuid);
    }
    // SAFETY: checked not null; the caller's output parameter.
    unsafe { put(out, found.unwrap_or(std::ptr::null())) };
    if found.is_some() { SUCCESS } else { NOT_FOUND }
}

/// Runtime interface, slot 1: the module of a registered fatbin.
extern "C" fn module_from_fatbin(module: *mut *mut c_void, _wrapper: *const c_void) -> CuResult {
    crate::modules::new_module(module)
}

/// Runtime interface, slot 2: the primary context of a device.
extern "C" fn primary_context(ctx: *mut *mut c_void, device: c_int) -> CuResult {
    // SAFETY: the runtime passes its output parameter.
    unsafe { crate::driver::cuDevicePrimaryCtxRetain(ctx, device) }
}

/// Runtime interface, slot 6: as slot 1, with options nobody needs here.
extern "C" fn module_from_fatbin_ext(
    module: *mut *mut c_void,
    _wrapper: *const c_void,
    _a: *mut c_void,
    _b: *mut c_void,
    _c: c_uint,
) -> CuResult {
    crate::modules::new_module(module)
}

/// Runtime interface, slot 7: a notice from the runtime; nothing to do.
extern "C" fn runtime_note(_arg: usize) -> CuResult {
    SUCCESS
}

/// Runtime interface, slot 8: as slot 6, the fatbin's header first.
extern "C" fn module_from_fatbin_header(
    _header: *const c_void,
    module: *mut *mut c_void,
    _a: *mut c_void,
    _b: *mut c_void,
    _c: c_uint,
) -> CuResult {
    crate::modules::new_module(module)
}

/// Runtime interface, slot 12: the JIT compilers are "loaded".
extern "C" fn load_compilers() -> CuResult {
    SUCCESS
}

/// Zeroed memory the tools hooks hand out, kept for the whole process.
fn tools_buffer(len: usize) -> *mut c_void {
    Box::leak(vec![0u64; len.div_ceil(8)].into_boxed_slice())
        .as_mut_ptr()
        .cast()
}

/// Tools hooks, slot 2: a 1024-byte buffer.
extern "C" fn tools_buffer_large(ptr: *mut *mut c_void, size: *mut usize) {
    static BUF: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let p = *BUF.get_or_init(|| tools_buffer(1024) as usize);
    // SAFETY: output parameters (the runtime's).
    unsafe {
        put(ptr, p as *mut c_void);
        put(size, 1024);
    }
}

/// Tools hooks, slot 6: a 14-byte buffer.
extern "C" fn tools_buffer_small(ptr: *mut *mut c_void, size: *mut usize) {
    static BUF: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let p = *BUF.get_or_init(|| tools_buffer(14) as usize);
    // SAFETY: output parameters (the runtime's).
    unsafe {
        put(ptr, p as *mut c_void);
        put(size, 14);
    }
}

/// Tools TLS, slot 2: the calling thread's current context.
extern "C" fn current_context(ctx: *mut *mut c_void) -> CuResult {
    // SAFETY: output parameter (the runtime's).
    unsafe { put(ctx, crate::driver::context()) };
    SUCCESS
}

/// Context identity, slot 3: the device of a context.
extern "C" fn context_device(_ctx: *mut c_void, device: *mut c_int) -> CuResult {
    // SAFETY: output parameter (the library's).
    unsafe { crate::driver::cuCtxGetDevice(device) }
}

/// Context-local storage: (context, key) → value.
static STORAGE: Mutex<Option<HashMap<(usize, usize), usize>>> = Mutex::new(None);

fn with_storage<R>(f: impl FnOnce(&mut HashMap<(usize, usize), usize>) -> R) -> R {
    let mut s = STORAGE.lock().unwrap_or_else(|e| e.into_inner());
    f(s.get_or_insert_with(HashMap::new))
}

/// Context-local storage, slot 0: keep `value` under `key` (the destructor
/// would run when the context is destroyed, which never happens here).
extern "C" fn storage_put(
    ctx: *mut c_void,
    key: *mut c_void,
    value: *mut c_void,
    _dtor: *const c_void,
) -> CuResult {
    with_storage(|s| s.insert((ctx as usize, key as usize), value as usize));
    SUCCESS
}

/// Context-local storage, slot 1: forget `key`.
extern "C" fn storage_delete(ctx: *mut c_void, key: *mut c_void) -> CuResult {
    with_storage(|s| s.remove(&(ctx as usize, key as usize)));
    SUCCESS
}

/// Context-local storage, slot 2: the value under `key`.
extern "C" fn storage_get(value: *mut *mut c_void, ctx: *mut c_void, key: *mut c_void) -> CuResult {
    match with_storage(|s| s.get(&(ctx as usize, key as usize)).copied()) {
        Some(v) => {
            // SAFETY: output parameter (the runtime's).
            unsafe { put(value, v as *mut c_void) };
            SUCCESS
        }
        None => INVALID_HANDLE,
    }
}

/// Context checks, slot 2: nothing to report about `ctx`.
extern "C" fn context_check(
    _ctx: *mut c_void,
    result: *mut c_uint,
    _detail: *mut *const c_void,
) -> CuResult {
    // SAFETY: output parameter (the runtime's).
    unsafe { put(result, 0) };
    SUCCESS
}

/// Context checks, slot 3: no checks pending.
extern "C" fn context_check_count() -> c_uint {
    0
}

unsafe extern "C" {
    /// POSIX `pthread_self` (the runtime hashes the calling thread's id).
    fn pthread_self() -> usize;
}

/// The key of the runtime's integrity HMAC.
const INTEGRITY_KEY: [u8; 16] = [
    0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52, 0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f,
];

/// Integrity check, slot 1: the HMAC-MD2 the runtime expects of a real
/// driver, over what both sides know — the driver and check versions, the
/// process and thread, the two tables' and this function's addresses, the
/// time the runtime passed, then each device's UUID and PCI location. (The
/// first two check versions answer constants.)
extern "C" fn integrity_check(
    version: c_uint,
    unix_seconds: u64,
    result: *mut [u64; 2],
) -> CuResult {
    if result.is_null() {
        return INVALID_VALUE;
    }
    let answer = match version % 10 {
        0 => [0x3341_181c_03cb_675c, 0x8ed3_83aa_1f4c_d1e8],
        1 => [0x1841_181c_03cb_675c, 0x8ed3_83aa_1f4c_d1e8],
        _ => integrity_hmac(version, unix_seconds),
    };
    // SAFETY: checked not null; the runtime's output parameter.
    unsafe { put(result, answer) };
    SUCCESS
}

fn integrity_hmac(version: c_uint, unix_seconds: u64) -> [u64; 2] {
    let mut msg = Vec::with_capacity(48 + 28 * 8);
    let mut driver = 0;
    // SAFETY: a local output parameter.
    unsafe { crate::driver::cuDriverGetVersion(&mut driver) };
    msg.extend_from_slice(&(driver as u32).to_le_bytes());
    msg.extend_from_slice(&version.to_le_bytes());
    msg.extend_from_slice(&std::process::id().to_le_bytes());
    // SAFETY: pthread_self has no preconditions.
    msg.extend_from_slice(&(unsafe { pthread_self() } as u32).to_le_bytes());
    for p in [
        RUNTIME_INTERFACE.as_ptr() as usize,
        INTEGRITY.as_ptr() as usize,
        integrity_check as *const () as usize,
    ] {
        msg.extend_from_slice(&(p as u64).to_le_bytes());
    }
    msg.extend_from_slice(&unix_seconds.to_le_bytes());
    for d in 0..crate::state::config().devices as c_int {
        let mut uuid = [0u8; 16];
        // SAFETY: a local 16-byte output.
        unsafe { crate::driver::cuDeviceGetUuid(uuid.as_mut_ptr().cast(), d) };
        msg.extend_from_slice(&uuid);
        for attr in [50, 33, 34] {
            // PCI domain, bus, device
            let v = crate::runtime_device::attribute(attr, d);
            msg.extend_from_slice(&v.to_le_bytes());
        }
    }
    let mut mac =
        Hmac::<md2::Md2>::new_from_slice(&INTEGRITY_KEY).expect("HMAC takes any key length");
    mac.update(&msg);
    let out = mac.finalize().into_bytes();
    let (lo, hi) = out.split_at(8);
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
    [word(lo), word(hi)]
}
