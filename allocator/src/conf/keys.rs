//! Which keys each PyTorch release accepts, the tokenizer, and the version
//! boundaries the parsers switch on.
//!
//! The version boundaries and their evidence are documented on the
//! [`conf`](super) module.

use super::cnum::c_isspace;
use super::version::TorchVersion;
use vramlab_torch::CONF_KEY_SINCE;

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
    CONF_KEY_SINCE
        .iter()
        .filter(|(_, since)| version >= *since)
        .map(|(k, _)| *k)
        .collect()
}

/// `true` if `version` accepts `key`.
pub(crate) fn has_key(version: TorchVersion, key: &str) -> bool {
    CONF_KEY_SINCE
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
}
