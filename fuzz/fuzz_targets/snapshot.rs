//! PyTorch snapshot pickles as arbitrary bytes: reading, the typed model and
//! the conversion to traces never panic, and what they produce is a valid
//! trace that replays without an invariant violation.
//!
//! The check is [`vramlab_fuzz::targets::snapshot`] (also run over the committed
//! inputs by `tests/regressions.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vramlab_fuzz::targets::snapshot(data));
