//! Regions obtained from the sub-allocator: growing (`Extend`, with the
//! backpedal loop) and freeing unused ones (`DeallocateRegions`,
//! `DeallocateFreeRegions`).

use super::bins::{MIN_ALLOCATION_SIZE, rounded_bytes};
use super::{BfcAllocator, Chunk, ChunkState, NIL, POOL, Region};
use crate::devices::{Device, DeviceError};
use crate::policy::AllocError;

/// `kBackpedalFactor`.
const BACKPEDAL_FACTOR: f32 = 0.9;

impl<D: Device> BfcAllocator<D> {
    /// `Extend`: obtains a new region able to hold `rounded` bytes.
    pub(super) fn extend(&mut self, rounded: u64) -> Result<bool, AllocError> {
        let available = self
            .memory_limit
            .saturating_sub(self.total_region_allocated_bytes)
            / MIN_ALLOCATION_SIZE
            * MIN_ALLOCATION_SIZE;
        if rounded > available {
            self.last_device_request = rounded;
            return Ok(false);
        }
        let mut increased = false;
        while rounded > self.curr_region_allocation_bytes {
            self.curr_region_allocation_bytes = self.curr_region_allocation_bytes.saturating_mul(2);
            increased = true;
        }
        let mut bytes = self.curr_region_allocation_bytes.min(available);
        let ptr = loop {
            self.last_device_request = bytes;
            match self.device.malloc(bytes) {
                Ok(p) => break p,
                Err(DeviceError::OutOfMemory { .. }) => {
                    let mut back = rounded_bytes(((bytes as f32) * BACKPEDAL_FACTOR) as u64);
                    if back >= bytes {
                        back = bytes - MIN_ALLOCATION_SIZE;
                    }
                    bytes = back;
                    if bytes < rounded {
                        return Ok(false);
                    }
                }
                Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
            }
        };
        if !increased {
            self.curr_region_allocation_bytes = self.curr_region_allocation_bytes.saturating_mul(2);
        }
        self.total_region_allocated_bytes += bytes;
        let idx = self.chunks.insert(Chunk {
            ptr,
            size: bytes,
            requested: 0,
            prev: NIL,
            next: NIL,
            state: ChunkState::Free,
        });
        self.regions.insert(
            ptr,
            Region {
                size: bytes,
                first: idx,
            },
        );
        self.insert_free(idx);
        let s = &mut self.stats;
        s.segment.increase(POOL, 1);
        s.reserved_bytes.increase(POOL, bytes);
        s.num_device_alloc += 1;
        Ok(true)
    }

    /// `true` when no chunk of the region is in use (then it is one free
    /// chunk, since free neighbours always merge).
    fn region_is_free(&self, r: &Region) -> bool {
        let c = &self.chunks[r.first];
        c.state == ChunkState::Free && c.size == r.size
    }

    /// Frees one unused region (`DeallocateRegions` for one region).
    fn release_region(&mut self, base: u64) -> Result<(), AllocError> {
        let Some(r) = self.regions.get(&base).copied() else {
            return Ok(());
        };
        self.device
            .free(base, r.size)
            .map_err(|e| AllocError::Device(e.to_string()))?;
        self.remove_free(r.first);
        self.chunks.remove(r.first);
        self.regions.remove(&base);
        self.total_region_allocated_bytes -= r.size;
        let s = &mut self.stats;
        s.segment.decrease(POOL, 1);
        s.reserved_bytes.decrease(POOL, r.size);
        s.num_device_free += 1;
        Ok(())
    }

    /// Frees every unused region, in address order; returns their bytes.
    pub(super) fn release_free_regions(&mut self) -> Result<u64, AllocError> {
        let mut bases = std::mem::take(&mut self.scratch);
        bases.clear();
        let mut bytes = 0;
        for (&base, r) in &self.regions {
            if self.region_is_free(r) {
                bases.push(base);
                bytes += r.size;
            }
        }
        let mut result = Ok(bytes);
        for &base in &bases {
            if let Err(e) = self.release_region(base) {
                result = Err(e);
                break;
            }
        }
        self.scratch = bases;
        result
    }

    /// `DeallocateFreeRegions`: with `garbage_collection`, frees the unused
    /// regions when that can make room for `rounded` bytes.
    pub(super) fn deallocate_free_regions(&mut self, rounded: u64) -> Result<bool, AllocError> {
        if !self.settings.garbage_collection {
            return Ok(false);
        }
        let free_bytes: u64 = self
            .regions
            .values()
            .filter(|r| self.region_is_free(r))
            .map(|r| r.size)
            .sum();
        if free_bytes == 0 {
            return Ok(false);
        }
        let available = self
            .memory_limit
            .saturating_sub(self.total_region_allocated_bytes)
            + free_bytes;
        if rounded > available {
            return Ok(false);
        }
        self.release_free_regions()?;
        Ok(true)
    }
}
