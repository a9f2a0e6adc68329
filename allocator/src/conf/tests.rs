//! Parser, printer and environment tests against PyTorch's behaviour per
//! release (messages as read from PyTorch's sources, see `error.rs`).

use super::env::env_var_precedence;
use super::keys::supported_keys;
use super::*;

fn v(minor: u16) -> TorchVersion {
    TorchVersion::new(2, minor)
}

const ALL: [u16; 11] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];

#[track_caller]
fn ok(s: &str, version: TorchVersion) -> AllocConf {
    match AllocConf::parse(s, version) {
        Ok(c) => c,
        Err(e) => panic!("{s:?} on {version}: unexpected error: {e}"),
    }
}

#[track_caller]
fn err(s: &str, version: TorchVersion) -> ConfError {
    match AllocConf::parse(s, version) {
        Ok(c) => panic!("{s:?} on {version}: expected an error, got {c:?}"),
        Err(e) => e,
    }
}

#[track_caller]
fn msg(s: &str, version: TorchVersion) -> String {
    err(s, version).message
}

const IOOB: &str = "i < config_.size() INTERNAL ASSERT FAILED at \"/pytorch/c10/core/AllocatorConfig.h\", please report a bug to PyTorch. Index out of bounds in ConfigTokenizer";

#[test]
fn defaults_and_empty_strings() {
    for m in ALL {
        for s in ["", "   "] {
            let c = ok(s, v(m));
            assert_eq!(c.raw, s);
            let mut d = AllocConf::new(v(m));
            d.raw = s.to_string();
            assert_eq!(c, d);
            assert_eq!(c.to_string(), "");
        }
    }
    // Tabs and newlines are whitespace only for the 2.10+ tokenizer.
    assert_eq!(
        ok("\t\n", v(11)),
        AllocConf {
            raw: "\t\n".into(),
            ..AllocConf::new(v(11))
        }
    );
    assert_eq!(
        msg("\t\n", v(9)),
        "Unrecognized CachingAllocator option: \t\n"
    );
}

#[test]
fn raw_is_kept_verbatim() {
    let s = " max_split_size_mb : 100 ,expandable_segments:True";
    assert_eq!(ok(s, v(11)).raw, s);
    assert_eq!(ok(s, v(9)).raw, s);
}

