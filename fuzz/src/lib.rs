//! The fuzz targets of vramlab, as plain functions of the input bytes.
//!
//! `fuzz_targets/*.rs` hand each function to libFuzzer (`cargo fuzz`, see
//! `scripts/fuzz.sh`); `tests/regressions.rs` runs the same functions over
//! the committed inputs in `regressions/` and `corpus/` on a stable
//! toolchain without libFuzzer, which is how CI replays every crasher ever
//! found.

pub mod check;
pub mod policy_in;
pub mod snapshot_in;
pub mod targets;
pub mod trace_in;

pub use check::{check_read_trace, check_read_trace_with, replay_checked, version_of, versions};
pub use policy_in::{NativeIn, PolicyIn, Roundup};
pub use trace_in::{OpIn, STREAMS, SizeIn, build_trace};
