//! Snapshot inputs, good and bad: each gets a clear, specific message or the
//! documented handling, and nothing panics.

use vramlab_traces::snapshot::{SizeRules, read_snapshot, snapshot_to_traces};
use vramlab_traces::{DictBuilder, PickleWriter, Value};
use vramlab_traces::{Event, SegmentEventKind};

fn entry(action: &str, addr: u64, size: u64) -> Value {
    DictBuilder::new()
        .entry("action", action)
        .entry("addr", addr as i64)
        .entry("size", size as i64)
        .entry("stream", 0i64)
        .build()
}

fn snapshot(entries: Vec<Value>, segments: Vec<Value>) -> Vec<u8> {
    let v = DictBuilder::new()
        .entry("segments", Value::list(segments))
        .entry("device_traces", Value::list([Value::list(entries)]))
        .entry(
            "allocator_settings",
            DictBuilder::new()
                .entry("PYTORCH_CUDA_ALLOC_CONF", "")
                .build(),
        )
        .build();
    PickleWriter::new().to_vec(&v)
}

fn convert(bytes: &[u8]) -> Result<Vec<vramlab_traces::Trace>, String> {
    let snap = read_snapshot(bytes, "s.pickle").map_err(|e| e.to_string())?;
    snapshot_to_traces(&snap, "s.pickle", &SizeRules::default()).map_err(|e| e.to_string())
}

const MIB: u64 = 1 << 20;

#[test]
fn segment_free_bursts_become_empty_cache_calls() {
    // Two segments; the second's only block is freed, then a burst of
    // segment_free that no malloc explains (the next request reuses the
    // first segment): an empty_cache() call.
    let (s, s2) = (0x7000_0000_0000u64, 0x7100_0000_0000u64);
    let bytes = snapshot(
        vec![
            entry("segment_alloc", s, 20 * MIB),
            entry("alloc", s, 4 * MIB),
            entry("segment_alloc", s2, 30 * MIB),
            entry("alloc", s2, 30 * MIB),
            entry("free_requested", s2, 30 * MIB),
            entry("free_completed", s2, 30 * MIB),
            entry("segment_free", s2, 30 * MIB),
            entry("alloc", s + 4 * MIB, 8 * MIB),
        ],
        vec![],
    );
    let t = &convert(&bytes).unwrap()[0];
    assert_eq!(
        t.events,
        vec![
            Event::Alloc {
                id: 0,
                stream: 0,
                size: 4 * MIB
            },
            Event::Alloc {
                id: 1,
                stream: 0,
                size: 30 * MIB
            },
            Event::Free { id: 1 },
            Event::EmptyCache,
            Event::Alloc {
                id: 2,
                stream: 0,
                size: 8 * MIB
            },
        ]
    );
    let e = t.expected.as_ref().unwrap();
    let kinds: Vec<_> = e
        .segment_events
        .iter()
        .map(|s| (s.event_index, s.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (0, SegmentEventKind::Alloc),
            (1, SegmentEventKind::Alloc),
            (3, SegmentEventKind::Free)
        ]
    );
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("inferred 1 empty_cache()"))
    );
}

#[test]
fn releases_inside_a_malloc_are_not_empty_cache() {
    // segment_free followed by segment_alloc: the release-and-retry path.
    let (a, b) = (0x7000_0000_0000u64, 0x7100_0000_0000u64);
    let bytes = snapshot(
        vec![
            entry("segment_alloc", a, 30 * MIB),
            entry("alloc", a, 30 * MIB),
            entry("free_requested", a, 30 * MIB),
            entry("free_completed", a, 30 * MIB),
            entry("segment_free", a, 30 * MIB),
            entry("segment_alloc", b, 64 * MIB),
            entry("alloc", b, 64 * MIB),
        ],
        vec![],
    );
    let t = &convert(&bytes).unwrap()[0];
    assert!(!t.events.contains(&Event::EmptyCache));
    let e = t.expected.as_ref().unwrap();
    assert_eq!(
        e.segment_events[1].event_index, 2,
        "the free belongs to the next alloc"
    );
}

#[test]
fn deferred_frees_and_ooms_are_kept() {
    let a = 0x7000_0000_0000u64;
    let mut oom = DictBuilder::new()
        .entry("action", "oom")
        .entry("size", (100 * MIB) as i64)
        .entry("stream", 0i64)
        .entry("device_free", (5 * MIB) as i64);
    oom.insert("time_us", 1i64);
    let bytes = snapshot(
        vec![
            entry("segment_alloc", a, 20 * MIB),
            entry("alloc", a, 4 * MIB),
            entry("free_requested", a, 4 * MIB),
            entry("alloc", a + 4 * MIB, 4 * MIB),
            entry("free_completed", a, 4 * MIB),
            oom.build(),
        ],
        vec![],
    );
    let t = &convert(&bytes).unwrap()[0];
    assert_eq!(
        t.events,
        vec![
            Event::Alloc {
                id: 0,
                stream: 0,
                size: 4 * MIB
            },
            Event::FreeRequested { id: 0 },
            Event::Alloc {
                id: 1,
                stream: 0,
                size: 4 * MIB
            },
            Event::FreeCompleted { id: 0 },
            Event::Alloc {
                id: 2,
                stream: 0,
                size: 100 * MIB
            },
        ]
    );
    let e = t.expected.as_ref().unwrap();
    assert_eq!(e.ooms.len(), 1);
    assert_eq!(e.ooms[0].event_index, 4);
    assert_eq!(e.ooms[0].device_free, 5 * MIB);
}

