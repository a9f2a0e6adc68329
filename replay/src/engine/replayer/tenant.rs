//! What shares the device with PyTorch's allocator in one process: an
//! engine pool's sleep and wake (its segments lose and regain their
//! physical memory while the allocator still counts them), and device
//! memory taken outside PyTorch (NCCL's buffers, a library's own
//! allocations). Either can find the device full: that is the process's
//! out-of-memory, at that event.

use vramlab_allocator::format::format_size;
use vramlab_allocator::{Allocator, DeviceError, DevicePtr};
use vramlab_traces::{AllocId, Event};

/// A pool's index in the trace.
type PoolIndex = u32;

use super::Replayer;
use crate::engine::run::OomEvent;
use crate::engine::{ReplayDevice, ReplayError};

/// The device memory beside the allocator, while a replay runs.
#[derive(Debug, Default)]
pub(super) struct TenantSide {
    /// Live memory outside PyTorch: id, bytes.
    raw: Vec<(AllocId, u64)>,
    /// Each sleeping pool's segments.
    asleep: Vec<(PoolIndex, Vec<DevicePtr>)>,
    /// Sleeps, wakes and allocations outside PyTorch that found the device
    /// full.
    ooms: u64,
}

impl Replayer<'_> {
    /// Replays a sleep, a wake, or memory outside PyTorch; `Ok(true)` when
    /// the replay must stop (the device was full).
    pub(super) fn tenant_event<A>(
        &mut self,
        alloc: &mut A,
        ei: u64,
        ev: &Event,
    ) -> Result<bool, ReplayError>
    where
        A: Allocator,
        A::Dev: ReplayDevice,
    {
        let mut side = self.tenants.take().unwrap_or_default();
        let r = self.tenant_step(alloc, &mut side, ei, ev);
        self.tenants = Some(side);
        r
    }

    fn tenant_step<A>(
        &mut self,
        alloc: &mut A,
        side: &mut TenantSide,
        ei: u64,
        ev: &Event,
    ) -> Result<bool, ReplayError>
    where
        A: Allocator,
        A::Dev: ReplayDevice,
    {
        let device_err = |e: DeviceError| ReplayError::Allocator {
            event_index: ei,
            message: e.to_string(),
        };
        match *ev {
            Event::RawAlloc { id, size } => match alloc.device_mut().take_outside(size) {
                Ok(()) => side.raw.push((id, size)),
                Err(DeviceError::OutOfMemory { free, .. }) => {
                    let msg = format!(
                        "out of memory: {} outside PyTorch (raw_alloc) do not fit; {} free on the device",
                        format_size(size),
                        format_size(free)
                    );
                    return Ok(self.outside_oom(alloc, side, ei, size, Some(id), free, msg));
                }
                Err(e) => return Err(device_err(e)),
            },
            Event::RawFree { id } => {
                // An allocation that failed has nothing to give back.
                if let Some(i) = side.raw.iter().position(|&(r, _)| r == id) {
                    let (_, size) = side.raw.swap_remove(i);
                    alloc.device_mut().give_outside(size);
                }
            }
            Event::PoolSleep { pool } => {
                // Segments still asleep (a wake that did not fit, the
                // process going on) stay so.
                let mut ptrs = side
                    .asleep
                    .iter()
                    .position(|(q, _)| *q == pool)
                    .map(|i| side.asleep.swap_remove(i).1)
                    .unwrap_or_default();
                let awake: Vec<DevicePtr> = alloc
                    .segments()
                    .iter()
                    .filter(|s| s.private_pool == Some(pool) && !s.is_expandable)
                    .map(|s| s.ptr)
                    .filter(|p| !ptrs.contains(p))
                    .collect();
                for &p in &awake {
                    alloc.device_mut().suspend(p).map_err(device_err)?;
                }
                ptrs.extend(awake);
                side.asleep.push((pool, ptrs));
            }
            Event::PoolWake { pool } => {
                let Some(i) = side.asleep.iter().position(|(q, _)| *q == pool) else {
                    return Ok(false);
                };
                let (_, ptrs) = side.asleep.swap_remove(i);
                match alloc.device_mut().resume(&ptrs) {
                    Ok(()) => {}
                    Err(DeviceError::OutOfMemory { requested, free }) => {
                        side.asleep.push((pool, ptrs));
                        let name = self
                            .trace
                            .pools
                            .get(pool as usize)
                            .map_or_else(|| pool.to_string(), |d| d.id_text());
                        let msg = format!(
                            "out of memory: waking engine pool {name} needs {}; {} free on the device",
                            format_size(requested),
                            format_size(free)
                        );
                        return Ok(self.outside_oom(alloc, side, ei, requested, None, free, msg));
                    }
                    Err(e) => return Err(device_err(e)),
                }
            }
            _ => {}
        }
        Ok(false)
    }

    /// The device was full for memory beside the allocator: the replay's
    /// OOM if it is the first. Returns whether the replay stops.
    #[allow(clippy::too_many_arguments)]
    fn outside_oom<A: Allocator>(
        &mut self,
        alloc: &A,
        side: &mut TenantSide,
        ei: u64,
        bytes: u64,
        id: Option<u32>,
        free: u64,
        message: String,
    ) -> bool {
        side.ooms += 1;
        if self.oom.is_none() {
            let st = alloc.stats();
            self.oom = Some(OomEvent {
                event_index: ei,
                alloc_id: id,
                at_start: false,
                requested_bytes: bytes,
                rounded_bytes: bytes,
                device_request_bytes: bytes,
                reserved_bytes: st.reserved_bytes.all.current as u64,
                allocated_bytes: st.allocated_bytes.all.current as u64,
                live_requested_bytes: self.live_requested,
                largest_free_block: alloc.largest_free_block(),
                device_free_bytes: free,
                message,
                largest_live: self.largest_live(),
                segments: alloc.segments(),
            });
        }
        self.opts.stop_at_oom
    }

    /// The engine around the allocator failed at event `ei` (it refused to
    /// start, or found no room for its KV cache): the replay's OOM if it is
    /// the first.
    pub(in crate::engine) fn engine_failed<A: Allocator>(
        &mut self,
        alloc: &A,
        ei: u64,
        bytes: u64,
        free: u64,
        message: String,
    ) {
        let mut side = self.tenants.take().unwrap_or_default();
        self.outside_oom(alloc, &mut side, ei, bytes, None, free, message);
        self.tenants = Some(side);
    }

    /// Bytes held outside PyTorch now.
    pub(in crate::engine) fn outside_bytes(&self) -> u64 {
        self.tenants
            .as_ref()
            .map_or(0, |t| t.raw.iter().map(|&(_, b)| b).sum())
    }

    /// Sleeps, wakes and allocations outside PyTorch that found the device
    /// full so far.
    pub(in crate::engine) fn outside_ooms(&self) -> i64 {
        self.tenants.as_ref().map_or(0, |t| t.ooms as i64)
    }
}
