//! `SimDevice`: a simulated GPU with a capacity, an address space (laid
//! out by a [`Placement`] policy), a call log and a cost model. Every test
//! and every sweep runs on it.

use std::collections::{BTreeMap, VecDeque};

use crate::devices::placement::{Placement, Placer};
use crate::devices::{Device, DeviceCall, DeviceCallKind, DeviceError, DevicePtr, MemInfo};

/// 1 GiB.
const GIB: u64 = 1 << 30;
/// 2 MiB: the physical page granularity of current NVIDIA GPUs.
pub(super) const DEFAULT_GRANULARITY: u64 = 2 << 20;
/// Where the simulated address space starts (looks like a CUDA VA).
const ADDRESS_BASE: u64 = 0x7f00_0000_0000;
/// Alignment of simulated cudaMalloc results (large-page aligned, as observed).
const MALLOC_ALIGN: u64 = 2 << 20;
/// Reported total memory when no capacity is set (1 TiB).
const UNLIMITED_TOTAL: u64 = 1 << 40;

/// Simulated cost of driver calls, in microseconds.
///
/// The defaults are order-of-magnitude figures for current data-centre GPUs
/// (cudaMalloc tens of microseconds and more for large sizes; cudaFree
/// implies a device synchronisation; the virtual-memory path costs per
/// physical page). They rank settings by how often they call the driver;
/// they are not a latency prediction for a specific card.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Fixed cost of cudaMalloc.
    pub malloc_us: f64,
    /// Additional cost of cudaMalloc per GiB.
    pub malloc_us_per_gib: f64,
    /// Fixed cost of cudaFree.
    pub free_us: f64,
    /// Additional cost of cudaFree per GiB.
    pub free_us_per_gib: f64,
    /// cuMemCreate + cuMemMap + cuMemSetAccess, per physical page.
    pub map_us_per_page: f64,
    /// cuMemUnmap + cuMemRelease, per physical page.
    pub unmap_us_per_page: f64,
    /// cuMemAddressReserve or cuMemAddressFree.
    pub reserve_us: f64,
    /// A device or stream synchronisation.
    pub sync_us: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            malloc_us: 25.0,
            malloc_us_per_gib: 20.0,
            free_us: 30.0,
            free_us_per_gib: 10.0,
            map_us_per_page: 6.0,
            unmap_us_per_page: 4.0,
            reserve_us: 5.0,
            sync_us: 10.0,
        }
    }
}

/// A reserved virtual range and what is mapped in it: runs of pages as
/// offset from the base → (bytes, page size). Runs never overlap; pages
/// lie at multiples of their size from the base. (Runs, not one entry per
/// page: a mapping of terabytes must not cost millions of entries.)
#[derive(Debug, Clone, Default)]
struct Reservation {
    size: u64,
    mapped: BTreeMap<u64, (u64, u64)>,
}

impl Reservation {
    /// `true` if a mapped page overlaps `[lo, hi)` (offsets).
    fn overlaps(&self, lo: u64, hi: u64) -> bool {
        // Runs are disjoint and sorted: only the last one starting below
        // `hi` can reach past `lo`.
        self.mapped
            .range(..hi)
            .next_back()
            .is_some_and(|(&o, &(len, _))| o + len > lo)
    }
}

/// A simulated GPU.
#[derive(Debug, Clone)]
pub struct SimDevice {
    capacity: u64,
    total: u64,
    granularity: u64,
    used: u64,
    placement: Placement,
    placer: Placer,
    placements: VecDeque<DevicePtr>,
    segments: BTreeMap<DevicePtr, u64>,
    reservations: BTreeMap<DevicePtr, Reservation>,
    log: Vec<DeviceCall>,
    cost: CostModel,
    time_us: f64,
    failed_mallocs: u64,
    refusal: Refusal,
    /// Segments whose physical memory sleeps (an engine pool's): they keep
    /// their addresses and hold no memory.
    asleep: BTreeMap<DevicePtr, u64>,
}

