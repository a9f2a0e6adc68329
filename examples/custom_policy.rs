//! Write your own allocation policy against vramlab's traits and compare it
//! with PyTorch's native caching allocator on the same trace.
//!
//! The policy here is a size-class cache: every request is rounded up to a
//! power of two (at least 512 bytes) and gets a segment of exactly that
//! size; freed segments are kept per (stream, size class) and reused, never
//! split or merged. It is simple, fast, and wastes up to half of every
//! block — the replay shows how much that costs against PyTorch's policy.
//!
//!     cargo run --example custom_policy [TRACE]

use std::collections::BTreeMap;
use std::path::PathBuf;

use vramlab_allocator::MemoryStats;
use vramlab_allocator::{
    AllocConf, AllocError, Allocator, BlockHandle, BlockState, BlockView, Inspect, Invariants,
    NativeAllocator, OomReport, PoolKind, Seed, SegmentView,
};
use vramlab_allocator::{Device, DeviceError, DevicePtr};
use vramlab_replay::{ReplayOptions, SimDevice, replay};

#[derive(Clone, Copy)]
struct Slot {
    ptr: DevicePtr,
    size: u64,
    requested: u64,
    stream: u64,
    live: bool,
    generation: u32,
}

/// A power-of-two size-class cache.
struct SizeClassCache<D: Device> {
    device: D,
    slots: Vec<Slot>,
    /// (stream, size) -> cached free slot indices.
    free: BTreeMap<(u64, u64), Vec<u32>>,
    stats: MemoryStats,
}

impl<D: Device> SizeClassCache<D> {
    fn new(device: D) -> Self {
        SizeClassCache {
            device,
            slots: Vec::new(),
            free: BTreeMap::new(),
            stats: MemoryStats::new(u64::MAX),
        }
    }

    fn pool(size: u64) -> PoolKind {
        if size <= 1 << 20 {
            PoolKind::Small
        } else {
            PoolKind::Large
        }
    }

    fn release_all_cached(&mut self) -> Result<(), AllocError> {
        for (_, list) in std::mem::take(&mut self.free) {
            for i in list {
                let s = self.slots[i as usize];
                self.device
                    .free(s.ptr, s.size)
                    .map_err(|e| AllocError::Device(e.to_string()))?;
                self.stats
                    .reserved_bytes
                    .decrease(Self::pool(s.size), s.size);
                self.stats.segment.decrease(Self::pool(s.size), 1);
                self.stats.num_device_free += 1;
                self.slots[i as usize].size = 0;
            }
        }
        Ok(())
    }

    fn live_slot(&self, h: BlockHandle) -> Result<usize, AllocError> {
        let i = h.index as usize;
        match self.slots.get(i) {
            Some(s) if s.live && s.generation == h.generation => Ok(i),
            _ => Err(AllocError::UnknownHandle(h)),
        }
    }
}