/// Accept/reject table: (versions, input, expected message or None).
#[test]
fn accept_reject_table() {
    let legacy: Vec<TorchVersion> = (1..=9).map(v).collect();
    let modern = [v(10), v(11)];
    let cases: &[(&[TorchVersion], &str, Option<&str>)] = &[
        (&legacy, "max_split_size_mb:21", None),
        (
            &legacy,
            "max_split_size_mb:20",
            Some("CachingAllocator option max_split_size_mb too small, must be > 20"),
        ),
        (&modern, "max_split_size_mb:20", None),
        (
            &modern,
            "max_split_size_mb:19",
            Some("CachingAllocator option max_split_size_mb too small, must be >= 20"),
        ),
        (&legacy, "max_split_size_mb:abc", Some("stoi")),
        (&modern, "max_split_size_mb:abc", Some("stoull")),
        (
            &legacy,
            "max_split_size_mb",
            Some("Error parsing CachingAllocator settings, expected :"),
        ),
        (
            &legacy,
            "max_split_size_mb:",
            Some("Error, expecting max_split_size_mb value"),
        ),
        (&modern, "max_split_size_mb", Some(IOOB)),
        (&modern, "max_split_size_mb:", Some(IOOB)),
        (
            &legacy,
            "foo:1",
            Some("Unrecognized CachingAllocator option: foo"),
        ),
        (
            &modern,
            "foo:1",
            Some("Unrecognized key 'foo' in CUDA allocator config."),
        ),
        (
            &legacy,
            "expandable_segments:true",
            Some("Expected a single True/False argument for expandable_segments"),
        ),
        (
            &legacy,
            "expandable_segments:",
            Some("Expected a single True/False argument for expandable_segments"),
        ),
        (
            &modern,
            "expandable_segments:true",
            Some("Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'"),
        ),
        (
            &modern,
            "expandable_segments:1",
            Some("Expected 'True' or 'False' at index 2 in ConfigTokenizer but got '1'"),
        ),
        (
            &legacy,
            "garbage_collection_threshold:0",
            Some("garbage_collect_threshold too small, set it 0.0~1.0"),
        ),
        (
            &legacy,
            "garbage_collection_threshold:1",
            Some("garbage_collect_threshold too big, set it 0.0~1.0"),
        ),
        (
            &legacy,
            "garbage_collection_threshold:nan",
            Some("garbage_collect_threshold too small, set it 0.0~1.0"),
        ),
        (&legacy, "garbage_collection_threshold:x", Some("stod")),
        (
            &legacy,
            "garbage_collection_threshold:",
            Some("Error, expecting garbage_collection_threshold value"),
        ),
        (
            &modern,
            "garbage_collection_threshold:0",
            Some("garbage_collect_threshold is invalid, set it in (0.0, 1.0)"),
        ),
        (
            &modern,
            "garbage_collection_threshold:1.0",
            Some("garbage_collect_threshold is invalid, set it in (0.0, 1.0)"),
        ),
        (&modern, "garbage_collection_threshold:0.999", None),
        (
            &legacy,
            "backend:foo",
            Some("Unknown allocator backend, options are native and cudaMallocAsync"),
        ),
        (
            &modern,
            "backend:hipMallocAsync",
            Some("Unknown allocator backend, options are native and cudaMallocAsync"),
        ),
        (&legacy, "backend:", Some("Error parsing backend value")),
        (
            &legacy[..8],
            "roundup_power2_divisions:3",
            Some("For roundups, the divisons has to be power of 2 "),
        ),
        (
            &[v(9)],
            "roundup_power2_divisions:3",
            Some("For roundups, the divisions has to be power of 2 "),
        ),
        (
            &modern,
            "roundup_power2_divisions:3",
            Some("For roundups, the divisions has to be power of 2 "),
        ),
        (
            &modern,
            "roundup_power2_divisions:0",
            Some("For roundups, the divisions has to be power of 2 "),
        ),
        (
            &legacy,
            "roundup_power2_divisions:[300:2]",
            Some("For roundups, the intervals have to be power of 2 "),
        ),
        (
            &modern,
            "roundup_power2_divisions:[300:2]",
            Some("For roundups, the intervals have to be power of 2 "),
        ),
        (&legacy, "roundup_power2_divisions:[x:2]", Some("stoul")),
        (&modern, "roundup_power2_divisions:[x:2]", Some("stoull")),
        (&legacy, "roundup_power2_divisions:[256:x]", Some("stoi")),
        (
            &legacy,
            "roundup_power2_divisions:",
            Some("Error, expecting roundup_power2_divisions value"),
        ),
        (
            &legacy,
            "roundup_power2_divisions:[256",
            Some("Error parsing CachingAllocator settings, expected :"),
        ),
        (
            &legacy,
            "roundup_power2_divisions:[256:",
            Some("Error parsing roundup_power2_divisions value"),
        ),
        (&modern, "roundup_power2_divisions:[256:1", Some(IOOB)),
        (
            &modern,
            "roundup_power2_divisions:[256:1,",
            Some(
                "i < tokenizer.size() INTERNAL ASSERT FAILED at \"/pytorch/c10/core/AllocatorConfig.cpp\", please report a bug to PyTorch. Expected closing bracket ']' in ConfigTokenizer but reached end of config",
            ),
        ),
        (
            &modern,
            "foo:[1,2",
            Some(
                "i < config_.size() INTERNAL ASSERT FAILED at \"/pytorch/c10/core/AllocatorConfig.h\", please report a bug to PyTorch. Expected closing bracket ']' in ConfigTokenizer but reached end of config",
            ),
        ),
        (
            &[v(9)],
            "roundup_power2_divisions:[256:3]",
            Some("For roundups, the divisions has to be power of 2 or 0 to disable roundup "),
        ),
        (
            &[v(8)],
            "roundup_power2_divisions:[256:3]",
            Some("For roundups, the divisons has to be power of 2 or 0 to disable roundup "),
        ),
        (
            &[v(2)],
            "roundup_power2_divisions:[256:0]",
            Some("For roundups, the divisons has to be power of 2 "),
        ),
        (&[v(3)], "roundup_power2_divisions:[256:0]", None),
        (&modern, "roundup_power2_divisions:[256:0]", None),
        (
            &[v(1)],
            "release_lock_on_cudamalloc:True",
            Some("Unrecognized CachingAllocator option: release_lock_on_cudamalloc"),
        ),
        (
            &[v(2)],
            "release_lock_on_hipmalloc:yes",
            Some("Expected a single True/False argument for release_lock_on_cudamalloc"),
        ),
        (
            &[v(2), v(9)],
            "pinned_use_hip_host_register:yes",
            Some("Expected a single True/False argument for pinned_use_cuda_host_register"),
        ),
        (
            &[v(9)],
            "pinned_use_cuda_host_register:",
            Some("Error, expecting pinned_use_cuda_host_register value"),
        ),
        (
            &[v(2), v(9)],
            "pinned_num_register_threads:3",
            Some("Number of register threads has to be power of 2 "),
        ),
        (
            &[v(2), v(9)],
            "pinned_num_register_threads:256",
            Some("Number of register threads should be less than or equal to 128"),
        ),
        (
            &modern,
            "pinned_num_register_threads:3",
            Some("Number of register threads has to be power of 2, got 3"),
        ),
        (
            &modern,
            "pinned_num_register_threads:256",
            Some("Number of register threads should be less than or equal to 128, got 256"),
        ),
        (
            &[v(5)],
            "max_non_split_rounding_mb:30",
            Some("Unrecognized CachingAllocator option: max_non_split_rounding_mb"),
        ),
        (
            &[v(6), v(9)],
            "max_non_split_rounding_mb:20",
            Some("CachingAllocator option max_non_split_rounding_mb too small, must be > 20"),
        ),
        (
            &modern,
            "max_non_split_rounding_mb:19",
            Some("CachingAllocator option max_non_split_rounding_mb too small, must be >= 20"),
        ),
        (
            &[v(5)],
            "pinned_use_background_threads:True",
            Some("Unrecognized CachingAllocator option: pinned_use_background_threads"),
        ),
        (&[v(6)], "pinned_use_background_threads:True", None),
        (
            &[v(8)],
            "graph_capture_record_stream_reuse:True",
            Some("Unrecognized CachingAllocator option: graph_capture_record_stream_reuse"),
        ),
        (
            &[v(9)],
            "graph_capture_record_stream_reuse:maybe",
            Some("Expected a single True/False argument for graph_capture_record_stream_reuse"),
        ),
        (
            &[v(9)],
            "pinned_reserve_segment_size_mb:64",
            Some("Unrecognized CachingAllocator option: pinned_reserve_segment_size_mb"),
        ),
        (
            &modern,
            "pinned_reserve_segment_size_mb:0",
            Some("Pinned reserve segment size has to be greater than 0"),
        ),
        (
            &[v(9)],
            "per_process_memory_fraction:0.5",
            Some("Unrecognized CachingAllocator option: per_process_memory_fraction"),
        ),
        (
            &modern,
            "per_process_memory_fraction:1.5",
            Some("per_process_memory_fraction is invalid, set it in [0.0, 1.0]"),
        ),
        (&modern, "per_process_memory_fraction:0", None),
        (
            &[v(10)],
            "large_segment_size_mb:30",
            Some("Unrecognized key 'large_segment_size_mb' in CUDA allocator config."),
        ),
        (
            &[v(11)],
            "large_segment_size_mb:10",
            Some("CachingAllocator option large_segment_size_mb must be > 10 MB"),
        ),
        // 2.12-2.15 keys, messages as each wheel gave them on the fake
        // device (vramlab oracle).
        (
            &[v(11)],
            "throw_on_cudamalloc_oom:True",
            Some("Unrecognized key 'throw_on_cudamalloc_oom' in CUDA allocator config."),
        ),
        (
            &[v(12), v(13), v(14), v(15)],
            "throw_on_cudamalloc_oom:True",
            None,
        ),
        (&[v(12), v(15)], "pinned_free_catch_all:False", None),
        // The host allocator's two 2.13 keys (torch 2.15 on the fake device:
        // stoull, no bound; 2.11 refuses them).
        (
            &[v(12)],
            "pinned_max_round_threshold_mb:64",
            Some("Unrecognized key 'pinned_max_round_threshold_mb' in CUDA allocator config."),
        ),
        (
            &[v(13), v(15)],
            "pinned_max_round_threshold_mb:64,pinned_max_cached_size_mb:32",
            None,
        ),
        (&[v(15)], "pinned_max_cached_size_mb:0", None),
        (&[v(15)], "pinned_max_round_threshold_mb:-1", None),
        (&[v(15)], "pinned_max_cached_size_mb:1.5", None),
        (
            &[v(15)],
            "pinned_max_round_threshold_mb:abc",
            Some("stoull"),
        ),
        (
            &[v(15)],
            "pinned_free_catch_all:1",
            Some("Expected 'True' or 'False' at index 2 in ConfigTokenizer but got '1'"),
        ),
        (
            &[v(15)],
            "throw_on_cudamalloc_oom:yes",
            Some("Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'yes'"),
        ),
        (
            &[v(12), v(14)],
            "expandable_segments_reserve:True",
            Some("Unrecognized key 'expandable_segments_reserve' in CUDA allocator config."),
        ),
        (&[v(15)], "expandable_segments_reserve:True", None),
        (&[v(15)], "expandable_segments_reserve:abc", None),
        (
            &[v(15)],
            "expandable_segments_reserve_by_class:[1:2,3:4]",
            None,
        ),
        (
            &[v(15)],
            "expandable_segments_reserve_by_class:5",
            Some(
                "i < config_.size() INTERNAL ASSERT FAILED at \"/pytorch/c10/core/AllocatorConfig.h\", please report a bug to PyTorch. Index out of bounds in ConfigTokenizer",
            ),
        ),
        (
            &[v(11)],
            "large_segment_size_mb:30,max_split_size_mb:25",
            Some("CachingAllocator option max_split_size_mb too small, must be >= 30"),
        ),
        (
            &[v(11)],
            "max_non_split_rounding_mb:25,large_segment_size_mb:30",
            Some("CachingAllocator option max_non_split_rounding_mb too small, must be >= 30"),
        ),
        (
            &[v(11)],
            "large_segment_size_mb:11,max_split_size_mb:11",
            None,
        ),
        (&[v(1)], "expandable_segments:True", None),
    ];
    for (versions, input, expected) in cases {
        for &version in *versions {
            match (AllocConf::parse(input, version), expected) {
                (Ok(_), None) => {}
                (Err(e), Some(m)) => assert_eq!(e.message, *m, "{input:?} on {version}"),
                (Ok(c), Some(m)) => {
                    panic!("{input:?} on {version}: accepted ({c:?}), expected {m:?}")
                }
                (Err(e), None) => panic!("{input:?} on {version}: rejected: {e}"),
            }
        }
    }
}

