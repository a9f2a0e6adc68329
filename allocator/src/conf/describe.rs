//! [`AllocConf::effective_rows`]: what the settings mean, as data for
//! `vramlab conf STR` to print.

use super::keys::has_key;
use super::{AllocConf, Backend, MIB, ROUNDUP_INTERVALS};

/// `n` MiB as "N MiB" or "N GiB".
fn mib_label(mib: u64) -> String {
    if mib >= 1024 && mib % 1024 == 0 {
        format!("{} GiB", mib / 1024)
    } else {
        format!("{mib} MiB")
    }
}

/// A byte size in the largest binary unit that divides it.
fn bytes_label(bytes: u64) -> String {
    if bytes % MIB == 0 {
        mib_label(bytes / MIB)
    } else if bytes % 1024 == 0 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// Request sizes covered by roundup intervals `from..=to`.
fn interval_label(from: usize, to: usize) -> String {
    let last = ROUNDUP_INTERVALS - 1;
    match (from, to) {
        (0, t) if t == last => "all sizes".to_string(),
        (0, t) => format!("< {}", mib_label(1 << (t + 1))),
        (f, t) if t == last => format!(">= {}", mib_label(1 << f)),
        (f, t) => format!("{}–{}", mib_label(1 << f), mib_label(1 << (t + 1))),
    }
}

fn divisions_label(d: u32) -> String {
    match d {
        0 => "off".to_string(),
        1 => "1 (no power-of-two rounding)".to_string(),
        d => format!("{d} divisions"),
    }
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// The rows being built: `(setting, effective meaning)`.
type Rows = Vec<(String, String)>;

/// Appends the row of setting `k`.
fn row(rows: &mut Rows, k: &str, s: String) {
    rows.push((k.to_string(), s));
}

impl AllocConf {
    /// One `(setting, effective meaning)` row per setting the target version
    /// has, in display order, for a human reader. Settings that never change
    /// device allocation decisions (host pinned-memory allocator, locking,
    /// graph capture) say so.
    pub fn effective_rows(&self) -> Vec<(String, String)> {
        let mut rows: Rows = Vec::new();
        self.backend_rows(&mut rows);
        self.split_and_segment_rows(&mut rows);
        row(
            &mut rows,
            "roundup_power2_divisions",
            self.rounding_description(),
        );
        self.memory_rows(&mut rows);
        self.no_effect_rows(&mut rows);
        for w in self.warnings() {
            row(&mut rows, "warning", w);
        }
        rows
    }

    /// The target version and the backend.
    fn backend_rows(&self, rows: &mut Rows) {
        row(rows, "torch_version", self.version.to_string());
        let async_backend = self.backend == Backend::CudaMallocAsync;
        row(
            rows,
            "backend",
            if async_backend {
                "cudaMallocAsync (driver's stream-ordered allocator; the native caching allocator and its settings below are not used)"
                    .to_string()
            } else {
                "native (PyTorch caching allocator)".to_string()
            },
        );
    }

    /// The split limits and the large segment size.
    fn split_and_segment_rows(&self, rows: &mut Rows) {
        let v = self.version;
        row(
            rows,
            "max_split_size",
            match self.max_split_size {
                None => "unlimited (any cached block may be split)".to_string(),
                Some(b) => format!(
                    "{} (blocks of this size or larger are never split; oversize requests reuse a cached block at most {} larger)",
                    bytes_label(b),
                    bytes_label(self.max_non_split_rounding_bytes())
                ),
            },
        );
        let nsr = self.max_non_split_rounding_bytes();
        row(
            rows,
            "max_non_split_rounding",
            if !has_key(v, "max_non_split_rounding_mb") {
                format!("{} (fixed in this version)", bytes_label(nsr))
            } else if self.max_non_split_rounding.is_none() {
                format!("{} (default)", bytes_label(nsr))
            } else {
                bytes_label(nsr)
            },
        );
        let large = self.large_segment_size_bytes();
        row(
            rows,
            "large_segment_size",
            format!(
                "{} (segment size for 1–10 MiB requests, large expandable page size){}",
                bytes_label(large),
                if has_key(v, "large_segment_size_mb") {
                    ""
                } else {
                    "; fixed in this version"
                }
            ),
        );
    }

    /// `roundup_power2_divisions`: off, or the divisions of each run of
    /// equal intervals.
    fn rounding_description(&self) -> String {
        let t = &self.roundup_power2_divisions;
        if t.iter().all(|&d| d <= 1) {
            "off (sizes rounded up to multiples of 512 B)".to_string()
        } else {
            let mut parts = Vec::new();
            let mut start = 0;
            // Runs of equal entries; `chunk_by` never yields an empty run.
            for run in t.chunk_by(|a, b| a == b) {
                if let [d, ..] = *run {
                    let end = start + run.len();
                    parts.push(format!(
                        "{}: {}",
                        interval_label(start, end - 1),
                        divisions_label(d)
                    ));
                    start = end;
                }
            }
            parts.join(", ")
        }
    }

    /// Garbage collection, expandable segments and the memory fraction.
    fn memory_rows(&self, rows: &mut Rows) {
        let limited = self.per_process_memory_fraction.is_some_and(|f| f < 1.0);
        row(
            rows,
            "garbage_collection_threshold",
            if self.garbage_collection_threshold == 0.0 {
                "off".to_string()
            } else if limited {
                format!(
                    "{} (active: per_process_memory_fraction sets a limit)",
                    self.garbage_collection_threshold
                )
            } else {
                format!(
                    "{} (only active with a memory fraction, e.g. torch.cuda.set_per_process_memory_fraction)",
                    self.garbage_collection_threshold
                )
            },
        );
        row(
            rows,
            "expandable_segments",
            on_off(self.expandable_segments).to_string(),
        );
        if has_key(self.version, "per_process_memory_fraction") {
            row(
                rows,
                "per_process_memory_fraction",
                match self.per_process_memory_fraction {
                    Some(f) if f < 1.0 => {
                        format!("{f} of device memory (applied at allocator construction)")
                    }
                    _ => "not limited".to_string(),
                },
            );
        }
    }

    /// The settings the target version has that never change device
    /// allocation decisions: locking, the host pinned-memory allocator,
    /// graph capture.
    fn no_effect_rows(&self, rows: &mut Rows) {
        let v = self.version;
        if has_key(v, "release_lock_on_cudamalloc") {
            row(
                rows,
                "release_lock_on_cudamalloc",
                format!(
                    "{} (lock handling only; no effect on allocation decisions)",
                    on_off(self.release_lock_on_cudamalloc)
                ),
            );
        }
        // The pinned host allocator's keys (docs/host-allocator-spec.md):
        // none changes a device allocation.
        let host = "pinned host memory; no effect on device allocation";
        if has_key(v, "pinned_use_cuda_host_register") {
            let how = match self.pinned_use_cuda_host_register {
                true => "on (malloc + cudaHostRegister",
                false => "off (cudaHostAlloc",
            };
            row(
                rows,
                "pinned_use_cuda_host_register",
                format!("{how}; the same blocks either way; {host})"),
            );
        }
        if has_key(v, "pinned_num_register_threads") {
            row(
                rows,
                "pinned_num_register_threads",
                format!(
                    "{} (threads that touch registered pages: timing only; {host})",
                    self.pinned_num_register_threads
                ),
            );
        }
        if has_key(v, "pinned_use_background_threads") {
            row(
                rows,
                "pinned_use_background_threads",
                format!(
                    "{} (when on, a thread instead of each pin checks whether freed blocks' streams are done: timing only; {host})",
                    on_off(self.pinned_use_background_threads)
                ),
            );
        }
        if has_key(v, "pinned_reserve_segment_size_mb") {
            row(
                rows,
                "pinned_reserve_segment_size_mb",
                if self.pinned_reserve_segment_size_mb == 0 {
                    format!("off ({host})")
                } else {
                    format!(
                        "{} (one region pinned at the first miss, carved in 4 KiB steps for new blocks, never returned; {host})",
                        mib_label(self.pinned_reserve_segment_size_mb)
                    )
                },
            );
        }
        if has_key(v, "throw_on_cudamalloc_oom") {
            row(
                rows,
                "throw_on_cudamalloc_oom",
                if self.throw_on_cudamalloc_oom {
                    "on (a new segment larger than the free memory fails at once: no cache released, no retry)".to_string()
                } else {
                    "off (release cached blocks and retry before an OOM)".to_string()
                },
            );
            row(
                rows,
                "pinned_free_catch_all",
                format!(
                    "{} (an error while freeing pinned memory is only warned of; {host})",
                    on_off(self.pinned_free_catch_all)
                ),
            );
        }
        if has_key(v, "pinned_max_round_threshold_mb") {
            let label = |mb: Option<u64>| match mb {
                Some(mb) => mib_label(mb),
                None => "unlimited".to_string(),
            };
            row(
                rows,
                "pinned_max_round_threshold_mb",
                format!(
                    "{} (a pinned request above it keeps its exact size; below, it takes a block of the next power of two; {host})",
                    label(self.pinned_max_round_threshold_mb)
                ),
            );
            row(
                rows,
                "pinned_max_cached_size_mb",
                format!(
                    "{} (a limit per block, not for the cache: a freed pinned block above it is given back at once, and a request above it is not rounded; {host})",
                    label(self.pinned_max_cached_size_mb)
                ),
            );
        }
        if has_key(v, "expandable_segments_reserve") {
            for (k, val) in [
                (
                    "expandable_segments_reserve",
                    &self.expandable_segments_reserve,
                ),
                (
                    "expandable_segments_reserve_by_class",
                    &self.expandable_segments_reserve_by_class,
                ),
            ] {
                row(
                    rows,
                    k,
                    match val {
                        Some(x) => format!("{x} (address space only: physical memory unchanged)"),
                        None => "default (address space only)".to_string(),
                    },
                );
            }
        }
        if has_key(v, "graph_capture_record_stream_reuse") {
            row(
                rows,
                "graph_capture_record_stream_reuse",
                format!(
                    "{} (only during CUDA graph capture)",
                    on_off(self.graph_capture_record_stream_reuse)
                ),
            );
        }
    }
}
