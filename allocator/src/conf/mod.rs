//! `PYTORCH_ALLOC_CONF` / `PYTORCH_CUDA_ALLOC_CONF`: the settings of PyTorch's
//! native caching allocator, parsed and printed as PyTorch does (spec §8).
//!
//! Behaviour that changed between PyTorch releases is selected by a
//! [`TorchVersion`] (default: the newest supported, 2.11).

mod version;

pub use version::TorchVersion;

/// 1 MiB in bytes.
pub const MIB: u64 = 1 << 20;

/// Number of power-of-two intervals in the `roundup_power2_divisions` table
/// (1 MiB … 32 GiB and above).
pub const ROUNDUP_INTERVALS: usize = 16;

/// Which allocator backend the settings select.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// PyTorch's own caching allocator (`backend:native`).
    #[default]
    Native,
    /// The driver's stream-ordered allocator (`backend:cudaMallocAsync`).
    CudaMallocAsync,
}

/// Parsed allocator settings.
///
/// Sizes are stored in bytes. `None` means "not set, use the default of the
/// target version"; use the accessor methods for effective values.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocConf {
    /// PyTorch release whose parser rules and allocator behaviour apply.
    pub version: TorchVersion,
    /// `backend`.
    pub backend: Backend,
    /// `max_split_size_mb` in bytes (`None` = unlimited).
    pub max_split_size: Option<u64>,
    /// `max_non_split_rounding_mb` in bytes (`None` = version default).
    pub max_non_split_rounding: Option<u64>,
    /// `roundup_power2_divisions`, one entry per interval (0 = off).
    pub roundup_power2_divisions: [u32; ROUNDUP_INTERVALS],
    /// `garbage_collection_threshold` (0 = off).
    pub garbage_collection_threshold: f64,
    /// `expandable_segments`.
    pub expandable_segments: bool,
    /// `release_lock_on_cudamalloc` (no effect on decisions).
    pub release_lock_on_cudamalloc: bool,
    /// `pinned_use_cuda_host_register` (host allocator only).
    pub pinned_use_cuda_host_register: bool,
    /// `pinned_num_register_threads` (host allocator only).
    pub pinned_num_register_threads: u32,
    /// `pinned_use_background_threads` (host allocator only).
    pub pinned_use_background_threads: bool,
    /// `pinned_reserve_segment_size_mb` (host allocator only).
    pub pinned_reserve_segment_size_mb: u64,
    /// `graph_capture_record_stream_reuse` (graph capture only).
    pub graph_capture_record_stream_reuse: bool,
    /// `per_process_memory_fraction` (`None` = not limited).
    pub per_process_memory_fraction: Option<f64>,
    /// `large_segment_size_mb` in bytes (`None` = 20 MiB).
    pub large_segment_size: Option<u64>,
    /// The string these settings were parsed from (as PyTorch reports it in
    /// `allocator_settings["PYTORCH_CUDA_ALLOC_CONF"]`).
    pub raw: String,
}

impl AllocConf {
    /// PyTorch's defaults for `version`.
    pub fn new(version: TorchVersion) -> Self {
        AllocConf {
            version,
            backend: Backend::Native,
            max_split_size: None,
            max_non_split_rounding: None,
            roundup_power2_divisions: [0; ROUNDUP_INTERVALS],
            garbage_collection_threshold: 0.0,
            expandable_segments: false,
            release_lock_on_cudamalloc: false,
            pinned_use_cuda_host_register: false,
            pinned_num_register_threads: 1,
            pinned_use_background_threads: false,
            pinned_reserve_segment_size_mb: 0,
            graph_capture_record_stream_reuse: false,
            per_process_memory_fraction: None,
            large_segment_size: None,
            raw: String::new(),
        }
    }

    /// Effective max split size in bytes (`u64::MAX` = unlimited).
    pub fn max_split_size_bytes(&self) -> u64 {
        self.max_split_size.unwrap_or(u64::MAX)
    }

    /// Segment size for 1–10 MiB requests and the large expandable page size
    /// (`kLargeBuffer`, or `large_segment_size_mb` where the version has it).
    pub fn large_segment_size_bytes(&self) -> u64 {
        self.large_segment_size.unwrap_or(20 * MIB)
    }

    /// Effective non-split rounding limit (NSR) in bytes: how much larger than
    /// an oversize request a cached block may be and still be reused.
    pub fn max_non_split_rounding_bytes(&self) -> u64 {
        self.max_non_split_rounding
            .unwrap_or_else(|| self.large_segment_size_bytes())
    }
}

impl Default for AllocConf {
    fn default() -> Self {
        AllocConf::new(TorchVersion::default())
    }
}