#[test]
fn keys_unknown_to_a_version_use_that_versions_wording() {
    assert_eq!(
        err("max_non_split_rounding_mb:30", v(5)).kind,
        ConfErrorKind::UnknownKey
    );
    let e = err("per_process_memory_fraction:0.5", v(9));
    assert_eq!(e.key.as_deref(), Some("per_process_memory_fraction"));
    for m in ALL {
        let e = err("roundup_bypass_threshold_mb:100", v(m));
        assert_eq!(e.kind, ConfErrorKind::UnknownKey, "{m}");
    }
    assert_eq!(supported_keys(v(11)).len(), 16);
    assert!(supported_keys(v(9)).contains(&"graph_capture_record_stream_reuse"));
}

/// `roundup_power2_divisions` lists (`CUDAAllocatorConfig::parseRoundUpPower2Divisions`;
/// from 2.10 `AcceleratorAllocatorConfig::parseRoundUpPower2Divisions`):
/// `[256:1,512:2,1024:4,>:8]` — `>` overwrites the 1 GiB
/// interval up to 2.9 and starts after it from 2.10.
#[test]
fn roundup_list_gt_fill_start() {
    let s = "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]";
    let old = ok(s, v(9)).roundup_power2_divisions;
    assert_eq!(old, [1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 8, 8, 8, 8, 8, 8]);
    for m in [10, 11] {
        let new = ok(s, v(m)).roundup_power2_divisions;
        assert_eq!(new, [1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8], "{m}");
    }
    // `>` before any key: from index 0 up to 2.9, from index 1 afterwards.
    assert_eq!(
        ok("roundup_power2_divisions:[>:4]", v(9)).roundup_power2_divisions,
        [4; 16]
    );
    let mut t = [4; 16];
    t[0] = 0;
    assert_eq!(
        ok("roundup_power2_divisions:[>:4]", v(11)).roundup_power2_divisions,
        t
    );
    // A key after `>` is still the "first" key and fills below itself.
    assert_eq!(
        ok("roundup_power2_divisions:[>:4,256:2]", v(9)).roundup_power2_divisions,
        [2, 2, 2, 2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4]
    );
    // Skipped intervals stay 0; keys above 32 GiB clamp to the last interval.
    assert_eq!(
        ok("roundup_power2_divisions:[1:2,4:8,65536:16]", v(11)).roundup_power2_divisions,
        [2, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16]
    );
    // stoul wraps "-2^63" to 2^63, a power of two: interval 15.
    assert_eq!(
        ok("roundup_power2_divisions:[-9223372036854775808:2]", v(9)).roundup_power2_divisions,
        [2; 16]
    );
    // Single form.
    assert_eq!(
        ok("roundup_power2_divisions:4", v(1)).roundup_power2_divisions,
        [4; 16]
    );
    // Trailing comma inside a list is accepted by both parsers.
    assert_eq!(
        ok("roundup_power2_divisions:[256:2,]", v(9)).roundup_power2_divisions,
        [2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0]
    );
    ok("roundup_power2_divisions:[256:2,]", v(11));
    // Up to 2.9 an unfinished list after a comma is silently accepted ...
    ok("roundup_power2_divisions:[256:2,", v(9));
    // ... and one ending right after a value is undefined behaviour in C++.
    assert_eq!(
        err("roundup_power2_divisions:[256:2", v(9)).kind,
        ConfErrorKind::UnclosedList
    );
}

