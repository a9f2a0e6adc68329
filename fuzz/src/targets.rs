//! One function per fuzz target. Each takes the raw input bytes and panics
//! when it finds a bug (a panic in vramlab, a trace a reader returns that
//! fails validation or replay, a write/read round trip that changes the
//! data, an invariant violation); inputs that vramlab rejects with an error
//! are fine.

use arbitrary::{Arbitrary, Unstructured};
use vramlab_allocator::AllocConf;
use vramlab_allocator::policies::native::{allocation_size, round_size};
use vramlab_allocator::policies::{async_pool, bfc, direct, stitch};
use vramlab_traces::read_rmm;
use vramlab_traces::snapshot::{
    SizeRules, read_snapshot, read_snapshot_streamed, read_snapshot_whole, snapshot_to_traces,
};
use vramlab_traces::{
    EventBlocks, IdUse, RmmEvents, ShortReads, StreamCounts, StreamEnd, TraceError, VltEvents,
};
use vramlab_traces::{PickleDoc, PickleWriter};
use vramlab_traces::{read_binary, write_binary};
use vramlab_traces::{read_csv, write_csv};

use crate::check::{check_read_trace, check_read_trace_with, replay_checked, versions};
use crate::policy_in::PolicyIn;
use crate::snapshot_in::SnapshotIn;
use crate::trace_in::{OpIn, build_trace};

/// A fuzz target: the input bytes in, a panic out when it finds a bug.
pub type Target = fn(&[u8]);

/// Every target by the name of its directory under `corpus/` and
/// `regressions/` (and of its binary in `fuzz_targets/`).
pub const ALL: [(&str, Target); 8] = [
    ("pickle", pickle),
    ("snapshot", snapshot),
    ("snapshot_model", snapshot_model),
    ("csv", csv),
    ("binary", binary),
    ("rmm", rmm),
    ("settings", settings),
    ("replay", replay),
];

/// Decodes structured input exactly as `libfuzzer_sys::fuzz_target!` does
/// for a typed closure, so that corpus files mean the same thing under
/// libFuzzer and in the regression test: inputs shorter than the type's
/// minimum size, and inputs that do not decode, are skipped.
pub fn decode<T: for<'a> Arbitrary<'a>>(data: &[u8]) -> Option<T> {
    if data.len() < T::size_hint(0).0 {
        return None;
    }
    T::arbitrary_take_rest(Unstructured::new(data)).ok()
}

/// The pickle reader on arbitrary bytes: never panics; what it reads can be
/// written back and read again to the same document.
pub fn pickle(data: &[u8]) {
    let Ok(doc) = PickleDoc::from_slice(data) else {
        return;
    };
    assert!(doc.bytes_read() <= data.len());
    let _ = format!("{doc:?}");
    let value = doc.root().to_value();
    let bytes = PickleWriter::new().to_vec(&value);
    let again = PickleDoc::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("the writer's output does not read back: {e}"));
    // Byte equality of the rewritten documents (tolerates NaN floats, which
    // compare unequal to themselves).
    let rewritten = PickleWriter::new().to_vec(&again.root().to_value());
    assert_eq!(bytes, rewritten, "read(write(doc)) differs from doc");
}

