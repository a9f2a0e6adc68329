//! Errors of the pickle reader.

use thiserror::Error;

/// Why a pickle could not be read.
///
/// Every variant names the byte offset (from the start of the input) of the
/// opcode that failed, and the opcode's name as CPython's `pickletools`
/// spells it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PickleError {
    /// The input ended in the middle of an opcode or its argument, or
    /// before a `STOP` opcode.
    #[error("pickle truncated at byte {offset} while reading {opcode}")]
    Truncated {
        /// Offset of the opcode being read (the input length when the input
        /// ended between opcodes).
        offset: usize,
        /// The opcode being read (`"opcode"` when the input ended between
        /// opcodes).
        opcode: &'static str,
    },
    /// A byte that is no pickle opcode.
    #[error("unknown pickle opcode 0x{byte:02x} at byte {offset}")]
    UnknownOpcode {
        /// The byte value.
        byte: u8,
        /// Its offset.
        offset: usize,
    },
    /// `GLOBAL`, `STACK_GLOBAL` or `INST`: the pickle would import (and then
    /// usually call) a Python object.
    #[error(
        "pickle references global '{module}.{name}' at byte {offset} ({opcode}): only plain data (dicts, lists, strings, numbers) is accepted"
    )]
    Global {
        /// The module named by the pickle (`?` where it could not be read).
        module: String,
        /// The attribute named by the pickle (`?` where it could not be read).
        name: String,
        /// Offset of the opcode.
        offset: usize,
        /// `GLOBAL`, `STACK_GLOBAL` or `INST`.
        opcode: &'static str,
    },
    /// An opcode that builds or calls objects, or refers to data outside the
    /// pickle (`REDUCE`, `BUILD`, `OBJ`, `NEWOBJ`, `NEWOBJ_EX`, `PERSID`,
    /// `BINPERSID`, `EXT1/2/4`, `NEXT_BUFFER`, `READONLY_BUFFER`).
    #[error(
        "pickle opcode {opcode} at byte {offset} is not plain data (it constructs objects, calls code or refers to outside data): only plain data (dicts, lists, strings, numbers) is accepted"
    )]
    NotPlainData {
        /// The opcode's name.
        opcode: &'static str,
        /// Its offset.
        offset: usize,
    },
    /// `PROTO` names a protocol this reader does not know (above 5).
    #[error("unsupported pickle protocol {protocol} at byte {offset}")]
    UnsupportedProtocol {
        /// The protocol number.
        protocol: u8,
        /// Offset of the `PROTO` opcode.
        offset: usize,
    },
    /// An opcode needed more values on the stack (above the innermost
    /// `MARK`) than there were.
    #[error(
        "pickle stack underflow at byte {offset}: {opcode} needs more values than are on the stack"
    )]
    StackUnderflow {
        /// The opcode's name.
        opcode: &'static str,
        /// Its offset.
        offset: usize,
    },
    /// An opcode that needs a `MARK` (`APPENDS`, `SETITEMS`, `TUPLE`, ...)
    /// found none, or `STOP` left a `MARK` open.
    #[error("pickle MARK mismatch at byte {offset}: {opcode} {problem}")]
    MarkMismatch {
        /// The opcode's name.
        opcode: &'static str,
        /// Its offset.
        offset: usize,
        /// What was wrong.
        problem: &'static str,
    },
    /// `GET`, `BINGET` or `LONG_BINGET` of a memo key that was never set.
    #[error("pickle memo key {key} missing at byte {offset} ({opcode})")]
    MemoKeyMissing {
        /// The memo key.
        key: u64,
        /// The opcode's name.
        opcode: &'static str,
        /// Its offset.
        offset: usize,
    },
    /// An opcode found a value of the wrong type (`APPEND` to something
    /// that is no list, `SETITEMS` on something that is no dict, ...).
    #[error("pickle {opcode} at byte {offset} expects a {expected}, found {found}")]
    WrongType {
        /// The opcode's name.
        opcode: &'static str,
        /// Its offset.
        offset: usize,
        /// The Python type the opcode needs.
        expected: &'static str,
        /// The Python type it found.
        found: &'static str,
    },
    /// A dict key or set element that Python could not hash (a list, dict,
    /// set or bytearray, or a tuple containing one).
    #[error(
        "pickle {opcode} at byte {offset} uses an unhashable {type_name} as a dict key or set element"
    )]
    Unhashable {
        /// The opcode's name.
        opcode: &'static str,
        /// Its offset.
        offset: usize,
        /// Python type name of the key.
        type_name: &'static str,
    },
    /// An opcode argument that is malformed (bad number text, negative
    /// length, bad escape, ...).
    #[error("invalid {opcode} argument at byte {offset}: {reason}")]
    InvalidArgument {
        /// The opcode's name.
        opcode: &'static str,
        /// Its offset.
        offset: usize,
        /// What was wrong.
        reason: String,
    },
    /// The input or the document is larger or deeper than
    /// `ReadOptions` allow.
    #[error("pickle exceeds the {what} limit of {limit}{}", fmt_offset(*.offset))]
    LimitExceeded {
        /// Which limit (`"input size"`, `"nesting depth"`).
        what: &'static str,
        /// The limit in force.
        limit: usize,
        /// Offset where it was noticed, where there is one.
        offset: Option<usize>,
    },
    /// The value returned by `STOP` contains itself (a recursive list or
    /// dict). Python can pickle these; this reader refuses them so that
    /// consumers can walk documents without cycle checks.
    #[error("pickle contains a reference cycle (a container that contains itself)")]
    Cycle,
}

fn fmt_offset(offset: Option<usize>) -> String {
    match offset {
        Some(o) => format!(" at byte {o}"),
        None => String::new(),
    }
}
