//! The RMM log reader: never panics; a trace it reads validates and replays
//! without an invariant violation.
//!
//! The check is [`vramlab_fuzz::targets::rmm`] (also run over the committed
//! inputs by `tests/regressions.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vramlab_fuzz::targets::rmm(data));