/// Fidelity mode: allocations the device refuses, as the real one did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Refusal {
    /// Allocations succeed while memory lasts.
    #[default]
    None,
    /// Refuse until a segment is freed or pages are unmapped (a malloc
    /// that released the cache and retried).
    UntilRelease,
    /// Refuse every allocation (a recorded out-of-memory).
    All,
}

impl Default for SimDevice {
    fn default() -> Self {
        SimDevice::unlimited()
    }
}

impl SimDevice {
    /// A device that never runs out of memory.
    pub fn unlimited() -> Self {
        SimDevice::with_capacity(None)
    }

    /// A device with `capacity` bytes (`None` = unlimited).
    pub fn with_capacity(capacity: Option<u64>) -> Self {
        SimDevice {
            capacity: capacity.unwrap_or(u64::MAX),
            total: capacity.unwrap_or(UNLIMITED_TOTAL),
            granularity: DEFAULT_GRANULARITY,
            used: 0,
            placement: Placement::default(),
            placer: Placer::new(Placement::default(), ADDRESS_BASE),
            placements: VecDeque::new(),
            segments: BTreeMap::new(),
            reservations: BTreeMap::new(),
            log: Vec::new(),
            cost: CostModel::default(),
            time_us: 0.0,
            failed_mallocs: 0,
            refusal: Refusal::None,
            asleep: BTreeMap::new(),
        }
    }

    /// Sets the total memory `cudaMemGetInfo` reports (it sizes expandable
    /// reservations and memory fractions); capacity is unchanged.
    pub fn set_total(&mut self, total: u64) {
        self.total = total;
    }

    /// Replaces the cost model.
    pub fn set_cost_model(&mut self, cost: CostModel) {
        self.cost = cost;
    }

    /// Chooses how new segments and reservations are placed. Ranges the
    /// device already holds are handed to the new policy as if it had
    /// placed them elsewhere (call it before the first allocation for a
    /// replay that follows one policy throughout).
    pub fn set_placement(&mut self, placement: Placement) {
        self.placement = placement;
        self.placer = Placer::new(placement, ADDRESS_BASE);
        for (&p, &s) in &self.segments {
            self.placer.malloced(p, s);
        }
        for (&p, r) in &self.reservations {
            self.placer.reserved(p, r.size);
        }
    }

    /// Bytes of physical memory in use (segments + mapped pages).
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Simulated time spent in driver calls so far, in microseconds.
    pub fn time_us(&self) -> f64 {
        self.time_us
    }

    /// Allocation calls that failed for lack of memory.
    pub fn failed_mallocs(&self) -> u64 {
        self.failed_mallocs
    }

    /// Fidelity mode: the next segment or reservation is placed at `addr`
    /// (where the real allocator's segment was), if that range is free.
    pub fn place_next(&mut self, addr: DevicePtr) {
        self.placements.push_back(addr);
    }

    /// Forgets placements that were not used.
    pub fn clear_placements(&mut self) {
        self.placements.clear();
    }

    /// Fidelity mode: refuse allocations as `refusal` says until told
    /// otherwise ([`Refusal::UntilRelease`] ends by itself).
    pub fn refuse(&mut self, refusal: Refusal) {
        self.refusal = refusal;
    }

    /// Memory taken outside the allocator (NCCL's buffers, a library's own
    /// allocation): `size` bytes of physical memory, at no address the
    /// allocator sees. Fails when the device is full.
    pub fn take_outside(&mut self, size: u64) -> Result<(), DeviceError> {
        self.fits(size)?;
        self.used += size;
        Ok(())
    }

    /// Memory of [`SimDevice::take_outside`] goes back.
    pub fn give_outside(&mut self, size: u64) {
        self.used = self.used.saturating_sub(size);
    }

