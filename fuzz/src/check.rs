//! The checks every target applies: replay with the invariant checker, and
//! what a reader's output must satisfy.

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{ReplayError, ReplayOptions, Scenario, Start};
use vramlab_traces::{Trace, validate};

/// Every PyTorch release whose rules vramlab models.
pub fn versions() -> impl Iterator<Item = TorchVersion> {
    (1..=11).map(|m| TorchVersion::new(2, m))
}

/// A version chosen by a byte.
pub fn version_of(b: u8) -> TorchVersion {
    TorchVersion::new(2, 1 + u16::from(b % 11))
}

/// Replays `trace` under `scenario` with the invariant checker after every
/// event. Panics on an invariant violation (a policy bug) and on allocator
/// errors that a simulated device cannot legitimately cause. When `valid`
/// (the trace is known to be a valid sequence: a reader accepted it, or it
/// was generated without raw events), any error but an unsupported initial
/// state is a bug too; otherwise trace errors are expected.
pub fn replay_checked(trace: &Trace, scenario: &Scenario, stop_at_oom: bool, valid: bool) {
    // A trace that starts mid-run replays under both starts; a fresh start
    // needs no layout and no policy support, so it must always work.
    let starts: &[Start] = if trace.initial.is_some() {
        &[Start::Recorded, Start::Fresh]
    } else {
        &[Start::Recorded]
    };
    for &start in starts {
        replay_checked_from(trace, scenario, stop_at_oom, valid, start);
    }
}

fn replay_checked_from(
    trace: &Trace,
    scenario: &Scenario,
    stop_at_oom: bool,
    valid: bool,
    start: Start,
) {
    let opts = ReplayOptions {
        stop_at_oom,
        timeline_points: 16,
        check_invariants: true,
        start,
        ..Default::default()
    };
    match scenario.run(trace, &opts) {
        Ok(run) => {
            let s = &run.summary;
            assert!(s.events_replayed <= s.events);
            assert!(
                s.peak_reserved_bytes >= s.final_reserved_bytes,
                "{} {s:?}",
                scenario.label()
            );
        }
        Err(ReplayError::Invariant {
            event_index,
            message,
        }) => panic!(
            "invariant violated under {} after event {event_index}: {message}",
            scenario.label()
        ),
        Err(ReplayError::Allocator {
            event_index,
            message,
        }) if message.contains("invalid block handle") => panic!(
            "policy lost a handle under {} at event {event_index}: {message}",
            scenario.label()
        ),
        Err(ReplayError::Initial(e)) if valid && start == Start::Fresh => panic!(
            "a valid trace failed to start fresh under {}: {e}",
            scenario.label()
        ),
        Err(ReplayError::Initial(_)) => {}
        Err(e) if valid => panic!(
            "a valid trace failed to replay under {}: {e}",
            scenario.label()
        ),
        Err(_) => {}
    }
}

/// What every reader's output must satisfy: the structural checks of
/// [`validate`], and a replay through the default native policy without an
/// invariant violation or any other error (a reader must refuse what the
/// replay cannot run, except initial states the replay does not support).
pub fn check_read_trace(trace: &Trace) {
    check_read_trace_with(trace, true);
}

/// [`check_read_trace`]; with `valid_sequence` false, errors in the event
/// sequence are expected (the binary reader checks the file's structure;
/// the replay reports a free without its allocation, naming the event).
pub fn check_read_trace_with(trace: &Trace, valid_sequence: bool) {
    if let Err((i, m)) = validate(trace) {
        panic!("a reader returned a trace that fails validation at entry {i}: {m}");
    }
    if trace.events.len() > 20_000 {
        return;
    }
    replay_checked(
        trace,
        &Scenario::native(AllocConf::default()),
        trace.events.len() % 2 == 0,
        valid_sequence,
    );
}
