//! vramlab-traces: the allocation trace model and its file formats.

#![warn(missing_docs)]

pub mod model;

pub use model::*;