#[test]
fn whitespace_handling() {
    // "a : 1" lexes like "a:1".
    let a = ok("max_split_size_mb : 100", v(9));
    assert_eq!(a.max_split_size, Some(100 * MIB));
    let b = ok("max_split_size_mb : 100 , expandable_segments : True", v(9));
    assert_eq!(b.max_split_size, Some(100 * MIB));
    assert!(b.expandable_segments);
    let c = ok(
        " max_split_size_mb : 100 , expandable_segments : True ",
        v(11),
    );
    assert_eq!(
        (c.max_split_size, c.expandable_segments),
        (Some(100 * MIB), true)
    );
    // Tab: kept in the token up to 2.9, dropped from 2.10.
    assert_eq!(
        msg("expandable_segments:\tTrue", v(9)),
        "Expected a single True/False argument for expandable_segments"
    );
    assert!(ok("expandable_segments:\tTrue\n", v(11)).expandable_segments);
    // stoi skips leading whitespace inside a token.
    assert_eq!(
        ok("max_split_size_mb:\t64", v(9)).max_split_size,
        Some(64 * MIB)
    );
    // A space inside a word joins it.
    assert!(ok("expandable_segments:Tr ue", v(9)).expandable_segments);
    assert!(ok("expandable_segments:Tr ue", v(11)).expandable_segments);
}

