//! The binary (.vlt) reader: never panics or allocates beyond the input; a
//! trace it reads validates, replays (including any initial state) without
//! an invariant violation, and round-trips through the writer.
//!
//! The check is [`vramlab_fuzz::targets::binary`] (also run over the committed
//! inputs by `tests/regressions.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vramlab_fuzz::targets::binary(data));
