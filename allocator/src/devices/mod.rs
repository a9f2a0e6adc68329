//! Devices: the [`Device`] trait (everything a policy may ask of a GPU) and
//! its implementations — [`sim::SimDevice`], a simulated GPU every test and
//! sweep runs on, and (feature `cuda`) `cuda::CudaDevice`, a real GPU
//! through the CUDA driver.
//!
//! A policy never knows whether it runs on a simulated GPU ([`sim::SimDevice`])
//! or a real one. Every call that changes device memory is
//! recorded in the device's call log ([`Device::calls`]), which is how the
//! replay engine learns the segment decisions a policy made.

#[cfg(feature = "cuda")]
pub mod cuda;
mod placement;
mod sim;

pub use placement::Placement;
pub use sim::{CostModel, Refusal, SimDevice};

/// A device virtual address.
pub type DevicePtr = u64;

/// Why a device call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// Not enough free device memory (cudaErrorMemoryAllocation /
    /// CUDA_ERROR_OUT_OF_MEMORY). Policies treat this as a recoverable miss.
    #[error("out of device memory: {requested} bytes requested, {free} bytes free")]
    OutOfMemory {
        /// Bytes the call needed.
        requested: u64,
        /// Bytes the device had free.
        free: u64,
    },
    /// Any other failure (invalid pointer, driver error, unsupported call).
    #[error("device error: {0}")]
    Other(String),
}

/// Free and total device memory, as `cudaMemGetInfo` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemInfo {
    /// Free bytes.
    pub free: u64,
    /// Total bytes.
    pub total: u64,
}

/// What a logged device call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceCallKind {
    /// cudaMalloc of a segment.
    Malloc,
    /// cudaFree of a segment.
    Free,
    /// Physical pages created and mapped into a reserved range.
    Map,
    /// Pages unmapped and their physical memory released.
    Unmap,
    /// Virtual address range reserved (no physical memory).
    Reserve,
    /// Virtual address range released.
    Release,
    /// Device-wide synchronisation.
    Synchronize,
}

impl DeviceCallKind {
    /// Name used in logs and JSON (`malloc`, `free`, `map`, …).
    pub fn name(self) -> &'static str {
        match self {
            DeviceCallKind::Malloc => "malloc",
            DeviceCallKind::Free => "free",
            DeviceCallKind::Map => "map",
            DeviceCallKind::Unmap => "unmap",
            DeviceCallKind::Reserve => "reserve",
            DeviceCallKind::Release => "release",
            DeviceCallKind::Synchronize => "synchronize",
        }
    }
}

/// One successful call that changed device state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceCall {
    /// What happened.
    pub kind: DeviceCallKind,
    /// Address of the segment or first mapped/unmapped byte (0 for sync).
    pub ptr: DevicePtr,
    /// Bytes allocated, freed, mapped, unmapped, reserved or released.
    pub size: u64,
}

/// What a policy may ask of a GPU.
///
/// Sizes passed to [`Device::map`] and [`Device::unmap`] are multiples of the
/// page size the caller chose, which itself is a multiple of
/// [`Device::granularity`].
pub trait Device {
    /// `cudaMalloc(size)`: a new segment. Fails with
    /// [`DeviceError::OutOfMemory`] when the device cannot hold it.
    fn malloc(&mut self, size: u64) -> Result<DevicePtr, DeviceError>;

    /// `cudaFree(ptr)` of a segment obtained from [`Device::malloc`]; `size`
    /// is the segment's size.
    fn free(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError>;

    /// `cudaMemGetInfo`.
    fn mem_info(&self) -> MemInfo;

    /// `cudaDeviceSynchronize` (waits for all streams).
    fn synchronize(&mut self);

    /// Minimum physical allocation granularity of the virtual-memory API.
    fn granularity(&self) -> u64;

    /// `cuMemAddressReserve`: reserve `size` bytes of virtual address space.
    fn reserve(&mut self, size: u64) -> Result<DevicePtr, DeviceError>;

    /// `cuMemCreate` + `cuMemMap` + `cuMemSetAccess` of `size` bytes at `ptr`
    /// inside a reserved range, one physical handle per `page` bytes. On
    /// failure nothing stays mapped.
    fn map(&mut self, ptr: DevicePtr, size: u64, page: u64) -> Result<(), DeviceError>;

    /// `cuMemUnmap` + `cuMemRelease` of `size` mapped bytes at `ptr`.
    fn unmap(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError>;

    /// `cuMemAddressFree` of a reserved range (nothing may be mapped in it).
    fn release(&mut self, ptr: DevicePtr, size: u64) -> Result<(), DeviceError>;

    /// Every successful memory-changing call so far, in order (since the
    /// last [`Device::forget_calls`]).
    fn calls(&self) -> &[DeviceCall];

    /// Drops the calls logged so far, for a caller that has read them and
    /// keeps no more than counts: the log then does not grow with the
    /// length of a replay. The device's state and time are kept.
    fn forget_calls(&mut self);
}
