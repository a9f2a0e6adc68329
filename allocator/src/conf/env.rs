//! Which environment variable the CUDA caching allocator reads its settings
//! from, and `PYTORCH_NO_CUDA_MEMORY_CACHING`.
//!
//! vramlab models CUDA builds; the ROCm-only fallbacks
//! (`PYTORCH_HIP_ALLOC_CONF`) are not consulted.

use super::error::ConfError;
use super::{AllocConf, TorchVersion};

/// The variables the native CUDA allocator consults, in order; the first one
/// that is *set* (even to the empty string) is the only one parsed.
///
/// * ≤ 2.8: `PYTORCH_CUDA_ALLOC_CONF` only (`CUDAAllocatorConfig::instance`
///   reads it with `getenv` / `c10::utils::get_env`).
/// * 2.9: still `PYTORCH_CUDA_ALLOC_CONF` only *for the CUDA allocator*. 2.9
///   ships the generic `AcceleratorAllocatorConfig`
///   (`c10/core/AllocatorConfig.cpp`, commit `0ac71663…`) which prefers
///   `PYTORCH_ALLOC_CONF` and warns "PYTORCH_CUDA_ALLOC_CONF is deprecated,
///   use PYTORCH_ALLOC_CONF instead" (the warning 2.9.1 prints from
///   `AllocatorConfig.cpp:28`), but the CUDA allocator was only moved onto it
///   in October 2025 (PR #165135), so 2.9's CUDA allocator ignores
///   `PYTORCH_ALLOC_CONF` (issue #183387: `PYTORCH_ALLOC_CONF=
///   expandable_segments:True` silently ignored in 2.9.1). What the generic
///   config does with `PYTORCH_ALLOC_CONF` in 2.9 (host-allocator settings,
///   possible errors) is not modelled.
/// * ≥ 2.10: `PYTORCH_CUDA_ALLOC_CONF`, then `PYTORCH_ALLOC_CONF` (both the
///   generic and the CUDA instance, after PR #167659, Nov 2025, which also
///   dropped the deprecation warning).
pub(crate) fn env_var_precedence(version: TorchVersion) -> &'static [&'static str] {
    if version.at_least(2, 10) {
        &["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"]
    } else {
        &["PYTORCH_CUDA_ALLOC_CONF"]
    }
}

impl AllocConf {
    /// The settings the native CUDA allocator of `version` starts with, read
    /// through `lookup` (e.g. `|k| std::env::var(k).ok()`), and the variable
    /// they came from (`None`: no variable set, defaults). See
    /// `env_var_precedence` for the order per version. Errors name the
    /// variable ([`ConfError::variable`]).
    pub fn from_env(
        version: TorchVersion,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(AllocConf, Option<&'static str>), ConfError> {
        for &var in env_var_precedence(version) {
            if let Some(value) = lookup(var) {
                let conf = AllocConf::parse(&value, version).map_err(|e| e.with_variable(var))?;
                return Ok((conf, Some(var)));
            }
        }
        Ok((AllocConf::new(version), None))
    }
}