#[test]
fn commas() {
    for m in ALL {
        // Trailing comma: accepted everywhere.
        assert_eq!(
            ok("max_split_size_mb:100,", v(m)).max_split_size,
            Some(100 * MIB)
        );
    }
    // Doubled comma: the second is read as a key.
    assert_eq!(
        msg("max_split_size_mb:100,,expandable_segments:True", v(9)),
        "Unrecognized CachingAllocator option: ,"
    );
    assert_eq!(
        msg("max_split_size_mb:100,,expandable_segments:True", v(11)),
        "Unrecognized key ',' in CUDA allocator config."
    );
    // Leading comma.
    assert_eq!(
        msg(",max_split_size_mb:100", v(9)),
        "Unrecognized CachingAllocator option: ,"
    );
    // Missing comma: the words run together ("100expandable_segments" reads
    // as 100) and the parser trips over the next ':'.
    assert_eq!(
        msg("max_split_size_mb:100 expandable_segments:True", v(9)),
        "Error parsing CachingAllocator settings, expected ,"
    );
    let e = err("max_split_size_mb:100 expandable_segments:True", v(11));
    assert_eq!(e.message, IOOB);
    assert_eq!(e.kind, ConfErrorKind::TokenizerIndexOutOfBounds);
    // 2.10+ never checks separators.
    assert_eq!(
        msg("max_split_size_mb,100", v(9)),
        "Error parsing CachingAllocator settings, expected :"
    );
    assert_eq!(
        ok("max_split_size_mb,100", v(11)).max_split_size,
        Some(100 * MIB)
    );
    assert_eq!(
        ok("max_split_size_mb:100;expandable_segments", v(11)).max_split_size,
        Some(100 * MIB)
    );
}

#[test]
fn numeric_prefixes_and_overflow() {
    for m in ALL {
        assert_eq!(
            ok("max_split_size_mb:512abc", v(m)).max_split_size,
            Some(512 * MIB)
        );
        assert_eq!(
            ok("max_split_size_mb:+64", v(m)).max_split_size,
            Some(64 * MIB)
        );
        assert_eq!(
            ok("garbage_collection_threshold:0.6x", v(m)).garbage_collection_threshold,
            0.6
        );
    }
    // stoi range: 2^31 MiB is out of range up to 2.9, fine for stoull.
    assert_eq!(msg("max_split_size_mb:3000000000", v(9)), "stoi");
    assert_eq!(
        err("max_split_size_mb:3000000000", v(9)).kind,
        ConfErrorKind::NumberOutOfRange
    );
    assert_eq!(
        ok("max_split_size_mb:3000000000", v(11)).max_split_size,
        Some(3_000_000_000 * MIB)
    );
    let big = "max_split_size_mb:99999999999999999999";
    assert_eq!(msg(big, v(9)), "stoi");
    assert_eq!(msg(big, v(11)), "stoull");
    assert_eq!(err(big, v(11)).kind, ConfErrorKind::NumberOutOfRange);
    // -1 wraps to SIZE_MAX and is clamped to SIZE_MAX / 1 MiB MiB.
    let clamp = Some((u64::MAX / MIB) * MIB);
    assert_eq!(ok("max_split_size_mb:-1", v(9)).max_split_size, clamp);
    assert_eq!(ok("max_split_size_mb:-1", v(11)).max_split_size, clamp);
    assert_eq!(
        ok("max_split_size_mb:18446744073709551615", v(11)).max_split_size,
        clamp
    );
    assert_eq!(
        ok("max_non_split_rounding_mb:-5", v(9)).max_non_split_rounding,
        clamp
    );
    // Negative thread counts wrap to huge non-powers of two.
    assert_eq!(
        msg("pinned_num_register_threads:-4", v(9)),
        "Number of register threads has to be power of 2 "
    );
    assert_eq!(
        msg("pinned_num_register_threads:-4", v(11)),
        "Number of register threads has to be power of 2, got 18446744073709551612"
    );
    // Huge powers of two are accepted as division counts (stored as 2^31).
    assert_eq!(
        ok("roundup_power2_divisions:4294967296", v(11)).roundup_power2_divisions,
        [1 << 31; 16]
    );
    assert_eq!(msg("roundup_power2_divisions:4294967296", v(9)), "stoi");
}

#[test]
fn max_split_size_20_boundary() {
    assert_eq!(
        msg("max_split_size_mb:20", v(9)),
        "CachingAllocator option max_split_size_mb too small, must be > 20"
    );
    assert_eq!(
        ok("max_split_size_mb:20", v(11)).max_split_size,
        Some(20 * MIB)
    );
    assert_eq!(
        ok("max_split_size_mb:20", v(10)).max_split_size,
        Some(20 * MIB)
    );
    assert_eq!(
        ok("max_split_size_mb:21", v(9)).max_split_size,
        Some(21 * MIB)
    );
}

