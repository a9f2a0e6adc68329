//! Every allocation policy, behind the same traits
//! ([`Allocator`](crate::Allocator), [`Inspect`](crate::Inspect),
//! [`Seed`](crate::Seed), [`Invariants`](crate::Invariants)), and the
//! registry ([`PolicySpec`], [`with_policy!`](crate::with_policy)) that
//! names and builds them.
//!
//! | name | type | what it models | settings keys (defaults) |
//! |---|---|---|---|
//! | `native` | [`NativeAllocator`] | PyTorch's CUDA caching allocator (see [`native`]) | `PYTORCH_ALLOC_CONF` ([`AllocConf`](crate::AllocConf)) |
//! | `direct` | [`direct::DirectAllocator`] | no cache: `cudaMalloc`/`cudaFree` per request, PyTorch with `PYTORCH_NO_CUDA_MEMORY_CACHING=1` | none |
//! | `bfc` | [`bfc::BfcAllocator`] | TensorFlow's / XLA's (JAX's) best-fit-with-coalescing allocator | `allow_growth` (false), `memory_limit` (none), `memory_fraction` (0.75), `preallocate` (shorthand), `garbage_collection` (false), `fragmentation_fraction` (0) |
//! | `async` | [`async_pool::AsyncPoolAllocator`] | a stream-ordered pool like `cudaMallocAsync` (PyTorch's `backend:cudaMallocAsync`) | `release_threshold` (0), `reuse_across_streams` (false) |
//! | `stitch` | [`stitch::StitchAllocator`] | GMLake's virtual-memory stitching of free blocks | `stitch` (true), `fragment_limit` (512MiB), `reuse_limit` (1), `defragment_level` (0), `max_pieces` (unlimited), `gc_limit` (1000GiB) |
//! | `plan` | [`plan::PlanAllocator`] | an offline plan of the trace replayed (greedy by size over its lifetimes) in one mapped arena, PyTorch's allocator for the rest (STAlloc) | the fallback's `PYTORCH_ALLOC_CONF` |
//!
//! Each policy module documents the rules it implements and the source each
//! rule was read from, and has a `Settings` with `parse` (a `key:value,…`
//! settings string; errors name the key and the value), `Display` (the
//! canonical string, which `parse` reads back to the same value) and
//! `Default`. Each allocator is built with `new(settings, device)`, reports
//! statistics with PyTorch's names, detects double frees through handle
//! generations, reports out-of-memory conditions as
//! [`AllocError::OutOfMemory`](crate::AllocError::OutOfMemory) and checks
//! its own consistency in `check_invariants`.
//!
//! Policies without PyTorch's small/large pool split count everything in
//! `large_pool`.
//!
//! Shared by the policies: `arena` (the slot arena behind generation-checked
//! block handles), `settings` (the settings-string grammar and value
//! parsers), `rounding`, `oom` (the 2^60-byte request limit and the
//! out-of-memory reports) and `checks` (helpers of the invariant checkers).

mod arena;
mod checks;
mod oom;
mod rounding;
mod settings;

pub mod async_pool;
pub mod bfc;
pub mod direct;
pub mod native;
pub mod plan;
mod registry;
pub mod stitch;

pub use async_pool::AsyncPoolAllocator;
pub use bfc::BfcAllocator;
pub use direct::DirectAllocator;
pub use native::NativeAllocator;
pub use plan::PlanAllocator;
pub use registry::{PolicyKind, PolicySpec};
pub use stitch::StitchAllocator;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::{Device, DeviceCall, DeviceError, DevicePtr, MemInfo};
    use crate::{AllocConf, Allocator, Inspect, Invariants};

    /// A device that refuses everything; enough to build each policy.
    struct NoDevice;

    impl Device for NoDevice {
        fn malloc(&mut self, size: u64) -> Result<DevicePtr, DeviceError> {
            Err(DeviceError::OutOfMemory {
                requested: size,
                free: 0,
            })
        }
        fn free(&mut self, _: DevicePtr, _: u64) -> Result<(), DeviceError> {
            Err(DeviceError::Other("nothing allocated".into()))
        }
        fn mem_info(&self) -> MemInfo {
            MemInfo { free: 0, total: 0 }
        }
        fn synchronize(&mut self) {}
        fn granularity(&self) -> u64 {
            2 << 20
        }
        fn reserve(&mut self, _: u64) -> Result<DevicePtr, DeviceError> {
            Err(DeviceError::Other("no address space".into()))
        }
        fn map(&mut self, _: DevicePtr, size: u64, _: u64) -> Result<(), DeviceError> {
            Err(DeviceError::OutOfMemory {
                requested: size,
                free: 0,
            })
        }
        fn unmap(&mut self, _: DevicePtr, _: u64) -> Result<(), DeviceError> {
            Err(DeviceError::Other("nothing mapped".into()))
        }
        fn release(&mut self, _: DevicePtr, _: u64) -> Result<(), DeviceError> {
            Err(DeviceError::Other("nothing reserved".into()))
        }
        fn calls(&self) -> &[DeviceCall] {
            &[]
        }
        fn forget_calls(&mut self) {}
    }

    #[test]
    fn names_match_the_list() {
        let names = [
            NativeAllocator::new(AllocConf::default(), NoDevice).name(),
            DirectAllocator::new(direct::Settings::default(), NoDevice).name(),
            BfcAllocator::new(bfc::Settings::default(), NoDevice).name(),
            AsyncPoolAllocator::new(async_pool::Settings::default(), NoDevice).name(),
            StitchAllocator::new(stitch::Settings::default(), NoDevice).name(),
            PlanAllocator::new(plan::Settings::default(), NoDevice).name(),
        ];
        let listed = registry::PolicyKind::ALL.map(registry::PolicyKind::name);
        assert_eq!(names, listed);
    }

    #[test]
    fn ooms_are_errors_not_panics() {
        let mut d = DirectAllocator::new(direct::Settings::default(), NoDevice);
        assert!(matches!(
            d.malloc(1 << 20, 0),
            Err(crate::AllocError::OutOfMemory(_))
        ));
        let mut b = BfcAllocator::new(bfc::Settings::default(), NoDevice);
        assert!(matches!(
            b.malloc(1 << 20, 0),
            Err(crate::AllocError::OutOfMemory(_))
        ));
        let mut a = AsyncPoolAllocator::new(async_pool::Settings::default(), NoDevice);
        assert!(matches!(
            a.malloc(1 << 20, 0),
            Err(crate::AllocError::OutOfMemory(_))
        ));
        let mut s = StitchAllocator::new(stitch::Settings::default(), NoDevice);
        assert!(matches!(
            s.malloc(512, 0),
            Err(crate::AllocError::OutOfMemory(_))
        ));
        // A device error (reserve fails) is reported, not a panic.
        assert!(matches!(
            s.malloc(64 << 20, 0),
            Err(crate::AllocError::Device(_))
        ));
        for r in [
            d.check_invariants(),
            b.check_invariants(),
            a.check_invariants(),
            s.check_invariants(),
        ] {
            r.unwrap();
        }
    }
}
