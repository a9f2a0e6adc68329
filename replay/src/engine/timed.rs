//! [`TimedAllocator`]: a policy wrapper that measures the wall time of
//! every caller-level malloc and free into latency histograms
//! (`vramlab replay --latency`, the GPU comparison with PyTorch).

use std::time::Instant;

use vramlab_allocator::LatencyHistogram;
use vramlab_allocator::{AllocError, Allocator, BlockHandle, Wrapper};

/// Wraps a policy and times each caller-level call: every
/// [`Allocator::malloc`] (cache hits included) into `malloc`, every
/// [`Allocator::free`] and [`Allocator::free_deferred`] into `free`. These
/// are the figures to compare with `torch.cuda.caching_allocator_alloc` /
/// `caching_allocator_delete` timings.
#[derive(Debug)]
pub(crate) struct TimedAllocator<A> {
    /// The wrapped policy.
    pub inner: A,
    /// Latency of each malloc call (successful or not).
    pub malloc: LatencyHistogram,
    /// Latency of each free call.
    pub free: LatencyHistogram,
}

impl<A: Allocator> TimedAllocator<A> {
    /// Wraps `inner` with empty histograms.
    pub(crate) fn new(inner: A) -> Self {
        TimedAllocator {
            inner,
            malloc: LatencyHistogram::new(),
            free: LatencyHistogram::new(),
        }
    }
}

/// Inspection, seeding and the invariant check are the policy's own.
impl<A: Allocator> Wrapper for TimedAllocator<A> {
    type Inner = A;

    fn inner(&self) -> &A {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut A {
        &mut self.inner
    }
}

/// Times `malloc`, `free` and `free_deferred`; passes the other calls on.
impl<A: Allocator> Allocator for TimedAllocator<A> {
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
    fn set_memory_fraction(&mut self, fraction: f64) -> Result<(), AllocError> {
        self.inner.set_memory_fraction(fraction)
    }
}
