//! The allocation path: PyTorch's `malloc` sequence with GMLake's three
//! stitching points, new physical segments and handing blocks out.

use super::rounding::{GRANULARITY, SMALL_SIZE, allocation_size, round_size};
use super::{Block, NIL, Params, Segment, State, StitchAllocator};
use crate::devices::{Device, DeviceError};
use crate::policies::oom::{MAX_REQUEST, exceeds_limit, out_of_memory};
use crate::policy::{AllocError, BlockHandle};
use crate::stats::PoolKind;

impl<D: Device> StitchAllocator<D> {
    pub(super) fn malloc_impl(
        &mut self,
        size: u64,
        stream: u64,
    ) -> Result<BlockHandle, AllocError> {
        if size == 0 {
            return Ok(BlockHandle::NULL);
        }
        if size >= MAX_REQUEST {
            return Err(exceeds_limit(&self.device, &self.stats, size, None));
        }
        self.process_events();
        let rounded = round_size(size);
        let pool = if rounded <= SMALL_SIZE {
            PoolKind::Small
        } else {
            PoolKind::Large
        };
        let p = Params {
            size: rounded,
            stream,
            pool,
            alloc_size: allocation_size(rounded),
        };
        let mut found = self.get_free_block(&p);
        if found.is_none() && pool == PoolKind::Large {
            found = self.reuse_cached(&p);
        }
        if found.is_none() && self.may_stitch(&p, 0) {
            found = self.stitch(&p)?;
        }
        if found.is_none() && !self.cached.is_empty() {
            // Cached sBlocks hold pages the home segments could use.
            self.dissolve_cached()?;
            found = self.get_free_block(&p);
            if found.is_none() && self.may_stitch(&p, 0) {
                found = self.stitch(&p)?;
            }
        }
        if found.is_none() {
            found = self.alloc_segment(&p, false)?;
        }
        if found.is_none() && self.may_stitch(&p, 1) {
            found = self.stitch(&p)?;
        }
        if found.is_none() {
            self.release_cached()?;
            found = self.alloc_segment(&p, true)?;
        }
        if found.is_none() && self.may_stitch(&p, 2) {
            found = self.stitch(&p)?;
        }
        match found {
            Some(idx) => Ok(self.hand_out(idx, &p, size)),
            None => Err(out_of_memory(
                &self.device,
                &mut self.stats,
                size,
                rounded,
                p.alloc_size,
                None,
            )),
        }
    }

    /// A new physical segment for `p`; `Ok(None)` when the device is full.
    /// The returned block is free and in no set.
    pub(super) fn alloc_segment(
        &mut self,
        p: &Params,
        retry: bool,
    ) -> Result<Option<u32>, AllocError> {
        if retry {
            self.stats.num_alloc_retries += 1;
        }
        let size = p.alloc_size;
        let ptr = match p.pool {
            PoolKind::Small => match self.device.malloc(size) {
                Ok(ptr) => ptr,
                Err(DeviceError::OutOfMemory { .. }) => return Ok(None),
                Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
            },
            PoolKind::Large => {
                let base = match self.device.reserve(size) {
                    Ok(b) => b,
                    Err(DeviceError::OutOfMemory { .. }) => return Ok(None),
                    Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
                };
                match self.device.map(base, size, GRANULARITY) {
                    Ok(()) => base,
                    Err(e) => {
                        self.device
                            .release(base, size)
                            .map_err(|e| AllocError::Device(e.to_string()))?;
                        return match e {
                            DeviceError::OutOfMemory { .. } => Ok(None),
                            DeviceError::Other(e) => Err(AllocError::Device(e)),
                        };
                    }
                }
            }
        };
        let seg = self.segments.insert(Segment {
            ptr,
            size,
            pool: p.pool,
            stream: p.stream,
            first: NIL,
        });
        let idx = self.new_block(Block {
            ptr,
            size,
            requested: 0,
            stream: p.stream,
            prev: NIL,
            next: NIL,
            seg,
            pool: p.pool,
            state: State::Free,
            stream_uses: Vec::new(),
            sources: Vec::new(),
        });
        self.segments[seg].first = idx;
        let s = &mut self.stats;
        s.segment.increase(p.pool, 1);
        s.reserved_bytes.increase(p.pool, size);
        s.num_device_alloc += 1;
        Ok(Some(idx))
    }

    /// Hands out block `idx` (plain: split first when worth it).
    pub(super) fn hand_out(&mut self, idx: u32, p: &Params, orig: u64) -> BlockHandle {
        if !self.blocks[idx].is_sblock() && self.should_split(idx, p.size) {
            self.split(idx, p.size);
        }
        let b = &mut self.blocks[idx];
        b.state = State::Allocated;
        b.requested = orig;
        b.stream_uses.clear();
        let (size, pool) = (b.size, b.pool);
        let s = &mut self.stats;
        s.allocation.increase(pool, 1);
        s.allocated_bytes.increase(pool, size);
        s.active.increase(pool, 1);
        s.active_bytes.increase(pool, size);
        s.requested_bytes.increase(pool, orig);
        self.blocks.renew(idx)
    }

    /// May stitching run at `point` (0, 1, 2) for `p`?
    pub(super) fn may_stitch(&self, p: &Params, point: u8) -> bool {
        self.config.stitch
            && p.pool == PoolKind::Large
            && p.size >= self.config.fragment_limit
            && point >= self.config.defragment_level
    }
}
