//! The allocator settings keys of each release.

use crate::version::TorchVersion;

/// Each key of `PYTORCH_ALLOC_CONF` (and `PYTORCH_CUDA_ALLOC_CONF`) and the
/// first release that accepts it, read from the wheels' libraries by
/// scripts/release_keys.py (the allocator's
/// `data/release-keys.tsv`, which a test holds this table to) and checked
/// with the oracle.
pub const CONF_KEY_SINCE: &[(&str, TorchVersion)] = &[
    ("backend", TorchVersion::new(2, 1)),
    ("max_split_size_mb", TorchVersion::new(2, 1)),
    ("roundup_power2_divisions", TorchVersion::new(2, 1)),
    ("garbage_collection_threshold", TorchVersion::new(2, 1)),
    ("expandable_segments", TorchVersion::new(2, 1)),
    ("release_lock_on_cudamalloc", TorchVersion::new(2, 2)),
    ("release_lock_on_hipmalloc", TorchVersion::new(2, 2)),
    ("pinned_use_cuda_host_register", TorchVersion::new(2, 2)),
    ("pinned_use_hip_host_register", TorchVersion::new(2, 2)),
    ("pinned_num_register_threads", TorchVersion::new(2, 2)),
    ("max_non_split_rounding_mb", TorchVersion::new(2, 6)),
    ("pinned_use_background_threads", TorchVersion::new(2, 6)),
    ("graph_capture_record_stream_reuse", TorchVersion::new(2, 9)),
    ("pinned_reserve_segment_size_mb", TorchVersion::new(2, 10)),
    ("per_process_memory_fraction", TorchVersion::new(2, 10)),
    ("large_segment_size_mb", TorchVersion::new(2, 11)),
    // Found in each wheel's libc10_cuda.so and checked with the oracle:
    // 2.11 refuses them ("Unrecognized key"), these releases accept them.
    ("throw_on_cudamalloc_oom", TorchVersion::new(2, 12)),
    ("pinned_free_catch_all", TorchVersion::new(2, 12)),
    // In libc10.so (the device-generic parser) from 2.13: read from the
    // wheels by scripts/release_keys.py (allocator/data/release-keys.tsv)
    // and checked with the oracle (2.15 accepts them, 2.11 refuses them).
    ("pinned_max_round_threshold_mb", TorchVersion::new(2, 13)),
    ("pinned_max_cached_size_mb", TorchVersion::new(2, 13)),
    ("expandable_segments_reserve", TorchVersion::new(2, 15)),
    (
        "expandable_segments_reserve_by_class",
        TorchVersion::new(2, 15),
    ),
];

/// The first release that accepts `key` (`None`: no release modelled).
pub fn conf_key_since(key: &str) -> Option<TorchVersion> {
    CONF_KEY_SINCE
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, since)| *since)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table says what the wheels say: every key of
    /// torch/data/release-keys.tsv (read from each release's libraries
    /// by scripts/release_keys.py) from the release it names, and no other.
    #[test]
    fn keys_are_those_the_wheels_have() {
        let data = include_str!("../data/release-keys.tsv");
        let mut from_wheels: Vec<(&str, TorchVersion)> = data
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let (k, r) = l.split_once('\t').expect("key<TAB>release");
                (k, r.parse().expect("a release"))
            })
            .collect();
        let mut ours: Vec<(&str, TorchVersion)> = CONF_KEY_SINCE.to_vec();
        from_wheels.sort();
        ours.sort();
        assert_eq!(ours, from_wheels);
    }
}