#[test]
fn fields_are_set() {
    let c = ok(
        "backend:cudaMallocAsync,max_split_size_mb:512,max_non_split_rounding_mb:64,\
         garbage_collection_threshold:0.6,expandable_segments:True,\
         release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True,\
         pinned_num_register_threads:8,pinned_use_background_threads:True,\
         pinned_reserve_segment_size_mb:1024,graph_capture_record_stream_reuse:True,\
         per_process_memory_fraction:0.5,large_segment_size_mb:32",
        v(11),
    );
    assert_eq!(c.backend, Backend::CudaMallocAsync);
    assert_eq!(c.max_split_size, Some(512 * MIB));
    assert_eq!(c.max_non_split_rounding, Some(64 * MIB));
    assert_eq!(c.garbage_collection_threshold, 0.6);
    assert!(c.expandable_segments && c.release_lock_on_cudamalloc);
    assert!(c.pinned_use_cuda_host_register && c.pinned_use_background_threads);
    assert_eq!(c.pinned_num_register_threads, 8);
    assert_eq!(c.pinned_reserve_segment_size_mb, 1024);
    assert!(c.graph_capture_record_stream_reuse);
    assert_eq!(c.per_process_memory_fraction, Some(0.5));
    assert_eq!(c.large_segment_size, Some(32 * MIB));
    assert_eq!(c.large_segment_size_bytes(), 32 * MIB);
    // per_process_memory_fraction:1.0 means "no limit".
    assert_eq!(
        ok("per_process_memory_fraction:1", v(11)).per_process_memory_fraction,
        None
    );
    // Values equal to the default normalise to None.
    assert_eq!(
        ok("max_non_split_rounding_mb:20", v(11)).max_non_split_rounding,
        None
    );
    assert_eq!(
        ok("large_segment_size_mb:20", v(11)).large_segment_size,
        None
    );
    let c = ok("large_segment_size_mb:40", v(11));
    assert_eq!(c.max_non_split_rounding_bytes(), 40 * MIB);
    // hip aliases set the cuda fields.
    let c = ok(
        "release_lock_on_hipmalloc:True,pinned_use_hip_host_register:True",
        v(9),
    );
    assert!(c.release_lock_on_cudamalloc && c.pinned_use_cuda_host_register);
    // Later duplicates win.
    assert_eq!(
        ok("max_split_size_mb:100,max_split_size_mb:200", v(9)).max_split_size,
        Some(200 * MIB)
    );
}

#[test]
fn parse_update_semantics() {
    for m in [9, 10] {
        let base = ok(
            "max_split_size_mb:512,roundup_power2_divisions:4,garbage_collection_threshold:0.6,\
             expandable_segments:True,max_non_split_rounding_mb:64,pinned_num_register_threads:4",
            v(m),
        );
        let up = base
            .parse_update("release_lock_on_cudamalloc:True")
            .unwrap();
        assert_eq!(up.max_split_size, None);
        assert_eq!(up.roundup_power2_divisions, [0; 16]);
        assert_eq!(up.garbage_collection_threshold, 0.0);
        assert!(up.expandable_segments);
        assert!(up.release_lock_on_cudamalloc);
        assert_eq!(up.pinned_num_register_threads, 4);
        // ≤ 2.10: the non-split rounding limit is kept.
        assert_eq!(up.max_non_split_rounding, Some(64 * MIB), "{m}");
        assert_eq!(up.raw, "release_lock_on_cudamalloc:True");
    }
    // 2.11: NSR reset to the (kept) large segment size.
    let base = ok(
        "large_segment_size_mb:40,max_non_split_rounding_mb:64,per_process_memory_fraction:0.5",
        v(11),
    );
    let up = base.parse_update("expandable_segments:True").unwrap();
    assert_eq!(up.max_non_split_rounding, None);
    assert_eq!(up.max_non_split_rounding_bytes(), 40 * MIB);
    assert_eq!(up.large_segment_size, Some(40 * MIB));
    assert_eq!(up.per_process_memory_fraction, Some(0.5));
    // The kept large segment size still bounds max_split_size_mb.
    assert_eq!(
        base.parse_update("max_split_size_mb:30")
            .unwrap_err()
            .message,
        "CachingAllocator option max_split_size_mb too small, must be >= 40"
    );
    // Backend must match the load-time one.
    let native = AllocConf::new(v(9));
    let e = native.parse_update("backend:cudaMallocAsync").unwrap_err();
    assert_eq!(e.kind, ConfErrorKind::BackendMismatch);
    assert!(
        e.message.contains(
            "Allocator backend parsed at runtime != allocator backend parsed at load time"
        )
    );
    let e = AllocConf::new(v(11))
        .parse_update("backend:cudaMallocAsync")
        .unwrap_err();
    assert!(
        e.message
            .ends_with("parsed at load time, cudaMallocAsync != native")
    );
    let asynch = ok("backend:cudaMallocAsync", v(11));
    assert_eq!(
        asynch.parse_update("").unwrap().backend,
        Backend::CudaMallocAsync
    );
    assert!(asynch.parse_update("backend:cudaMallocAsync").is_ok());
    // Errors leave the original untouched and usable.
    assert!(native.parse_update("max_split_size_mb:5").is_err());
    assert_eq!(native, AllocConf::new(v(9)));
}

