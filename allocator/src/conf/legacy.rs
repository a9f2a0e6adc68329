//! The hand-written parser of `c10/cuda/CUDAAllocatorConfig.cpp` used by the
//! CUDA caching allocator up to and including 2.9 (`CUDAAllocatorConfig::
//! parseArgs`, revisions ≈2.2 and October 2025 read).
//!
//! Grammar as that code implements it, token by token:
//!
//! * every item is `KEY ':' VALUE`; after an item, if tokens remain, the next
//!   must be `,` ("Error parsing CachingAllocator settings, expected ,").
//!   A trailing `,` is therefore accepted, a doubled one is an unknown key
//!   `,`;
//! * integers go through `std::stoi` and are stored in `size_t` (so `-1`
//!   wraps to 2^64-1, passes "> 20" and is clamped to `SIZE_MAX / 1 MiB`
//!   MiB); list keys of `roundup_power2_divisions` go through `std::stoul`;
//!   floats through `std::stod`;
//! * booleans must be exactly `True` or `False`;
//! * `roundup_power2_divisions:[K:V,...]` — see [`parse_roundup`].
//!
//! Known gap: for an unterminated list (`[256:1` at the end of the string)
//! the C++ code reads past the end of its token vector (undefined
//! behaviour). vramlab reports "expected ," there.

use super::cnum::{self, NumError};
use super::error::{ConfError, ConfErrorKind, internal_assert};
use super::keys::{self, divisions_spelled_right, roundup_list_accepts_zero};
use super::{AllocConf, Backend, MIB, ROUNDUP_INTERVALS, apply_roundup_key};

/// Largest value in MiB the parsers keep (`SIZE_MAX / kMB`).
pub(crate) const MAX_MB: u64 = u64::MAX / MIB;

struct Legacy<'a> {
    toks: &'a [String],
    conf: &'a mut AllocConf,
    load_backend: Option<Backend>,
}

pub(crate) fn parse(
    conf: &mut AllocConf,
    toks: &[String],
    load_backend: Option<Backend>,
) -> Result<(), ConfError> {
    let mut p = Legacy {
        toks,
        conf,
        load_backend,
    };
    p.run()
}