#[test]
fn bad_snapshots_get_specific_messages() {
    let a = 0x7000_0000_0000u64;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            PickleWriter::new().to_vec(&Value::list([Value::from(1i64)])),
            "(list)[0]: is a int: a list at the top level is read as torch.cuda.memory_snapshot()'s list of segment dicts; not a PyTorch memory snapshot",
        ),
        (
            PickleWriter::new().to_vec(&Value::from(1i64)),
            "is a int, expected a dict with 'segments' and 'device_traces': not a PyTorch memory snapshot",
        ),
        (
            PickleWriter::new().to_vec(&DictBuilder::new().entry("weights", 1i64).build()),
            "has neither 'segments' nor 'device_traces'",
        ),
        (
            b"\x80\x04\x95\x10\x00\x00\x00".to_vec(),
            "not a readable pickle: pickle truncated",
        ),
        (
            b"cbuiltins\neval\n.".to_vec(),
            "pickle references global 'builtins.eval'",
        ),
        (
            snapshot(
                vec![
                    entry("free_requested", a, 10),
                    entry("free_completed", a, 10),
                    entry("free_requested", a, 10),
                ],
                vec![],
            ),
            "free_requested at 0x700000000000, which is not allocated",
        ),
        (
            snapshot(vec![entry("alloc", a, 10), entry("alloc", a, 10)], vec![]),
            "alloc at 0x700000000000, which is still allocated",
        ),
        (
            snapshot(
                vec![
                    DictBuilder::new()
                        .entry("action", "alloc")
                        .entry("addr", 1i64)
                        .entry("size", "big")
                        .build(),
                ],
                vec![],
            ),
            "device_traces[0][0].size: is a str, expected an int",
        ),
        (
            snapshot(
                vec![
                    DictBuilder::new()
                        .entry("action", "alloc")
                        .entry("size", 5i64)
                        .build(),
                ],
                vec![],
            ),
            "a 'alloc' entry has no 'addr'",
        ),
    ];
    for (bytes, want) in cases {
        let err = convert(&bytes).unwrap_err();
        assert!(err.starts_with("s.pickle"), "{err}");
        assert!(err.contains(want), "expected {want:?} in {err:?}");
    }
}

#[test]
fn a_block_in_use_without_its_segment_keeps_the_trace_but_not_the_layout() {
    // A free of a block the trace never allocated means the recording began
    // mid-run; without a segment holding it the layout cannot be rebuilt,
    // but the block in use is known (a fresh start allocates it).
    let a = 0x7000_0000_0000u64;
    let bytes = snapshot(
        vec![
            entry("free_requested", a, 10),
            entry("free_completed", a, 10),
        ],
        vec![],
    );
    let t = &convert(&bytes).unwrap()[0];
    let init = t.initial.as_ref().unwrap();
    assert_eq!(init.live.len(), 1);
    assert_eq!((init.live[0].address, init.live[0].requested), (a, 10));
    assert!(init.segments.is_empty());
    let why = init.layout_error.as_deref().unwrap();
    assert_eq!(
        why,
        "the block at 0x700000000000 was in use when the recording began, but no segment holds it (the final segments are missing or incomplete)"
    );
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains(why) && n.contains("start fresh")),
        "{:?}",
        t.notes
    );
}

#[test]
fn state_only_snapshots_have_no_events() {
    // Recorded with enabled="state": segments but no trace entries.
    let seg = DictBuilder::new()
        .entry("device", 0i64)
        .entry("address", 0x7000_0000_0000i64)
        .entry("total_size", (2 * MIB) as i64)
        .entry("stream", 0i64)
        .entry("segment_type", "small")
        .entry(
            "blocks",
            Value::list([DictBuilder::new()
                .entry("address", 0x7000_0000_0000i64)
                .entry("size", (2 * MIB) as i64)
                .entry("state", "inactive")
                .build()]),
        )
        .build();
    let bytes = snapshot(vec![], vec![seg]);
    let traces = convert(&bytes).unwrap();
    assert_eq!(traces.len(), 1);
    assert!(traces[0].events.is_empty());
    assert!(
        traces[0]
            .notes
            .iter()
            .any(|n| n.contains("no trace entries")),
        "{:?}",
        traces[0].notes
    );
}

/// Entries share equal `compile_context` and `user_metadata` texts (a
/// million entries hold one copy of "N/A"), and keep different ones apart.
#[test]
fn equal_entry_texts_are_shared() {
    let with = |action: &str, addr: u64, ctx: &str| {
        DictBuilder::new()
            .entry("action", action)
            .entry("addr", addr as i64)
            .entry("size", 512i64)
            .entry("stream", 0i64)
            .entry("compile_context", ctx.to_string())
            .entry("user_metadata", "")
            .build()
    };
    let bytes = snapshot(
        vec![
            with("alloc", 0x1000, "N/A"),
            with("free_requested", 0x1000, "N/A"),
            with("alloc", 0x2000, "step 3"),
        ],
        Vec::new(),
    );
    let snap = read_snapshot(&bytes, "s.pickle").unwrap();
    let e = &snap.device_traces[0];
    let (a, b, c) = (&e[0], &e[1], &e[2]);
    let ctx = |x: &vramlab_traces::snapshot::TraceEntry| x.compile_context.clone().unwrap();
    assert!(std::sync::Arc::ptr_eq(&ctx(a), &ctx(b)));
    assert_eq!(&*ctx(c), "step 3");
    assert!(std::sync::Arc::ptr_eq(
        a.user_metadata.as_ref().unwrap(),
        c.user_metadata.as_ref().unwrap()
    ));
}
