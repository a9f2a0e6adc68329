//! C types of the CUDA API, the opaque handles this crate hands out, and
//! the one way it writes through a caller's pointer.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `cudaError_t`.
pub(crate) type CudaError = c_int;
/// `CUresult`.
pub(crate) type CuResult = c_int;
/// An opaque handle (`cudaStream_t`, `cudaEvent_t`, `cudaGraph_t`, …).
pub(crate) type Handle = *mut c_void;

/// `cudaSuccess` / `CUDA_SUCCESS`.
pub(crate) const SUCCESS: c_int = 0;
/// `cudaErrorInvalidValue` / `CUDA_ERROR_INVALID_VALUE`.
pub(crate) const INVALID_VALUE: c_int = 1;
/// `cudaErrorMemoryAllocation` / `CUDA_ERROR_OUT_OF_MEMORY`.
pub(crate) const OUT_OF_MEMORY: c_int = 2;
/// `cudaErrorInvalidDevice`.
pub(crate) const INVALID_DEVICE: c_int = 101;
/// `cudaErrorNotReady` / `CUDA_ERROR_NOT_READY`: not an error, but work
/// not done yet.
pub(crate) const NOT_READY: c_int = 600;
/// `cudaErrorNotSupported` / `CUDA_ERROR_NOT_SUPPORTED`.
pub(crate) const NOT_SUPPORTED: c_int = 801;
/// `cudaErrorStreamCaptureUnsupported`.
pub(crate) const CAPTURE_UNSUPPORTED: c_int = 900;
/// `cudaErrorStreamCaptureInvalidated`.
pub(crate) const CAPTURE_INVALIDATED: c_int = 901;

static NEXT_HANDLE: AtomicUsize = AtomicUsize::new(1);

/// A new opaque handle (a stream, an event, a graph): distinct, non-null,
/// never dereferenced.
pub(crate) fn new_handle() -> Handle {
    (0x5eed_0000_0000 + 16 * NEXT_HANDLE.fetch_add(1, Ordering::Relaxed)) as Handle
}

/// Writes `value` through `ptr` unless `ptr` is null; `true` if written.
///
/// # Safety
/// `ptr` is null or valid for a write of one `T`: the CUDA API's contract
/// for every output parameter this crate fills.
pub(crate) unsafe fn put<T>(ptr: *mut T, value: T) -> bool {
    if ptr.is_null() {
        return false;
    }
    // SAFETY: not null, and the caller guarantees it points to a writable T
    // (an output parameter of a CUDA API function).
    unsafe { ptr.write(value) };
    true
}

/// Fills `len` bytes at `ptr` with zeros unless `ptr` is null.
///
/// # Safety
/// `ptr` is null or valid for writes of `len` bytes.
pub(crate) unsafe fn zero(ptr: *mut c_void, len: usize) {
    if !ptr.is_null() {
        // SAFETY: the caller guarantees `len` writable bytes at `ptr`.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, len) };
    }
}

/// Copies `text` (with a terminating NUL, cut to fit) into the `cap`-byte
/// buffer at `buf`.
///
/// # Safety
/// `buf` is null or valid for writes of `cap` bytes.
pub(crate) unsafe fn put_str(buf: *mut u8, cap: usize, text: &str) {
    if buf.is_null() || cap == 0 {
        return;
    }
    let n = text.len().min(cap - 1);
    // SAFETY: `n + 1 <= cap` bytes at `buf` are writable (caller's promise);
    // the source is a live &str of at least `n` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf, n);
        buf.add(n).write(0);
    }
}

/// The bytes of a NUL-terminated C string (`None` for a null pointer).
///
/// # Safety
/// `s` is null or points to a NUL-terminated string that outlives the call.
pub(crate) unsafe fn c_str<'a>(s: *const std::ffi::c_char) -> Option<&'a [u8]> {
    if s.is_null() {
        return None;
    }
    // SAFETY: not null and NUL-terminated (caller's promise).
    Some(unsafe { std::ffi::CStr::from_ptr(s) }.to_bytes())
}
