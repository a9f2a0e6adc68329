//! [`CudaDevice`]: the [`Device`] trait over the CUDA driver.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::driver::{self, DriverError};
use super::{CudaError, Gpu};
use crate::devices::{Device, DeviceCall, DeviceCallKind, DeviceError, DevicePtr, MemInfo};
use crate::latency::DeviceLatencies;

/// How a [`CudaDevice`] behaves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CudaDeviceOptions {
    /// Write zeros (`cuMemsetD8`) over every newly obtained segment and
    /// mapped range, outside the timed call, so that the memory is known to
    /// be usable. Off by default.
    pub touch: bool,
}

/// One physical page mapped into a reservation.
#[derive(Debug, Clone, Copy)]
struct Page {
    size: u64,
    handle: u64,
}

/// A reserved virtual range and the pages mapped in it (by address).
#[derive(Debug, Clone, Default)]
struct Reservation {
    size: u64,
    pages: BTreeMap<DevicePtr, Page>,
}

/// A real GPU as a [`Device`]: every call goes to the CUDA driver, is timed
/// and (when it succeeds and changes memory) logged.
///
/// The device keeps track of what it handed out; dropping it (or
/// [`CudaDevice::release_all`]) gives back every segment, page and
/// reservation still held.
#[derive(Debug)]
pub struct CudaDevice {
    gpu: Rc<Gpu>,
    ordinal: i32,
    granularity: u64,
    opts: CudaDeviceOptions,
    segments: BTreeMap<DevicePtr, u64>,
    reservations: BTreeMap<DevicePtr, Reservation>,
    held: u64,
    log: Vec<DeviceCall>,
    lat: DeviceLatencies,
    driver_time: Duration,
    failed_mallocs: u64,
    errors: u64,
    last_info: Cell<MemInfo>,
}

impl CudaDevice {
    /// Opens GPU `ordinal` ([`Gpu::open`]) and a device on it.
    ///
    /// # Errors
    ///
    /// [`CudaError::NotFound`] without a driver or device, or
    /// [`CudaError::Driver`] when the driver fails.
    pub fn open(ordinal: u32, opts: CudaDeviceOptions) -> Result<Self, CudaError> {
        Ok(CudaDevice::new(Gpu::open(ordinal)?, opts))
    }

    /// A device on an open GPU.
    pub fn new(gpu: Rc<Gpu>, opts: CudaDeviceOptions) -> Self {
        let info = gpu.info().clone();
        let last = gpu.mem_info().unwrap_or(MemInfo {
            free: info.total_bytes,
            total: info.total_bytes,
        });
        CudaDevice {
            ordinal: info.ordinal as i32,
            granularity: info.granularity,
            gpu,
            opts,
            segments: BTreeMap::new(),
            reservations: BTreeMap::new(),
            held: 0,
            log: Vec::new(),
            lat: DeviceLatencies::default(),
            driver_time: Duration::ZERO,
            failed_mallocs: 0,
            errors: 0,
            last_info: Cell::new(last),
        }
    }

    /// Latency histograms of the malloc, free, map and unmap calls made so
    /// far (successful calls only).
    pub fn latencies(&self) -> &DeviceLatencies {
        &self.lat
    }

    /// Time spent in driver calls so far (every call, failed ones included,
    /// not counting [`CudaDeviceOptions::touch`] writes), microseconds.
    pub fn driver_time_us(&self) -> f64 {
        self.driver_time.as_secs_f64() * 1e6
    }

    /// Bytes of device memory held now: segments plus mapped pages.
    pub fn held_bytes(&self) -> u64 {
        self.held
    }

    /// Segment and page allocations that failed for lack of memory.
    pub fn failed_mallocs(&self) -> u64 {
        self.failed_mallocs
    }

