//! The private pools of a *fresh* start: the pools that held memory when
//! the recording began exist, held once, and their blocks in use are
//! allocated inside a section that routes them there — the same calls as
//! the events [`Trace::with_fresh_start`] writes, so that a replay started
//! fresh and a replay of that rewritten trace agree.

use vramlab_allocator::{AllocError, Allocator, PoolOptions, PoolRoute};
use vramlab_traces::{InitialState, PrivatePoolKind, StreamIndex, Trace};

/// Index into `Trace::pools`.
type PoolIndex = u32;

/// The pool state of a fresh start while its blocks are allocated.
pub(super) struct FreshPools<'t> {
    trace: &'t Trace,
    made: Vec<bool>,
    /// (pool, stream, the section's hold is given back at its end)
    open: Option<(PoolIndex, StreamIndex, bool)>,
}

impl<'t> FreshPools<'t> {
    pub(super) fn new(trace: &'t Trace) -> FreshPools<'t> {
        FreshPools {
            trace,
            made: vec![false; trace.pools.len()],
            open: None,
        }
    }

    fn is_mempool(&self, p: PoolIndex) -> bool {
        self.trace
            .pools
            .get(p as usize)
            .is_some_and(|d| d.kind.is_mempool())
    }

    fn raw(&self, s: StreamIndex) -> u64 {
        self.trace.streams.get(s as usize).copied().unwrap_or(0)
    }

    /// Before a block of `pool` (on `stream`): the section that routes it.
    pub(super) fn before<A: Allocator>(
        &mut self,
        alloc: &mut A,
        pool: Option<PoolIndex>,
        stream: StreamIndex,
    ) -> Result<(), AllocError> {
        let want = pool.map(|p| (p, stream));
        if self.open.map(|(p, s, _)| (p, s)) == want {
            return Ok(());
        }
        self.close(alloc)?;
        let Some((p, s)) = want else { return Ok(()) };
        let mempool = self.is_mempool(p);
        let options = pool_options(self.trace, p);
        let already = self.made.get(p as usize).copied().unwrap_or(false);
        if !already && mempool {
            alloc.create_pool(p, options)?;
        }
        if let Some(m) = self.made.get_mut(p as usize) {
            *m = true;
        }
        let route = if mempool {
            PoolRoute::Thread
        } else {
            PoolRoute::Capture {
                stream: self.raw(s),
            }
        };
        alloc.begin_allocate_to_pool(p, route, options)?;
        self.open = Some((p, s, already && !mempool));
        Ok(())
    }

    fn close<A: Allocator>(&mut self, alloc: &mut A) -> Result<(), AllocError> {
        if let Some((p, _, extra)) = self.open.take() {
            alloc.end_allocate_to_pool(p)?;
            if self.is_mempool(p) || extra {
                alloc.release_pool(p)?;
            }
        }
        Ok(())
    }

    /// After the last block: closes the section, and holds the pools that
    /// held only cached memory.
    pub(super) fn finish<A: Allocator>(
        mut self,
        alloc: &mut A,
        init: &InitialState,
    ) -> Result<(), AllocError> {
        self.close(alloc)?;
        for seg in &init.segments {
            let Some(p) = seg.pool else { continue };
            if self.made.get(p as usize).copied().unwrap_or(true) {
                continue;
            }
            if let Some(m) = self.made.get_mut(p as usize) {
                *m = true;
            }
            let options = pool_options(self.trace, p);
            if self.is_mempool(p) {
                alloc.create_pool(p, options)?;
            } else {
                let stream = self.raw(seg.stream);
                alloc.begin_allocate_to_pool(p, PoolRoute::Capture { stream }, options)?;
                alloc.end_allocate_to_pool(p)?;
            }
        }
        Ok(())
    }
}

/// The allocator options of the trace's private pool `pool` (a MemPool's
/// `use_on_oom` and `no_split`; none for a graph pool or an undeclared one).
pub(super) fn pool_options(trace: &Trace, pool: u32) -> PoolOptions {
    trace
        .pools
        .get(pool as usize)
        .map_or(PoolOptions::default(), |d| PoolOptions {
            use_on_oom: d.use_on_oom,
            no_split: d.no_split,
            own_allocator: d.kind == PrivatePoolKind::Engine,
        })
}
