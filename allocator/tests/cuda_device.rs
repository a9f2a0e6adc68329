//! `CudaDevice` on a real GPU (feature `cuda`).
//!
//! The tests that need a GPU are `#[ignore]`d, so that a machine without one
//! lists them as ignored instead of passing them; on a GPU machine run
//! `cargo test -p vramlab-allocator --features cuda --test cuda_device --
//! --ignored` (scripts/gpu-check.sh does). Run there without a driver they
//! print `skipped: no CUDA driver/device (<reason>)`. The probe tests run
//! everywhere. The GPU tests take a lock so that they never run at the
//! same time (free-memory readings and the OOM test need the GPU alone);
//! run them with `--nocapture` to see the skips and the measured figures.

#![cfg(feature = "cuda")]

use std::rc::Rc;
use std::sync::{Mutex, MutexGuard};

use vramlab_allocator::cuda::{CudaDevice, CudaDeviceOptions, CudaError, Gpu, probe};
use vramlab_allocator::{AllocConf, Allocator, Inspect, NativeAllocator, TorchVersion};
use vramlab_allocator::{Device, DeviceCallKind, DeviceError};

static GPU_LOCK: Mutex<()> = Mutex::new(());

/// The GPU and the lock that serialises GPU tests, or `None` (after
/// printing why) when there is no driver or device.
fn gpu() -> Option<(Rc<Gpu>, MutexGuard<'static, ()>)> {
    let guard = GPU_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    match Gpu::open(0) {
        Ok(g) => {
            let i = g.info();
            println!(
                "GPU 0: {} ({} bytes, granularity {}, CUDA {})",
                i.name,
                i.total_bytes,
                i.granularity,
                i.driver.cuda_version()
            );
            Some((g, guard))
        }
        Err(CudaError::NotFound(why)) => {
            println!("skipped: no CUDA driver/device ({why})");
            None
        }
        Err(e) => panic!("a driver is present but opening GPU 0 failed: {e}"),
    }
}

fn free_now(g: &Gpu) -> u64 {
    g.mem_info().expect("cuMemGetInfo").free
}

#[test]
fn probe_returns_an_error_instead_of_panicking() {
    match probe() {
        Ok(info) => {
            assert!(info.device_count >= 1);
            println!(
                "driver found: CUDA {}, {} device(s)",
                info.cuda_version(),
                info.device_count
            );
        }
        Err(e) => {
            assert!(matches!(e, CudaError::NotFound(_)), "{e:?}");
            let msg = e.to_string();
            assert!(
                msg.starts_with("no CUDA driver/device found: "),
                "unexpected message: {msg}"
            );
            println!("skipped: no CUDA driver/device ({msg})");
        }
    }
}

#[test]
fn a_gpu_index_beyond_the_count_is_not_found() {
    let e = CudaDevice::open(100_000, CudaDeviceOptions::default()).unwrap_err();
    assert!(matches!(e, CudaError::NotFound(_)), "{e:?}");
    assert!(e.to_string().starts_with("no CUDA driver/device found: "));
}

