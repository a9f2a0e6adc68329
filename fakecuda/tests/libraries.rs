//! The driver as NVIDIA's libraries call it (cuBLAS, cuDNN and Triton, after
//! `dlopen("libcuda.so.1")`): the private export tables their static
//! runtime starts with, code objects and their handles, device memory of
//! their own, and the card's limits they size launches by.
//!
//! One test: the settings are read from the environment once per process.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::ptr::null_mut;

unsafe extern "C" {
    fn cuGetExportTable(t: *mut *const c_void, id: *const [u8; 16]) -> c_int;
    fn cuLibraryLoadData(
        l: *mut *mut c_void,
        code: *const c_void,
        a: *mut c_int,
        b: *mut *mut c_void,
        n: c_uint,
        c: *mut c_int,
        d: *mut *mut c_void,
        m: c_uint,
    ) -> c_int;
    fn cuLibraryGetKernel(k: *mut *mut c_void, l: *mut c_void, name: *const c_char) -> c_int;
    fn cuFuncGetAttribute(v: *mut c_int, attr: c_int, f: *mut c_void) -> c_int;
    fn cuFuncSetAttribute(f: *mut c_void, attr: c_int, v: c_int) -> c_int;
    fn cuMemAlloc_v2(p: *mut u64, size: usize) -> c_int;
    fn cuMemFree_v2(p: u64) -> c_int;
    fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> c_int;
    fn cuDeviceGetAttribute(v: *mut c_int, attr: c_int, d: c_int) -> c_int;
    fn cuPointerGetAttribute(data: *mut c_void, attr: c_int, ptr: u64) -> c_int;
}

const MIB: usize = 1 << 20;

const RUNTIME: u128 = 0x6bd5fb6c_5bf4_e74a_8987_d93912fd9df9;
const HOOKS: u128 = 0xa094798c_2e74_2e74_93f2_0800200c0a66;
const TLS: u128 = 0x42d85a81_23f6_cb47_8298_f6e78a3aecdc;
const STORAGE: u128 = 0xc693336e_1121_df11_a8c3_68f355d89593;
const IDENTITY: u128 = 0x21318c60_9714_3248_8ca6_41ff7324c8f2;
const CHECKS: u128 = 0x263e8860_7cd2_6143_92f6_bbd5006dfa7e;
const INTEGRITY: u128 = 0xd4082055_bde6_704b_8d34_ba123c66e1f2;

/// The table named `uuid`, or the error.
fn table(uuid: u128) -> Result<*const usize, c_int> {
    let mut t = std::ptr::null();
    // SAFETY: a writable output and 16 readable bytes.
    match unsafe { cuGetExportTable(&mut t, &uuid.to_be_bytes()) } {
        0 => Ok(t.cast()),
        e => Err(e),
    }
}

/// Slot `i` of table `t`.
fn slot(t: *const usize, i: usize) -> usize {
    // SAFETY: every table tested has more than `i` slots.
    unsafe { *t.add(i) }
}

fn mem_free() -> usize {
    let (mut f, mut t) = (0, 0);
    // SAFETY: two writable usizes.
    assert_eq!(unsafe { cuMemGetInfo_v2(&mut f, &mut t) }, 0);
    f
}