// Serving callers: what PyTorch's caching allocator answers.
impl<D: Device> Allocator for SizeClassCache<D> {
    fn malloc(&mut self, size: u64, stream: u64) -> Result<BlockHandle, AllocError> {
        if size == 0 {
            return Ok(BlockHandle::NULL);
        }
        let class = size
            .max(512)
            .checked_next_power_of_two()
            .ok_or_else(|| AllocError::Invalid("too large".into()))?;
        let pool = Self::pool(class);
        let idx = match self.free.get_mut(&(stream, class)).and_then(Vec::pop) {
            Some(i) => i,
            None => {
                let ptr = match self.device.malloc(class) {
                    Ok(p) => p,
                    Err(DeviceError::OutOfMemory { .. }) => {
                        // Give the cache back and try once more, like PyTorch.
                        self.release_all_cached()?;
                        self.device.malloc(class).map_err(|_| {
                            self.stats.num_ooms += 1;
                            let info = self.device.mem_info();
                            AllocError::OutOfMemory(Box::new(OomReport {
                                exceeds_limit: false,
                                preemptive: false,
                                requested: size,
                                rounded: class,
                                device_request: class,
                                device_free: info.free,
                                device_total: info.total,
                                allowed: None,
                                allocated: self.stats.allocated_bytes.all.current as u64,
                                reserved: self.stats.reserved_bytes.all.current as u64,
                            }))
                        })?
                    }
                    Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
                };
                self.stats.num_device_alloc += 1;
                self.stats.segment.increase(pool, 1);
                self.stats.reserved_bytes.increase(pool, class);
                self.slots.push(Slot {
                    ptr,
                    size: class,
                    requested: 0,
                    stream,
                    live: false,
                    generation: 0,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[idx as usize];
        s.live = true;
        s.requested = size;
        s.generation = s.generation.wrapping_add(1);
        for st in [
            &mut self.stats.allocated_bytes,
            &mut self.stats.active_bytes,
        ] {
            st.increase(pool, class);
        }
        self.stats.requested_bytes.increase(pool, size);
        self.stats.allocation.increase(pool, 1);
        self.stats.active.increase(pool, 1);
        Ok(BlockHandle {
            index: idx,
            generation: s.generation,
        })
    }

    fn free(&mut self, h: BlockHandle) -> Result<(), AllocError> {
        if h.is_null() {
            return Ok(());
        }
        let i = self.live_slot(h)?;
        let s = &mut self.slots[i];
        s.live = false;
        let (pool, size, req) = (Self::pool(s.size), s.size, s.requested);
        for st in [
            &mut self.stats.allocated_bytes,
            &mut self.stats.active_bytes,
        ] {
            st.decrease(pool, size);
        }
        self.stats.requested_bytes.decrease(pool, req);
        self.stats.allocation.decrease(pool, 1);
        self.stats.active.decrease(pool, 1);
        self.free
            .entry((s.stream, size))
            .or_default()
            .push(i as u32);
        Ok(())
    }

    // This policy has no notion of stream events: a deferred free is a free.
    fn free_deferred(&mut self, h: BlockHandle) -> Result<(), AllocError> {
        self.free(h)
    }

    fn complete_free(&mut self, _h: BlockHandle) -> Result<(), AllocError> {
        Ok(())
    }

    fn record_stream(&mut self, _h: BlockHandle, _stream: u64) -> Result<(), AllocError> {
        Ok(())
    }

    fn empty_cache(&mut self) -> Result<(), AllocError> {
        self.release_all_cached()
    }
}

// What the policy holds, and the device it owns.
impl<D: Device> Inspect for SizeClassCache<D> {
    type Dev = D;

    fn name(&self) -> &'static str {
        "size-class"
    }

    fn stats(&self) -> &MemoryStats {
        &self.stats
    }

    fn block_ptr(&self, h: BlockHandle) -> DevicePtr {
        self.slots.get(h.index as usize).map_or(0, |s| s.ptr)
    }

    fn largest_free_block(&self) -> u64 {
        self.free
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|((_, size), _)| *size)
            .max()
            .unwrap_or(0)
    }

    fn segments(&self) -> Vec<SegmentView> {
        let mut v: Vec<SegmentView> = self
            .slots
            .iter()
            .filter(|s| s.size > 0)
            .map(|s| SegmentView {
                ptr: s.ptr,
                size: s.size,
                stream: s.stream,
                pool: Self::pool(s.size),
                private_pool: None,
                is_expandable: false,
                blocks: vec![BlockView {
                    ptr: s.ptr,
                    size: s.size,
                    requested: s.requested,
                    state: if s.live {
                        BlockState::Allocated
                    } else {
                        BlockState::Free
                    },
                }],
            })
            .collect();
        v.sort_by_key(|s| s.ptr);
        v
    }

    fn device(&self) -> &D {
        &self.device
    }

    fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }
}

// It cannot start from a recorded allocator state (traces recorded mid-run).
impl<D: Device> Seed for SizeClassCache<D> {}

// Its consistency, checked after every event under `--check`.
impl<D: Device> Invariants for SizeClassCache<D> {
    fn check_invariants(&self) -> Result<(), String> {
        let reserved: u64 = self.slots.iter().map(|s| s.size).sum();
        if reserved as i64 != self.stats.reserved_bytes.all.current {
            return Err(format!(
                "reserved {reserved} != stats {}",
                self.stats.reserved_bytes.all.current
            ));
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("workloads/data/gpt-small-train.csv")
        });
    let trace = vramlab_replay::Inputs::new([&path]).trace()?;
    let opts = ReplayOptions::default();

    let mut mine = SizeClassCache::new(SimDevice::unlimited());
    let a = replay(&trace, &mut mine, &opts)?;
    let mut native = NativeAllocator::new(AllocConf::default(), SimDevice::unlimited());
    let b = replay(&trace, &mut native, &opts)?;

    // utilization is peak *active* (blocks in use, rounding included) over
    // peak reserved; peak live is what the callers asked for.
    println!(
        "{:<12} {:>14} {:>14} {:>14} {:>16} {:>14}",
        "policy", "peak reserved", "peak live", "peak active", "active/reserved", "device mallocs"
    );
    for r in [&a, &b] {
        println!(
            "{:<12} {:>10.1} MiB {:>10.1} MiB {:>10.1} MiB {:>15.1}% {:>14}",
            r.policy,
            r.summary.peak_reserved_bytes as f64 / 1048576.0,
            r.summary.peak_requested_bytes as f64 / 1048576.0,
            r.summary.peak_active_bytes as f64 / 1048576.0,
            r.summary.utilization * 100.0,
            r.summary.num_device_alloc
        );
    }
    Ok(())
}
