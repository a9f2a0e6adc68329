//! `direct`: no cache at all — every request is one device allocation and
//! every free one device free, as PyTorch does with
//! `PYTORCH_NO_CUDA_MEMORY_CACHING=1`.
//!
//! # Rules and sources
//!
//! Read in `c10/cuda/CUDACachingAllocator.cpp` (`NativeCachingAllocator::
//! allocate`, `uncached_allocate`, `uncached_delete`):
//!
//! * A request of 2^60 bytes or more fails before anything else ("Tried to
//!   allocate more than 1EB memory"); this check precedes the uncached
//!   branch.
//! * Otherwise `uncached_allocate(size)` calls `cudaMalloc(&ptr, size)` with
//!   the caller's exact size: no rounding, no pools, no splitting. A zero
//!   size gives a null pointer; here it gives [`BlockHandle::NULL`] and no
//!   device call.
//! * `uncached_delete` calls `cudaFree(ptr)` at once. `cudaFree` waits for
//!   the device, so a free never stays pending: [`Allocator::free_deferred`]
//!   frees at once too, and a later [`Allocator::complete_free`] of that
//!   handle is accepted and ignored. `record_stream` has nothing to defer.
//! * A failed `cudaMalloc` is an error straight away (`C10_CUDA_CHECK`): no
//!   cache to flush, no retry.
//! * `empty_cache` has nothing to release.
//!
//! PyTorch keeps **no statistics** in this mode (`memory_stats()` stays at
//! zero because the caching allocator is bypassed). vramlab still reports
//! them so runs can be compared: each allocation is one segment of exactly
//! the requested size, so `allocated_bytes`, `active_bytes`,
//! `requested_bytes` and `reserved_bytes` are all the sum of live request
//! sizes and `segment`/`allocation`/`active` their count. Everything is
//! counted in `large_pool` (there are no pools); `num_device_alloc` and
//! `num_device_free` count the driver calls and `num_ooms` the failures.
//! `reserved_bytes` counts the bytes passed to `cudaMalloc`; the driver's
//! own rounding of small allocations to its page size is not modelled (the
//! simulated device charges exact bytes).

use std::fmt;
use std::str::FromStr;

use super::arena::Arena;
use super::checks::{compare_stats, ensure};
use super::oom::{MAX_REQUEST, exceeds_limit, out_of_memory};
use super::settings::split_settings;
use crate::devices::{Device, DeviceError, DevicePtr};
use crate::policy::{
    AllocError, Allocator, BlockHandle, BlockState, BlockView, Inspect, Invariants, Seed,
    SegmentView,
};
use crate::stats::{MemoryStats, PoolKind};

/// Settings of the `direct` policy. It has none: the only valid settings
/// string is the empty one, and [`Settings`] displays as the empty string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Settings {}

impl Settings {
    /// Parses a settings string; any key is an error.
    pub fn parse(s: &str) -> Result<Settings, String> {
        split_settings("direct", s, &[])?;
        Ok(Settings {})
    }
}

impl fmt::Display for Settings {
    /// The canonical (empty) settings string.
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Ok(())
    }
}

impl FromStr for Settings {
    type Err = String;
    fn from_str(s: &str) -> Result<Settings, String> {
        Settings::parse(s)
    }
}

/// One live device allocation.
#[derive(Debug, Clone, Copy)]
struct Alloc {
    ptr: DevicePtr,
    size: u64,
}

/// The uncached policy: one `cudaMalloc` per request, one `cudaFree` per
/// free.
#[derive(Debug, Clone)]
pub struct DirectAllocator<D: Device> {
    device: D,
    allocs: Arena<Alloc>,
    stats: MemoryStats,
}

const POOL: PoolKind = PoolKind::Large;

impl<D: Device> DirectAllocator<D> {
    /// A fresh allocator over `device` (the settings are empty: the
    /// parameter keeps every policy's `new(settings, device)` shape).
    pub fn new(_settings: Settings, device: D) -> Self {
        DirectAllocator {
            device,
            allocs: Arena::default(),
            stats: MemoryStats::new(u64::MAX),
        }
    }

    fn resolve(&self, h: BlockHandle) -> Result<u32, AllocError> {
        if self.allocs.is_current(h.index, h.generation) {
            Ok(h.index)
        } else {
            Err(AllocError::UnknownHandle(h))
        }
    }

    fn free_now(&mut self, h: BlockHandle) -> Result<(), AllocError> {
        if h.is_null() {
            return Ok(());
        }
        let idx = self.resolve(h)?;
        let Alloc { ptr, size } = self.allocs[idx];
        self.device
            .free(ptr, size)
            .map_err(|e| AllocError::Device(e.to_string()))?;
        self.allocs.remove(idx);
        let s = &mut self.stats;
        s.allocation.decrease(POOL, 1);
        s.segment.decrease(POOL, 1);
        s.active.decrease(POOL, 1);
        for st in [
            &mut s.allocated_bytes,
            &mut s.reserved_bytes,
            &mut s.active_bytes,
            &mut s.requested_bytes,
        ] {
            st.decrease(POOL, size);
        }
        s.num_device_free += 1;
        Ok(())
    }
}

