//! A replay's out-of-memory report: the state at the failure and the
//! largest allocations live then.

use vramlab_allocator::{AllocError, Allocator, OomReport};

use super::{IdState, Replayer};
use crate::engine::run::OomEvent;
use crate::engine::start::StartOom;

impl Replayer<'_> {
    /// The initial state does not fit: the replay's OOM, at event 0.
    pub(in crate::engine) fn oom_at_start<A: Allocator>(&mut self, alloc: &A, o: StartOom) {
        let AllocError::OutOfMemory(report) = o.error else {
            return;
        };
        // The block's id in the trace (renamed when ids are recycled).
        let id =
            o.id.map(|id| self.initial_numbers.get(id as usize).copied().unwrap_or(id));
        self.oom = Some(self.oom_event(alloc, 0, o.bytes, id, &report, true));
    }

    pub(super) fn oom_event<A: Allocator>(
        &self,
        alloc: &A,
        event_index: u64,
        size: u64,
        id: Option<u32>,
        report: &OomReport,
        at_start: bool,
    ) -> OomEvent {
        let st = alloc.stats();
        OomEvent {
            event_index,
            alloc_id: id,
            at_start,
            requested_bytes: size,
            rounded_bytes: report.rounded,
            device_request_bytes: report.device_request,
            reserved_bytes: st.reserved_bytes.all.current as u64,
            allocated_bytes: st.allocated_bytes.all.current as u64,
            live_requested_bytes: self.live_requested,
            largest_free_block: alloc.largest_free_block(),
            device_free_bytes: report.device_free,
            message: report.to_string(),
            largest_live: self.largest_live(),
            segments: alloc.segments(),
        }
    }

    /// The [`crate::engine::run::LARGEST_LIVE`] largest live allocations (id,
    /// requested bytes), largest first; ties by id.
    pub(super) fn largest_live(&self) -> Vec<(u32, u64)> {
        let mut top: Vec<(u32, u64)> = Vec::with_capacity(crate::engine::run::LARGEST_LIVE + 1);
        for s in &self.slots {
            if s.state != IdState::Live {
                continue;
            }
            let pos = top
                .iter()
                .position(|&(n, sz)| s.size > sz || (s.size == sz && s.number < n))
                .unwrap_or(top.len());
            if pos < crate::engine::run::LARGEST_LIVE {
                top.insert(pos, (s.number, s.size));
                top.truncate(crate::engine::run::LARGEST_LIVE);
            }
        }
        top
    }
}
