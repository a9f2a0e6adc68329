//! The native CSV reader: never panics; a trace it reads validates,
//! replays without an invariant violation and survives a write/read round
//! trip unchanged.
//!
//! The check is [`vramlab_fuzz::targets::csv`] (also run over the committed
//! inputs by `tests/regressions.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vramlab_fuzz::targets::csv(data));
