//! The steps of the allocation path (PyTorch's `malloc` sequence with
//! GMLake's three stitching points, run by `Allocator::malloc` in
//! `mod.rs`): new physical segments and handing blocks out.

use super::rounding::GRANULARITY;
use super::{Block, NIL, Params, Segment, State, StitchAllocator};
use crate::devices::{Device, DeviceError};
use crate::policy::{AllocError, BlockHandle};
use crate::stats::PoolKind;

impl<D: Device> StitchAllocator<D> {
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
        self.settings.stitch
            && p.pool == PoolKind::Large
            && p.size >= self.settings.fragment_limit
            && point >= self.settings.defragment_level
    }
}
