//! Frees: `cudaFreeAsync` on the allocation stream or on PyTorch's
//! unifying stream.

use super::{AsyncPoolAllocator, POOL, Reuse};
use crate::devices::Device;
use crate::policy::{AllocError, BlockHandle};

impl<D: Device> AsyncPoolAllocator<D> {
    /// `cudaFreeAsync` on the allocation stream, or on the unifying stream
    /// when `unified`.
    pub(super) fn free_handle(&mut self, h: BlockHandle, unified: bool) -> Result<(), AllocError> {
        if h.is_null() {
            return Ok(());
        }
        let idx = self.resolve(h)?;
        let b = self.blocks[idx];
        let s = &mut self.stats;
        s.allocation.decrease(POOL, 1);
        s.allocated_bytes.decrease(POOL, b.size);
        s.active.decrease(POOL, 1);
        s.active_bytes.decrease(POOL, b.size);
        s.requested_bytes.decrease(POOL, b.requested);
        let reuse = if self.settings.reuse_across_streams {
            Reuse::Shared
        } else if unified || b.recorded {
            Reuse::Unified
        } else {
            Reuse::Stream(b.stream)
        };
        let blk = &mut self.blocks[idx];
        blk.allocated = false;
        blk.recorded = false;
        blk.reuse = reuse;
        let merged = self.coalesce(idx);
        self.insert_free(merged);
        Ok(())
    }
}
