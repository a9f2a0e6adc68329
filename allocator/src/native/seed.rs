//! Initial state: rebuilding the segments and blocks a recording started
//! with (traces that begin mid-run, spec §12.4).

use super::NativeAllocator;
use super::block::{Block, NIL, State};
use super::rounding::MAX_REQUEST;
use crate::device::{Device, DeviceError};
use crate::policy::{AllocError, BlockHandle, SeedBlock, SeedBlockState};
use crate::stats::PoolKind;

impl<D: Device> NativeAllocator<D> {
    /// Adds a segment that existed before the trace began: obtains `size`
    /// bytes from the device (a simulated device told to place it at the
    /// recorded address does so) and lays out `blocks` in it, updating every
    /// statistic as if the blocks had been allocated. Returns one handle per
    /// block (`None` for free ones).
    ///
    /// Only non-expandable segments can be seeded.
    pub(super) fn seed_segment_impl(
        &mut self,
        pool: PoolKind,
        stream: u64,
        blocks: &[SeedBlock],
    ) -> Result<Vec<Option<BlockHandle>>, AllocError> {
        if blocks.is_empty() || blocks.iter().any(|b| b.size == 0 || b.size % 512 != 0) {
            return Err(AllocError::Invalid(
                "a seeded segment needs blocks whose sizes are positive multiples of 512".into(),
            ));
        }
        // Sizes come from a trace file: their sum may overflow.
        let size = blocks
            .iter()
            .try_fold(0u64, |sum, b| sum.checked_add(b.size))
            .filter(|&s| s < MAX_REQUEST)
            .ok_or_else(|| AllocError::Invalid("a seeded segment of 2^60 bytes or more".into()))?;
        let base = match self.device.malloc(size) {
            Ok(p) => p,
            Err(DeviceError::OutOfMemory { requested, free }) => {
                return Err(AllocError::Invalid(format!(
                    "the initial segment of {requested} bytes does not fit the device ({free} bytes free)"
                )));
            }
            Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
        };
        self.total_allocated_memory += size;
        self.stats.segment.increase(pool, 1);
        self.stats.reserved_bytes.increase(pool, size);
        let mss = self.max_split_size();
        if size >= mss {
            self.stats.oversize_segments.increase(1);
        }
        self.stats.num_device_alloc += 1;
        let mut handles = Vec::with_capacity(blocks.len());
        let mut prev = NIL;
        let mut ptr = base;
        let split = blocks.len() > 1;
        for sb in blocks {
            let idx = self.arena.insert(Block {
                ptr,
                size: sb.size,
                requested: sb.requested,
                stream,
                prev,
                next: NIL,
                gc_count_base: 0,
                expandable: NIL,
                generation: 0,
                event_count: 0,
                pool,
                state: State::Allocated,
                mapped: true,
            });
            if prev != NIL {
                self.arena[prev].next = idx;
            }
            prev = idx;
            ptr += sb.size;
            match sb.state {
                SeedBlockState::Free => {
                    self.insert_into_blocks(idx);
                    if split {
                        self.stats.inactive_split.increase(pool, 1);
                        self.stats.inactive_split_bytes.increase(pool, sb.size);
                    }
                    handles.push(None);
                }
                SeedBlockState::Allocated | SeedBlockState::PendingFree => {
                    let s = &mut self.stats;
                    s.active.increase(pool, 1);
                    s.active_bytes.increase(pool, sb.size);
                    s.requested_bytes.increase(pool, sb.requested);
                    if sb.state == SeedBlockState::Allocated {
                        s.allocation.increase(pool, 1);
                        s.allocated_bytes.increase(pool, sb.size);
                        if sb.size >= mss {
                            s.oversize_allocations.increase(1);
                        }
                    } else {
                        self.arena[idx].state = State::PendingFree;
                        self.arena[idx].event_count = 1;
                        self.trace_pending.push(idx);
                    }
                    handles.push(Some(self.handle_of(idx)));
                }
            }
        }
        Ok(handles)
    }
}