#[test]
fn the_driver_answers_as_nvidia_libraries_expect() {
    // SAFETY: the only test in this binary sets the environment before any
    // other thread exists and before the fake reads it.
    unsafe {
        std::env::set_var("VRAMLAB_FAKECUDA_CAPACITY", (64 * MIB).to_string());
        std::env::set_var("VRAMLAB_FAKECUDA_QUIET", "1");
    }

    // Export tables: the known ones, their sizes in the first slot (the
    // context-local storage table has none); any other is "not found".
    for (uuid, slots) in [
        (RUNTIME, 13),
        (HOOKS, 7),
        (TLS, 4),
        (IDENTITY, 5),
        (CHECKS, 4),
        (INTEGRITY, 3),
    ] {
        let t = table(uuid).unwrap();
        assert_eq!(slot(t, 0), slots * 8, "{uuid:x}");
        for i in 1..slots {
            assert_ne!(slot(t, i), 0, "{uuid:x} slot {i} is a null pointer");
        }
    }
    assert_eq!(table(0xf8cff951_2146_8b4e_b9e2_fb469e7c0dd9), Err(500));

    // Context-local storage: put, get, delete, get.
    let storage = table(STORAGE).unwrap();
    type Put = extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *const c_void) -> c_int;
    type Get = extern "C" fn(*mut *mut c_void, *mut c_void, *mut c_void) -> c_int;
    type Delete = extern "C" fn(*mut c_void, *mut c_void) -> c_int;
    // SAFETY: the slots hold functions of these types.
    let (put, delete, get): (Put, Delete, Get) = unsafe {
        (
            std::mem::transmute::<usize, Put>(slot(storage, 0)),
            std::mem::transmute::<usize, Delete>(slot(storage, 1)),
            std::mem::transmute::<usize, Get>(slot(storage, 2)),
        )
    };
    let (ctx, key, value) = (
        0x10 as *mut c_void,
        0x20 as *mut c_void,
        0x30 as *mut c_void,
    );
    let mut got = null_mut();
    assert_ne!(get(&mut got, ctx, key), 0);
    assert_eq!(put(ctx, key, value, std::ptr::null()), 0);
    assert_eq!(get(&mut got, ctx, key), 0);
    assert_eq!(got, value);
    assert_eq!(delete(ctx, key), 0);
    assert_ne!(get(&mut got, ctx, key), 0);

    // Context identity: a context's device and id.
    type Device = extern "C" fn(*mut c_void, *mut c_int) -> c_int;
    type Id = extern "C" fn(*mut c_void, *mut u64) -> c_int;
    let identity = table(IDENTITY).unwrap();
    // SAFETY: the slots hold functions of these types.
    let (device, id): (Device, Id) = unsafe {
        (
            std::mem::transmute::<usize, Device>(slot(identity, 3)),
            std::mem::transmute::<usize, Id>(slot(identity, 4)),
        )
    };
    let (mut d, mut n) = (-1, 0);
    assert_eq!(device(null_mut(), &mut d), 0);
    assert_eq!(id(null_mut(), &mut n), 0);
    assert_eq!((d, n), (0, 1));

    // The integrity check: constants for the first two versions; for the
    // others a digest of what both sides know, so the same inputs give the
    // same answer and another time another one.
    type Check = extern "C" fn(c_uint, u64, *mut [u64; 2]) -> c_int;
    // SAFETY: slot 1 holds a function of this type.
    let check: Check = unsafe { std::mem::transmute(slot(table(INTEGRITY).unwrap(), 1)) };
    let answer = |version, seconds| {
        let mut r = [0u64; 2];
        assert_eq!(check(version, seconds, &mut r), 0);
        r
    };
    assert_eq!(
        answer(10, 1),
        [0x3341_181c_03cb_675c, 0x8ed3_83aa_1f4c_d1e8]
    );
    assert_eq!(answer(12, 1_700_000_000), answer(12, 1_700_000_000));
    assert_ne!(answer(12, 1_700_000_000), answer(12, 1_700_000_001));
    assert_eq!(check(12, 0, null_mut()), 1);

    // Code objects: one handle per name, attributes the caller set kept.
    let mut lib = null_mut();
    let none = null_mut();
    // SAFETY: a writable output; no options.
    assert_eq!(
        unsafe {
            cuLibraryLoadData(
                &mut lib,
                std::ptr::null(),
                none,
                none.cast(),
                0,
                none,
                none.cast(),
                0,
            )
        },
        0
    );
    let kernel = |name: &std::ffi::CStr| {
        let mut k = null_mut();
        // SAFETY: a writable output and a C string.
        assert_eq!(unsafe { cuLibraryGetKernel(&mut k, lib, name.as_ptr()) }, 0);
        k
    };
    let (a, b) = (kernel(c"gemm"), kernel(c"reduce"));
    assert_eq!(kernel(c"gemm"), a);
    assert_ne!(a, b);
    let attr = |f, which| {
        let mut v = -1;
        // SAFETY: a writable output.
        assert_eq!(unsafe { cuFuncGetAttribute(&mut v, which, f) }, 0);
        v
    };
    assert_eq!(attr(a, 0), 1024);
    assert_eq!(attr(a, 8), 0);
    // SAFETY: a handle from above.
    assert_eq!(unsafe { cuFuncSetAttribute(a, 8, 200_000) }, 0);
    assert_eq!((attr(a, 8), attr(b, 8)), (200_000, 0));

    // Device memory of the libraries' own: on the same simulated card.
    let free = mem_free();
    let mut p = 0;
    // SAFETY: a writable output.
    assert_eq!(unsafe { cuMemAlloc_v2(&mut p, 3 * MIB) }, 0);
    assert!(mem_free() <= free - 3 * MIB);
    // SAFETY: the allocation above.
    assert_eq!(unsafe { cuMemFree_v2(p) }, 0);
    assert_eq!(mem_free(), free);
    let mut q = 0;
    // SAFETY: a writable output.
    assert_eq!(unsafe { cuMemAlloc_v2(&mut q, 0) }, 1);
    // SAFETY: as above.
    assert_eq!(unsafe { cuMemAlloc_v2(&mut q, 128 * MIB) }, 2);
    let mut kind: c_uint = 0;
    // SAFETY: a writable u32 for the memory type.
    assert_eq!(
        unsafe { cuPointerGetAttribute((&mut kind as *mut c_uint).cast(), 2, 0x1000) },
        0
    );
    assert_eq!(kind, 2);

    // The card's limits, never 0 where launches are sized by them.
    for (attr, want) in [
        (2, 1024),
        (4, 64),
        (5, i32::MAX),
        (6, 65_535),
        (16, 132),
        (97, 232_448),
    ] {
        let mut v = 0;
        // SAFETY: a writable output.
        assert_eq!(unsafe { cuDeviceGetAttribute(&mut v, attr, 0) }, 0);
        assert_eq!(v, want, "attribute {attr}");
    }
    // Links this test to the library (its functions are called by symbol).
    vramlab_fakecuda::vramlab_fakecuda_flush();
}
