//! `Display` for [`AllocConf`]: the canonical settings string.
//!
//! Only settings that differ from the target version's defaults are printed,
//! in this fixed order: `backend`, `large_segment_size_mb`,
//! `max_split_size_mb`, `max_non_split_rounding_mb`,
//! `roundup_power2_divisions`, `garbage_collection_threshold`,
//! `expandable_segments`, `release_lock_on_cudamalloc`,
//! `pinned_use_cuda_host_register`, `pinned_num_register_threads`,
//! `pinned_use_background_threads`, `pinned_reserve_segment_size_mb`,
//! `graph_capture_record_stream_reuse`, `per_process_memory_fraction`;
//! joined by `,` without spaces. All defaults print as the empty string.
//!
//! A roundup table with one value everywhere prints as the single form
//! (`roundup_power2_divisions:4`); any other table prints as the shortest
//! list this module finds that rebuilds it under the *target version's* list
//! rules (the `>` entry fills from the last index up to 2.9 and from the last
//! index + 1 from 2.10).
//!
//! Round trip: for every `c` produced by [`AllocConf::parse`] or
//! [`AllocConf::parse_update`], `AllocConf::parse(&c.to_string(), c.version)`
//! equals `c` apart from `raw`. Settings built by hand may print keys or
//! values the version rejects (e.g. a key it does not have).

use std::fmt;

use super::keys::roundup_list_accepts_zero;
use super::legacy::MAX_MB;
use super::{AllocConf, Backend, MIB, ROUNDUP_INTERVALS, TorchVersion, apply_roundup_key};

/// One entry of a `roundup_power2_divisions` list: `Some(index)` is the key
/// `2^index` (MiB), `None` is `>`.
type ListEntry = (Option<usize>, u32);

/// The table a list produces under `version`'s rules (see the parsers).
fn apply_list(version: TorchVersion, entries: &[ListEntry]) -> [u32; ROUNDUP_INTERVALS] {
    let plus_one = usize::from(version.at_least(2, 10));
    let mut table = [0u32; ROUNDUP_INTERVALS];
    let mut first = true;
    let mut last = 0usize;
    for &(index, d) in entries {
        match index {
            None => table.iter_mut().skip(last + plus_one).for_each(|t| *t = d),
            Some(idx) => {
                last = apply_roundup_key(&mut table, idx, d, first);
                first = false;
            }
        }
    }
    table
}

/// A list that rebuilds `table` under `version`'s rules, or `None`.
fn encode_list(version: TorchVersion, table: &[u32; ROUNDUP_INTERVALS]) -> Option<Vec<ListEntry>> {
    let zero_ok = roundup_list_accepts_zero(version);
    let modern = version.at_least(2, 10);
    let n = ROUNDUP_INTERVALS;
    // End of the leading run and start of the trailing run (each run holds
    // at least its own first or last entry).
    let [head, .., tail] = *table;
    let r0 = table.iter().take_while(|&&d| d == head).count() - 1;
    let s = n - table.iter().rev().take_while(|&&d| d == tail).count();
    let mut entries: Vec<ListEntry> = vec![(Some(r0), head)];
    // Use `>` for the trailing run when it saves entries.
    let use_gt = s > r0 && s + 1 < n && (tail != 0 || zero_ok);
    let explicit_end = if use_gt { s } else { n };
    for (j, &d) in table.iter().enumerate().take(explicit_end).skip(r0 + 1) {
        // Unlisted intervals stay 0, except where a modern `>` needs its
        // anchor at `s - 1`.
        let anchor = use_gt && modern && j + 1 == s;
        if d != 0 || anchor {
            entries.push((Some(j), d));
        }
    }
    if use_gt {
        if !modern {
            entries.push((Some(s), tail));
        }
        entries.push((None, tail));
    }
    let candidates = [
        entries,
        // Fallback: every interval spelled out.
        spelled_out(table),
    ];
    candidates.into_iter().find(|list| {
        list.iter()
            .all(|&(_, d)| d.is_power_of_two() || (d == 0 && zero_ok))
            && apply_list(version, list) == *table
    })
}

/// The list that names every interval's value.
fn spelled_out(table: &[u32; ROUNDUP_INTERVALS]) -> Vec<ListEntry> {
    table
        .iter()
        .enumerate()
        .map(|(j, &d)| (Some(j), d))
        .collect()
}

fn write_list(out: &mut String, entries: &[ListEntry]) {
    out.push('[');
    for (k, &(index, d)) in entries.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        match index {
            Some(idx) => out.push_str(&format!("{}:{d}", 1u64 << idx)),
            None => out.push_str(&format!(">:{d}")),
        }
    }
    out.push(']');
}

/// MiB value of a size setting. Up to 2.9 the parser reads it with `stoi`,
/// so the clamped maximum (reached by any negative input) is written `-1`.
fn mb_value(version: TorchVersion, bytes: u64) -> String {
    let mb = bytes / MIB;
    if !version.at_least(2, 10) && mb == MAX_MB {
        "-1".to_string()
    } else {
        mb.to_string()
    }
}

