//! The fake device's answers, called as PyTorch calls them (through the C
//! ABI), on a 64 MiB device: addresses from the driver placement model,
//! accounting and out-of-memory at the capacity, the virtual-memory calls
//! of expandable segments, capture state, events (complete at once by
//! default), and driver entry points.
//!
//! One test: the settings are read from the environment once per process.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use vramlab_fakecuda::*;

unsafe extern "C" {
    fn cudaMalloc(p: *mut *mut c_void, size: usize) -> c_int;
    fn cudaFree(p: *mut c_void) -> c_int;
    fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> c_int;
    fn cudaGetLastError() -> c_int;
    fn cudaGetDeviceCount(n: *mut c_int) -> c_int;
    safe fn cudaSetDevice(d: c_int) -> c_int;
    fn cuMemAddressReserve(p: *mut u64, size: usize, align: usize, addr: u64, flags: u64) -> c_int;
    fn cuMemAddressFree(p: u64, size: usize) -> c_int;
    fn cuMemCreate(h: *mut u64, size: usize, prop: *const c_void, flags: u64) -> c_int;
    fn cuMemMap(p: u64, size: usize, offset: usize, h: u64, flags: u64) -> c_int;
    fn cuMemUnmap(p: u64, size: usize) -> c_int;
    fn cuMemRelease(h: u64) -> c_int;
    fn cudaStreamCreate(s: *mut *mut c_void) -> c_int;
    fn cudaStreamBeginCapture(s: *mut c_void, mode: c_int) -> c_int;
    fn cudaStreamEndCapture(s: *mut c_void, g: *mut *mut c_void) -> c_int;
    fn cudaStreamIsCapturing(s: *mut c_void, st: *mut c_int) -> c_int;
    fn cudaGetDriverEntryPoint(
        sym: *const std::ffi::c_char,
        f: *mut *const c_void,
        flags: u64,
        st: *mut c_int,
    ) -> c_int;
    fn cudaGetDeviceProperties(p: *mut c_void, d: c_int) -> c_int;
    fn cudaEventCreateWithFlags(e: *mut *mut c_void, flags: u32) -> c_int;
    safe fn cudaEventRecord(e: *mut c_void, s: *mut c_void) -> c_int;
    safe fn cudaEventQuery(e: *mut c_void) -> c_int;
    safe fn cudaStreamQuery(s: *mut c_void) -> c_int;
}

const MIB: usize = 1 << 20;

fn mem_info() -> (usize, usize) {
    let (mut f, mut t) = (0, 0);
    // SAFETY: two writable usizes.
    assert_eq!(unsafe { cudaMemGetInfo(&mut f, &mut t) }, 0);
    (f, t)
}

fn malloc(size: usize) -> Result<u64, c_int> {
    let mut p = null_mut();
    // SAFETY: a writable pointer.
    match unsafe { cudaMalloc(&mut p, size) } {
        0 => Ok(p as u64),
        e => Err(e),
    }
}

