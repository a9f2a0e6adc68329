//! Python pickles of plain data: a fast, safe reader and a writer.
//!
//! PyTorch memory snapshots (`torch.cuda.memory._dump_snapshot()`) are
//! `pickle.dump(dict)` of plain data whose stack frames are shared objects
//! through the pickle memo. This module reads such files without executing
//! anything and without copying shared objects, and writes them back.
//!
//! The module is private: the crate root re-exports what other crates use
//! (reading a [`PickleDoc`] into an owned [`Value`], building values and
//! writing them with [`PickleWriter`]); the borrowed readers below serve
//! this crate's snapshot parser.
//!
//! # Reading
//!
//! [`PickleDoc::from_slice`] runs the pickle machine over the bytes
//! (protocols 0 to 5) and returns a [`PickleDoc`]: every container lives
//! once in an arena, so what the pickle shares stays shared (same
//! [`NodeId`]), and memory stays proportional to the input. Values are
//! read through [`ValueRef`] (`as_dict`, `get`, `as_list`, `as_i64`,
//! `as_u64`, `as_f64`, `as_str`, `as_bool`, `is_none`, `type_name`,
//! `view` for `match`), and containers through [`ListRef`], [`DictRef`]
//! and [`SetRef`], which iterate.
//!
//! Opcodes that import, construct or call objects (`GLOBAL`,
//! `STACK_GLOBAL`, `REDUCE`, `BUILD`, `INST`, `OBJ`, `NEWOBJ`, ...) are
//! refused with a [`PickleError`] that names the opcode, its byte offset
//! and, for imports, the `module.name`. No input makes the reader panic,
//! recurse on nesting depth or allocate beyond a constant factor of the
//! input size; see [`ReadOptions`] for the limits.
//!
//! ```
//! use vramlab_traces::{PickleDoc, Value};
//! // pickle.dumps({'device_traces': [[{'action': 'alloc', 'size': 512}]]}, protocol=4)
//! let bytes = b"\x80\x04\x959\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\rdevice_traces\x94]\x94]\x94}\x94(\x8c\x06action\x94\x8c\x05alloc\x94\x8c\x04size\x94M\x00\x02uaas.";
//! let doc = PickleDoc::from_slice(bytes)?;
//! let event = Value::dict([("action", Value::from("alloc")), ("size", Value::from(512))]);
//! let expected = Value::dict([("device_traces", Value::list([Value::list([event])]))]);
//! assert_eq!(doc.root().to_value(), expected);
//! # Ok::<(), vramlab_traces::PickleError>(())
//! ```
//!
//! Where this reader differs from Python's `pickle.loads` (never for
//! files PyTorch writes):
//!
//! * a value that contains itself (a recursive list or dict) is refused
//!   with [`PickleError::Cycle`], so documents can be walked without cycle
//!   checks;
//! * text that is not valid UTF-8 (lone surrogates written with
//!   `surrogatepass`) is decoded with U+FFFD replacements;
//! * Python 2 strings (`STRING`, `BINSTRING`, `SHORT_BINSTRING`) decode as
//!   Latin-1 (`encoding='latin1'`), not as ASCII;
//! * frozensets used as dict keys compare their container elements by
//!   identity;
//! * inputs above 1 GiB are refused ([`MAX_INPUT_LEN`]).
//!
//! # Writing
//!
//! Build an owned [`Value`] tree (with [`Value::dict`], [`Value::list`],
//! [`DictBuilder`], `From` conversions) where shared parts are clones of
//! one `Arc`, and write it with [`PickleWriter`]: protocol 4 with frames,
//! shared containers written once and referenced through the memo, using
//! only opcodes that PyTorch's `MemoryViz.js` reads (for snapshot data).
//! [`ValueRef::to_value`] converts a read document back into a `Value`,
//! keeping the sharing.

mod bigint;
mod doc;
mod error;
mod key_index;
mod keys;
mod opcodes;
mod reader;
mod refs;
mod sink;
mod value;
mod writer;

#[cfg(test)]
mod tests;

pub use bigint::BigInt;
pub use doc::PickleDoc;
pub(crate) use doc::{MAX_INPUT_LEN, NodeId, Slot};
pub use error::PickleError;
pub(crate) use reader::{PickleInput, parse_with_sink};
pub use refs::ValueRef;
pub(crate) use refs::{DictRef, ListRef, View};
pub(crate) use sink::{Claim, Done, ListPlace, ListSink};
pub use value::{DictBuilder, Value};
pub use writer::PickleWriter;