#[test]
#[ignore = "needs a CUDA GPU: cargo test --features cuda -- --ignored (scripts/gpu-check.sh runs them)"]
fn malloc_and_free_segments() {
    let Some((g, _lock)) = gpu() else { return };
    for touch in [false, true] {
        let mut d = CudaDevice::new(Rc::clone(&g), CudaDeviceOptions { touch });
        let before = free_now(&g);
        let a = d.malloc(20 << 20).expect("malloc 20 MiB");
        let b = d.malloc(2 << 20).expect("malloc 2 MiB");
        assert_ne!(a, b);
        assert_eq!(d.held_bytes(), 22 << 20);
        assert!(
            before - free_now(&g) >= 22 << 20,
            "free memory did not drop"
        );
        assert!(matches!(d.free(a, 1), Err(DeviceError::Other(_))));
        assert!(matches!(
            d.free(a + 512, 20 << 20),
            Err(DeviceError::Other(_))
        ));
        assert!(matches!(d.malloc(0), Err(DeviceError::Other(_))));
        d.free(a, 20 << 20).unwrap();
        d.free(b, 2 << 20).unwrap();
        assert_eq!(d.held_bytes(), 0);
        let kinds: Vec<_> = d.calls().iter().map(|c| c.kind).collect();
        use DeviceCallKind::*;
        assert_eq!(kinds, vec![Malloc, Malloc, Free, Free]);
        d.synchronize();
        assert_eq!(d.errors(), 3, "two rejected frees and one empty malloc");
        assert!(d.driver_time_us() > 0.0);
        let l = d.latencies();
        assert_eq!((l.malloc.count(), l.free.count()), (2, 2));
        assert!(l.malloc.summary().max_ns > 0);
        println!(
            "touch={touch}: malloc {:?}, free {:?}",
            l.malloc.summary(),
            l.free.summary()
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: cargo test --features cuda -- --ignored (scripts/gpu-check.sh runs them)"]
fn map_and_unmap_at_the_driver_granularity() {
    let Some((g, _lock)) = gpu() else { return };
    let gran = g.info().granularity;
    let mut d = CudaDevice::new(Rc::clone(&g), CudaDeviceOptions { touch: true });
    assert_eq!(d.granularity(), gran);
    assert!(
        d.reserve(gran + 1).is_err(),
        "reservation off the granularity"
    );
    let page = 2 * gran;
    let base = d.reserve(16 * page).unwrap();
    assert_eq!(base % gran, 0);
    let before = free_now(&g);
    d.map(base, 3 * page, page).unwrap();
    assert_eq!(d.held_bytes(), 3 * page);
    assert!(
        before - free_now(&g) >= 3 * page,
        "free memory did not drop"
    );
    assert!(d.map(base + page, page, page).is_err(), "double map");
    if gran > 1 {
        assert!(
            d.map(base + 4 * page, gran + 1, gran + 1).is_err(),
            "page off the granularity"
        );
    }
    assert!(
        d.map(base + 16 * page, page, page).is_err(),
        "outside the reservation"
    );
    assert!(d.unmap(base, page / 2).is_err(), "part of a page");
    d.unmap(base + page, page).unwrap();
    assert!(d.release(base, 16 * page).is_err(), "pages still mapped");
    d.unmap(base, page).unwrap();
    d.unmap(base + 2 * page, page).unwrap();
    assert_eq!(d.held_bytes(), 0);
    d.release(base, 16 * page).unwrap();
    use DeviceCallKind::*;
    let kinds: Vec<_> = d.calls().iter().map(|c| c.kind).collect();
    assert_eq!(kinds, vec![Reserve, Map, Unmap, Unmap, Unmap, Release]);
    let l = d.latencies();
    assert_eq!((l.map.count(), l.unmap.count()), (1, 3));
    println!("map {:?}, unmap {:?}", l.map.summary(), l.unmap.summary());
}

#[test]
#[ignore = "needs a CUDA GPU: cargo test --features cuda -- --ignored (scripts/gpu-check.sh runs them)"]
fn out_of_memory_maps_to_device_error_out_of_memory() {
    let Some((g, _lock)) = gpu() else { return };
    let gran = g.info().granularity;
    let total = g.info().total_bytes;
    let too_big = (total + gran).div_ceil(gran) * gran;
    let mut d = CudaDevice::new(Rc::clone(&g), CudaDeviceOptions::default());
    match d.malloc(too_big) {
        Err(DeviceError::OutOfMemory { requested, free }) => {
            assert_eq!(requested, too_big);
            assert!(free > 0 && free <= total);
        }
        other => panic!("cuMemAlloc of more than the device holds gave {other:?}"),
    }
    let base = d.reserve(2 * too_big).unwrap();
    match d.map(base, too_big, too_big) {
        Err(DeviceError::OutOfMemory { requested, .. }) => assert_eq!(requested, too_big),
        other => panic!("cuMemCreate of more than the device holds gave {other:?}"),
    }
    assert_eq!(d.held_bytes(), 0, "a failed map leaves nothing mapped");
    assert_eq!(d.failed_mallocs(), 2);
    d.release(base, 2 * too_big).unwrap();
    // The device still works after the failures.
    let p = d.malloc(gran).unwrap();
    d.free(p, gran).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU: cargo test --features cuda -- --ignored (scripts/gpu-check.sh runs them)"]
fn mem_info_reports_the_real_device() {
    let Some((g, _lock)) = gpu() else { return };
    let d = CudaDevice::new(Rc::clone(&g), CudaDeviceOptions::default());
    let m = d.mem_info();
    assert_eq!(m.total, g.info().total_bytes);
    assert!(m.free > 0 && m.free <= m.total, "{m:?}");
}

#[test]
#[ignore = "needs a CUDA GPU: cargo test --features cuda -- --ignored (scripts/gpu-check.sh runs them)"]
fn teardown_gives_every_byte_back() {
    let Some((g, _lock)) = gpu() else { return };
    let gran = g.info().granularity;
    g.synchronize().unwrap();
    let start = free_now(&g);
    {
        let mut d = CudaDevice::new(Rc::clone(&g), CudaDeviceOptions { touch: true });
        d.malloc(64 << 20).unwrap();
        d.malloc(gran).unwrap();
        let base = d.reserve(64 * gran).unwrap();
        d.map(base, 8 * gran, gran).unwrap();
        d.map(base + 16 * gran, 4 * gran, 2 * gran).unwrap();
        assert_eq!(d.held_bytes(), (64 << 20) + 13 * gran);
        // Dropped with everything still held.
    }
    g.synchronize().unwrap();
    let after_drop = free_now(&g);
    assert!(
        after_drop >= start,
        "{} bytes did not come back after drop",
        start - after_drop
    );
    // The same through the native policy, both kinds of segment.
    for conf in ["", "expandable_segments:True"] {
        let c = AllocConf::parse(conf, TorchVersion::NEWEST).unwrap();
        let mut a = NativeAllocator::new(c, CudaDevice::new(Rc::clone(&g), Default::default()));
        let mut live = Vec::new();
        for i in 0..64u64 {
            live.push(a.malloc((i + 1) * 300_000 + 512, 0).unwrap());
        }
        let st = a.stats().reserved_bytes.all.current as u64;
        assert_eq!(
            st,
            a.device().held_bytes(),
            "{conf}: allocator and device books differ"
        );
        for h in live.drain(..).step_by(2) {
            a.free(h).unwrap();
        }
        a.empty_cache().unwrap();
        assert_eq!(
            a.stats().reserved_bytes.all.current as u64,
            a.device().held_bytes(),
            "{conf}: after empty_cache"
        );
        if conf.is_empty() {
            assert!(
                a.device()
                    .calls()
                    .iter()
                    .all(|c| matches!(c.kind, DeviceCallKind::Malloc | DeviceCallKind::Free))
            );
        } else {
            assert!(
                a.device()
                    .calls()
                    .iter()
                    .any(|c| c.kind == DeviceCallKind::Map)
            );
        }
        drop(a);
        g.synchronize().unwrap();
        let end = free_now(&g);
        assert!(end >= start, "{conf}: {} bytes leaked", start - end);
    }
}