    /// Calls that failed for another reason, and synchronisations that
    /// failed (the trait cannot report those).
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Gives back everything still held, as dropping the device does:
    /// synchronises, frees every segment, unmaps and releases every page and
    /// frees every reservation (each logged like a normal call). Returns the
    /// bytes of device memory (segments + pages) given back.
    ///
    /// # Errors
    ///
    /// The first driver failure; the device still tries everything else.
    pub fn release_all(&mut self) -> Result<u64, CudaError> {
        let mut first: Option<CudaError> = None;
        let mut keep = |r: Result<(), CudaError>| {
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        };
        keep(self.gpu.synchronize());
        let before = self.held;
        let segs: Vec<(DevicePtr, u64)> = self.segments.iter().map(|(&p, &s)| (p, s)).collect();
        for (p, s) in segs {
            keep(self.free(p, s).map_err(to_cuda("cuMemFree")));
        }
        let bases: Vec<DevicePtr> = self.reservations.keys().copied().collect();
        for base in bases {
            // Always found: every base was a key when collected, and only
            // `release(base)` at the end of its own iteration removes it.
            let Some(r) = self.reservations.get(&base) else {
                continue;
            };
            let (size, pages): (u64, Vec<(DevicePtr, u64)>) = (
                r.size,
                r.pages.iter().map(|(&p, pg)| (p, pg.size)).collect(),
            );
            for (p, s) in pages {
                keep(self.unmap(p, s).map_err(to_cuda("cuMemUnmap")));
            }
            keep(
                self.release(base, size)
                    .map_err(to_cuda("cuMemAddressFree")),
            );
        }
        match first {
            Some(e) => Err(e),
            None => Ok(before - self.held),
        }
    }

    fn current(&self) -> Result<(), DeviceError> {
        self.gpu
            .make_current()
            .map_err(|e| DeviceError::Other(e.to_string()))
    }

    /// Times `f` into the driver total and returns its result and duration.
    fn timed<T>(&mut self, f: impl FnOnce() -> T) -> (T, Duration) {
        let t = Instant::now();
        let r = f();
        let d = t.elapsed();
        self.driver_time += d;
        (r, d)
    }

    fn free_now(&self) -> u64 {
        self.mem_info().free
    }

    /// Maps a failed allocation call to [`DeviceError`].
    fn alloc_error(&mut self, call: &str, size: u64, e: &DriverError) -> DeviceError {
        if driver::is_oom(e) {
            self.failed_mallocs += 1;
            DeviceError::OutOfMemory {
                requested: size,
                free: self.free_now(),
            }
        } else {
            self.errors += 1;
            DeviceError::Other(format!("{call}({size}): {}", driver::describe(e)))
        }
    }

    fn other(&mut self, msg: String) -> DeviceError {
        self.errors += 1;
        DeviceError::Other(msg)
    }

    fn record(&mut self, kind: DeviceCallKind, ptr: DevicePtr, size: u64) {
        self.log.push(DeviceCall { kind, ptr, size });
    }

    /// Unmaps and releases `pages` (already removed from the books);
    /// returns the first failure.
    fn drop_pages(pages: &[(DevicePtr, Page)]) -> Result<(), String> {
        let mut first = None;
        for &(p, pg) in pages {
            if let Err(e) = driver::mem_unmap(p, pg.size) {
                first
                    .get_or_insert_with(|| format!("cuMemUnmap({p:#x}): {}", driver::describe(&e)));
            }
            if let Err(e) = driver::mem_release(pg.handle) {
                first.get_or_insert_with(|| {
                    format!("cuMemRelease({p:#x}): {}", driver::describe(&e))
                });
            }
        }
        first.map_or(Ok(()), Err)
    }

    fn touch(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError> {
        if !self.opts.touch {
            return Ok(());
        }
        driver::memset_d8(ptr, 0, size).map_err(|e| {
            self.other(format!(
                "cuMemsetD8({ptr:#x}, {size}): {}",
                driver::describe(&e)
            ))
        })
    }
}

fn to_cuda(call: &'static str) -> impl Fn(DeviceError) -> CudaError {
    move |e| CudaError::Driver {
        call,
        message: e.to_string(),
    }
}

impl Device for CudaDevice {
    fn malloc(&mut self, size: u64) -> Result<DevicePtr, DeviceError> {
        if size == 0 {
            return Err(self.other("cuMemAlloc(0): a segment cannot be empty".into()));
        }
        self.current()?;
        let (r, d) = self.timed(|| driver::mem_alloc(size));
        let ptr = r.map_err(|e| self.alloc_error("cuMemAlloc", size, &e))?;
        self.lat.malloc.record(d);
        if let Err(e) = self.touch(ptr, size) {
            let _ = driver::mem_free(ptr);
            return Err(e);
        }
        self.segments.insert(ptr, size);
        self.held += size;
        self.record(DeviceCallKind::Malloc, ptr, size);
        Ok(ptr)
    }

