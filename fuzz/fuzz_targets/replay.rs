//! Replay of arbitrary event sequences under arbitrary settings of every
//! policy on a small simulated device, with the invariant checker after
//! every event: no panic, and no `ReplayError::Invariant` (a policy bug).
//! `ReplayError::Trace` for invalid sequences is expected.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use vramlab_fuzz::{OpIn, PolicyIn, build_trace, replay_checked};

#[derive(Debug, Arbitrary)]
struct Input {
    policy: PolicyIn,
    /// Capacity in MiB (`None`: unlimited).
    capacity_mib: Option<u16>,
    stop_at_oom: bool,
    ops: Vec<OpIn>,
}

fuzz_target!(|input: Input| {
    let trace = build_trace(&input.ops, 400);
    let capacity = input.capacity_mib.map(|m| u64::from(m) << 20);
    let scenario = input.policy.scenario(capacity);
    replay_checked(&trace, &scenario, input.stop_at_oom);
});
