//! The 2.10+ parsers: `AcceleratorAllocatorConfig::parseArgs`
//! (`c10/core/AllocatorConfig.cpp`) followed by the CUDA hook
//! `CUDAAllocatorConfig::parseArgs` (`c10/cuda/CUDAAllocatorConfig.cpp`),
//! both over a `ConfigTokenizer` (`c10/core/AllocatorConfig.h`), in the order
//! `c10::CachingAllocator::setAllocatorSettings` runs them.
//!
//! Behaviour reproduced from that code:
//!
//! * `ConfigTokenizer::checkToken(i, ":")` only checks that token `i`
//!   *exists*; its boolean result is ignored by every caller. So separators
//!   are never verified: `max_split_size_mb,100` parses like
//!   `max_split_size_mb:100`, and a missing comma shows up later (usually as
//!   "Index out of bounds in ConfigTokenizer", a `TORCH_INTERNAL_ASSERT`).
//! * numbers: `std::stoull` (`toSizeT`) and `std::stod` (`toDouble`);
//!   booleans: `toBool`, exactly `True`/`False`.
//! * the generic pass owns `max_split_size_mb`, `max_non_split_rounding_mb`,
//!   `garbage_collection_threshold`, `roundup_power2_divisions`,
//!   `expandable_segments`, `pinned_use_background_threads` (and 2.11's
//!   `large_segment_size_mb`, read in a pre-pass over *all* tokens) and skips
//!   every other key with `skipKey`; the CUDA pass owns the rest, skips the
//!   generic keys and rejects anything else with "Unrecognized key 'K' in
//!   CUDA allocator config.". (The newest main also checks unknown keys in
//!   the generic pass, with the words "in Accelerator allocator config.";
//!   not modelled.)
//! * `roundup_power2_divisions` lists: `>` fills from the last key's index
//!   **plus one** (so `[>:8]` alone leaves interval 0 untouched).

use super::cnum::{self, NumError};
use super::error::{ConfError, ConfErrorKind, internal_assert};
use super::keys::{self, has_large_segment_size};
use super::legacy::{MAX_MB, store_divisions};
use super::{AllocConf, Backend, MIB, ROUNDUP_INTERVALS, apply_roundup_key};

const TOKENIZER_H: &str = "/pytorch/c10/core/AllocatorConfig.h";
const ALLOCATOR_CONFIG_CPP: &str = "/pytorch/c10/core/AllocatorConfig.cpp";

struct Modern<'a> {
    toks: &'a [String],
    conf: &'a mut AllocConf,
    load_backend: Option<Backend>,
}

pub(crate) fn parse(
    conf: &mut AllocConf,
    toks: &[String],
    load_backend: Option<Backend>,
) -> Result<(), ConfError> {
    let mut p = Modern {
        toks,
        conf,
        load_backend,
    };
    if has_large_segment_size(p.conf.version) {
        p.large_segment_prepass()?;
    }
    p.generic_pass()?;
    p.cuda_pass()
}

