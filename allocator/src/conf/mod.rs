//! `PYTORCH_ALLOC_CONF` / `PYTORCH_CUDA_ALLOC_CONF`: the settings of PyTorch's
//! native caching allocator, parsed and printed as PyTorch does
//! (`CUDAAllocatorConfig::parseArgs` in c10/cuda/CUDAAllocatorConfig.cpp;
//! from 2.10 `AcceleratorAllocatorConfig::parseArgs` in
//! c10/core/AllocatorConfig.cpp with the CUDA hook).
//!
//! Behaviour that changed between PyTorch releases is selected by a
//! [`TorchVersion`] (default: the newest supported, 2.11).
//!
//! * [`AllocConf::parse`] / [`AllocConf::parse_update`]: PyTorch's tokenizer,
//!   grammar, validation and error messages for the target release (≤ 2.9:
//!   the hand-written `CUDAAllocatorConfig` parser; 2.10+: the
//!   `AcceleratorAllocatorConfig` + CUDA hook parsers). The version boundaries
//!   and the evidence for them are summarised below.
//! * `Display` for [`AllocConf`]: the canonical settings string.
//! * [`AllocConf::from_env`]: which environment variable PyTorch reads.
//! * [`AllocConf::effective_rows`]: a readable description of the effect.
//!
//! # Version boundaries
//!
//! Release tags could not be mapped to commits in the source index, so each
//! boundary is the release whose branch cut follows the change, dated by the
//! pull request that made it (pytorch/pytorch):
//!
//! | Since | Change | Evidence |
//! |---|---|---|
//! | ≤ 2.1 | `backend`, `max_split_size_mb`, `roundup_power2_divisions` (single and list), `garbage_collection_threshold`, `expandable_segments` | 2.0.1 rejects `expandable_segments`; ≈2.2 `CUDAAllocatorConfig.cpp` revision has all five |
//! | 2.2 | `release_lock_on_cudamalloc` (+ `_hipmalloc` alias), `pinned_use_cuda_host_register` (+ hip alias), `pinned_num_register_threads` | PR #108367 (31 Aug 2023, after the 2.1 cut), PR #110715 (Oct 2023) |
//! | 2.3 | list entries of `roundup_power2_divisions` may be 0 | ≈2.2 revision rejects 0; derived code of the `std::string_view` era (≈2.3/2.4) accepts it — **inferred** |
//! | 2.6 | `max_non_split_rounding_mb`, `pinned_use_background_threads` | PR #136174 (16 Sep 2024), PR #135524 (9 Sep 2024), both after the 2.5 cut |
//! | 2.9 | `graph_capture_record_stream_reuse`; "divisons" typo fixed in messages | PR #158352 (merged by Sep 2025); Oct 2025 revision — typo boundary **inferred** |
//! | 2.10 | parser moved to `AcceleratorAllocatorConfig` + CUDA hook (`ConfigTokenizer`, `stoull`, any whitespace dropped, separators not checked, `max_split_size_mb >= 20`, `>` fills from last + 1), `pinned_reserve_segment_size_mb`, `per_process_memory_fraction` | PR #165131/#165135 (Oct 2025, after the 2.9 release), PR #164501 (Oct 2025), PR #161035 (in the hook parser, commit `b944315b…`); issue #183387 shows 2.9.1's CUDA allocator still on the old parser |
//! | 2.11 | `large_segment_size_mb` (parsed first; minimum for `max_split_size_mb` / `max_non_split_rounding_mb`; re-parse resets NSR to it) | PR #172056 (9 Jan 2026, after the 2.10 cut) — **unverified** that it made 2.11 |
//! | 2.12 | `throw_on_cudamalloc_oom`, `pinned_free_catch_all` | each release's wheel (`torch/data/release-keys.tsv`); grammar and messages from the 2.12–2.15 wheels on the fake device |
//! | 2.13 | `pinned_max_round_threshold_mb`, `pinned_max_cached_size_mb` (in `libc10.so`'s generic parser: `stoull`, no bound) | the wheels (release-keys.tsv); 2.15 on the fake device accepts them, 2.11 refuses them |
//! | 2.15 | `expandable_segments_reserve`, `expandable_segments_reserve_by_class` | the wheels (release-keys.tsv); the 2.15 wheel on the fake device |
//!
//! Which release first has each key is read from the wheels themselves
//! (`scripts/release_keys.py`: `libc10_cuda.so` and `libc10.so` of every
//! release on PyPI), and the key table must equal that list (a test says
//! where they part).
//!
//! The ROCm-only backend `hipMallocAsync` is rejected (vramlab models CUDA
//! builds), but the `*_hip*` key aliases are accepted as CUDA builds do.
//!
//! Boundaries that are easy to misplace: `pinned_reserve_segment_size_mb`
//! is 2.10, not ≈2.8 (its PR is from October 2025); `pinned_use_background_threads`
//! is taken as 2.6, not ≈2.5; 2.9's *CUDA* parser is still the old one
//! (`> 20`, `>` from the last index), as the table above says.

