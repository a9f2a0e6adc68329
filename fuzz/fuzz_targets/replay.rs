//! Replay of arbitrary event sequences under arbitrary settings of every
//! policy on a small simulated device, with the invariant checker after
//! every event: no panic, and no `ReplayError::Invariant` (a policy bug).
//! `ReplayError::Trace` for invalid sequences is expected.
//!
//! The check is [`vramlab_fuzz::targets::replay`] (also run over the committed
//! inputs by `tests/regressions.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vramlab_fuzz::targets::replay(data));
