//! How a process finds the driver's functions: the runtime's
//! `cudaGetDriverEntryPoint[ByVersion]` (PyTorch 2.7+) and the driver's own
//! `cuGetProcAddress[_v2]` (the CUDA libraries' static runtimes: cuBLAS,
//! cuDNN, …, after `dlopen("libcuda.so.1")`). Both resolve a name and a
//! CUDA version to a symbol as the driver does (the newest version of the
//! name at most the one asked for: `cuCtxCreate` at 12.0 is
//! `cuCtxCreate_v3`), then to this library's function of that symbol. A
//! symbol that is not faked resolves to its "not supported" stub, never to
//! a null pointer; so does a name newer than the table (CUDA 13.2's), said
//! once on stderr. Only a name asked for at a version older than its first
//! one is "not found", as the driver answers.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

use crate::driver_table::{VERSIONS, symbol};
use crate::ffi::{CuResult, CudaError, SUCCESS, c_str, put};

/// `CUDA_ERROR_NOT_FOUND`.
const NOT_FOUND: CuResult = 500;
/// `CU_GET_PROC_ADDRESS_SUCCESS`.
const FOUND: c_int = 0;
/// What a name newer than the table resolves to: "not supported".
extern "C" fn unknown_entry() -> CuResult {
    crate::ffi::NOT_SUPPORTED
}

/// Says once per name that `name` is not in the table.
fn say_unknown(name: &[u8]) {
    static SEEN: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.iter().any(|n| n == name) {
        seen.push(name.to_vec());
        if !crate::state::config().quiet {
            eprintln!(
                "[vramlab-fakecuda] driver entry point {} is newer than the fake's table: it returns 801 (not supported)",
                String::from_utf8_lossy(name)
            );
        }
    }
}

/// `CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`.
const SYMBOL_NOT_FOUND: c_int = 1;
/// `CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`.
const VERSION_NOT_SUFFICIENT: c_int = 2;

/// What a lookup found.
enum Lookup {
    /// The function, and the status to report.
    Found(*const c_void),
    /// The name exists only in versions newer than the one asked for.
    TooNew,
    /// No driver function has this name.
    Unknown,
}

/// The symbol `cuGetProcAddress(name, version)` stands for.
fn versioned(name: &[u8], version: u32) -> Result<&'static str, Lookup> {
    let start = VERSIONS.partition_point(|(base, _, _)| base.as_bytes() < name);
    let rows = VERSIONS
        .get(start..)
        .unwrap_or_default()
        .iter()
        .take_while(|(base, _, _)| base.as_bytes() == name);
    let mut known = false;
    let mut best = None;
    for (_, since, sym) in rows {
        known = true;
        if *since <= version {
            best = Some(*sym);
        }
    }
    match (known, best) {
        (_, Some(sym)) => Ok(sym),
        (true, None) => Err(Lookup::TooNew),
        (false, None) => Err(Lookup::Unknown),
    }
}

/// The function for `name` at CUDA `version`.
fn lookup(name: &[u8], version: u32) -> Lookup {
    let sym = match versioned(name, version) {
        Ok(sym) => sym.as_bytes(),
        // A symbol asked for by its own name (`cuMemAlloc_v2`).
        Err(Lookup::Unknown) => name,
        Err(other) => return other,
    };
    // This module's own symbols are answered here: the generated table
    // never points back at the module that reads it.
    match sym {
        b"cuGetProcAddress" => Lookup::Found(cuGetProcAddress as *const c_void),
        b"cuGetProcAddress_v2" => Lookup::Found(cuGetProcAddress_v2 as *const c_void),
        _ => symbol(sym).map_or(Lookup::Unknown, Lookup::Found),
    }
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
    version: c_uint,
    _flags: c_ulonglong,
    status: *mut c_int,
) -> CudaError {
    // SAFETY: forwarded caller's contract (the driver's codes for "not
    // found" are the runtime's too: cudaErrorSymbolNotFound is 500).
    unsafe { answer(sym, f, version, status) }
}

/// `cudaGetDriverEntryPoint`: the names at the runtime's own version.
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
    let version = crate::state::config().runtime_version.max(0) as c_uint;
    // SAFETY: forwarded caller's contract.
    unsafe { cudaGetDriverEntryPointByVersion(sym, f, version, flags, status) }
}

