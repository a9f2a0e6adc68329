//! Which keys each PyTorch release accepts, the tokenizer, and the version
//! boundaries the parsers switch on.
//!
//! The version boundaries and their evidence are documented on the
//! [`conf`](super) module.

use super::cnum::c_isspace;
use super::version::TorchVersion;

/// First release of each key (see the module table).
const KEY_SINCE: &[(&str, TorchVersion)] = &[
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

/// Keys handled by the generic `AcceleratorAllocatorConfig` parser (2.10+);
/// the CUDA hook parser skips exactly these.
const GENERIC_KEYS: &[&str] = &[
    "max_split_size_mb",
    "max_non_split_rounding_mb",
    "garbage_collection_threshold",
    "roundup_power2_divisions",
    "expandable_segments",
    "pinned_use_background_threads",
    "large_segment_size_mb",
    "pinned_max_round_threshold_mb",
    "pinned_max_cached_size_mb",
];

/// The keys `version` accepts, in a stable order (aliases included): what
/// the tests check the table by.
#[cfg(test)]
pub(crate) fn supported_keys(version: TorchVersion) -> Vec<&'static str> {
    KEY_SINCE
        .iter()
        .filter(|(_, since)| version >= *since)
        .map(|(k, _)| *k)
        .collect()
}

/// `true` if `version` accepts `key`.
pub(crate) fn has_key(version: TorchVersion, key: &str) -> bool {
    KEY_SINCE
        .iter()
        .any(|(k, since)| *k == key && version >= *since)
}

/// `true` if the 2.10+ generic parser owns `key` in `version`.
pub(crate) fn is_generic_key(version: TorchVersion, key: &str) -> bool {
    GENERIC_KEYS.contains(&key) && has_key(version, key)
}

/// 2.10+: `AcceleratorAllocatorConfig` + CUDA hook parser.
pub(crate) fn uses_tokenizer_parser(v: TorchVersion) -> bool {
    v.at_least(2, 10)
}

/// List entries of `roundup_power2_divisions` may be 0 ("disable").
pub(crate) fn roundup_list_accepts_zero(v: TorchVersion) -> bool {
    v.at_least(2, 3)
}

/// Messages spell "divisions" instead of "divisons".
pub(crate) fn divisions_spelled_right(v: TorchVersion) -> bool {
    v.at_least(2, 9)
}

/// `large_segment_size_mb` exists (and a re-parse resets NSR to it).
pub(crate) fn has_large_segment_size(v: TorchVersion) -> bool {
    v.at_least(2, 11)
}

/// Split a settings string into tokens: `,` `:` `[` `]` are single-character
/// tokens, everything between them forms a token, and whitespace is dropped —
/// only the space character up to 2.9 (`lexArgs`: `ch != ' '`), any C
/// `isspace` character from 2.10 (`ConfigTokenizer`). So `"a : 1"` and `"a:1"`
/// lex alike, but up to 2.9 a tab stays inside its token.
pub(crate) fn tokenize(s: &str, version: TorchVersion) -> Vec<String> {
    let drop_any_space = uses_tokenizer_parser(version);
    let mut tokens = Vec::new();
    let mut buf = String::new();
    for ch in s.chars() {
        if matches!(ch, ',' | ':' | '[' | ']') {
            if !buf.is_empty() {
                tokens.push(std::mem::take(&mut buf));
            }
            tokens.push(ch.to_string());
        } else if (drop_any_space && c_isspace(ch)) || ch == ' ' {
            continue;
        } else {
            buf.push(ch);
        }
    }
    if !buf.is_empty() {
        tokens.push(buf);
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_splits_and_drops_spaces() {
        let v = TorchVersion::NEWEST;
        assert_eq!(
            tokenize("a : 1, b:[2:3]", v),
            ["a", ":", "1", ",", "b", ":", "[", "2", ":", "3", "]"]
        );
        assert_eq!(tokenize("a:\t1\n", v), ["a", ":", "1"]);
        let old = TorchVersion::new(2, 9);
        assert_eq!(tokenize("a:\t1\n", old), ["a", ":", "\t1\n"]);
        assert_eq!(tokenize("  ", old), Vec::<String>::new());
        assert_eq!(tokenize("x y", old), ["xy"]);
    }

    #[test]
    fn key_sets() {
        assert!(!has_key(
            TorchVersion::new(2, 5),
            "max_non_split_rounding_mb"
        ));
        assert!(has_key(
            TorchVersion::new(2, 6),
            "max_non_split_rounding_mb"
        ));
        assert!(!has_key(TorchVersion::new(2, 10), "large_segment_size_mb"));
        assert!(has_key(TorchVersion::new(2, 11), "large_segment_size_mb"));
        assert!(supported_keys(TorchVersion::new(2, 1)).len() == 5);
    }

    /// The table says what the wheels say: every key of
    /// allocator/data/release-keys.tsv (read from each release's libraries
    /// by scripts/release_keys.py) from the release it names, and no other.
    #[test]
    fn keys_are_those_the_wheels_have() {
        let data = include_str!("../../data/release-keys.tsv");
        let mut from_wheels: Vec<(&str, TorchVersion)> = data
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let (k, r) = l.split_once('\t').expect("key<TAB>release");
                (k, r.parse().expect("a release"))
            })
            .collect();
        let mut ours: Vec<(&str, TorchVersion)> = KEY_SINCE.to_vec();
        from_wheels.sort();
        ours.sort();
        assert_eq!(ours, from_wheels);
    }
}
