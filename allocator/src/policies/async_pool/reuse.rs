//! The free sets by reuse class (stream-private, unified, shared): keeping
//! free blocks in them, the best fit a stream may reuse, and sharing every
//! free block at a synchronisation.

use super::{AsyncPoolAllocator, POOL, Reuse, SizeKey, StreamKey};
use crate::devices::Device;

impl<D: Device> AsyncPoolAllocator<D> {
    /// Makes every free block reusable by every stream and merges the
    /// neighbours that become equal.
    pub(super) fn share_all(&mut self) {
        let mut todo = std::mem::take(&mut self.scratch);
        todo.clear();
        todo.extend(self.by_stream.iter().map(|k| k.idx));
        todo.extend(self.unified.iter().map(|k| k.idx));
        for &idx in &todo {
            // A block merged into an earlier one in this loop is gone.
            if !self.blocks.is_live(idx)
                || self.blocks[idx].allocated
                || self.blocks[idx].reuse == Reuse::Shared
            {
                continue;
            }
            self.remove_free(idx);
            self.blocks[idx].reuse = Reuse::Shared;
            let merged = self.coalesce(idx);
            self.insert_free(merged);
        }
        self.scratch = todo;
    }

    pub(super) fn insert_free(&mut self, idx: u32) {
        let b = self.blocks[idx];
        if b.is_split() {
            self.stats.inactive_split.increase(POOL, 1);
            self.stats.inactive_split_bytes.increase(POOL, b.size);
        }
        match b.reuse {
            Reuse::Stream(stream) => {
                self.by_stream.insert(StreamKey {
                    stream,
                    size: b.size,
                    ptr: b.ptr,
                    idx,
                });
            }
            Reuse::Unified => {
                self.unified.insert(SizeKey {
                    size: b.size,
                    ptr: b.ptr,
                    idx,
                });
            }
            Reuse::Shared => {
                self.shared.insert(SizeKey {
                    size: b.size,
                    ptr: b.ptr,
                    idx,
                });
            }
        }
    }

    pub(super) fn remove_free(&mut self, idx: u32) {
        let b = self.blocks[idx];
        if b.is_split() {
            self.stats.inactive_split.decrease(POOL, 1);
            self.stats.inactive_split_bytes.decrease(POOL, b.size);
        }
        let sk = SizeKey {
            size: b.size,
            ptr: b.ptr,
            idx,
        };
        match b.reuse {
            Reuse::Stream(stream) => {
                self.by_stream.remove(&StreamKey {
                    stream,
                    size: b.size,
                    ptr: b.ptr,
                    idx,
                });
            }
            Reuse::Unified => {
                self.unified.remove(&sk);
            }
            Reuse::Shared => {
                self.shared.remove(&sk);
            }
        }
    }

    /// The best fit for `size` bytes among the blocks `stream` may reuse.
    pub(super) fn best_fit(&self, size: u64, stream: u64) -> Option<u32> {
        let shared = self
            .shared
            .range(
                SizeKey {
                    size,
                    ptr: 0,
                    idx: 0,
                }..,
            )
            .next()
            .map(|k| (k.size, k.ptr, k.idx));
        let own = self
            .by_stream
            .range(
                StreamKey {
                    stream,
                    size,
                    ptr: 0,
                    idx: 0,
                }..,
            )
            .next()
            .filter(|k| k.stream == stream)
            .map(|k| (k.size, k.ptr, k.idx));
        match (shared, own) {
            (Some(a), Some(b)) => Some(a.min(b).2),
            (a, b) => a.or(b).map(|k| k.2),
        }
    }
}
