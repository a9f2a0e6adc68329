//! What each request that grew the reserve found: at every event that made
//! the device allocate (a segment, or pages of an expandable one), the live
//! blocks that had free space beside them — and so which live allocations
//! kept cached space from serving that request.
//!
//! A replay's [`GrowthHook`] keeps, per such event, only the segments'
//! outlines and the allocated blocks with a free neighbour (few, next to
//! the events), so a long trace does not keep a copy of every state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use vramlab_allocator::{BlockState, PoolKind, SegmentView};
use vramlab_traces::{AllocId, Event, Trace};

use crate::analysis::peak_state::{Lifetime, PeakState};
use crate::engine::GrowthHook;
use vramlab_allocator::DeviceCallKind;

/// A segment's outline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Outline {
    ptr: u64,
    size: u64,
    stream: u64,
    pool: PoolKind,
    private_pool: Option<u32>,
}

/// An allocated block with free space beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Beside {
    ptr: u64,
    /// Its block plus the free blocks right before and after it: what a
    /// free of it would make.
    joined: u64,
    /// Index of its segment in the outlines.
    segment: usize,
}

/// The state after one growing event.
#[derive(Debug, Clone, Default)]
struct Seen {
    event: u64,
    outlines: Vec<Outline>,
    beside: Vec<Beside>,
}

/// The states a replay showed its growth hook.
#[derive(Debug, Clone, Default)]
pub(crate) struct GrowthLog {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl GrowthLog {
    /// A hook that records into this log.
    pub(crate) fn hook(&self) -> GrowthHook {
        let sink = Arc::clone(&self.seen);
        GrowthHook::new(move |event, segments| {
            let s = outline(event, segments);
            if let Ok(mut v) = sink.lock() {
                v.push(s);
            }
        })
    }

    fn take(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

fn outline(event: u64, segments: &[SegmentView]) -> Seen {
    let mut beside = Vec::new();
    for (si, s) in segments.iter().enumerate() {
        let free = |j: Option<usize>| {
            j.and_then(|j| s.blocks.get(j))
                .filter(|b| b.state == BlockState::Free)
                .map_or(0, |b| b.size)
        };
        for (i, b) in s.blocks.iter().enumerate() {
            if b.state != BlockState::Allocated {
                continue;
            }
            let around = free(i.checked_sub(1)).saturating_add(free(i.checked_add(1)));
            if around > 0 {
                beside.push(Beside {
                    ptr: b.ptr,
                    joined: around.saturating_add(b.size),
                    segment: si,
                });
            }
        }
    }
    Seen {
        event,
        outlines: segments
            .iter()
            .map(|s| Outline {
                ptr: s.ptr,
                size: s.size,
                stream: s.stream,
                pool: s.pool,
                private_pool: s.private_pool,
            })
            .collect(),
        beside,
    }
}

/// What one live allocation kept from growing requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Blocked {
    /// Requests that made the device allocate and would have fitted in the
    /// space its free would have made.
    pub requests: u64,
    /// The device bytes those requests made the allocator take.
    pub device_bytes: u64,
}

/// For each allocation id, the growing requests (by the peak, event
/// `until`) that it kept from cached space: a request on the same stream,
/// in the same pool (small or large; default or the same private pool) as
/// the block, that fitted in the block and its free neighbours.
pub(crate) fn blocked_by(
    trace: &Trace,
    log: &GrowthLog,
    state: &PeakState,
) -> HashMap<AllocId, Blocked> {
    let Some(until) = state.at else {
        return HashMap::new();
    };
    let lifetimes = state.lifetimes.as_slice();
    // Which ids ever held each address (an address is reused over time).
    let mut holders: HashMap<u64, Vec<AllocId>> = HashMap::new();
    for (id, &ptr) in state.addresses.iter().enumerate() {
        if lifetimes.get(id).is_some_and(|l| l.requested > 0) {
            holders.entry(ptr).or_default().push(id as AllocId);
        }
    }
    let mut out: HashMap<AllocId, Blocked> = HashMap::new();
    for seen in log.take() {
        if seen.event > until {
            continue;
        }
        let Some(&Event::Alloc { stream, size, .. }) = trace.events.get(seen.event as usize) else {
            continue;
        };
        let raw = trace.streams.get(stream as usize).copied().unwrap_or(0);
        // The segment the device call grew holds the request now.
        let grown = state
            .device_log
            .iter()
            .filter(|c| c.event_index.map(u64::from) == Some(seen.event))
            .filter(|c| matches!(c.kind, DeviceCallKind::Malloc | DeviceCallKind::Map))
            .find_map(|c| {
                seen.outlines
                    .iter()
                    .position(|o| c.ptr >= o.ptr && c.ptr < o.ptr.saturating_add(o.size))
                    .map(|i| (i, c.size))
            });
        let Some((grown_at, device_bytes)) = grown else {
            continue;
        };
        let Some(target) = seen.outlines.get(grown_at).copied() else {
            continue;
        };
        for b in &seen.beside {
            let Some(o) = seen.outlines.get(b.segment) else {
                continue;
            };
            let same_place =
                o.stream == raw && o.pool == target.pool && o.private_pool == target.private_pool;
            if b.segment == grown_at || !same_place || b.joined < size {
                continue;
            }
            let Some(id) = holder_at(&holders, lifetimes, b.ptr, seen.event) else {
                continue;
            };
            let e = out.entry(id).or_default();
            e.requests += 1;
            e.device_bytes = e.device_bytes.saturating_add(device_bytes);
        }
    }
    out
}

/// The id whose block was at `ptr` after event `at`.
fn holder_at(
    holders: &HashMap<u64, Vec<AllocId>>,
    lifetimes: &[Lifetime],
    ptr: u64,
    at: u64,
) -> Option<AllocId> {
    holders.get(&ptr)?.iter().copied().find(|&id| {
        lifetimes.get(id as usize).is_some_and(|l| {
            let began = l.initial || l.allocated_at().is_some_and(|a| a <= at);
            let ended = l.released_at().is_some_and(|r| r <= at);
            began && !ended
        })
    })
}
