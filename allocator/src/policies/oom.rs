//! Out-of-memory conditions every policy reports alike: the request size
//! limit PyTorch's front end enforces and the [`OomReport`]s.

use crate::devices::Device;
use crate::policy::{AllocError, OomReport};
use crate::stats::MemoryStats;

/// Requests of this size (2^60 bytes) or more are refused before any policy
/// looks at them, as PyTorch's front end does for every backend
/// (`NativeCachingAllocator::allocate` in c10/cuda/CUDACachingAllocator.cpp:
/// `TORCH_CHECK_WITH(OutOfMemoryError, size < one_exa_bytes, "CUDA out of
/// memory. Tried to allocate more than 1EB memory.")`).
pub(super) const MAX_REQUEST: u64 = 1 << 60;

/// The report of a request of [`MAX_REQUEST`] bytes or more (PyTorch's
/// "more than 1EB"); nothing is counted.
pub(crate) fn exceeds_limit<D: Device>(
    device: &D,
    stats: &MemoryStats,
    size: u64,
    allowed: Option<u64>,
) -> AllocError {
    let mut r = report(device, stats, size, size, size, allowed);
    r.exceeds_limit = true;
    AllocError::OutOfMemory(Box::new(r))
}

/// The report of `throw_on_cudamalloc_oom` (2.12+): a new segment larger
/// than the free memory, refused before the driver is asked — no cached
/// blocks released, no retry, nothing counted (measured against PyTorch
/// 2.12–2.15 with the oracle).
pub(crate) fn preemptive<D: Device>(
    device: &D,
    stats: &MemoryStats,
    rounded: u64,
    device_request: u64,
    allowed: Option<u64>,
) -> AllocError {
    let mut r = report(device, stats, rounded, rounded, device_request, allowed);
    r.preemptive = true;
    AllocError::OutOfMemory(Box::new(r))
}

/// The device and allocator state at an out-of-memory.
fn report<D: Device>(
    device: &D,
    stats: &MemoryStats,
    requested: u64,
    rounded: u64,
    device_request: u64,
    allowed: Option<u64>,
) -> OomReport {
    let info = device.mem_info();
    OomReport {
        exceeds_limit: false,
        preemptive: false,
        requested,
        rounded,
        device_request,
        device_free: info.free,
        device_total: info.total,
        allowed,
        allocated: stats.allocated_bytes.all.current as u64,
        reserved: stats.reserved_bytes.all.current as u64,
    }
}

/// Counts the OOM in `stats` and builds the report.
pub(crate) fn out_of_memory<D: Device>(
    device: &D,
    stats: &mut MemoryStats,
    requested: u64,
    rounded: u64,
    device_request: u64,
    allowed: Option<u64>,
) -> AllocError {
    stats.num_ooms += 1;
    AllocError::OutOfMemory(Box::new(report(
        device,
        stats,
        requested,
        rounded,
        device_request,
        allowed,
    )))
}