#[test]
fn the_fake_device_answers_as_the_c_abi_promises() {
    let log = std::env::temp_dir().join(format!("fakecuda-contract-{}.log", std::process::id()));
    // SAFETY: the only test in this binary sets the environment before any
    // other thread reads it.
    unsafe {
        std::env::set_var("VRAMLAB_FAKECUDA_CAPACITY", (64 * MIB).to_string());
        std::env::set_var("VRAMLAB_FAKECUDA_DEVICES", "2");
        std::env::set_var("VRAMLAB_FAKECUDA_LOG", &log);
        std::env::set_var("VRAMLAB_FAKECUDA_QUIET", "1");
    }
    let mut n = 0;
    // SAFETY: a writable int.
    assert_eq!(unsafe { cudaGetDeviceCount(&mut n) }, 0);
    assert_eq!(n, 2);
    assert_eq!(mem_info(), (64 * MIB, 64 * MIB));

    // cudaMalloc: the H200 driver model's first address, then downwards;
    // memory counted; out of memory past the capacity, as error 2 that
    // cudaGetLastError reports once.
    vramlab_fakecuda_mark(7);
    let a = malloc(20 * MIB).unwrap();
    let b = malloc(2 * MIB).unwrap();
    assert_eq!((a, b), (0x7eff_fe00_0000, 0x7eff_ff40_0000));
    assert_eq!(mem_info().0, 42 * MIB);
    assert_eq!(malloc(64 * MIB), Err(2));
    // SAFETY: no arguments.
    assert_eq!(unsafe { cudaGetLastError() }, 2);
    // SAFETY: no arguments.
    assert_eq!(unsafe { cudaGetLastError() }, 0);
    // SAFETY: `a` came from cudaMalloc; 12345 is not a segment.
    unsafe {
        assert_eq!(cudaFree(a as *mut c_void), 0);
        assert_eq!(cudaFree(12345 as *mut c_void), 1);
    }
    assert_eq!(mem_info().0, 62 * MIB);

    // Expandable segments: memory counts from cuMemCreate (before the map)
    // to cuMemRelease (after the unmap).
    let mut base = 0u64;
    let mut h = 0u64;
    // SAFETY: writable outputs; a null property pointer means the current device.
    unsafe {
        assert_eq!(cuMemAddressReserve(&mut base, 1 << 30, 0, 0, 0), 0);
        assert_eq!(cuMemCreate(&mut h, 20 * MIB, std::ptr::null(), 0), 0);
    }
    assert_eq!(mem_info().0, 42 * MIB);
    let mut h2 = 0u64;
    // SAFETY: as above.
    assert_eq!(
        unsafe { cuMemCreate(&mut h2, 60 * MIB, std::ptr::null(), 0) },
        2
    );
    // SAFETY: `h` is a live handle, `base` a reservation.
    unsafe {
        assert_eq!(cuMemMap(base, 20 * MIB, 0, h, 0), 0);
        assert_eq!(mem_info().0, 42 * MIB);
        assert_eq!(cuMemUnmap(base, 20 * MIB), 0);
        assert_eq!(mem_info().0, 42 * MIB);
        assert_eq!(cuMemRelease(h), 0);
        assert_eq!(cuMemAddressFree(base, 1 << 30), 0);
    }
    assert_eq!(mem_info().0, 62 * MIB);

    // Device 1 has its own memory and addresses that device 0 never hands out.
    assert_eq!(cudaSetDevice(1), 0);
    assert_eq!(mem_info().0, 64 * MIB);
    let c = malloc(2 * MIB).unwrap();
    assert_eq!(c >> 48, 1);
    assert_eq!(cudaSetDevice(2), 101);
    assert_eq!(cudaSetDevice(0), 0);

    // Capture: per stream, from begin to end.
    let mut s = null_mut();
    let mut st = 0;
    let mut g = null_mut();
    // SAFETY: writable outputs.
    unsafe {
        assert_eq!(cudaStreamCreate(&mut s), 0);
        assert_eq!(cudaStreamBeginCapture(s, 0), 0);
        assert_eq!(cudaStreamIsCapturing(s, &mut st), 0);
        assert_eq!(st, 1);
        assert_eq!(cudaStreamEndCapture(s, &mut g), 0);
        assert!(!g.is_null());
        assert_eq!(cudaStreamIsCapturing(s, &mut st), 0);
        assert_eq!(st, 0);
        assert_eq!(cudaStreamBeginCapture(null_mut(), 0), 900);
    }

    // Events: complete as soon as recorded (VRAMLAB_FAKECUDA_EVENTS unset).
    let mut e = null_mut();
    // SAFETY: a writable handle.
    assert_eq!(unsafe { cudaEventCreateWithFlags(&mut e, 2) }, 0);
    assert_eq!(cudaEventRecord(e, s), 0);
    assert_eq!((cudaEventQuery(e), cudaStreamQuery(s)), (0, 0));

    // Entry points: faked functions and unknown names both resolve.
    for name in [c"cuMemCreate", c"cuSomethingNew"] {
        let mut f: *const c_void = std::ptr::null();
        let mut status = -1;
        // SAFETY: a C string and writable outputs.
        assert_eq!(
            unsafe { cudaGetDriverEntryPoint(name.as_ptr(), &mut f, 0, &mut status) },
            0
        );
        assert!(!f.is_null());
        assert_eq!(status, 0);
    }

    // Properties at the CUDA 13 offsets: name at 0, totalGlobalMem at 288,
    // major/minor at 360/364.
    let mut props = vec![0u8; 1008];
    // SAFETY: 1008 writable bytes, the CUDA 13 struct's size.
    assert_eq!(
        unsafe { cudaGetDeviceProperties(props.as_mut_ptr().cast(), 0) },
        0
    );
    assert!(props.starts_with(b"NVIDIA H200\0"));
    assert_eq!(
        u64::from_le_bytes(props[288..296].try_into().unwrap()),
        64 * MIB as u64
    );
    assert_eq!(props[360], 9);

    vramlab_fakecuda_flush();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "7 malloc 0 0x7efffe000000 20971520");
    assert_eq!(lines[2], "7 free 0 0x7efffe000000 20971520");
    assert!(lines.contains(&"7 map 0 0x200000000 20971520"));
    let _ = std::fs::remove_file(&log);
}