#[test]
fn error_display_puts_pytorch_message_first() {
    let e = err("max_split_size_mb:5", v(9));
    let shown = e.to_string();
    assert!(
        shown.starts_with("CachingAllocator option max_split_size_mb too small, must be > 20 (")
    );
    assert!(shown.contains("key `max_split_size_mb`"));
    assert!(shown.contains("value `5`"));
    assert!(shown.contains("PyTorch 2.9"));
    let e = err("foo:1", v(11));
    assert_eq!(
        e.to_string(),
        "Unrecognized key 'foo' in CUDA allocator config. (key `foo`, PyTorch 2.11 rules)"
    );
    let e = AllocConf::from_env(v(11), |k| {
        (k == "PYTORCH_ALLOC_CONF").then(|| "x:1".to_string())
    })
    .unwrap_err();
    assert_eq!(e.variable, Some("PYTORCH_ALLOC_CONF"));
    assert!(e.to_string().ends_with("from PYTORCH_ALLOC_CONF)"));
    // Trailing spaces of PyTorch's message are kept in the field only.
    let e = err("roundup_power2_divisions:3", v(11));
    assert!(e.message.ends_with("power of 2 "));
    assert!(
        e.to_string()
            .starts_with("For roundups, the divisions has to be power of 2 (key")
    );
}

#[test]
fn display_canonical_strings() {
    for m in ALL {
        assert_eq!(AllocConf::new(v(m)).to_string(), "");
    }
    let c = ok("expandable_segments:True , max_split_size_mb:512", v(11));
    assert_eq!(
        c.to_string(),
        "max_split_size_mb:512,expandable_segments:True"
    );
    assert_eq!(
        ok("roundup_power2_divisions:[1:4,>:4]", v(9)).to_string(),
        "roundup_power2_divisions:4"
    );
    assert_eq!(
        ok("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", v(11)).to_string(),
        "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"
    );
    assert_eq!(
        ok("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", v(9)).to_string(),
        "roundup_power2_divisions:[256:1,512:2,1024:8,>:8]"
    );
    assert_eq!(
        ok("max_split_size_mb:-1", v(9)).to_string(),
        "max_split_size_mb:-1"
    );
    assert_eq!(
        ok("max_split_size_mb:-1", v(11)).to_string(),
        format!("max_split_size_mb:{}", u64::MAX / MIB)
    );
    assert_eq!(
        ok(
            "garbage_collection_threshold:6e-1,backend:cudaMallocAsync",
            v(11)
        )
        .to_string(),
        "backend:cudaMallocAsync,garbage_collection_threshold:0.6"
    );
}

/// Display round trip over hand-picked strings and a deterministic fuzz.
#[test]
fn display_round_trip() {
    let samples = [
        "max_split_size_mb:512,garbage_collection_threshold:0.6",
        "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
        "roundup_power2_divisions:[>:4]",
        "roundup_power2_divisions:[>:4,256:2]",
        "roundup_power2_divisions:[1:2,4:8,65536:16]",
        "roundup_power2_divisions:[2:0,64:4,>:0]",
        "roundup_power2_divisions:[32:8,128:0,>:2]",
        "roundup_power2_divisions:16",
        "backend:cudaMallocAsync,expandable_segments:True,release_lock_on_cudamalloc:True",
        "pinned_use_cuda_host_register:True,pinned_num_register_threads:128",
        "pinned_use_background_threads:True,max_non_split_rounding_mb:100",
        "graph_capture_record_stream_reuse:True,garbage_collection_threshold:0.1234567890123",
        "per_process_memory_fraction:0.25,pinned_reserve_segment_size_mb:2048",
        "large_segment_size_mb:64,max_split_size_mb:64,max_non_split_rounding_mb:128",
        "max_split_size_mb:-1,max_non_split_rounding_mb:-1",
        "max_split_size_mb:18446744073709551615",
        "expandable_segments:False",
    ];
    for m in ALL {
        for s in samples {
            if let Ok(c) = AllocConf::parse(s, v(m)) {
                check_round_trip(&c);
            }
        }
    }
    // Fuzz: random token soup must never panic; whatever parses round-trips.
    let pieces = [
        "max_split_size_mb",
        "max_non_split_rounding_mb",
        "roundup_power2_divisions",
        "garbage_collection_threshold",
        "expandable_segments",
        "backend",
        "release_lock_on_cudamalloc",
        "pinned_num_register_threads",
        "pinned_use_background_threads",
        "large_segment_size_mb",
        "per_process_memory_fraction",
        "pinned_reserve_segment_size_mb",
        ":",
        ":",
        ",",
        ",",
        "[",
        "]",
        ">",
        " ",
        "\t",
        "True",
        "False",
        "0",
        "1",
        "2",
        "4",
        "16",
        "20",
        "21",
        "30",
        "256",
        "512",
        "1024",
        "65536",
        "-1",
        "0.5",
        "1e-3",
        "nan",
        "99999999999999999999",
        "cudaMallocAsync",
        "native",
        "x",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let mut parsed = 0;
    for _ in 0..20_000 {
        let len = next() % 12;
        let mut s = String::new();
        for _ in 0..len {
            s.push_str(pieces[next() % pieces.len()]);
        }
        for m in ALL {
            if let Ok(c) = AllocConf::parse(&s, v(m)) {
                parsed += 1;
                check_round_trip(&c);
                let _ = c.effective_rows();
                if let Ok(u) = c.parse_update(&s) {
                    check_round_trip(&u);
                }
            }
        }
    }
    assert!(
        parsed > 1000,
        "fuzz exercised too few valid strings: {parsed}"
    );
}

#[track_caller]
fn check_round_trip(c: &AllocConf) {
    let shown = c.to_string();
    match AllocConf::parse(&shown, c.version) {
        Ok(mut back) => {
            back.raw = c.raw.clone();
            assert_eq!(&back, c, "round trip of {:?} via {shown:?}", c.raw);
        }
        Err(e) => panic!("display of {:?} = {shown:?} does not parse: {e}", c.raw),
    }
}

#[test]
fn env_precedence() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, val)| val.to_string())
        }
    };
    let both = env(&[
        ("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:100"),
        ("PYTORCH_ALLOC_CONF", "expandable_segments:True"),
    ]);
    let only_generic = env(&[("PYTORCH_ALLOC_CONF", "expandable_segments:True")]);
    let empty_cuda = env(&[
        ("PYTORCH_CUDA_ALLOC_CONF", ""),
        ("PYTORCH_ALLOC_CONF", "expandable_segments:True"),
    ]);
    for m in [1, 8, 9] {
        let (c, var) = AllocConf::from_env(v(m), both).unwrap();
        assert_eq!(var, Some("PYTORCH_CUDA_ALLOC_CONF"));
        assert_eq!(c.max_split_size, Some(100 * MIB));
        assert!(!c.expandable_segments);
        // 2.9's CUDA allocator ignores PYTORCH_ALLOC_CONF (issue #183387).
        let (c, var) = AllocConf::from_env(v(m), only_generic).unwrap();
        assert_eq!(var, None);
        assert!(!c.expandable_segments);
    }
    for m in [10, 11] {
        let (c, var) = AllocConf::from_env(v(m), both).unwrap();
        assert_eq!(var, Some("PYTORCH_CUDA_ALLOC_CONF"));
        assert!(!c.expandable_segments);
        let (c, var) = AllocConf::from_env(v(m), only_generic).unwrap();
        assert_eq!(var, Some("PYTORCH_ALLOC_CONF"));
        assert!(c.expandable_segments);
        assert_eq!(c.raw, "expandable_segments:True");
        // Set-but-empty wins.
        let (c, var) = AllocConf::from_env(v(m), empty_cuda).unwrap();
        assert_eq!(var, Some("PYTORCH_CUDA_ALLOC_CONF"));
        assert!(!c.expandable_segments);
    }
    let (c, var) = AllocConf::from_env(v(11), |_| None).unwrap();
    assert_eq!((c, var), (AllocConf::new(v(11)), None));
    assert_eq!(env_var_precedence(v(9)), ["PYTORCH_CUDA_ALLOC_CONF"]);
}

