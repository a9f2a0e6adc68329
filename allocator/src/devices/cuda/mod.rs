//! A real GPU as a [`Device`](crate::Device): [`CudaDevice`] calls the CUDA
//! driver through cudarc (feature `cuda`).
//!
//! * Segments: `cuMemAlloc` / `cuMemFree`.
//! * Expandable segments: `cuMemAddressReserve`, `cuMemCreate` +
//!   `cuMemMap` + `cuMemSetAccess`, `cuMemUnmap` + `cuMemRelease`,
//!   `cuMemAddressFree`, at the granularity the driver reports
//!   (`cuMemGetAllocationGranularity`).
//! * `cuMemGetInfo`, `cuCtxSynchronize`, and optionally a `cuMemsetD8` of
//!   every newly obtained segment or page ([`CudaDeviceOptions::touch`]).
//! * Every malloc, free, map and unmap is timed into an HdrHistogram
//!   ([`CudaDevice::latencies`]).
//!
//! The driver library is loaded at run time, so this builds on machines
//! without CUDA. [`probe`] (and so [`Gpu::open`] and [`CudaDevice::open`])
//! checks, in order, that the driver library loads and exports every entry
//! point used here, that `cuInit` succeeds and that the driver reports at
//! least one device; otherwise it returns [`CudaError::NotFound`] ("no CUDA
//! driver/device found: …") instead of letting cudarc panic.
//!
//! This module holds the only `unsafe` code of vramlab, all of it in
//! `driver.rs`, each block with a `SAFETY:` comment.
//!
//! The driver's context is per thread: a [`Gpu`] (and every [`CudaDevice`]
//! on it) makes its context current before each call, and neither type is
//! `Send`.

mod device;
mod driver;

use std::rc::Rc;

pub use device::{CudaDevice, CudaDeviceOptions};

use crate::devices::MemInfo;

/// Why the CUDA device cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CudaError {
    /// No usable driver library, `cuInit` failed, or no such device.
    #[error("no CUDA driver/device found: {0}")]
    NotFound(String),
    /// A driver call failed.
    #[error("{call} failed: {message}")]
    Driver {
        /// The driver entry point.
        call: &'static str,
        /// The driver's error name and description.
        message: String,
    },
}

impl CudaError {
    fn driver(call: &'static str, e: &driver::DriverError) -> Self {
        CudaError::Driver {
            call,
            message: driver::describe(e),
        }
    }
}

/// What [`probe`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverInfo {
    /// `cuDriverGetVersion`: the CUDA version the driver supports, as
    /// `1000 * major + 10 * minor` (12080 = 12.8).
    pub driver_version: i32,
    /// `cuDeviceGetCount` (at least 1).
    pub device_count: u32,
}

impl DriverInfo {
    /// The driver's CUDA version as `major.minor`.
    pub fn cuda_version(&self) -> String {
        format!(
            "{}.{}",
            self.driver_version / 1000,
            (self.driver_version % 1000) / 10
        )
    }
}

/// Looks for a CUDA driver and a device without panicking: the driver
/// library must load and export every entry point this module uses, then
/// `cuInit` must succeed, then the driver must report at least one device.
///
/// # Errors
///
/// [`CudaError::NotFound`] naming the step that failed.
pub fn probe() -> Result<DriverInfo, CudaError> {
    // cudarc panics on a missing library or symbol; both are checked first,
    // and anything that still panics is turned into the same error.
    std::panic::catch_unwind(probe_steps).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "the CUDA bindings panicked".to_string());
        Err(CudaError::NotFound(msg))
    })
}

fn probe_steps() -> Result<DriverInfo, CudaError> {
    let nf = |m: String| Err(CudaError::NotFound(m));
    if !driver::library_present() {
        return nf(
            "the CUDA driver library (libcuda.so / nvcuda.dll) cannot be loaded; is the NVIDIA driver installed and on the library path?"
                .into(),
        );
    }
    if let Some(sym) = driver::first_missing_symbol() {
        return nf(format!(
            "the loaded CUDA driver library does not export {sym} (driver too old?)"
        ));
    }
    if let Err(e) = driver::init() {
        return nf(format!("cuInit failed: {}", driver::describe(&e)));
    }
    let count = match driver::device_count() {
        Ok(n) => n,
        Err(e) => {
            return nf(format!("cuDeviceGetCount failed: {}", driver::describe(&e)));
        }
    };
    if count <= 0 {
        return nf("the driver reports no CUDA device".into());
    }
    let driver_version = driver::driver_version().unwrap_or(0);
    Ok(DriverInfo {
        driver_version,
        device_count: count as u32,
    })
}

/// A GPU and what the driver says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    /// Device ordinal (as `CUDA_VISIBLE_DEVICES` numbers them).
    pub ordinal: u32,
    /// `cuDeviceGetName`.
    pub name: String,
    /// `cuDeviceTotalMem`, bytes.
    pub total_bytes: u64,
    /// `cuMemGetAllocationGranularity` (minimum) for device memory, bytes.
    pub granularity: u64,
    /// The driver.
    pub driver: DriverInfo,
}

/// An open GPU: its primary context, retained while this value lives.
///
/// Several [`CudaDevice`]s may share one `Gpu` (through `Rc`); free memory
/// read from the `Gpu` after a device is dropped tells whether the device
/// gave everything back.
#[derive(Debug)]
pub struct Gpu {
    info: GpuInfo,
    dev: cudarc::driver::sys::CUdevice,
    ctx: cudarc::driver::sys::CUcontext,
}