impl<D: Device> Allocator for DirectAllocator<D> {
    fn malloc(&mut self, size: u64, _stream: u64) -> Result<BlockHandle, AllocError> {
        if size == 0 {
            return Ok(BlockHandle::NULL);
        }
        if size >= MAX_REQUEST {
            return Err(exceeds_limit(&self.device, &self.stats, size, None));
        }
        let ptr = match self.device.malloc(size) {
            Ok(p) => p,
            Err(DeviceError::OutOfMemory { .. }) => {
                return Err(out_of_memory(
                    &self.device,
                    &mut self.stats,
                    size,
                    size,
                    size,
                    None,
                ));
            }
            Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
        };
        let idx = self.allocs.insert(Alloc { ptr, size });
        let s = &mut self.stats;
        s.allocation.increase(POOL, 1);
        s.segment.increase(POOL, 1);
        s.active.increase(POOL, 1);
        for st in [
            &mut s.allocated_bytes,
            &mut s.reserved_bytes,
            &mut s.active_bytes,
            &mut s.requested_bytes,
        ] {
            st.increase(POOL, size);
        }
        s.num_device_alloc += 1;
        Ok(self.allocs.handle(idx))
    }

    fn free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        self.free_now(handle)
    }

    /// `cudaFree` synchronises, so the free happens at once.
    fn free_deferred(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        self.free_now(handle)
    }

    /// Accepts the completion of a free that already happened; a live
    /// handle was never freed and is an error.
    fn complete_free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        if !handle.is_null() && self.allocs.is_current(handle.index, handle.generation) {
            return Err(AllocError::UnknownHandle(handle));
        }
        Ok(())
    }

    fn record_stream(&mut self, handle: BlockHandle, _stream: u64) -> Result<(), AllocError> {
        if handle.is_null() {
            return Ok(());
        }
        self.resolve(handle).map(|_| ())
    }

    fn empty_cache(&mut self) -> Result<(), AllocError> {
        Ok(())
    }
}

impl<D: Device> Inspect for DirectAllocator<D> {
    type Dev = D;

    fn name(&self) -> &'static str {
        "direct"
    }

    fn stats(&self) -> &MemoryStats {
        &self.stats
    }

    fn block_ptr(&self, handle: BlockHandle) -> DevicePtr {
        if handle.is_null() || !self.allocs.is_current(handle.index, handle.generation) {
            return 0;
        }
        self.allocs[handle.index].ptr
    }

    fn largest_free_block(&self) -> u64 {
        0
    }

    fn segments(&self) -> Vec<SegmentView> {
        let mut out: Vec<SegmentView> = self
            .allocs
            .live()
            .map(|i| {
                let a = self.allocs[i];
                let block = BlockView {
                    ptr: a.ptr,
                    size: a.size,
                    requested: a.size,
                    state: BlockState::Allocated,
                };
                SegmentView::new((a.ptr, a.size), 0, POOL, vec![block])
            })
            .collect();
        out.sort_by_key(|s| s.ptr);
        out
    }

    fn device(&self) -> &D {
        &self.device
    }

    fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }
}

/// Replays start from an empty state only.
impl<D: Device> Seed for DirectAllocator<D> {}

impl<D: Device> Invariants for DirectAllocator<D> {
    fn check_invariants(&self) -> Result<(), String> {
        let mut want = MemoryStats::new(u64::MAX);
        let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(self.allocs.len());
        for i in self.allocs.live() {
            let a = self.allocs[i];
            ensure!(a.size > 0, "allocation {i} has size 0");
            ranges.push((a.ptr, a.size));
            want.allocation.increase(POOL, 1);
            want.segment.increase(POOL, 1);
            want.active.increase(POOL, 1);
            want.allocated_bytes.increase(POOL, a.size);
            want.reserved_bytes.increase(POOL, a.size);
            want.active_bytes.increase(POOL, a.size);
            want.requested_bytes.increase(POOL, a.size);
        }
        ranges.sort_unstable();
        for (&(ptr, size), &(next_ptr, _)) in ranges.iter().zip(ranges.iter().skip(1)) {
            ensure!(
                ptr + size <= next_ptr,
                "allocations at {ptr:#x} and {next_ptr:#x} overlap"
            );
        }
        compare_stats(&self.stats, &want)?;
        ensure!(
            self.stats.inactive_split.all.current == 0,
            "direct allocations are never split"
        );
        Ok(())
    }
}
