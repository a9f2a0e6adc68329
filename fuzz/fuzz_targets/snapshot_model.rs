//! Snapshot → trace conversion on structured snapshots ([`SnapshotIn`]):
//! never panics; every trace it returns validates and replays — under the
//! default settings and in fidelity mode — without an invariant violation.
//!
//! The check is [`vramlab_fuzz::targets::snapshot_model`] (also run over the committed
//! inputs by `tests/regressions.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vramlab_fuzz::targets::snapshot_model(data));
