//! `--json`: a command's result, serialised as it is.
//!
//! Results whose keys have always been printed in alphabetical order at
//! every level (replays, capacity runs, fidelity, cards) go through
//! [`print_sorted`]; every other result prints its fields in their
//! declared order ([`print`]).

use anyhow::Result;
use serde::Serialize;

/// Prints `value` as pretty JSON, fields in their declared order.
pub fn print<T: Serialize + ?Sized>(value: &T) -> Result<()> {
    crate::output::write_stdout(&format!("{}\n", serde_json::to_string_pretty(value)?));
    Ok(())
}

/// Prints `value` as pretty JSON with the keys of every object in
/// alphabetical order.
pub fn print_sorted<T: Serialize + ?Sized>(value: &T) -> Result<()> {
    print(&serde_json::to_value(value)?)
}

/// Prints one result as an object, several (or none) as an array, keys
/// sorted: the shape of `replay --json` with one or several `--conf`.
pub fn print_one_or_many<T: Serialize>(values: &[T]) -> Result<()> {
    match values {
        [one] => print_sorted(one),
        many => print_sorted(many),
    }
}
