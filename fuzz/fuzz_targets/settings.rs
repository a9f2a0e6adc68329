//! Settings parsers: `AllocConf::parse` under every modelled release and
//! each policy's `Settings::parse`. Never panic; what parses prints a
//! canonical string that parses back to the same settings; rounding under
//! any accepted settings never rounds down.
//!
//! The check is [`vramlab_fuzz::targets::settings`] (also run over the committed
//! inputs by `tests/regressions.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vramlab_fuzz::targets::settings(data));
