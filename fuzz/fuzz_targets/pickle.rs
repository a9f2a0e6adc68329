//! The pickle reader on arbitrary bytes: never panics; what it reads can be
//! written back and read again to the same document.
//!
//! The check is [`vramlab_fuzz::targets::pickle`] (also run over the committed
//! inputs by `tests/regressions.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vramlab_fuzz::targets::pickle(data));
