//! [`TimedAllocator`]: a policy wrapper that measures the wall time of
//! every caller-level malloc and free into latency histograms
//! (`vramlab replay --latency`, the GPU comparison with PyTorch).

use std::time::Instant;

use vramlab_allocator::devices::DevicePtr;
use vramlab_allocator::latency::LatencyHistogram;
use vramlab_allocator::{
    AllocError, Allocator, BlockHandle, MemoryStats, PoolKind, SeedBlock, SegmentView,
};

/// Wraps a policy and times each caller-level call: every
/// [`Allocator::malloc`] (cache hits included) into `malloc`, every
/// [`Allocator::free`] and [`Allocator::free_deferred`] into `free`. These
/// are the figures to compare with `torch.cuda.caching_allocator_alloc` /
/// `caching_allocator_delete` timings.
#[derive(Debug)]
pub struct TimedAllocator<A> {
    /// The wrapped policy.
    pub inner: A,
    /// Latency of each malloc call (successful or not).
    pub malloc: LatencyHistogram,
    /// Latency of each free call.
    pub free: LatencyHistogram,
}

impl<A: Allocator> TimedAllocator<A> {
    /// Wraps `inner` with empty histograms.
    pub fn new(inner: A) -> Self {
        TimedAllocator {
            inner,
            malloc: LatencyHistogram::new(),
            free: LatencyHistogram::new(),
        }
    }
}

impl<A: Allocator> Allocator for TimedAllocator<A> {
    type Dev = A::Dev;

    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn malloc(&mut self, size: u64, stream: u64) -> Result<BlockHandle, AllocError> {
        let t = Instant::now();
        let r = self.inner.malloc(size, stream);
        self.malloc.record(t.elapsed());
        r
    }
    fn free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        let t = Instant::now();
        let r = self.inner.free(handle);
        self.free.record(t.elapsed());
        r
    }
    fn free_deferred(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        let t = Instant::now();
        let r = self.inner.free_deferred(handle);
        self.free.record(t.elapsed());
        r
    }
    fn complete_free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        self.inner.complete_free(handle)
    }
    fn record_stream(&mut self, handle: BlockHandle, stream: u64) -> Result<(), AllocError> {
        self.inner.record_stream(handle, stream)
    }
    fn empty_cache(&mut self) -> Result<(), AllocError> {
        self.inner.empty_cache()
    }
    fn block_ptr(&self, handle: BlockHandle) -> DevicePtr {
        self.inner.block_ptr(handle)
    }
    fn stats(&self) -> &MemoryStats {
        self.inner.stats()
    }
    fn largest_free_block(&self) -> u64 {
        self.inner.largest_free_block()
    }
    fn segments(&self) -> Vec<SegmentView> {
        self.inner.segments()
    }
    fn seed_segment(
        &mut self,
        pool: PoolKind,
        stream: u64,
        blocks: &[SeedBlock],
    ) -> Result<Vec<Option<BlockHandle>>, AllocError> {
        self.inner.seed_segment(pool, stream, blocks)
    }
    fn seed_expandable(
        &mut self,
        pool: PoolKind,
        stream: u64,
        ranges: &[vramlab_allocator::SeedRange<'_>],
    ) -> Result<Vec<Option<BlockHandle>>, AllocError> {
        self.inner.seed_expandable(pool, stream, ranges)
    }
    fn set_memory_fraction(&mut self, fraction: f64) -> Result<(), AllocError> {
        self.inner.set_memory_fraction(fraction)
    }
    fn check_invariants(&self) -> Result<(), String> {
        self.inner.check_invariants()
    }
    fn device(&self) -> &Self::Dev {
        self.inner.device()
    }
    fn device_mut(&mut self) -> &mut Self::Dev {
        self.inner.device_mut()
    }
}