#[test]
fn effective_rows_describe_settings() {
    let rows = AllocConf::new(v(11)).effective_rows();
    let get = |rows: &[(String, String)], k: &str| {
        rows.iter()
            .find(|(key, _)| key == k)
            .map(|(_, val)| val.clone())
    };
    assert_eq!(
        get(&rows, "max_split_size").unwrap(),
        "unlimited (any cached block may be split)"
    );
    assert!(
        get(&rows, "roundup_power2_divisions")
            .unwrap()
            .starts_with("off")
    );
    assert_eq!(get(&rows, "garbage_collection_threshold").unwrap(), "off");
    assert!(
        get(&rows, "pinned_use_cuda_host_register")
            .unwrap()
            .contains("no effect on device allocation")
    );
    let c = ok(
        "roundup_power2_divisions:[256:1,512:2,1024:4,>:8],garbage_collection_threshold:0.6,max_split_size_mb:512",
        v(11),
    );
    let rows = c.effective_rows();
    assert_eq!(
        get(&rows, "roundup_power2_divisions").unwrap(),
        "< 512 MiB: 1 (no power-of-two rounding), 512 MiB–1 GiB: 2 divisions, 1 GiB–2 GiB: 4 divisions, >= 2 GiB: 8 divisions"
    );
    assert!(
        get(&rows, "garbage_collection_threshold")
            .unwrap()
            .starts_with("0.6 (only active with a memory fraction")
    );
    assert!(get(&rows, "max_split_size").unwrap().starts_with("512 MiB"));
    let c = ok(
        "garbage_collection_threshold:0.6,per_process_memory_fraction:0.5",
        v(11),
    );
    assert!(
        get(&c.effective_rows(), "garbage_collection_threshold")
            .unwrap()
            .contains("active")
    );
    // Keys a version does not have get no row, fixed values say so.
    let rows = AllocConf::new(v(5)).effective_rows();
    assert!(get(&rows, "pinned_use_background_threads").is_none());
    assert!(
        get(&rows, "max_non_split_rounding")
            .unwrap()
            .contains("fixed")
    );
    // The cudaMallocAsync warning.
    let c = ok("backend:cudaMallocAsync,max_split_size_mb:100", v(9));
    assert_eq!(c.warnings().len(), 1);
    assert!(get(&c.effective_rows(), "warning").is_some());
    // From 2.10 only the CUDA hook's keys count.
    assert!(
        ok("backend:cudaMallocAsync,max_split_size_mb:100", v(11))
            .warnings()
            .is_empty()
    );
    assert_eq!(
        ok(
            "backend:cudaMallocAsync,release_lock_on_cudamalloc:True",
            v(11)
        )
        .warnings()
        .len(),
        1
    );
}