impl Legacy<'_> {
    fn err(
        &self,
        kind: ConfErrorKind,
        msg: impl Into<String>,
        key: &str,
        value: Option<&str>,
    ) -> ConfError {
        ConfError::new(kind, msg, Some(key), value, self.conf.version)
    }

    fn tok(&self, i: usize) -> Option<&str> {
        self.toks.get(i).map(String::as_str)
    }

    /// `consumeToken(config, i, c)`.
    fn consume(&self, i: usize, c: char, key: &str) -> Result<(), ConfError> {
        match self.tok(i) {
            Some(t) if t.len() == 1 && t.starts_with(c) => Ok(()),
            found => Err(self.err(
                ConfErrorKind::ExpectedToken,
                format!("Error parsing CachingAllocator settings, expected {c}"),
                key,
                found,
            )),
        }
    }

    fn num_err(&self, e: NumError, func: &str, key: &str, value: &str) -> ConfError {
        let kind = match e {
            NumError::Invalid => ConfErrorKind::InvalidNumber,
            NumError::OutOfRange => ConfErrorKind::NumberOutOfRange,
        };
        self.err(kind, func, key, Some(value))
    }

    /// `size_t v = stoi(token)`: the `int` is converted to `size_t`
    /// (negative values wrap modulo 2^64).
    fn stoi_size_t(&self, key: &str, value: &str) -> Result<u64, ConfError> {
        cnum::stoi(value)
            .map(|v| i64::from(v) as u64)
            .map_err(|e| self.num_err(e, "stoi", key, value))
    }

    fn run(&mut self) -> Result<(), ConfError> {
        let v = self.conf.version;
        let n = self.toks.len();
        let mut i = 0;
        while let Some(key) = self.tok(i) {
            let key = key.to_string();
            let known = keys::has_key(v, &key);
            i = match key.as_str() {
                "max_split_size_mb" | "max_non_split_rounding_mb" if known => {
                    self.parse_mb(i, &key)?
                }
                "garbage_collection_threshold" => self.parse_gc(i, &key)?,
                "roundup_power2_divisions" => self.parse_roundup(i, &key)?,
                "backend" => self.parse_backend(i, &key)?,
                "expandable_segments"
                | "release_lock_on_cudamalloc"
                | "release_lock_on_hipmalloc"
                    if known =>
                {
                    self.parse_strict_bool(i, &key)?
                }
                "pinned_use_cuda_host_register"
                | "pinned_use_hip_host_register"
                | "pinned_use_background_threads"
                | "graph_capture_record_stream_reuse"
                    if known =>
                {
                    self.parse_pinned_bool(i, &key)?
                }
                "pinned_num_register_threads" if known => self.parse_register_threads(i, &key)?,
                _ => {
                    return Err(self.err(
                        ConfErrorKind::UnknownKey,
                        format!("Unrecognized CachingAllocator option: {key}"),
                        &key,
                        None,
                    ));
                }
            };
            if i + 1 < n {
                self.consume(i + 1, ',', &key)?;
                i += 1;
            }
            i += 1;
        }
        Ok(())
    }

    /// `max_split_size_mb` / `max_non_split_rounding_mb`: `stoi`, must be
    /// `> 20`, clamped to `[20, SIZE_MAX / 1 MiB]`, stored as bytes.
    fn parse_mb(&mut self, mut i: usize, key: &str) -> Result<usize, ConfError> {
        self.consume(i + 1, ':', key)?;
        i += 2;
        let Some(tok) = self.tok(i) else {
            return Err(self.err(
                ConfErrorKind::MissingValue,
                format!("Error, expecting {key} value"),
                key,
                None,
            ));
        };
        let tok = tok.to_string();
        let mb = self.stoi_size_t(key, &tok)?;
        if mb <= 20 {
            return Err(self.err(
                ConfErrorKind::InvalidValue,
                format!("CachingAllocator option {key} too small, must be > 20"),
                key,
                Some(&tok),
            ));
        }
        let bytes = mb.clamp(20, MAX_MB) * MIB;
        if key == "max_split_size_mb" {
            self.conf.max_split_size = Some(bytes);
        } else {
            self.conf.max_non_split_rounding = Some(bytes);
        }
        Ok(i)
    }

    fn parse_gc(&mut self, mut i: usize, key: &str) -> Result<usize, ConfError> {
        self.consume(i + 1, ':', key)?;
        i += 2;
        let Some(tok) = self.tok(i) else {
            return Err(self.err(
                ConfErrorKind::MissingValue,
                "Error, expecting garbage_collection_threshold value",
                key,
                None,
            ));
        };
        let tok = tok.to_string();
        let x = cnum::stod(&tok).map_err(|e| self.num_err(e, "stod", key, &tok))?;
        if x.is_nan() || x <= 0.0 {
            return Err(self.err(
                ConfErrorKind::InvalidValue,
                "garbage_collect_threshold too small, set it 0.0~1.0",
                key,
                Some(&tok),
            ));
        }
        if x >= 1.0 {
            return Err(self.err(
                ConfErrorKind::InvalidValue,
                "garbage_collect_threshold too big, set it 0.0~1.0",
                key,
                Some(&tok),
            ));
        }
        self.conf.garbage_collection_threshold = x;
        Ok(i)
    }

    /// `roundup_power2_divisions`, ≤ 2.9 semantics:
    ///
    /// * single value `N` (`stoi`): power of two (0 rejected), all 16
    ///   intervals;
    /// * list `[K:V, ...]`: `V` via `stoi`, power of two (or 0 from 2.3);
    ///   `K` via `stoul`, power of two, interval `min(log2 K, 15)`; the first
    ///   non-`>` entry also fills every interval below it; `>:V` fills from
    ///   the **last key's own index** to the end (overwriting that entry), or
    ///   from 0 before any key. Entries left out stay 0.
    fn parse_roundup(&mut self, mut i: usize, key: &str) -> Result<usize, ConfError> {
        let v = self.conf.version;
        self.consume(i + 1, ':', key)?;
        i += 2;
        let Some(first_tok) = self.tok(i) else {
            return Err(self.err(
                ConfErrorKind::MissingValue,
                "Error, expecting roundup_power2_divisions value",
                key,
                None,
            ));
        };
        let spelled = if divisions_spelled_right(v) {
            "divisions"
        } else {
            "divisons"
        };
        if first_tok != "[" {
            let tok = first_tok.to_string();
            let d = self.stoi_size_t(key, &tok)?;
            if !d.is_power_of_two() {
                return Err(self.err(
                    ConfErrorKind::InvalidValue,
                    format!("For roundups, the {spelled} has to be power of 2 "),
                    key,
                    Some(&tok),
                ));
            }
            self.conf.roundup_power2_divisions = [store_divisions(d); ROUNDUP_INTERVALS];
            return Ok(i);
        }
        let zero_ok = roundup_list_accepts_zero(v);
        let mut table = [0u64; ROUNDUP_INTERVALS];
        let mut first = true;
        let mut last_index = 0usize;
        loop {
            i += 1;
            let k = match self.tok(i) {
                Some(k) if k != "]" => k.to_string(),
                _ => break,
            };
            self.consume(i + 1, ':', key)?;
            i += 2;
            let Some(vt) = self.tok(i) else {
                return Err(self.err(
                    ConfErrorKind::MissingValue,
                    "Error parsing roundup_power2_divisions value",
                    key,
                    Some(&k),
                ));
            };
            let vt = vt.to_string();
            let d = self.stoi_size_t(key, &vt)?;
            if !((d == 0 && zero_ok) || d.is_power_of_two()) {
                let msg = if zero_ok {
                    format!(
                        "For roundups, the {spelled} has to be power of 2 or 0 to disable roundup "
                    )
                } else {
                    format!("For roundups, the {spelled} has to be power of 2 ")
                };
                return Err(self.err(ConfErrorKind::InvalidValue, msg, key, Some(&vt)));
            }
            if k == ">" {
                table.iter_mut().skip(last_index).for_each(|t| *t = d);
            } else {
                let bound = cnum::stoul(&k).map_err(|e| self.num_err(e, "stoul", key, &k))?;
                if !bound.is_power_of_two() {
                    return Err(self.err(
                        ConfErrorKind::InvalidValue,
                        "For roundups, the intervals have to be power of 2 ",
                        key,
                        Some(&k),
                    ));
                }
                last_index =
                    apply_roundup_key(&mut table, bound.trailing_zeros() as usize, d, first);
                first = false;
            }
            match self.tok(i + 1) {
                Some("]") => {}
                Some(_) => {
                    self.consume(i + 1, ',', key)?;
                    i += 1;
                }
                None => {
                    // `config[i + 1]` past the end: undefined behaviour in C++.
                    return Err(self.err(
                        ConfErrorKind::UnclosedList,
                        "Error parsing CachingAllocator settings, expected ,",
                        key,
                        None,
                    ));
                }
            }
        }
        self.conf.roundup_power2_divisions = table.map(store_divisions);
        Ok(i)
    }

    fn parse_backend(&mut self, mut i: usize, key: &str) -> Result<usize, ConfError> {
        self.consume(i + 1, ':', key)?;
        i += 2;
        let Some(tok) = self.tok(i) else {
            return Err(self.err(
                ConfErrorKind::MissingValue,
                "Error parsing backend value",
                key,
                None,
            ));
        };
        let backend = match tok {
            "native" => Backend::Native,
            "cudaMallocAsync" => Backend::CudaMallocAsync,
            _ => {
                return Err(self.err(
                    ConfErrorKind::UnknownBackend,
                    "Unknown allocator backend, options are native and cudaMallocAsync",
                    key,
                    Some(tok),
                ));
            }
        };
        if let Some(load) = self.load_backend
            && load != backend
        {
            return Err(self.err(
                ConfErrorKind::BackendMismatch,
                internal_assert(
                    "config[i] == get()->name()",
                    "c10/cuda/CUDAAllocatorConfig.cpp",
                    "Allocator backend parsed at runtime != allocator backend parsed at load time",
                ),
                key,
                Some(tok),
            ));
        }
        self.conf.backend = backend;
        Ok(i)
    }

    /// `expandable_segments`, `release_lock_on_cudamalloc`: one check covers
    /// both a missing and a wrong value.
    fn parse_strict_bool(&mut self, mut i: usize, key: &str) -> Result<usize, ConfError> {
        self.consume(i + 1, ':', key)?;
        i += 2;
        let name = if key == "expandable_segments" {
            "expandable_segments"
        } else {
            "release_lock_on_cudamalloc"
        };
        let value = match self.tok(i) {
            Some("True") => true,
            Some("False") => false,
            other => {
                return Err(self.err(
                    ConfErrorKind::InvalidBool,
                    format!("Expected a single True/False argument for {name}"),
                    key,
                    other,
                ));
            }
        };
        if name == "expandable_segments" {
            self.conf.expandable_segments = value;
        } else {
            self.conf.release_lock_on_cudamalloc = value;
        }
        Ok(i)
    }

    /// The pinned-memory and graph-capture booleans: separate messages for
    /// a missing and for a wrong value.
    fn parse_pinned_bool(&mut self, mut i: usize, key: &str) -> Result<usize, ConfError> {
        self.consume(i + 1, ':', key)?;
        i += 2;
        let name = if key == "pinned_use_hip_host_register" {
            "pinned_use_cuda_host_register"
        } else {
            key
        };
        let value = match self.tok(i) {
            None => {
                return Err(self.err(
                    ConfErrorKind::MissingValue,
                    format!("Error, expecting {name} value"),
                    key,
                    None,
                ));
            }
            Some("True") => true,
            Some("False") => false,
            Some(other) => {
                return Err(self.err(
                    ConfErrorKind::InvalidBool,
                    format!("Expected a single True/False argument for {name}"),
                    key,
                    Some(other),
                ));
            }
        };
        match name {
            "pinned_use_cuda_host_register" => self.conf.pinned_use_cuda_host_register = value,
            "pinned_use_background_threads" => self.conf.pinned_use_background_threads = value,
            _ => self.conf.graph_capture_record_stream_reuse = value,
        }
        Ok(i)
    }

    fn parse_register_threads(&mut self, mut i: usize, key: &str) -> Result<usize, ConfError> {
        self.consume(i + 1, ':', key)?;
        i += 2;
        let Some(tok) = self.tok(i) else {
            return Err(self.err(
                ConfErrorKind::MissingValue,
                "Error, expecting pinned_num_register_threads value",
                key,
                None,
            ));
        };
        let tok = tok.to_string();
        let n = self.stoi_size_t(key, &tok)?;
        if !n.is_power_of_two() {
            return Err(self.err(
                ConfErrorKind::InvalidValue,
                "Number of register threads has to be power of 2 ",
                key,
                Some(&tok),
            ));
        }
        if n > 128 {
            return Err(self.err(
                ConfErrorKind::InvalidValue,
                "Number of register threads should be less than or equal to 128",
                key,
                Some(&tok),
            ));
        }
        self.conf.pinned_num_register_threads = n as u32;
        Ok(i)
    }
}

/// Division counts are `size_t` in PyTorch but `u32` here: powers of two of
/// 2^32 and above are stored as 2^31. This only changes the rounding of
/// requests above 1 TiB.
pub(crate) fn store_divisions(d: u64) -> u32 {
    u32::try_from(d).unwrap_or(1 << 31)
}
