//! The host allocator's statistics as `torch.cuda.host_memory_stats()`
//! reports them (R5.2, R5.3), and the bytes it holds from CUDA. Each is
//! PyTorch's `Stat` ([`Stat`]), whose argument is an unsigned size: 2.11
//! and 2.12 pass it −1 (R5.4), which `Stat::decrease` takes as PyTorch
//! does.

use crate::stats::Stat;

/// `a` and `b` added field by field: how `host_memory_stats()` sums the
/// buckets' statistics, peaks included (R5.2).
fn sum(a: Stat, b: Stat) -> Stat {
    Stat {
        current: a.current + b.current,
        peak: a.peak + b.peak,
        allocated: a.allocated + b.allocated,
        freed: a.freed + b.freed,
    }
}

/// The active statistics of one bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct BucketActive {
    requests: Stat,
    bytes: Stat,
}

impl BucketActive {
    pub(super) fn increase(&mut self, requests: u64, bytes: u64) {
        self.requests.increase(requests);
        self.bytes.increase(bytes);
    }

    pub(super) fn decrease(&mut self, requests: u64, bytes: u64) {
        self.requests.decrease(requests);
        self.bytes.decrease(bytes);
    }
}

/// What the host allocator has done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostStats {
    /// Blocks (`allocations.*`; `num_host_alloc` is its `allocated`,
    /// `num_host_free` its `freed`).
    pub allocations: Stat,
    /// Bytes of those blocks (`allocated_bytes.*`).
    pub allocated_bytes: Stat,
    /// Host allocations from CUDA (`host_alloc_time.count`): the reserve
    /// segment's included.
    pub host_alloc_calls: u64,
    /// Host memory given back to CUDA (`host_free_time.count`).
    pub host_free_calls: u64,
    /// Bytes held from CUDA (blocks outside the reserve, and the reserve).
    pub reserved_bytes: Stat,
    active: Vec<BucketActive>,
}

impl Default for HostStats {
    fn default() -> Self {
        HostStats {
            allocations: Stat::default(),
            allocated_bytes: Stat::default(),
            host_alloc_calls: 0,
            host_free_calls: 0,
            reserved_bytes: Stat::default(),
            active: vec![BucketActive::default(); super::BUCKETS],
        }
    }
}

impl HostStats {
    /// `active_requests.*`: the sum over buckets, peaks included (so its
    /// peak is the sum of the buckets' peaks, R5.2).
    pub fn active_requests(&self) -> Stat {
        self.active
            .iter()
            .fold(Stat::default(), |s, b| sum(s, b.requests))
    }

    /// `active_bytes.*`, summed as [`HostStats::active_requests`].
    pub fn active_bytes(&self) -> Stat {
        self.active
            .iter()
            .fold(Stat::default(), |s, b| sum(s, b.bytes))
    }

    pub(super) fn active(&mut self, bucket: usize) -> Option<&mut BucketActive> {
        self.active.get_mut(bucket)
    }

    pub(super) fn block_created(&mut self, size: u64) {
        self.allocations.increase(1);
        self.allocated_bytes.increase(size);
    }

    pub(super) fn block_destroyed(&mut self, size: u64) {
        self.allocations.decrease(1);
        self.allocated_bytes.decrease(size);
    }

    pub(super) fn host_allocated(&mut self, size: u64) {
        self.host_alloc_calls += 1;
        self.reserved_bytes.increase(size);
    }

    pub(super) fn host_freed(&mut self, size: u64) {
        self.host_free_calls += 1;
        self.reserved_bytes.decrease(size);
    }
}
