//! The pool's physical memory: growing by one chunk (`cudaMalloc`) and
//! giving whole free chunks back at a synchronisation
//! (`cudaMemPoolTrimTo`, the release threshold).

use super::{AsyncPoolAllocator, Block, Chunk, NIL, POOL, Reuse};
use crate::devices::{Device, DeviceError};
use crate::policies::rounding::round_up;
use crate::policy::AllocError;

impl<D: Device> AsyncPoolAllocator<D> {
    /// A device-wide synchronisation (`cudaDeviceSynchronize` or any stream,
    /// event or context synchronisation): every freed block becomes reusable
    /// by every stream, then the pool is trimmed to the release threshold.
    pub fn synchronize(&mut self) -> Result<(), AllocError> {
        self.stats.num_sync_all_streams += 1;
        self.device.synchronize();
        self.share_all();
        self.trim_to(self.settings.release_threshold)
    }

    /// `cudaMemPoolTrimTo(pool, keep)`: frees chunks without a live
    /// allocation, largest first, until the pool holds at most `keep` bytes.
    /// Blocks not yet reusable by every stream are kept.
    pub(crate) fn trim_to(&mut self, keep: u64) -> Result<(), AllocError> {
        if self.reserved() <= keep {
            return Ok(());
        }
        let mut whole = std::mem::take(&mut self.scratch);
        whole.clear();
        whole.extend(
            self.shared
                .iter()
                .rev()
                .filter(|k| !self.blocks[k.idx].is_split())
                .map(|k| k.idx),
        );
        let mut result = Ok(());
        for &idx in &whole {
            if self.reserved() <= keep {
                break;
            }
            if let Err(e) = self.release_chunk(idx) {
                result = Err(e);
                break;
            }
        }
        self.scratch = whole;
        result
    }

    /// Frees the chunk made of the single free block `idx`.
    fn release_chunk(&mut self, idx: u32) -> Result<(), AllocError> {
        let (ptr, size) = {
            let b = &self.blocks[idx];
            (b.ptr, b.size)
        };
        self.device
            .free(ptr, size)
            .map_err(|e| AllocError::Device(e.to_string()))?;
        self.remove_free(idx);
        self.blocks.remove(idx);
        self.chunks.remove(&ptr);
        let s = &mut self.stats;
        s.segment.decrease(POOL, 1);
        s.reserved_bytes.decrease(POOL, size);
        s.num_device_free += 1;
        Ok(())
    }

    /// Grows the pool by one chunk able to hold `size` bytes; `Ok(None)`
    /// when the device has no room.
    pub(super) fn grow(&mut self, size: u64) -> Result<Option<u32>, AllocError> {
        let bytes = round_up(size, self.granularity);
        let ptr = match self.device.malloc(bytes) {
            Ok(p) => p,
            Err(DeviceError::OutOfMemory { .. }) => return Ok(None),
            Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
        };
        let idx = self.blocks.insert(Block {
            ptr,
            size: bytes,
            requested: 0,
            stream: 0,
            prev: NIL,
            next: NIL,
            allocated: false,
            recorded: false,
            reuse: Reuse::Shared,
        });
        self.chunks.insert(
            ptr,
            Chunk {
                size: bytes,
                first: idx,
            },
        );
        self.insert_free(idx);
        let s = &mut self.stats;
        s.segment.increase(POOL, 1);
        s.reserved_bytes.increase(POOL, bytes);
        s.num_device_alloc += 1;
        Ok(Some(idx))
    }
}
