//! vramlab-traces: the allocation trace model and its file formats.
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
#![warn(missing_docs)]

pub mod advice;
pub mod binary;
pub mod concat;
pub mod csv;
pub mod error;
pub mod io;
mod lines;
pub mod model;
pub mod pickle;
pub mod rmm;
pub mod snapshot;
pub mod summary;

pub use error::{Location, TraceError};
pub use model::*;