mod cnum;
mod describe;
mod display;
mod env;
mod error;
mod keys;
mod legacy;
mod modern;
#[cfg(test)]
mod tests;
mod version;

pub use error::{ConfError, ConfErrorKind};
pub use version::TorchVersion;
pub(crate) use version::ties_by_address;

/// 1 MiB in bytes.
pub(crate) const MIB: u64 = 1 << 20;

/// Number of power-of-two intervals in the `roundup_power2_divisions` table
/// (1 MiB … 32 GiB and above).
pub const ROUNDUP_INTERVALS: usize = 16;

/// Applies a keyed `roundup_power2_divisions` list entry `2^log2_mib:value`
/// to `table` as every parser version does: the entry's interval is
/// `min(log2_mib, ROUNDUP_INTERVALS - 1)`, and the list's first keyed entry
/// (`first`) also fills every interval below its own. Returns the interval.
// Indexing: `index <= ROUNDUP_INTERVALS - 1` by the clamp on the first line
// and `from <= index`, so `from..=index` lies inside the fixed-size table.
#[allow(clippy::indexing_slicing)]
pub(crate) fn apply_roundup_key<T: Copy>(
    table: &mut [T; ROUNDUP_INTERVALS],
    log2_mib: usize,
    value: T,
    first: bool,
) -> usize {
    let index = log2_mib.min(ROUNDUP_INTERVALS - 1);
    let from = if first { 0 } else { index };
    table[from..=index].fill(value);
    index
}

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
    /// `throw_on_cudamalloc_oom` (2.12+): a new segment larger than the
    /// device's free memory raises at once — no cached blocks released, no
    /// retry, not counted in `num_ooms` ("Allocation was preemptively
    /// rejected …").
    pub throw_on_cudamalloc_oom: bool,
    /// `pinned_free_catch_all` (2.12+; pinned host memory only).
    pub pinned_free_catch_all: bool,
    /// `pinned_max_round_threshold_mb` (2.13+; pinned host memory only):
    /// requests above it are not rounded up to a power of two (`None`:
    /// unlimited, the default).
    pub pinned_max_round_threshold_mb: Option<u64>,
    /// `pinned_max_cached_size_mb` (2.13+; pinned host memory only): a
    /// limit per block, not for the whole cache: a freed block larger than
    /// it goes back to CUDA at once (`None`: unlimited, the default).
    pub pinned_max_cached_size_mb: Option<u64>,
    /// `expandable_segments_reserve` (2.15+) as written: the size of the
    /// address range an expandable segment reserves; physical memory (and
    /// so every figure vramlab reports) is unchanged by it.
    pub expandable_segments_reserve: Option<String>,
    /// `expandable_segments_reserve_by_class` (2.15+) as written (the
    /// tokens up to its closing `]`); like `expandable_segments_reserve`,
    /// address space only.
    pub expandable_segments_reserve_by_class: Option<String>,
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
            throw_on_cudamalloc_oom: false,
            pinned_free_catch_all: false,
            pinned_max_round_threshold_mb: None,
            pinned_max_cached_size_mb: None,
            expandable_segments_reserve: None,
            expandable_segments_reserve_by_class: None,
            raw: String::new(),
        }
    }

    /// `TorchVersion::ties_by_address` of these settings' release.
    pub fn ties_by_address(&self) -> bool {
        version::ties_by_address(self.version)
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

impl AllocConf {
    /// Parse a settings string (the value of `PYTORCH_CUDA_ALLOC_CONF` /
    /// `PYTORCH_ALLOC_CONF`) with the rules of `version`, starting from that
    /// version's defaults. `raw` keeps `s` unchanged.
    ///
    /// An empty or all-whitespace string gives the defaults. Errors carry
    /// PyTorch's own message for `version` (see [`ConfError`]).
    pub fn parse(s: &str, version: TorchVersion) -> Result<AllocConf, ConfError> {
        AllocConf::new(version).apply(s, None)
    }

    /// Re-parse at runtime (`torch.cuda.memory._set_allocator_settings(s)`,
    /// or a later parse of the environment) on top of `self`, as PyTorch's
    /// `parseArgs` does:
    ///
    /// * `max_split_size`, the roundup table and
    ///   `garbage_collection_threshold` are reset to their defaults first, so
    ///   keys absent from `s` lose their previous values; 2.11 also resets the
    ///   non-split rounding limit to the (kept) large segment size;
    /// * every other setting (`expandable_segments`, `release_lock…`,
    ///   `pinned_*`, `graph_capture_record_stream_reuse`,
    ///   `per_process_memory_fraction`, `large_segment_size_mb`, and before
    ///   2.11 `max_non_split_rounding_mb`) keeps its value unless `s` sets it;
    /// * `backend` must equal the one chosen at load time (`self.backend`);
    ///   PyTorch fails an internal assert otherwise.
    ///
    /// On error `self` is untouched (PyTorch may keep the keys parsed before
    /// the failing one; that partial state is not modelled).
    pub fn parse_update(&self, s: &str) -> Result<AllocConf, ConfError> {
        self.apply(s, Some(self.backend))
    }

    fn apply(&self, s: &str, load_backend: Option<Backend>) -> Result<AllocConf, ConfError> {
        let mut c = self.clone();
        let v = c.version;
        c.max_split_size = None;
        c.roundup_power2_divisions = [0; ROUNDUP_INTERVALS];
        c.garbage_collection_threshold = 0.0;
        if keys::has_large_segment_size(v) {
            c.max_non_split_rounding = None;
        }
        c.raw = s.to_string();
        let tokens = keys::tokenize(s, v);
        if keys::uses_tokenizer_parser(v) {
            modern::parse(&mut c, &tokens, load_backend)?;
        } else {
            legacy::parse(&mut c, &tokens, load_backend)?;
        }
        c.normalize();
        Ok(c)
    }

    /// Store values equal to their default as `None`, so that equal settings
    /// compare equal however they were spelled.
    fn normalize(&mut self) {
        if self.large_segment_size == Some(20 * MIB) {
            self.large_segment_size = None;
        }
        if self.max_non_split_rounding == Some(self.large_segment_size_bytes()) {
            self.max_non_split_rounding = None;
        }
        if self.per_process_memory_fraction == Some(1.0) {
            self.per_process_memory_fraction = None;
        }
    }

    /// Warnings PyTorch prints for these settings: "backend:cudaMallocAsync
    /// ignores …" when the async backend is combined with options of the
    /// native allocator. Which options count follows the parser of the
    /// version: up to 2.9 every key but `backend`; from 2.10 only the keys of
    /// the CUDA hook parser (`release_lock_on_cudamalloc`, `pinned_*` except
    /// `pinned_use_background_threads`, `graph_capture_record_stream_reuse`,
    /// `per_process_memory_fraction`). Derived from the values, so a key set
    /// explicitly to its default (which PyTorch also counts) is missed.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.backend != Backend::CudaMallocAsync {
            return out;
        }
        let hook_keys = self.release_lock_on_cudamalloc
            || self.pinned_use_cuda_host_register
            || self.pinned_num_register_threads != 1
            || self.pinned_reserve_segment_size_mb != 0
            || self.graph_capture_record_stream_reuse
            || self.per_process_memory_fraction.is_some();
        let generic_keys = self.max_split_size.is_some()
            || self.max_non_split_rounding.is_some()
            || self.roundup_power2_divisions != [0; ROUNDUP_INTERVALS]
            || self.garbage_collection_threshold != 0.0
            || self.expandable_segments
            || self.pinned_use_background_threads;
        let counted = if keys::uses_tokenizer_parser(self.version) {
            hook_keys
        } else {
            hook_keys || generic_keys
        };
        if counted {
            out.push(
                "backend:cudaMallocAsync ignores max_split_size_mb,roundup_power2_divisions, and garbage_collect_threshold."
                    .to_string(),
            );
        }
        out
    }
}

impl Default for AllocConf {
    fn default() -> Self {
        AllocConf::new(TorchVersion::default())
    }
}