impl Modern<'_> {
    fn err(
        &self,
        kind: ConfErrorKind,
        msg: impl Into<String>,
        key: &str,
        value: Option<&str>,
    ) -> ConfError {
        ConfError::new(kind, msg, Some(key), value, self.conf.version)
    }

    /// `ConfigTokenizer::operator[]` / `checkIndex`.
    fn at(&self, i: usize, key: &str) -> Result<&str, ConfError> {
        self.toks.get(i).map(String::as_str).ok_or_else(|| {
            self.err(
                ConfErrorKind::TokenizerIndexOutOfBounds,
                internal_assert(
                    "i < config_.size()",
                    TOKENIZER_H,
                    "Index out of bounds in ConfigTokenizer",
                ),
                key,
                None,
            )
        })
    }

    /// `checkToken(i, tok)`: index check only, the comparison is ignored.
    fn check_token(&self, i: usize, key: &str) -> Result<(), ConfError> {
        self.at(i, key).map(|_| ())
    }

    fn num_err(&self, e: NumError, func: &str, key: &str, value: &str) -> ConfError {
        let kind = match e {
            NumError::Invalid => ConfErrorKind::InvalidNumber,
            NumError::OutOfRange => ConfErrorKind::NumberOutOfRange,
        };
        self.err(kind, func, key, Some(value))
    }

    /// `toSizeT(i)`: `std::stoull`.
    fn to_size_t(&self, i: usize, key: &str) -> Result<(u64, String), ConfError> {
        let t = self.at(i, key)?.to_string();
        let v = cnum::stoull(&t).map_err(|e| self.num_err(e, "stoull", key, &t))?;
        Ok((v, t))
    }

    /// `toDouble(i)`: `std::stod`.
    fn to_double(&self, i: usize, key: &str) -> Result<(f64, String), ConfError> {
        let t = self.at(i, key)?.to_string();
        let v = cnum::stod(&t).map_err(|e| self.num_err(e, "stod", key, &t))?;
        Ok((v, t))
    }

    /// The keys of 2.12–2.15 (the wheels' grammar, read on the fake device
    /// with the oracle): two booleans; `expandable_segments_reserve` takes
    /// any one token or list; `..._by_class` reads tokens up to the first
    /// `]`, whatever comes first, and runs off the end without one. Returns
    /// the index of the key's last token.
    fn newer_key(&mut self, i: usize, key: &str) -> Result<usize, ConfError> {
        match key {
            "throw_on_cudamalloc_oom" | "pinned_free_catch_all" => {
                self.check_token(i + 1, key)?;
                let b = self.to_bool(i + 2, key)?;
                if key == "throw_on_cudamalloc_oom" {
                    self.conf.throw_on_cudamalloc_oom = b;
                } else {
                    self.conf.pinned_free_catch_all = b;
                }
                Ok(i + 2)
            }
            "expandable_segments_reserve" => {
                let end = self.skip_key(i, key)?;
                self.conf.expandable_segments_reserve =
                    self.toks.get(i + 2..=end).map(|t| t.concat());
                Ok(end)
            }
            _ => {
                self.check_token(i + 1, key)?;
                let start = i + 2;
                let mut j = start;
                while self.at(j, key)? != "]" {
                    j += 1;
                }
                self.conf.expandable_segments_reserve_by_class =
                    self.toks.get(start..=j).map(|t| t.concat());
                Ok(j)
            }
        }
    }

    /// `toBool(i)`.
    fn to_bool(&self, i: usize, key: &str) -> Result<bool, ConfError> {
        match self.at(i, key)? {
            "True" => Ok(true),
            "False" => Ok(false),
            other => Err(self.err(
                ConfErrorKind::InvalidBool,
                format!(
                    "Expected 'True' or 'False' at index {i} in ConfigTokenizer but got '{other}'"
                ),
                key,
                Some(other),
            )),
        }
    }

    /// `skipKey(i)`: returns the index of the value, or of the `]` closing a
    /// list value.
    fn skip_key(&self, mut i: usize, key: &str) -> Result<usize, ConfError> {
        self.check_token(i + 1, key)?;
        i += 2;
        if self.at(i, key)? != "[" {
            return Ok(i);
        }
        loop {
            i += 1;
            if self.toks.get(i).is_none_or(|t| t == "]") {
                break;
            }
        }
        if i >= self.toks.len() {
            return Err(self.err(
                ConfErrorKind::UnclosedList,
                internal_assert(
                    "i < config_.size()",
                    TOKENIZER_H,
                    "Expected closing bracket ']' in ConfigTokenizer but reached end of config",
                ),
                key,
                None,
            ));
        }
        Ok(i)
    }

    /// 2.11: every token equal to `large_segment_size_mb` is parsed before
    /// anything else (`max_*_mb` minimums depend on it).
    fn large_segment_prepass(&mut self) -> Result<(), ConfError> {
        let mut i = 0;
        while let Some(tok) = self.toks.get(i) {
            if tok == "large_segment_size_mb" {
                let key = "large_segment_size_mb";
                self.check_token(i + 1, key)?;
                i += 2;
                let (mb, t) = self.to_size_t(i, key)?;
                if mb <= 10 {
                    return Err(self.err(
                        ConfErrorKind::InvalidValue,
                        "CachingAllocator option large_segment_size_mb must be > 10 MB",
                        key,
                        Some(&t),
                    ));
                }
                let bytes = mb.min(MAX_MB) * MIB;
                self.conf.large_segment_size = (bytes != 20 * MIB).then_some(bytes);
            }
            i += 1;
        }
        Ok(())
    }

    fn generic_pass(&mut self) -> Result<(), ConfError> {
        let v = self.conf.version;
        let n = self.toks.len();
        let mut i = 0;
        while let Some(key) = self.toks.get(i) {
            let key = key.clone();
            let owned = keys::is_generic_key(v, &key);
            i = match key.as_str() {
                "max_split_size_mb" | "max_non_split_rounding_mb" if owned => {
                    self.parse_mb(i, &key)?
                }
                "garbage_collection_threshold" => {
                    self.check_token(i + 1, &key)?;
                    i += 2;
                    let (x, t) = self.to_double(i, &key)?;
                    if !(x > 0.0 && x < 1.0) {
                        return Err(self.err(
                            ConfErrorKind::InvalidValue,
                            "garbage_collect_threshold is invalid, set it in (0.0, 1.0)",
                            &key,
                            Some(&t),
                        ));
                    }
                    self.conf.garbage_collection_threshold = x;
                    i
                }
                "roundup_power2_divisions" => self.parse_roundup(i, &key)?,
                "pinned_max_round_threshold_mb" | "pinned_max_cached_size_mb" if owned => {
                    // `stoull`, no bound (2.15 takes 0, `-1` and `1.5`).
                    self.check_token(i + 1, &key)?;
                    i += 2;
                    let (mb, _) = self.to_size_t(i, &key)?;
                    if key == "pinned_max_round_threshold_mb" {
                        self.conf.pinned_max_round_threshold_mb = Some(mb);
                    } else {
                        self.conf.pinned_max_cached_size_mb = Some(mb);
                    }
                    i
                }
                "expandable_segments" | "pinned_use_background_threads" => {
                    self.check_token(i + 1, &key)?;
                    i += 2;
                    let b = self.to_bool(i, &key)?;
                    if key == "expandable_segments" {
                        self.conf.expandable_segments = b;
                    } else {
                        self.conf.pinned_use_background_threads = b;
                    }
                    i
                }
                // large_segment_size_mb (handled by the pre-pass) and every
                // key the CUDA hook owns or rejects.
                _ => self.skip_key(i, &key)?,
            };
            if i + 1 < n {
                i += 1; // checkToken(++i, ",") — result ignored
            }
            i += 1;
        }
        Ok(())
    }

    /// `max_split_size_mb` / `max_non_split_rounding_mb`: `stoull`, must be
    /// `>= 20` (2.11: `>= large_segment_size_mb`), clamped to
    /// `SIZE_MAX / 1 MiB`, stored as bytes.
    fn parse_mb(&mut self, mut i: usize, key: &str) -> Result<usize, ConfError> {
        self.check_token(i + 1, key)?;
        i += 2;
        let (mb, t) = self.to_size_t(i, key)?;
        let min = self.conf.large_segment_size_bytes() / MIB;
        if mb < min {
            return Err(self.err(
                ConfErrorKind::InvalidValue,
                format!("CachingAllocator option {key} too small, must be >= {min}"),
                key,
                Some(&t),
            ));
        }
        let bytes = mb.min(MAX_MB) * MIB;
        if key == "max_split_size_mb" {
            self.conf.max_split_size = Some(bytes);
        } else {
            self.conf.max_non_split_rounding = Some(bytes);
        }
        Ok(i)
    }

    /// `roundup_power2_divisions`, 2.10+ semantics: values (`stoull`) are
    /// checked before keys; `>` fills from `last_index + 1`; an unterminated
    /// list is an internal assert.
    fn parse_roundup(&mut self, mut i: usize, key: &str) -> Result<usize, ConfError> {
        let n = self.toks.len();
        self.check_token(i + 1, key)?;
        i += 2;
        if self.at(i, key)? != "[" {
            let (d, t) = self.to_size_t(i, key)?;
            if !d.is_power_of_two() {
                return Err(self.err(
                    ConfErrorKind::InvalidValue,
                    "For roundups, the divisions has to be power of 2 ",
                    key,
                    Some(&t),
                ));
            }
            self.conf.roundup_power2_divisions = [store_divisions(d); ROUNDUP_INTERVALS];
            return Ok(i);
        }
        let mut table = [0u64; ROUNDUP_INTERVALS];
        let mut first = true;
        let mut last_index = 0usize;
        loop {
            i += 1;
            // `>` (the rest of the table) or a size key; `]` ends the list.
            let is_rest = match self.toks.get(i) {
                Some(t) if t != "]" => t == ">",
                _ => break,
            };
            let key_index = i;
            self.check_token(i + 1, key)?;
            i += 2;
            let (d, t) = self.to_size_t(i, key)?;
            if !(d == 0 || d.is_power_of_two()) {
                return Err(self.err(
                    ConfErrorKind::InvalidValue,
                    "For roundups, the divisions has to be power of 2 or 0 to disable roundup ",
                    key,
                    Some(&t),
                ));
            }
            if is_rest {
                table.iter_mut().skip(last_index + 1).for_each(|t| *t = d);
            } else {
                let (bound, kt) = self.to_size_t(key_index, key)?;
                if !bound.is_power_of_two() {
                    return Err(self.err(
                        ConfErrorKind::InvalidValue,
                        "For roundups, the intervals have to be power of 2 ",
                        key,
                        Some(&kt),
                    ));
                }
                last_index =
                    apply_roundup_key(&mut table, bound.trailing_zeros() as usize, d, first);
                first = false;
            }
            if self.at(i + 1, key)? != "]" {
                self.check_token(i + 1, key)?;
                i += 1;
            }
        }
        if i >= n {
            return Err(self.err(
                ConfErrorKind::UnclosedList,
                internal_assert(
                    "i < tokenizer.size()",
                    ALLOCATOR_CONFIG_CPP,
                    "Expected closing bracket ']' in ConfigTokenizer but reached end of config",
                ),
                key,
                None,
            ));
        }
        self.conf.roundup_power2_divisions = table.map(store_divisions);
        Ok(i)
    }

    fn cuda_pass(&mut self) -> Result<(), ConfError> {
        let v = self.conf.version;
        let n = self.toks.len();
        let mut i = 0;
        while let Some(key) = self.toks.get(i) {
            let key = key.clone();
            i = match key.as_str() {
                "backend" => {
                    self.check_token(i + 1, &key)?;
                    i += 2;
                    let t = self.at(i, &key)?.to_string();
                    let backend = match t.as_str() {
                        "native" => Backend::Native,
                        "cudaMallocAsync" => Backend::CudaMallocAsync,
                        _ => {
                            return Err(self.err(
                                ConfErrorKind::UnknownBackend,
                                "Unknown allocator backend, options are native and cudaMallocAsync",
                                &key,
                                Some(&t),
                            ));
                        }
                    };
                    if let Some(load) = self.load_backend
                        && load != backend
                    {
                        let load_name = match load {
                            Backend::Native => "native",
                            Backend::CudaMallocAsync => "cudaMallocAsync",
                        };
                        return Err(self.err(
                            ConfErrorKind::BackendMismatch,
                            internal_assert(
                                "tokenizer[i] == get()->name()",
                                "c10/cuda/CUDAAllocatorConfig.cpp",
                                &format!(
                                    "Allocator backend parsed at runtime != allocator backend parsed at load time, {t} != {load_name}"
                                ),
                            ),
                            &key,
                            Some(&t),
                        ));
                    }
                    self.conf.backend = backend;
                    i
                }
                k @ ("throw_on_cudamalloc_oom"
                | "pinned_free_catch_all"
                | "expandable_segments_reserve"
                | "expandable_segments_reserve_by_class")
                    if keys::has_key(v, k) =>
                {
                    self.newer_key(i, &key)?
                }
                "release_lock_on_hipmalloc"
                | "release_lock_on_cudamalloc"
                | "pinned_use_hip_host_register"
                | "pinned_use_cuda_host_register"
                | "graph_capture_record_stream_reuse" => {
                    self.check_token(i + 1, &key)?;
                    i += 2;
                    let b = self.to_bool(i, &key)?;
                    match key.as_str() {
                        "release_lock_on_hipmalloc" | "release_lock_on_cudamalloc" => {
                            self.conf.release_lock_on_cudamalloc = b
                        }
                        "graph_capture_record_stream_reuse" => {
                            self.conf.graph_capture_record_stream_reuse = b
                        }
                        _ => self.conf.pinned_use_cuda_host_register = b,
                    }
                    i
                }
                "pinned_num_register_threads" => {
                    self.check_token(i + 1, &key)?;
                    i += 2;
                    let (t, tok) = self.to_size_t(i, &key)?;
                    if !t.is_power_of_two() {
                        return Err(self.err(
                            ConfErrorKind::InvalidValue,
                            format!("Number of register threads has to be power of 2, got {t}"),
                            &key,
                            Some(&tok),
                        ));
                    }
                    if t > 128 {
                        return Err(self.err(
                            ConfErrorKind::InvalidValue,
                            format!(
                                "Number of register threads should be less than or equal to 128, got {t}"
                            ),
                            &key,
                            Some(&tok),
                        ));
                    }
                    self.conf.pinned_num_register_threads = t as u32;
                    i
                }
                "pinned_reserve_segment_size_mb" => {
                    self.check_token(i + 1, &key)?;
                    i += 2;
                    let (mb, tok) = self.to_size_t(i, &key)?;
                    if mb == 0 {
                        return Err(self.err(
                            ConfErrorKind::InvalidValue,
                            "Pinned reserve segment size has to be greater than 0",
                            &key,
                            Some(&tok),
                        ));
                    }
                    self.conf.pinned_reserve_segment_size_mb = mb;
                    i
                }
                "per_process_memory_fraction" => {
                    self.check_token(i + 1, &key)?;
                    i += 2;
                    let (x, tok) = self.to_double(i, &key)?;
                    if !(0.0..=1.0).contains(&x) {
                        return Err(self.err(
                            ConfErrorKind::InvalidValue,
                            "per_process_memory_fraction is invalid, set it in [0.0, 1.0]",
                            &key,
                            Some(&tok),
                        ));
                    }
                    // 1.0 removes the limit when the allocator applies it.
                    self.conf.per_process_memory_fraction = (x < 1.0).then_some(x);
                    i
                }
                k if keys::is_generic_key(v, k) => self.skip_key(i, &key)?,
                _ => {
                    return Err(self.err(
                        ConfErrorKind::UnknownKey,
                        format!("Unrecognized key '{key}' in CUDA allocator config."),
                        &key,
                        None,
                    ));
                }
            };
            if i + 1 < n {
                i += 1; // checkToken(++i, ",") — result ignored
            }
            i += 1;
        }
        Ok(())
    }
}
