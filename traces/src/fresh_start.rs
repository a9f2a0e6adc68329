//! A trace that starts mid-run, rewritten to start from an empty
//! allocator ([`Trace::with_fresh_start`]).

use crate::model::*;
use crate::pools::PoolIndex;

impl Trace {
    /// The same trace starting from an empty allocator: the blocks in use
    /// at the first entry become its first allocations, in address order
    /// (a pending free is requested right after its allocation), exactly
    /// as a replay with a *fresh* start begins. The expected record is
    /// dropped (its event indices no longer apply). A trace without an
    /// initial state is returned as it is.
    pub fn with_fresh_start(&self) -> Trace {
        let Some(init) = &self.initial else {
            return self.clone();
        };
        let mut events = Vec::with_capacity(self.events.len() + 2 * init.live.len());
        // Pools that held memory before the recording began existed then,
        // held once (as a recorded start seeds them): a MemPool is made
        // first, and blocks of a private pool are allocated inside a
        // section that routes them to it; a graph pool's second and later
        // sections give back the hold their capture took.
        let mut made = vec![false; self.pools.len()];
        // (pool, stream, the section's hold is to be given back)
        let mut open: Option<(PoolIndex, StreamIndex, bool)> = None;
        let close = |events: &mut Vec<Event>, open: &mut Option<(PoolIndex, StreamIndex, bool)>| {
            if let Some((pool, _, extra)) = open.take() {
                events.push(self.pool_section_end(pool));
                if extra {
                    events.push(Event::PoolRelease { pool });
                }
            }
        };
        for b in &init.live {
            if b.requested == 0 {
                continue; // a zero-byte request allocates nothing
            }
            let want = b.pool.map(|p| (p, b.stream));
            if open.map(|(p, s, _)| (p, s)) != want {
                close(&mut events, &mut open);
                if let Some((pool, stream)) = want {
                    let mempool = self.pool_is_mempool(pool);
                    let mut extra = false;
                    if let Some(m) = made.get_mut(pool as usize) {
                        if !*m && mempool {
                            events.push(Event::PoolCreate { pool });
                        }
                        extra = *m && !mempool;
                        *m = true;
                    }
                    events.push(self.pool_section_begin(pool, stream));
                    open = Some((pool, stream, extra));
                }
            }
            events.push(Event::Alloc {
                id: b.id(),
                stream: b.stream,
                size: b.requested,
            });
            if matches!(b.state, InitialBlockState::PendingFree(_)) {
                events.push(Event::FreeRequested { id: b.id() });
            }
        }
        close(&mut events, &mut open);
        // A pool that held only cached memory is held all the same.
        for seg in &init.segments {
            let Some(pool) = seg.pool else { continue };
            if let Some(m) = made.get_mut(pool as usize) {
                if !*m {
                    *m = true;
                    if self.pool_is_mempool(pool) {
                        events.push(Event::PoolCreate { pool });
                    } else {
                        events.push(Event::CaptureBegin {
                            pool,
                            stream: seg.stream,
                        });
                        events.push(Event::CaptureEnd { pool });
                    }
                }
            }
        }
        let prologue = events.len();
        events.extend_from_slice(&self.events);
        let mut t = Trace {
            header: self.header.clone(),
            streams: self.streams.clone(),
            initial: None,
            events,
            num_ids: self.num_ids,
            expected: None,
            notes: self.notes.clone(),
            frames: self.frames.clone(),
            alloc_frames: self.alloc_frames.clone(),
            phases: self
                .phases
                .iter()
                .map(|p| PhaseMark {
                    event_index: p.event_index + prologue as u64,
                    label: p.label.clone(),
                })
                .collect(),
            pools: self.pools.clone(),
            host_events: self.host_events,
            tenant_events: self.tenant_events,
            expected_host: None,
        };
        t.header
            .extra
            .insert("fresh_start_events".into(), prologue.to_string());
        t.notes.push(format!(
            "fresh start: the {} blocks in use at the first entry are the first {prologue} events (address order)",
            init.live.len()
        ));
        t
    }
}