    /// The segment at `ptr` sleeps: it keeps its address and its physical
    /// memory goes back (an engine pool's `cuMemUnmap` + `cuMemRelease`).
    /// Returns its size.
    pub fn suspend(&mut self, ptr: DevicePtr) -> Result<u64, DeviceError> {
        let Some(&size) = self.segments.get(&ptr) else {
            return Err(DeviceError::Other(format!(
                "sleep of {ptr:#x}: not a segment"
            )));
        };
        if self.asleep.insert(ptr, size).is_some() {
            return Err(DeviceError::Other(format!(
                "sleep of {ptr:#x}: already asleep"
            )));
        }
        self.used -= size;
        Ok(size)
    }

    /// The sleeping segments at `ptrs` are backed again, all or none: an
    /// out-of-memory error when their sum does not fit. An address that no
    /// longer sleeps (its segment was freed, or is another's now) is
    /// passed over.
    pub fn resume(&mut self, ptrs: &[DevicePtr]) -> Result<(), DeviceError> {
        let mut total = 0u64;
        for p in ptrs {
            total = total.saturating_add(self.asleep.get(p).copied().unwrap_or(0));
        }
        self.fits(total)?;
        for p in ptrs {
            self.asleep.remove(p);
        }
        self.used += total;
        Ok(())
    }

    fn fits(&self, size: u64) -> Result<(), DeviceError> {
        if self.refusal != Refusal::None {
            return Err(DeviceError::OutOfMemory {
                requested: size,
                free: 0,
            });
        }
        if self
            .used
            .checked_add(size)
            .is_none_or(|u| u > self.capacity)
        {
            return Err(DeviceError::OutOfMemory {
                requested: size,
                free: self.capacity.saturating_sub(self.used),
            });
        }
        Ok(())
    }

    /// `true` if `[addr, addr+size)` overlaps no segment, no reservation's
    /// base and no mapped page.
    fn range_is_free_of_segments_and_pages(&self, addr: u64, size: u64) -> bool {
        let end = addr.saturating_add(size);
        let seg = self
            .segments
            .range(..end)
            .next_back()
            .map(|(&p, &s)| (p, s));
        if seg.is_some_and(|(p, s)| p < end && addr < p + s) {
            return false;
        }
        if self.reservations.range(addr..end).next().is_some() {
            return false;
        }
        // Mapped pages of a reservation that starts below `addr`.
        self.reservations
            .range(..addr)
            .next_back()
            .is_none_or(|(&base, r)| !r.overlaps(addr - base, end - base))
    }

    /// `true` if `[addr, addr+size)` overlaps no segment or reservation.
    fn range_is_free(&self, addr: u64, size: u64) -> bool {
        let end = addr.saturating_add(size);
        let overlaps =
            |map_end: Option<(u64, u64)>| map_end.is_some_and(|(p, s)| p < end && addr < p + s);
        let seg_before = self
            .segments
            .range(..end)
            .next_back()
            .map(|(&p, &s)| (p, s));
        let res_before = self
            .reservations
            .range(..end)
            .next_back()
            .map(|(&p, r)| (p, r.size));
        !overlaps(seg_before) && !overlaps(res_before)
    }

    /// Picks an address for a new range: a requested placement, or where
    /// the placement policy puts it, or (when the policy has no room, which
    /// only traces of exabyte-sized requests reach) the first gap that
    /// fits; `None` when no gap does.
    ///
    /// A placed reservation may overlap the unused tail of another
    /// reservation: the simulated reservations are sized from the simulated
    /// device's total memory, which can be larger than the recording GPU's,
    /// while the recorded bases only show that the real ones did not overlap.
    fn place(&mut self, size: u64, align: u64, reservation: bool) -> Option<DevicePtr> {
        if let Some(addr) = self.placements.pop_front() {
            let free = if reservation {
                self.range_is_free_of_segments_and_pages(addr, size)
            } else {
                self.range_is_free(addr, size)
            };
            // A recorded address too close to the end of the address
            // space for this size (a hostile snapshot) is not used.
            if free && addr.checked_add(size).is_some() {
                return Some(addr);
            }
        }
        let pick = if reservation {
            self.placer.pick_reserve(size, align)
        } else {
            self.placer.pick_malloc(size, align)
        };
        match pick {
            Some(addr) if self.range_is_free(addr, size) => Some(addr),
            _ => self.first_gap(size, align),
        }
    }

