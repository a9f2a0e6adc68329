//! `struct cudaDeviceProp`, filled at the offsets of the caller's CUDA
//! major version. The offsets were read (`offsetof`) from the
//! `driver_types.h` of the runtime wheels: nvidia-cuda-runtime-cu12 12.4.127
//! and the CUDA 13.0 runtime of torch 2.11's wheels (CUDA 13 removed fields
//! such as `clockRate`, so everything after `textureAlignment` moved).

use std::ffi::c_void;

/// The fields the fake fills, and where each lies.
struct Layout {
    size: usize,
    multi_processor_count: usize,
    integrated: usize,
    can_map_host_memory: usize,
    concurrent_kernels: usize,
    ecc_enabled: usize,
    pci_bus_id: usize,
    async_engine_count: usize,
    unified_addressing: usize,
    memory_bus_width: usize,
    l2_cache_size: usize,
    max_threads_per_multi_processor: usize,
    stream_priorities_supported: usize,
    shared_mem_per_multiprocessor: usize,
    regs_per_multiprocessor: usize,
    managed_memory: usize,
    concurrent_managed_access: usize,
    shared_mem_per_block_optin: usize,
    max_blocks_per_multi_processor: usize,
    memory_pools_supported: usize,
}

const CUDA12: Layout = Layout {
    size: 1032,
    multi_processor_count: 388,
    integrated: 396,
    can_map_host_memory: 400,
    concurrent_kernels: 576,
    ecc_enabled: 580,
    pci_bus_id: 584,
    async_engine_count: 600,
    unified_addressing: 604,
    memory_bus_width: 612,
    l2_cache_size: 616,
    max_threads_per_multi_processor: 624,
    stream_priorities_supported: 628,
    shared_mem_per_multiprocessor: 640,
    regs_per_multiprocessor: 648,
    managed_memory: 652,
    concurrent_managed_access: 676,
    shared_mem_per_block_optin: 696,
    max_blocks_per_multi_processor: 712,
    memory_pools_supported: 744,
};

const CUDA13: Layout = Layout {
    size: 1008,
    multi_processor_count: 384,
    integrated: 388,
    can_map_host_memory: 392,
    concurrent_kernels: 560,
    ecc_enabled: 564,
    pci_bus_id: 568,
    async_engine_count: 584,
    unified_addressing: 588,
    memory_bus_width: 592,
    l2_cache_size: 596,
    max_threads_per_multi_processor: 604,
    stream_priorities_supported: 608,
    shared_mem_per_multiprocessor: 624,
    regs_per_multiprocessor: 632,
    managed_memory: 636,
    concurrent_managed_access: 656,
    shared_mem_per_block_optin: 672,
    max_blocks_per_multi_processor: 688,
    memory_pools_supported: 720,
};

// Offsets shared by both layouts.
const NAME: usize = 0;
const UUID: usize = 256;
const TOTAL_GLOBAL_MEM: usize = 288;
const SHARED_MEM_PER_BLOCK: usize = 296;
const REGS_PER_BLOCK: usize = 304;
const WARP_SIZE: usize = 308;
const MEM_PITCH: usize = 312;
const MAX_THREADS_PER_BLOCK: usize = 320;
const MAX_THREADS_DIM: usize = 324;
const MAX_GRID_SIZE: usize = 336;
const TOTAL_CONST_MEM: usize = 352;
const MAJOR: usize = 360;
const MINOR: usize = 364;
const TEXTURE_ALIGNMENT: usize = 368;

/// Fills the caller's `cudaDeviceProp` for device `d`: the figures of the
/// card ([`cards::card`](crate::cards::card)); name and memory from the
/// settings.
///
/// # Safety
/// `p` is null or points to a `cudaDeviceProp` of the caller's CUDA major
/// version (`cuda_major`), writable.
pub(crate) unsafe fn fill(p: *mut c_void, d: u32, cuda_major: i32, name: &str, total: u64) {
    if p.is_null() {
        return;
    }
    let l = if cuda_major >= 13 { &CUDA13 } else { &CUDA12 };
    let card = crate::cards::card();
    let base = p.cast::<u8>();
    let i32_at = |off: usize, v: i32| {
        // SAFETY: `off + 4 <= l.size`: every offset comes from the layout of
        // this major version, and the struct is that large (caller's promise).
        unsafe { base.add(off).cast::<i32>().write_unaligned(v) }
    };
    let u64_at = |off: usize, v: u64| {
        // SAFETY: as above, for an 8-byte field.
        unsafe { base.add(off).cast::<u64>().write_unaligned(v) }
    };
    // SAFETY: the whole struct is writable (caller's promise).
    unsafe { std::ptr::write_bytes(base, 0, l.size) };
    // SAFETY: the name field is 256 bytes at offset 0.
    unsafe { crate::ffi::put_str(base.add(NAME), 256, name) };
    // SAFETY: the uuid is 16 bytes at UUID; a distinct first byte per device.
    unsafe { base.add(UUID).write(d as u8 + 1) };
    u64_at(TOTAL_GLOBAL_MEM, total);
    u64_at(SHARED_MEM_PER_BLOCK, 49_152);
    i32_at(REGS_PER_BLOCK, 65_536);
    i32_at(WARP_SIZE, 32);
    u64_at(MEM_PITCH, 2_147_483_647);
    i32_at(MAX_THREADS_PER_BLOCK, 1024);
    for (i, v) in [1024, 1024, 64].into_iter().enumerate() {
        i32_at(MAX_THREADS_DIM + 4 * i, v);
    }
    for (i, v) in [2_147_483_647, 65_535, 65_535].into_iter().enumerate() {
        i32_at(MAX_GRID_SIZE + 4 * i, v);
    }
    u64_at(TOTAL_CONST_MEM, 65_536);
    i32_at(MAJOR, card.major);
    i32_at(MINOR, card.minor);
    u64_at(TEXTURE_ALIGNMENT, 512);
    i32_at(l.multi_processor_count, card.sm_count);
    i32_at(l.integrated, 0);
    i32_at(l.can_map_host_memory, 1);
    i32_at(l.concurrent_kernels, 1);
    i32_at(l.ecc_enabled, i32::from(card.ecc));
    i32_at(l.pci_bus_id, 0x18 + d as i32);
    i32_at(l.async_engine_count, 3);
    i32_at(l.unified_addressing, 1);
    i32_at(l.memory_bus_width, card.bus_width);
    i32_at(l.l2_cache_size, card.l2_bytes);
    i32_at(l.max_threads_per_multi_processor, card.threads_per_sm);
    i32_at(l.stream_priorities_supported, 1);
    u64_at(l.shared_mem_per_multiprocessor, card.shared_per_sm as u64);
    i32_at(l.regs_per_multiprocessor, 65_536);
    i32_at(l.managed_memory, 1);
    i32_at(l.concurrent_managed_access, 1);
    u64_at(l.shared_mem_per_block_optin, card.shared_optin as u64);
    i32_at(l.max_blocks_per_multi_processor, card.blocks_per_sm);
    i32_at(l.memory_pools_supported, 1);
}
