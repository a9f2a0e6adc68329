//! Returning memory to the device: whole free segments
//! (`release_cached_blocks`, what `empty_cache` does).

use super::{Segment, StitchAllocator};
use crate::devices::{Device, DeviceError};
use crate::policy::AllocError;
use crate::stats::PoolKind;

impl<D: Device> StitchAllocator<D> {
    /// Frees a physical segment made of the single free block `idx`.
    pub(super) fn release_segment(&mut self, idx: u32) -> Result<(), AllocError> {
        let dev_err = |e: DeviceError| AllocError::Device(e.to_string());
        let (seg, pool) = (self.blocks[idx].seg, self.blocks[idx].pool);
        let Segment { ptr, size, .. } = self.segments[seg];
        match pool {
            PoolKind::Small => self.device.free(ptr, size).map_err(dev_err)?,
            PoolKind::Large => {
                self.device.unmap(ptr, size).map_err(dev_err)?;
                self.device.release(ptr, size).map_err(dev_err)?;
            }
        }
        self.remove_free(idx);
        self.blocks.remove(idx);
        self.segments.remove(seg);
        let s = &mut self.stats;
        s.segment.decrease(pool, 1);
        s.reserved_bytes.decrease(pool, size);
        s.num_device_free += 1;
        Ok(())
    }

    /// `release_cached_blocks`: completes pending frees, dissolves cached
    /// sBlocks, then frees every whole free segment (large pool first).
    pub(super) fn release_cached(&mut self) -> Result<(), AllocError> {
        self.synchronize_and_free_events();
        self.dissolve_cached()?;
        let mut whole = std::mem::take(&mut self.scratch);
        let mut result = Ok(());
        for kind in [PoolKind::Large, PoolKind::Small] {
            whole.clear();
            whole.extend(
                kind.select(&self.pools)
                    .iter()
                    .filter(|k| !self.blocks[k.idx].is_split())
                    .map(|k| k.idx),
            );
            for &idx in &whole {
                if let Err(e) = self.release_segment(idx) {
                    result = Err(e);
                    break;
                }
            }
            if result.is_err() {
                break;
            }
        }
        self.scratch = whole;
        result
    }
}
