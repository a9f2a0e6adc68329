//! What a private-pool event of the trace asks of the allocator.

use vramlab_allocator::{AllocError, Allocator, PoolRoute};
use vramlab_traces::Event;

use super::Replayer;
use crate::engine::fresh_pools::pool_options;

impl Replayer<'_> {
    /// A private-pool event: the pool calls PyTorch makes for it
    /// (`beginAllocateToPool`, `endAllocateToPool`, `releasePool`, and for
    /// a MemPool `createOrIncrefPool` and, when it is deleted,
    /// `emptyCache(id)`).
    pub(super) fn pool_event<A: Allocator>(
        &mut self,
        alloc: &mut A,
        ev: &Event,
    ) -> Result<(), AllocError> {
        let decl = |pool: u32| self.trace.pools.get(pool as usize);
        let options = |pool: u32| pool_options(self.trace, pool);
        match *ev {
            Event::PoolCreate { pool } => alloc.create_pool(pool, options(pool)),
            Event::CaptureBegin { pool, stream } => {
                let raw = self.streams.get(stream as usize).copied().unwrap_or(0);
                alloc.begin_allocate_to_pool(
                    pool,
                    PoolRoute::Capture { stream: raw },
                    options(pool),
                )
            }
            Event::PoolEnter { pool } => {
                alloc.begin_allocate_to_pool(pool, PoolRoute::Thread, options(pool))
            }
            Event::CaptureEnd { pool } => alloc.end_allocate_to_pool(pool),
            Event::PoolExit { pool } => {
                alloc.end_allocate_to_pool(pool)?;
                alloc.release_pool(pool)
            }
            Event::PoolRelease { pool } => {
                alloc.release_pool(pool)?;
                if decl(pool).is_some_and(|d| d.kind.is_mempool()) {
                    // `~MemPool`: releasePool, then emptyCache(id).
                    alloc.empty_cache_pool(pool)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}
