//! Frees: immediate, deferred by the trace or by `record_stream` uses, and
//! their completion (`free_block`, `process_events`,
//! `synchronize_and_free_events`).

use super::{State, StitchAllocator};
use crate::devices::Device;
use crate::policy::{AllocError, BlockHandle};

impl<D: Device> StitchAllocator<D> {
    /// `free_block`: a block's memory becomes reusable.
    pub(super) fn free_block(&mut self, idx: u32) {
        let (size, requested, pool, sblock) = {
            let b = &self.blocks[idx];
            (b.size, b.requested, b.pool, b.is_sblock())
        };
        let s = &mut self.stats;
        s.active.decrease(pool, 1);
        s.active_bytes.decrease(pool, size);
        s.requested_bytes.decrease(pool, requested);
        if sblock {
            self.blocks[idx].state = State::Free;
            let key = self.key(idx);
            self.cached.insert(key);
        } else {
            self.blocks[idx].state = State::Free;
            self.coalesce_and_insert(idx);
        }
    }

    /// `process_events`: frees deferred by `record_stream` complete by the
    /// next `malloc` (a replay has no GPU backlog).
    pub(super) fn process_events(&mut self) {
        if self.stream_event_queue.is_empty() {
            return;
        }
        let queue = std::mem::take(&mut self.stream_event_queue);
        for &idx in &queue {
            self.free_block(idx);
        }
        self.stream_event_queue = queue;
        self.stream_event_queue.clear();
    }

    /// `synchronize_and_free_events`.
    pub(super) fn synchronize_and_free_events(&mut self) {
        self.stats.num_sync_all_streams += 1;
        self.process_events();
        let pending = self.trace_pending.take();
        for &idx in &pending {
            self.free_block(idx);
        }
        self.trace_pending.recycle(pending);
    }

    pub(super) fn free_handle(&mut self, h: BlockHandle, deferred: bool) -> Result<(), AllocError> {
        if h.is_null() {
            return Ok(());
        }
        let idx = self.resolve(h, State::Allocated)?;
        let (size, pool) = (self.blocks[idx].size, self.blocks[idx].pool);
        self.stats.allocation.decrease(pool, 1);
        self.stats.allocated_bytes.decrease(pool, size);
        if deferred {
            self.blocks[idx].state = State::PendingFree;
            self.blocks[idx].stream_uses.clear();
            self.trace_pending.push(idx);
        } else if !self.blocks[idx].stream_uses.is_empty() {
            self.blocks[idx].state = State::PendingFree;
            self.blocks[idx].stream_uses.clear();
            self.stream_event_queue.push(idx);
        } else {
            self.free_block(idx);
        }
        Ok(())
    }
}