fn bool_value(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

impl AllocConf {
    /// The canonical settings items, in display order.
    pub(crate) fn canonical_items(&self) -> Vec<(&'static str, String)> {
        let v = self.version;
        let d = AllocConf::new(v);
        let mut items: Vec<(&'static str, String)> = Vec::new();
        if self.backend != d.backend {
            let name = match self.backend {
                Backend::Native => "native",
                Backend::CudaMallocAsync => "cudaMallocAsync",
            };
            items.push(("backend", name.to_string()));
        }
        if let Some(b) = self.large_segment_size
            && b != 20 * MIB
        {
            items.push(("large_segment_size_mb", mb_value(v, b)));
        }
        if let Some(b) = self.max_split_size {
            items.push(("max_split_size_mb", mb_value(v, b)));
        }
        if let Some(b) = self.max_non_split_rounding
            && b != self.large_segment_size_bytes()
        {
            items.push(("max_non_split_rounding_mb", mb_value(v, b)));
        }
        let table = &self.roundup_power2_divisions;
        if *table != d.roundup_power2_divisions {
            let mut s = String::new();
            if table.iter().all(|&x| x == table[0]) && table[0] != 0 {
                s.push_str(&table[0].to_string());
            } else {
                let entries = encode_list(v, table).unwrap_or_else(|| spelled_out(table));
                write_list(&mut s, &entries);
            }
            items.push(("roundup_power2_divisions", s));
        }
        if self.garbage_collection_threshold != d.garbage_collection_threshold {
            items.push((
                "garbage_collection_threshold",
                self.garbage_collection_threshold.to_string(),
            ));
        }
        let bools = [
            (
                "expandable_segments",
                self.expandable_segments,
                d.expandable_segments,
            ),
            (
                "release_lock_on_cudamalloc",
                self.release_lock_on_cudamalloc,
                d.release_lock_on_cudamalloc,
            ),
            (
                "pinned_use_cuda_host_register",
                self.pinned_use_cuda_host_register,
                d.pinned_use_cuda_host_register,
            ),
        ];
        for (k, val, def) in bools {
            if val != def {
                items.push((k, bool_value(val).to_string()));
            }
        }
        if self.pinned_num_register_threads != d.pinned_num_register_threads {
            items.push((
                "pinned_num_register_threads",
                self.pinned_num_register_threads.to_string(),
            ));
        }
        if self.pinned_use_background_threads != d.pinned_use_background_threads {
            items.push((
                "pinned_use_background_threads",
                bool_value(self.pinned_use_background_threads).to_string(),
            ));
        }
        if self.pinned_reserve_segment_size_mb != d.pinned_reserve_segment_size_mb {
            items.push((
                "pinned_reserve_segment_size_mb",
                self.pinned_reserve_segment_size_mb.to_string(),
            ));
        }
        if self.graph_capture_record_stream_reuse != d.graph_capture_record_stream_reuse {
            items.push((
                "graph_capture_record_stream_reuse",
                bool_value(self.graph_capture_record_stream_reuse).to_string(),
            ));
        }
        if let Some(f) = self.per_process_memory_fraction
            && f != 1.0
        {
            items.push(("per_process_memory_fraction", f.to_string()));
        }
        if self.throw_on_cudamalloc_oom {
            items.push(("throw_on_cudamalloc_oom", bool_value(true).to_string()));
        }
        if self.pinned_free_catch_all {
            items.push(("pinned_free_catch_all", bool_value(true).to_string()));
        }
        if let Some(mb) = self.pinned_max_round_threshold_mb {
            items.push(("pinned_max_round_threshold_mb", mb.to_string()));
        }
        if let Some(mb) = self.pinned_max_cached_size_mb {
            items.push(("pinned_max_cached_size_mb", mb.to_string()));
        }
        if let Some(v) = &self.expandable_segments_reserve {
            items.push(("expandable_segments_reserve", v.clone()));
        }
        if let Some(v) = &self.expandable_segments_reserve_by_class {
            items.push(("expandable_segments_reserve_by_class", v.clone()));
        }
        items
    }
}

impl fmt::Display for AllocConf {
    /// The canonical settings string (see the module documentation).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, (key, value)) in self.canonical_items().into_iter().enumerate() {
            if k > 0 {
                f.write_str(",")?;
            }
            write!(f, "{key}:{value}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoder_round_trips_tables() {
        let tables: [[u32; 16]; 4] = [
            [1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 8, 8, 8, 8, 8, 8],
            [1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8],
            [0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            [2, 4, 2, 4, 2, 4, 2, 4, 2, 4, 2, 4, 2, 4, 2, 0],
        ];
        for v in [
            TorchVersion::new(2, 5),
            TorchVersion::new(2, 9),
            TorchVersion::new(2, 11),
        ] {
            for t in &tables {
                let list = encode_list(v, t).expect("encodable");
                assert_eq!(apply_list(v, &list), *t, "{v} {t:?}");
            }
        }
    }
}