/// PyTorch snapshot pickles as arbitrary bytes: reading, the typed model and
/// the conversion to traces never panic, the read that converts entries as
/// the pickle is read answers as the whole read does (errors included; from
/// a stream, where it answers at all), and
/// what they produce is a valid trace that replays without an invariant
/// violation.
pub fn snapshot(data: &[u8]) {
    let read = read_snapshot(data, "fuzz.pickle");
    let whole = read_snapshot_whole(data, "fuzz.pickle");
    match (&read, &whole) {
        (Ok(a), Ok(b)) => assert!(a == b, "the streamed read differs from the whole read"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        _ => panic!("one read failed and the other did not"),
    }
    // Read from a stream in short reads (as a file is), where it answers.
    if let Some(s) = read_snapshot_streamed(&mut ShortReads::new(data, &[7]), data.len()) {
        assert!(
            whole.as_ref().ok() == Some(&s),
            "the read from a stream differs from the whole read"
        );
    }
    let Ok(snap) = read else {
        return;
    };
    let Ok(traces) = snapshot_to_traces(&snap, "fuzz.pickle", &SizeRules::default()) else {
        return;
    };
    for t in &traces {
        check_read_trace(t);
    }
}

/// Snapshot → trace conversion on structured snapshots ([`SnapshotIn`]):
/// never panics; every trace it returns validates and replays — under the
/// default settings and in fidelity mode — without an invariant violation.
pub fn snapshot_model(data: &[u8]) {
    let Some(input) = decode::<SnapshotIn>(data) else {
        return;
    };
    let snap = input.snapshot();
    let Ok(traces) = snapshot_to_traces(&snap, "fuzz.pickle", &SizeRules::default()) else {
        return;
    };
    let settings = if input.expandable() {
        "expandable_segments:True"
    } else {
        ""
    };
    let conf = AllocConf::parse(settings, Default::default()).expect("valid settings");
    for t in &traces {
        check_read_trace(t);
        if let Err(vramlab_replay::ReplayError::Invariant { message, .. }) =
            vramlab_replay::check_fidelity(t, conf.clone())
        {
            panic!("invariant violated in fidelity mode: {message}")
        }
    }
}

/// The native CSV reader: never panics; a trace it reads validates,
/// replays without an invariant violation and survives a write/read round
/// trip unchanged.
pub fn csv(data: &[u8]) {
    let Ok(trace) = read_csv(data, "fuzz.csv") else {
        return;
    };
    check_read_trace(&trace);
    let mut out = Vec::new();
    write_csv(&trace, &mut out, "out.csv").expect("writing to memory");
    let back = read_csv(out.as_slice(), "fuzz.csv")
        .unwrap_or_else(|e| panic!("the writer's output does not read back: {e}"));
    assert_eq!(back, trace, "read(write(trace)) differs");
}

/// The binary (.vlt) reader: never panics or allocates beyond the input; a
/// trace it reads validates, replays (including any initial state) without
/// an invariant violation, and round-trips through the writer. (The reader
/// checks structure, not the order of allocations and frees: the replay
/// reports those errors with the event's index.)
pub fn binary(data: &[u8]) {
    // Read as it is read (ids recycled): never panics, and accepts only
    // what the whole read accepts (it also checks the ids' order).
    let streamed = VltEvents::open(data, "fuzz.vlt", IdUse::Recycled).and_then(drain);
    let Ok(trace) = read_binary(data, "fuzz.vlt") else {
        assert!(streamed.is_err(), "read as it is read, not whole");
        return;
    };
    if let Ok(end) = streamed {
        assert_eq!(end.counts, StreamCounts::of(&trace));
    }
    check_read_trace_with(&trace, false);
    for compress in [false, true] {
        let mut out = Vec::new();
        write_binary(&trace, &mut out, compress, "out.vlt").expect("writing to memory");
        let back = read_binary(out.as_slice(), "out.vlt")
            .unwrap_or_else(|e| panic!("the writer's output does not read back: {e}"));
        assert_eq!(back, trace, "read(write(trace)) differs");
    }
}

/// The RMM log reader: never panics; a trace it reads validates and replays
/// without an invariant violation.
pub fn rmm(data: &[u8]) {
    // Read as it is read (ids recycled): the same answer as the whole read.
    let streamed = RmmEvents::open(data, "fuzz.csv", IdUse::Recycled).and_then(drain);
    let whole = read_rmm(data, "fuzz.csv");
    match (&whole, &streamed) {
        (Ok(t), Ok(end)) => assert_eq!(end.counts, StreamCounts::of(t)),
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => panic!("whole read {whole:?}, read as it is read {streamed:?}"),
    }
    if let Ok(trace) = whole {
        check_read_trace(&trace);
    }
}

/// Takes every block of a read as it is read, and ends it.
fn drain<E: EventBlocks>(mut events: E) -> Result<StreamEnd, TraceError> {
    let mut block = Vec::new();
    while events.next_block(&mut block)? {}
    events.finish()
}

/// Settings parsers: `AllocConf::parse` under every modelled release and
/// each policy's `Settings::parse`. Never panic; what parses prints a
/// canonical string that parses back to the same settings; rounding under
/// any accepted settings never rounds down.
pub fn settings(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    for v in versions() {
        let Ok(c) = AllocConf::parse(&s, v) else {
            continue;
        };
        let _ = c.effective_rows();
        let _ = c.warnings();
        let printed = c.to_string();
        let mut back = AllocConf::parse(&printed, v).unwrap_or_else(|e| {
            panic!("{v}: '{printed}' (printed from '{s}') does not parse: {e}")
        });
        back.raw = c.raw.clone();
        assert_eq!(
            back, c,
            "{v}: '{s}' prints as '{printed}', which parses differently"
        );
        let _ = c.parse_update(&s);
        for n in [
            1u64,
            511,
            513,
            1 << 20,
            (1 << 20) + 1,
            10 << 20,
            (1 << 40) + 3,
            (1 << 60) - 1,
        ] {
            let r = round_size(&c, n);
            assert!(r >= n && r % 512 == 0, "{v} '{s}': round_size({n}) = {r}");
            let a = allocation_size(&c, r);
            assert!(a >= r, "{v} '{s}': allocation_size({r}) = {a}");
        }
    }
    round_trips("direct", &s, direct::Settings::parse);
    round_trips("bfc", &s, bfc::Settings::parse);
    round_trips("async", &s, async_pool::Settings::parse);
    round_trips("stitch", &s, stitch::Settings::parse);
}

/// Settings that `parse` accepts print as a string that parses back to
/// the same settings.
fn round_trips<C, E>(policy: &str, s: &str, parse: fn(&str) -> Result<C, E>)
where
    C: std::fmt::Display + std::fmt::Debug + PartialEq,
    E: std::fmt::Debug + PartialEq,
{
    if let Ok(c) = parse(s) {
        let p = c.to_string();
        assert_eq!(parse(&p), Ok(c), "{policy} '{s}' prints as '{p}'");
    }
}

/// Input of [`replay`].
#[derive(Debug, Arbitrary)]
pub struct ReplayIn {
    /// The policy and its settings.
    pub policy: PolicyIn,
    /// Capacity in MiB (`None`: unlimited).
    pub capacity_mib: Option<u16>,
    /// Stop at the first OOM, or go on.
    pub stop_at_oom: bool,
    /// The events.
    pub ops: Vec<OpIn>,
}

/// Replay of arbitrary event sequences under arbitrary settings of every
/// policy on a small simulated device, with the invariant checker after
/// every event: no panic, and no `ReplayError::Invariant` (a policy bug).
/// `ReplayError::Trace` for invalid sequences is expected.
pub fn replay(data: &[u8]) {
    let Some(input) = decode::<ReplayIn>(data) else {
        return;
    };
    let trace = build_trace(&input.ops, 400);
    let capacity = input.capacity_mib.map(|m| u64::from(m) << 20);
    let scenario = input.policy.scenario(capacity);
    // Without raw events the sequence is valid: it must replay.
    let valid = !input
        .ops
        .iter()
        .take(400)
        .any(|op| matches!(op, OpIn::Raw(..)));
    replay_checked(&trace, &scenario, input.stop_at_oom, valid);
}
