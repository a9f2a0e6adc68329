//! vramlab-traces: the allocation trace model and its file formats.

#![warn(missing_docs)]

pub mod binary;
pub mod csv;
pub mod error;
pub mod r#gen;
pub mod io;
mod lines;
pub mod model;
pub mod pickle;
pub mod rmm;
pub mod snapshot;
pub mod summary;

pub use error::{Location, TraceError};
pub use model::*;