    fn free(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError> {
        match self.segments.get(&ptr) {
            Some(&s) if s == size => {}
            Some(&s) => {
                return Err(self.other(format!(
                    "cuMemFree({ptr:#x}): segment has {s} bytes, caller said {size}"
                )));
            }
            None => return Err(self.other(format!("cuMemFree({ptr:#x}): not a segment"))),
        }
        self.current()?;
        let (r, d) = self.timed(|| driver::mem_free(ptr));
        if let Err(e) = r {
            return Err(self.other(format!("cuMemFree({ptr:#x}): {}", driver::describe(&e))));
        }
        self.lat.free.record(d);
        self.segments.remove(&ptr);
        self.held -= size;
        self.record(DeviceCallKind::Free, ptr, size);
        Ok(())
    }

    fn mem_info(&self) -> MemInfo {
        // The trait cannot fail here: on a driver error the last reading
        // stands.
        if let Ok(info) = self.gpu.mem_info() {
            self.last_info.set(info);
        }
        self.last_info.get()
    }

    fn synchronize(&mut self) {
        if self.current().is_err() {
            self.errors += 1;
            return;
        }
        let (r, _) = self.timed(driver::ctx_synchronize);
        if r.is_err() {
            self.errors += 1;
        }
    }

    fn granularity(&self) -> u64 {
        self.granularity
    }

    fn reserve(&mut self, size: u64) -> Result<DevicePtr, DeviceError> {
        if size == 0 || size % self.granularity != 0 {
            return Err(self.other(format!(
                "cuMemAddressReserve({size}): not a multiple of the {} byte granularity",
                self.granularity
            )));
        }
        self.current()?;
        // Alignment 0 (the granularity), as PyTorch's ExpandableSegment does.
        let (r, _) = self.timed(|| driver::address_reserve(size, 0));
        let ptr = r.map_err(|e| self.alloc_error("cuMemAddressReserve", size, &e))?;
        self.reservations.insert(
            ptr,
            Reservation {
                size,
                pages: BTreeMap::new(),
            },
        );
        self.record(DeviceCallKind::Reserve, ptr, size);
        Ok(ptr)
    }

    // Expect: `base` is a key of `reservations` (looked up at the start of
    // this call, with `&mut self` held throughout), and entries leave the map
    // only in `release`, which this method does not call.
    #[allow(clippy::expect_used)]
    fn map(&mut self, ptr: DevicePtr, size: u64, page: u64) -> Result<(), DeviceError> {
        if page == 0 || page % self.granularity != 0 || size == 0 || size % page != 0 {
            return Err(self.other(format!(
                "map({ptr:#x}, {size}, page {page}): size and page must be non-zero multiples of the {} byte granularity",
                self.granularity
            )));
        }
        let end = ptr.checked_add(size);
        let Some((&base, res)) = self
            .reservations
            .range(..=ptr)
            .next_back()
            .filter(|(b, r)| end.is_some_and(|e| e <= **b + r.size))
        else {
            return Err(self.other(format!("map({ptr:#x}, {size}): outside any reservation")));
        };
        if (ptr - base) % page != 0 {
            return Err(self.other(format!(
                "map({ptr:#x}): not aligned to the {page} byte page"
            )));
        }
        let end = ptr + size;
        let overlaps = res
            .pages
            .range(..end)
            .next_back()
            .is_some_and(|(&p, pg)| p + pg.size > ptr);
        if overlaps {
            return Err(self.other(format!("map({ptr:#x}, {size}): already mapped")));
        }
        self.current()?;
        let ord = self.ordinal;
        let (r, d) = self.timed(|| {
            let mut done: Vec<(DevicePtr, Page)> = Vec::with_capacity((size / page) as usize);
            let mut p = ptr;
            while p < end {
                let h = match driver::mem_create(page, ord) {
                    Ok(h) => h,
                    Err(e) => return Err(("cuMemCreate", e, done)),
                };
                if let Err(e) = driver::mem_map(p, page, h) {
                    let _ = driver::mem_release(h);
                    return Err(("cuMemMap", e, done));
                }
                done.push((
                    p,
                    Page {
                        size: page,
                        handle: h,
                    },
                ));
                p += page;
            }
            if let Err(e) = driver::mem_set_access(ptr, size, ord) {
                return Err(("cuMemSetAccess", e, done));
            }
            Ok(done)
        });
        let done = match r {
            Ok(done) => done,
            Err((call, e, done)) => {
                // On failure nothing stays mapped.
                let rollback = CudaDevice::drop_pages(&done);
                let err = self.alloc_error(call, size, &e);
                if let Err(m) = rollback {
                    self.errors += 1;
                    return Err(DeviceError::Other(format!(
                        "{err}; and undoing the partial map failed: {m}"
                    )));
                }
                return Err(err);
            }
        };
        self.lat.map.record(d);
        if let Err(e) = self.touch(ptr, size) {
            let _ = CudaDevice::drop_pages(&done);
            return Err(e);
        }
        let res = self.reservations.get_mut(&base).expect("found above");
        res.pages.extend(done);
        self.held += size;
        self.record(DeviceCallKind::Map, ptr, size);
        Ok(())
    }

    // Expect: as in `map`: `base` was found in `reservations` at the start of
    // this call and only `release` removes entries.
    #[allow(clippy::expect_used)]
    fn unmap(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError> {
        let end = ptr.saturating_add(size);
        let Some((&base, res)) = self.reservations.range(..=ptr).next_back() else {
            return Err(self.other(format!("unmap({ptr:#x}): outside any reservation")));
        };
        let pages: Vec<(DevicePtr, Page)> = res
            .pages
            .range(ptr..end)
            .filter(|&(&p, pg)| p + pg.size <= end)
            .map(|(&p, &pg)| (p, pg))
            .collect();
        let mapped: u64 = pages.iter().map(|(_, pg)| pg.size).sum();
        if mapped != size || size == 0 {
            return Err(self.other(format!(
                "unmap({ptr:#x}, {size}): {mapped} bytes of whole pages are mapped there"
            )));
        }
        self.current()?;
        // PyTorch's unmapHandles waits for the stream before unmapping
        // (cuMemUnmap does not always synchronise); the wait is part of the
        // timed call.
        let (r, d) = self.timed(|| {
            let s = driver::ctx_synchronize()
                .map_err(|e| format!("cuCtxSynchronize: {}", driver::describe(&e)));
            let u = CudaDevice::drop_pages(&pages);
            s.and(u)
        });
        // The handles are gone whatever happened: forget them.
        let res = self.reservations.get_mut(&base).expect("found above");
        for (p, _) in &pages {
            res.pages.remove(p);
        }
        self.held -= size;
        if let Err(m) = r {
            return Err(self.other(format!("unmap({ptr:#x}, {size}): {m}")));
        }
        self.lat.unmap.record(d);
        self.record(DeviceCallKind::Unmap, ptr, size);
        Ok(())
    }

    fn release(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError> {
        match self.reservations.get(&ptr) {
            Some(r) if r.size == size && r.pages.is_empty() => {}
            Some(_) => {
                return Err(self.other(format!(
                    "cuMemAddressFree({ptr:#x}): wrong size or pages still mapped"
                )));
            }
            None => {
                return Err(self.other(format!("cuMemAddressFree({ptr:#x}): not a reservation")));
            }
        }
        self.current()?;
        let (r, _) = self.timed(|| driver::address_free(ptr, size));
        if let Err(e) = r {
            return Err(self.other(format!(
                "cuMemAddressFree({ptr:#x}): {}",
                driver::describe(&e)
            )));
        }
        self.reservations.remove(&ptr);
        self.record(DeviceCallKind::Release, ptr, size);
        Ok(())
    }

    fn calls(&self) -> &[DeviceCall] {
        &self.log
    }

    fn forget_calls(&mut self) {
        self.log.clear();
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; `release_all` tries
        // everything regardless.
        let _ = self.release_all();
    }
}
