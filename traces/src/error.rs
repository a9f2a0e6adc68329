//! Errors of trace readers and writers: always the file, the place in it and
//! the reason.

use std::fmt;

/// Where in an input a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// Nowhere in particular (the whole file).
    File,
    /// A 1-based line of a text file.
    Line(u64),
    /// A byte offset of a binary file.
    Byte(u64),
    /// An entry of a trace (0-based index).
    Entry(u64),
}

/// A reader or writer failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    /// The file (or `-`, or a description of the input).
    pub path: String,
    /// Where the problem is.
    pub location: Location,
    /// What is wrong.
    pub message: String,
}

impl TraceError {
    /// A problem at `location` of `path`.
    pub fn new(path: impl Into<String>, location: Location, message: impl Into<String>) -> Self {
        TraceError {
            path: path.into(),
            location,
            message: message.into(),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location {
            Location::File => write!(f, "{}: {}", self.path, self.message),
            Location::Line(n) => write!(f, "{}:{}: {}", self.path, n, self.message),
            Location::Byte(n) => write!(f, "{}: byte {}: {}", self.path, n, self.message),
            Location::Entry(n) => write!(f, "{}: entry {}: {}", self.path, n, self.message),
        }
    }
}

impl std::error::Error for TraceError {}
