//! sBlocks: reusing a cached one (`reuseLimit`), stitching free blocks into
//! a new one (`get_fused_fragmented_blocks`) and dissolving cached ones
//! (`garbage_collect_fused_blocks`).

use super::rounding::GRANULARITY;
use super::{Block, FreeKey, NIL, Params, State, StitchAllocator};
use crate::devices::{Device, DeviceError};
use crate::policy::AllocError;
use crate::stats::PoolKind;

impl<D: Device> StitchAllocator<D> {
    /// The smallest cached sBlock of the stream that fits, within the
    /// reuse limit; removed from the cached set.
    pub(super) fn reuse_cached(&mut self, p: &Params) -> Option<u32> {
        let key = self
            .cached
            .range(
                FreeKey {
                    stream: p.stream,
                    size: p.size,
                    ptr: 0,
                    idx: 0,
                }..,
            )
            .next()
            .copied()
            .filter(|k| k.stream == p.stream)?;
        if key.size as f64 > p.size as f64 * self.settings.reuse_limit {
            return None;
        }
        self.cached.remove(&key);
        Some(key.idx)
    }

    /// `get_fused_fragmented_blocks`: stitches free large blocks of the
    /// stream into a new sBlock of exactly `p.size` bytes. `Ok(None)` when
    /// they do not suffice (or need more than `max_pieces`).
    pub(super) fn stitch(&mut self, p: &Params) -> Result<Option<u32>, AllocError> {
        let lo = FreeKey {
            stream: p.stream,
            size: 0,
            ptr: 0,
            idx: 0,
        };
        let hi = FreeKey {
            stream: p.stream,
            size: u64::MAX,
            ptr: u64::MAX,
            idx: u32::MAX,
        };
        let mut pieces = std::mem::take(&mut self.scratch);
        pieces.clear();
        let mut sum = 0u64;
        let limit = self.settings.max_pieces.map_or(usize::MAX, |n| n as usize);
        for k in PoolKind::Large.select(&self.pools).range(lo..=hi).rev() {
            if sum >= p.size || pieces.len() >= limit {
                break;
            }
            pieces.push(k.idx);
            sum += k.size;
        }
        if sum < p.size || pieces.len() < 2 {
            self.scratch = pieces;
            return Ok(None);
        }
        let vbase = match self.device.reserve(p.size) {
            Ok(b) => b,
            Err(DeviceError::OutOfMemory { .. }) => {
                self.scratch = pieces;
                return Ok(None);
            }
            Err(DeviceError::Other(e)) => {
                self.scratch = pieces;
                return Err(AllocError::Device(e));
            }
        };
        for &i in &pieces {
            self.remove_free(i);
        }
        let overshoot = sum - p.size;
        // `pieces` has at least two entries (checked above).
        if overshoot > 0
            && let Some(&last) = pieces.last()
        {
            let keep = self.blocks[last].size - overshoot;
            self.split(last, keep);
        }
        let result = self.move_pages(&pieces, vbase, p.size);
        if let Err(e) = result {
            for &i in &pieces {
                self.coalesce_and_insert(i);
            }
            self.scratch = pieces;
            return Err(e);
        }
        let sidx = self.new_block(Block {
            ptr: vbase,
            size: p.size,
            requested: 0,
            stream: p.stream,
            prev: NIL,
            next: NIL,
            seg: NIL,
            pool: PoolKind::Large,
            state: State::Free,
            stream_uses: Vec::new(),
            sources: Vec::new(),
        });
        self.blocks[sidx].sources.extend_from_slice(&pieces);
        for &i in &pieces {
            self.blocks[i].state = State::Stitched(sidx);
        }
        self.scratch = pieces;
        self.stitched_bytes += p.size;
        self.num_stitches += 1;
        if self.stitched_bytes > self.settings.gc_limit {
            self.dissolve_cached()?;
        }
        Ok(Some(sidx))
    }

    /// Unmaps `pieces` at home and maps as many bytes at `vbase`. On
    /// failure everything is undone (pieces mapped back, reservation
    /// released).
    pub(super) fn move_pages(
        &mut self,
        pieces: &[u32],
        vbase: u64,
        size: u64,
    ) -> Result<(), AllocError> {
        let dev_err = |e: DeviceError| AllocError::Device(e.to_string());
        for &i in pieces {
            let (ptr, sz) = (self.blocks[i].ptr, self.blocks[i].size);
            self.device.unmap(ptr, sz).map_err(dev_err)?;
        }
        if let Err(e) = self.device.map(vbase, size, GRANULARITY) {
            for &i in pieces {
                let (ptr, sz) = (self.blocks[i].ptr, self.blocks[i].size);
                self.device.map(ptr, sz, GRANULARITY).map_err(dev_err)?;
            }
            self.device.release(vbase, size).map_err(dev_err)?;
            return Err(dev_err(e));
        }
        Ok(())
    }

    /// Moves the pages of the cached sBlock `sidx` back home, releases its
    /// reservation and returns its pieces to their pools.
    pub(super) fn dissolve(&mut self, sidx: u32) -> Result<(), AllocError> {
        let dev_err = |e: DeviceError| AllocError::Device(e.to_string());
        let key = self.key(sidx);
        self.cached.remove(&key);
        let (vbase, size) = (self.blocks[sidx].ptr, self.blocks[sidx].size);
        self.device.unmap(vbase, size).map_err(dev_err)?;
        self.device.release(vbase, size).map_err(dev_err)?;
        let sources = std::mem::take(&mut self.blocks[sidx].sources);
        let mut result = Ok(());
        for &i in &sources {
            let (ptr, sz) = (self.blocks[i].ptr, self.blocks[i].size);
            if let Err(e) = self.device.map(ptr, sz, GRANULARITY) {
                result = Err(dev_err(e));
            }
            self.blocks[i].state = State::Free;
            self.coalesce_and_insert(i);
        }
        self.blocks[sidx].sources = sources;
        self.blocks[sidx].sources.clear();
        self.blocks.remove(sidx);
        self.stitched_bytes -= size;
        self.num_dissolves += 1;
        result
    }

    /// Dissolves every cached sBlock.
    pub(super) fn dissolve_cached(&mut self) -> Result<(), AllocError> {
        if self.cached.is_empty() {
            return Ok(());
        }
        let mut todo = std::mem::take(&mut self.scratch);
        todo.clear();
        todo.extend(self.cached.iter().map(|k| k.idx));
        let mut result = Ok(());
        for &s in &todo {
            if let Err(e) = self.dissolve(s) {
                result = Err(e);
                break;
            }
        }
        self.scratch = todo;
        result
    }
}
