//! placeholder
#![allow(missing_docs)]
mod common;
pub mod direct;