/// `cuGetProcAddress` (CUDA 11.3–11.8's form): as `_v2` without the status.
///
/// # Safety
/// As [`cuGetProcAddress_v2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetProcAddress(
    sym: *const c_char,
    f: *mut *const c_void,
    version: c_int,
    _flags: c_ulonglong,
) -> CuResult {
    // SAFETY: forwarded caller's contract; a null status is never written.
    unsafe { answer(sym, f, version.max(0) as c_uint, std::ptr::null_mut()) }
}

/// `cuGetProcAddress_v2`.
///
/// # Safety
/// `sym` is null or a NUL-terminated string; `f` and `status` are null or
/// valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    sym: *const c_char,
    f: *mut *const c_void,
    version: c_int,
    _flags: c_ulonglong,
    status: *mut c_int,
) -> CuResult {
    // SAFETY: forwarded caller's contract.
    unsafe { answer(sym, f, version.max(0) as c_uint, status) }
}

/// Resolves `sym` at `version` into `f` and `status`.
///
/// # Safety
/// As [`cuGetProcAddress_v2`].
unsafe fn answer(
    sym: *const c_char,
    f: *mut *const c_void,
    version: c_uint,
    status: *mut c_int,
) -> CuResult {
    // SAFETY: the caller passes a C string or null.
    let name = unsafe { c_str(sym) }.unwrap_or_default();
    let (found, code, result) = match lookup(name, version) {
        Lookup::Found(p) => (p, FOUND, SUCCESS),
        Lookup::TooNew => (std::ptr::null(), VERSION_NOT_SUFFICIENT, NOT_FOUND),
        Lookup::Unknown if name.is_empty() => (std::ptr::null(), SYMBOL_NOT_FOUND, NOT_FOUND),
        Lookup::Unknown => {
            say_unknown(name);
            (unknown_entry as *const c_void, FOUND, SUCCESS)
        }
    };
    // SAFETY: output parameters (caller's contract).
    unsafe {
        put(f, found);
        put(status, code);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbol_of(name: &str, version: u32) -> Option<&'static str> {
        versioned(name.as_bytes(), version).ok()
    }

    #[test]
    fn names_resolve_to_the_symbol_of_their_version() {
        assert_eq!(symbol_of("cuCtxCreate", 2000), Some("cuCtxCreate"));
        assert_eq!(symbol_of("cuCtxCreate", 3020), Some("cuCtxCreate_v2"));
        assert_eq!(symbol_of("cuCtxCreate", 12000), Some("cuCtxCreate_v3"));
        assert_eq!(symbol_of("cuCtxCreate", 13000), Some("cuCtxCreate_v4"));
        assert_eq!(symbol_of("cuMemAlloc", 3020), Some("cuMemAlloc_v2"));
        assert!(matches!(
            versioned(b"cuMemCreate", 9000),
            Err(Lookup::TooNew)
        ));
        assert!(matches!(
            versioned(b"cuNoSuchThing", 13000),
            Err(Lookup::Unknown)
        ));
    }

    #[test]
    fn every_known_name_gives_a_function() {
        for (base, since, _) in VERSIONS {
            assert!(
                matches!(lookup(base.as_bytes(), *since), Lookup::Found(p) if !p.is_null()),
                "{base} at {since}"
            );
        }
        assert!(matches!(lookup(b"cuMemAlloc_v2", 0), Lookup::Found(_)));
        assert!(matches!(lookup(b"cuNoSuchThing", 13000), Lookup::Unknown));
    }

    #[test]
    fn answers_follow_the_driver() {
        let mut f: *const c_void = std::ptr::null();
        let mut status = -1;
        let ask = |name: &std::ffi::CStr, version, f: &mut *const c_void, status: &mut c_int| {
            // SAFETY: a C string and two writable outputs.
            unsafe { cuGetProcAddress_v2(name.as_ptr(), f, version, 0, status) }
        };
        assert_eq!(ask(c"cuMemAlloc", 3020, &mut f, &mut status), SUCCESS);
        assert_eq!(
            (f, status),
            (crate::driver_memory::cuMemAlloc_v2 as *const c_void, FOUND)
        );
        assert_eq!(ask(c"cuMemCreate", 9000, &mut f, &mut status), NOT_FOUND);
        assert_eq!((f, status), (std::ptr::null(), VERSION_NOT_SUFFICIENT));
        assert_eq!(
            ask(c"cuGetProcAddress", 12000, &mut f, &mut status),
            SUCCESS
        );
        assert_eq!(f, cuGetProcAddress_v2 as *const c_void);
        assert_eq!(
            ask(c"cuSomethingNewer", 13000, &mut f, &mut status),
            SUCCESS
        );
        assert_eq!((f, status), (unknown_entry as *const c_void, FOUND));
    }
}
