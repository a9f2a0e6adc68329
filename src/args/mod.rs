//! Command-line options shared by several commands, one kind per file.

mod conf;
mod device;
mod grid;
mod trace;

pub use conf::{ConfArgs, scenarios};
pub use device::{DeviceArgs, HostArgs, parse_gpu_arg, parse_size_arg};
pub use grid::GridArgs;
pub use trace::{StartArgs, TraceArgs, parse_format};