    /// The lowest aligned address from the base where `size` bytes overlap
    /// no segment and no reservation.
    fn first_gap(&self, size: u64, align: u64) -> Option<DevicePtr> {
        let mut taken: Vec<(u64, u64)> = self
            .segments
            .iter()
            .map(|(&p, &s)| (p, p.saturating_add(s)))
            .chain(
                self.reservations
                    .iter()
                    .map(|(&p, r)| (p, p.saturating_add(r.size))),
            )
            .collect();
        taken.sort_unstable();
        let mut cursor = ADDRESS_BASE;
        for (start, end) in taken {
            let addr = cursor.div_ceil(align).checked_mul(align)?;
            if addr.checked_add(size).is_some_and(|e| e <= start) {
                return Some(addr);
            }
            cursor = cursor.max(end);
        }
        let addr = cursor.div_ceil(align).checked_mul(align)?;
        addr.checked_add(size).map(|_| addr)
    }

    /// The error of an allocation that found no address range.
    fn no_address_space(&mut self, size: u64) -> DeviceError {
        self.failed_mallocs += 1;
        DeviceError::OutOfMemory {
            requested: size,
            free: self.capacity.saturating_sub(self.used),
        }
    }

    fn record(&mut self, kind: DeviceCallKind, ptr: DevicePtr, size: u64, cost_us: f64) {
        self.log.push(DeviceCall { kind, ptr, size });
        self.time_us += cost_us;
    }
}

impl Device for SimDevice {
    fn malloc(&mut self, size: u64) -> Result<DevicePtr, DeviceError> {
        if let Err(e) = self.fits(size) {
            self.failed_mallocs += 1;
            return Err(e);
        }
        let Some(ptr) = self.place(size, MALLOC_ALIGN, false) else {
            return Err(self.no_address_space(size));
        };
        self.used += size;
        self.segments.insert(ptr, size);
        self.placer.malloced(ptr, size);
        let cost = self.cost.malloc_us + self.cost.malloc_us_per_gib * size as f64 / GIB as f64;
        self.record(DeviceCallKind::Malloc, ptr, size, cost);
        Ok(ptr)
    }