impl Gpu {
    /// Probes the driver ([`probe`]), retains GPU `ordinal`'s primary
    /// context, reads its name, memory and granularity, and warms the
    /// driver up (one small segment and one mapped page, obtained, written
    /// and given back), so that memory the driver sets aside lazily on first
    /// use is not mistaken for a leak later.
    ///
    /// # Errors
    ///
    /// [`CudaError::NotFound`] when there is no driver or no such device;
    /// [`CudaError::Driver`] when a driver call fails.
    pub fn open(ordinal: u32) -> Result<Rc<Gpu>, CudaError> {
        let driver = probe()?;
        if ordinal >= driver.device_count {
            return Err(CudaError::NotFound(format!(
                "GPU {ordinal} was asked for, but the driver reports {} device{} (0..{})",
                driver.device_count,
                if driver.device_count == 1 { "" } else { "s" },
                driver.device_count
            )));
        }
        let ord = ordinal as i32;
        let dev = driver::device_get(ord).map_err(|e| CudaError::driver("cuDeviceGet", &e))?;
        let name =
            driver::device_name(dev).map_err(|e| CudaError::driver("cuDeviceGetName", &e))?;
        let total_bytes =
            driver::device_total_mem(dev).map_err(|e| CudaError::driver("cuDeviceTotalMem", &e))?;
        let ctx = driver::primary_ctx_retain(dev)
            .map_err(|e| CudaError::driver("cuDevicePrimaryCtxRetain", &e))?;
        // From here on `Drop` releases the context.
        let mut gpu = Gpu {
            info: GpuInfo {
                ordinal,
                name,
                total_bytes,
                granularity: 0,
                driver,
            },
            dev,
            ctx,
        };
        gpu.make_current()?;
        gpu.info.granularity = driver::allocation_granularity(ord)
            .map_err(|e| CudaError::driver("cuMemGetAllocationGranularity", &e))?;
        if gpu.info.granularity == 0 {
            return Err(CudaError::Driver {
                call: "cuMemGetAllocationGranularity",
                message: "reported a granularity of 0 bytes".into(),
            });
        }
        gpu.warm_up()?;
        Ok(Rc::new(gpu))
    }

    /// What the driver says about this GPU.
    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// Makes this GPU's context current on the calling thread.
    ///
    /// # Errors
    ///
    /// When `cuCtxSetCurrent` fails.
    pub(crate) fn make_current(&self) -> Result<(), CudaError> {
        driver::ctx_set_current(self.ctx).map_err(|e| CudaError::driver("cuCtxSetCurrent", &e))
    }

    /// `cuMemGetInfo`: free and total device memory now.
    ///
    /// # Errors
    ///
    /// When the driver call fails.
    pub fn mem_info(&self) -> Result<MemInfo, CudaError> {
        self.make_current()?;
        let (free, total) =
            driver::mem_get_info().map_err(|e| CudaError::driver("cuMemGetInfo", &e))?;
        Ok(MemInfo { free, total })
    }

    /// `cuCtxSynchronize`.
    ///
    /// # Errors
    ///
    /// When the driver call fails (an earlier asynchronous error included).
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.make_current()?;
        driver::ctx_synchronize().map_err(|e| CudaError::driver("cuCtxSynchronize", &e))
    }

    fn warm_up(&self) -> Result<(), CudaError> {
        let g = self.info.granularity;
        let ord = self.info.ordinal as i32;
        let d = |call: &'static str| move |e: driver::DriverError| CudaError::driver(call, &e);
        let p = driver::mem_alloc(g).map_err(d("cuMemAlloc"))?;
        let r = driver::memset_d8(p, 0, g).map_err(d("cuMemsetD8"));
        driver::mem_free(p).map_err(d("cuMemFree"))?;
        r?;
        // The virtual-memory path is warmed up on a best-effort basis: a
        // driver without it still serves plain segments, and a map through
        // the device reports its own error.
        let Ok(base) = driver::address_reserve(g, 0) else {
            return Ok(());
        };
        if let Ok(h) = driver::mem_create(g, ord) {
            if driver::mem_map(base, g, h).is_ok() {
                if driver::mem_set_access(base, g, ord).is_ok() {
                    let _ = driver::memset_d8(base, 0, g);
                }
                let _ = driver::ctx_synchronize();
                let _ = driver::mem_unmap(base, g);
            }
            let _ = driver::mem_release(h);
        }
        let _ = driver::address_free(base, g);
        Ok(())
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // Nothing useful can be done about a failure while dropping.
        let _ = driver::primary_ctx_release(self.dev);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_never_panics() {
        match probe() {
            Ok(info) => assert!(info.device_count > 0),
            Err(CudaError::NotFound(m)) => assert!(!m.is_empty()),
            Err(e) => panic!("probe returned {e}"),
        }
    }

    #[test]
    fn not_found_message() {
        let e = CudaError::NotFound("x".into());
        assert_eq!(e.to_string(), "no CUDA driver/device found: x");
        let v = DriverInfo {
            driver_version: 12080,
            device_count: 1,
        };
        assert_eq!(v.cuda_version(), "12.8");
    }
}