    fn free(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError> {
        match self.segments.get(&ptr) {
            Some(&s) if s == size => {}
            Some(&s) => {
                return Err(DeviceError::Other(format!(
                    "cudaFree({ptr:#x}): segment has {s} bytes, caller said {size}"
                )));
            }
            None => {
                return Err(DeviceError::Other(format!(
                    "cudaFree({ptr:#x}): not a segment"
                )));
            }
        }
        self.segments.remove(&ptr);
        self.placer.freed(ptr);
        // A sleeping segment's memory went back at its sleep.
        if self.asleep.remove(&ptr).is_none() {
            self.used -= size;
        }
        if self.refusal == Refusal::UntilRelease {
            self.refusal = Refusal::None;
        }
        let cost = self.cost.free_us + self.cost.free_us_per_gib * size as f64 / GIB as f64;
        self.record(DeviceCallKind::Free, ptr, size, cost);
        Ok(())
    }

    fn mem_info(&self) -> MemInfo {
        MemInfo {
            free: self.total.min(self.capacity).saturating_sub(self.used),
            total: self.total,
        }
    }

    fn synchronize(&mut self) {
        self.time_us += self.cost.sync_us;
    }

    fn granularity(&self) -> u64 {
        self.granularity
    }

    fn reserve(&mut self, size: u64) -> Result<DevicePtr, DeviceError> {
        let Some(ptr) = self.place(size, self.granularity, true) else {
            return Err(self.no_address_space(size));
        };
        self.reservations.insert(
            ptr,
            Reservation {
                size,
                mapped: BTreeMap::new(),
            },
        );
        self.placer.reserved(ptr, size);
        self.record(DeviceCallKind::Reserve, ptr, size, self.cost.reserve_us);
        Ok(ptr)
    }

    fn map(&mut self, ptr: DevicePtr, size: u64, page: u64) -> Result<(), DeviceError> {
        if page == 0 || page % self.granularity != 0 || size % page != 0 {
            return Err(DeviceError::Other(format!(
                "map({ptr:#x}, {size}): size and page must be multiples of the {} granularity",
                self.granularity
            )));
        }
        let (&base, res) = self
            .reservations
            .range(..=ptr)
            .next_back()
            .filter(|(b, r)| ptr.checked_add(size).is_some_and(|e| e <= **b + r.size))
            .ok_or_else(|| {
                DeviceError::Other(format!("map({ptr:#x}, {size}): outside any reservation"))
            })?;
        if (ptr - base) % page != 0 {
            return Err(DeviceError::Other(format!(
                "map({ptr:#x}): not page aligned"
            )));
        }
        let offset = ptr - base;
        let pages = size / page;
        if res.overlaps(offset, offset + size) {
            return Err(DeviceError::Other(format!(
                "map({ptr:#x}, {size}): already mapped"
            )));
        }
        if let Err(e) = self.fits(size) {
            self.failed_mallocs += 1;
            return Err(e);
        }
        if size > 0 {
            if let Some(res) = self.reservations.get_mut(&base) {
                res.mapped.insert(offset, (size, page));
            }
        }
        self.used += size;
        self.record(
            DeviceCallKind::Map,
            ptr,
            size,
            self.cost.map_us_per_page * pages as f64,
        );
        Ok(())
    }

    fn unmap(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError> {
        let (&base, res) = self
            .reservations
            .range_mut(..=ptr)
            .next_back()
            .ok_or_else(|| {
                DeviceError::Other(format!("unmap({ptr:#x}): outside any reservation"))
            })?;
        // The whole pages inside [ptr, ptr + size) go; the runs they were
        // part of keep the rest. Nothing changes unless exactly `size`
        // bytes were mapped there.
        let (lo, hi) = (ptr - base, (ptr - base).saturating_add(size));
        let mut freed = 0u64;
        let mut pages = 0u64;
        let mut cut = Vec::new();
        for (&o, &(len, page)) in res.mapped.range(..hi).rev() {
            if o + len <= lo {
                break;
            }
            let a = lo.max(o).div_ceil(page) * page;
            let b = hi.min(o + len) / page * page;
            if a < b {
                freed += b - a;
                pages += (b - a) / page;
                cut.push((o, len, page, a, b));
            }
        }
        if freed != size {
            return Err(DeviceError::Other(format!(
                "unmap({ptr:#x}, {size}): only {freed} bytes were mapped there"
            )));
        }
        for (o, len, page, a, b) in cut {
            res.mapped.remove(&o);
            if o < a {
                res.mapped.insert(o, (a - o, page));
            }
            if b < o + len {
                res.mapped.insert(b, (o + len - b, page));
            }
        }
        self.used -= freed;
        if self.refusal == Refusal::UntilRelease && freed > 0 {
            self.refusal = Refusal::None;
        }
        let cost = self.cost.sync_us + self.cost.unmap_us_per_page * pages as f64;
        self.record(DeviceCallKind::Unmap, ptr, size, cost);
        Ok(())
    }

    fn release(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError> {
        match self.reservations.get(&ptr) {
            Some(r) if r.size == size && r.mapped.is_empty() => {}
            Some(_) => {
                return Err(DeviceError::Other(format!(
                    "release({ptr:#x}): wrong size or pages still mapped"
                )));
            }
            None => {
                return Err(DeviceError::Other(format!(
                    "release({ptr:#x}): not a reservation"
                )));
            }
        }
        self.reservations.remove(&ptr);
        self.placer.released(ptr);
        self.record(DeviceCallKind::Release, ptr, size, self.cost.reserve_us);
        Ok(())
    }

    fn calls(&self) -> &[DeviceCall] {
        &self.log
    }

    fn forget_calls(&mut self) {
        self.log.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_enforced_and_freed() {
        let mut d = SimDevice::with_capacity(Some(64 << 20));
        let a = d.malloc(40 << 20).unwrap();
        assert!(matches!(
            d.malloc(40 << 20),
            Err(DeviceError::OutOfMemory { .. })
        ));
        assert_eq!(d.failed_mallocs(), 1);
        d.free(a, 40 << 20).unwrap();
        assert!(d.malloc(40 << 20).is_ok());
        assert_eq!(d.mem_info().free, 24 << 20);
        assert!(d.free(a + 512, 1).is_err());
    }

    #[test]
    fn placements_are_honoured_when_free() {
        let mut d = SimDevice::unlimited();
        d.place_next(0x1000_0000);
        assert_eq!(d.malloc(2 << 20).unwrap(), 0x1000_0000);
        // An overlapping placement falls back to the bump allocator.
        d.place_next(0x1000_0200);
        assert_ne!(d.malloc(2 << 20).unwrap(), 0x1000_0200);
    }

    #[test]
    fn placed_reservations_may_share_unused_address_space() {
        // Simulated reservations are sized from the simulated device; a real
        // GPU's next reservation may start inside that size.
        let mut d = SimDevice::unlimited();
        let page = 20 << 20;
        d.place_next(0x1_0000_0000);
        let a = d.reserve(1 << 40).unwrap();
        d.map(a, page, page).unwrap();
        d.place_next(0x2_0000_0000);
        assert_eq!(d.reserve(1 << 40).unwrap(), 0x2_0000_0000);
        // ... but never over mapped pages.
        d.place_next(0x1_0000_0000 + (4 << 20));
        assert_ne!(d.reserve(1 << 40).unwrap(), 0x1_0000_0000 + (4 << 20));
    }

    #[test]
    fn sleeping_segments_give_their_memory_back_and_wake_all_or_none() {
        let mut d = SimDevice::with_capacity(Some(100));
        let a = d.malloc(40).unwrap();
        let b = d.malloc(40).unwrap();
        assert_eq!(d.suspend(a).unwrap(), 40);
        assert_eq!(d.suspend(b).unwrap(), 40);
        assert_eq!(d.used(), 0);
        d.take_outside(30).unwrap();
        let c = d.malloc(40).unwrap();
        // 70 used: the two sleeping segments (80) do not fit, so neither wakes.
        assert!(matches!(
            d.resume(&[a, b]),
            Err(DeviceError::OutOfMemory {
                requested: 80,
                free: 30
            })
        ));
        assert_eq!(d.used(), 70);
        d.free(c, 40).unwrap();
        d.give_outside(30);
        d.resume(&[a, b]).unwrap();
        assert_eq!(d.used(), 80);
        // A sleeping segment freed gives back only its address.
        d.suspend(a).unwrap();
        d.free(a, 40).unwrap();
        assert_eq!(d.used(), 40);
        assert!(d.suspend(a).is_err(), "freed");
    }

    #[test]
    fn virtual_memory_pages() {
        let mut d = SimDevice::with_capacity(Some(60 << 20));
        let page = 20 << 20;
        let base = d.reserve(10 * page).unwrap();
        d.map(base, 2 * page, page).unwrap();
        assert_eq!(d.used(), 40 << 20);
        assert!(d.map(base, page, page).is_err(), "double map");
        assert!(matches!(
            d.map(base + 2 * page, 2 * page, page),
            Err(DeviceError::OutOfMemory { .. })
        ));
        d.unmap(base + page, page).unwrap();
        assert!(d.release(base, 10 * page).is_err(), "pages still mapped");
        d.unmap(base, page).unwrap();
        d.release(base, 10 * page).unwrap();
        assert_eq!(d.used(), 0);
        let kinds: Vec<_> = d.calls().iter().map(|c| c.kind).collect();
        use DeviceCallKind::*;
        assert_eq!(kinds, vec![Reserve, Map, Unmap, Unmap, Release]);
    }
}
