//! The pickle machine: a loop over opcodes with an explicit value stack,
//! mark stack and memo. It never recurses on the input's nesting and never
//! sizes an allocation from a length prefix before the bytes are there.
//!
//! `Machine::run` reads one opcode at a time and dispatches it to its
//! `load_*` handler (named after the methods of `pickle.py`'s
//! `_Unpickler`); the handlers live with their opcode family:
//!
//! * `input`: the bytes (a slice, or a stream read through a window) and
//!   reading arguments from them (fixed-width, length-prefixed, text
//!   lines);
//! * `stack`: `MARK`, `POP`, `POP_MARK`, `DUP` and the stack and mark
//!   stack themselves;
//! * `memo`: `PUT`, `BINPUT`, `LONG_BINPUT`, `MEMOIZE`, `GET`, `BINGET`,
//!   `LONG_BINGET`;
//! * `numbers`: `None`, bools, ints and floats;
//! * `strings`: `str`, `bytes`, `bytearray` and Python 2 strings (text
//!   escapes in `escapes`);
//! * `containers`: lists, tuples, dicts, sets and frozensets;
//! * `nesting`: container heights and the depth and cycle check on the
//!   returned value;
//! * `refused`: opcodes that import, construct or call objects;
//! * `claims`: lists whose items a [`ListSink`] takes as they are appended;
//! * framing (`PROTO`, `FRAME`, `STOP`): here.

mod claims;
mod containers;
mod escapes;
mod input;
mod memo;
mod nesting;
mod numbers;
mod refused;
mod stack;
mod strings;

pub(crate) use input::PickleInput;

use std::collections::HashMap;

use super::doc::{MAX_INPUT_LEN, PickleDoc, ReadOptions, Slot, slot_type_name};
use super::error::PickleError;
use super::opcodes as op;
use super::sink::ListSink;
use input::Input;
use nesting::Meta;

type Result<T> = std::result::Result<T, PickleError>;

impl PickleDoc {
    /// Reads a pickle with the default `ReadOptions`.
    pub fn from_slice(input: &[u8]) -> Result<PickleDoc> {
        Self::from_slice_with(input, &ReadOptions::default())
    }

    /// Reads a pickle (any protocol 0-5) of plain data: `None`, bools, ints
    /// of any size, floats, str, bytes, bytearray, lists, tuples, dicts,
    /// sets and frozensets. Opcodes that import, construct or call objects
    /// are refused with an error naming them; nothing is executed.
    pub(crate) fn from_slice_with(input: &[u8], opts: &ReadOptions) -> Result<PickleDoc> {
        parse(input, opts, false)
    }
}

/// The reader; `full_check` forces the depth and cycle walk even where the
/// incremental heights suffice (tests compare both).
pub(crate) fn parse(input: &[u8], opts: &ReadOptions, full_check: bool) -> Result<PickleDoc> {
    run_machine(PickleInput::Slice(input), 0, opts, full_check, None)
}

/// Reads a pickle from `input` under `opts` (tests: streams against
/// slices).
#[cfg(test)]
pub(crate) fn parse_input(input: PickleInput<'_>, opts: &ReadOptions) -> Result<PickleDoc> {
    run_machine(input, 0, opts, false, None)
}

/// Reads a pickle like [`PickleDoc::from_slice`], handing the items of the
/// lists `sink` claims to it as they are appended (see [`ListSink`]). An
/// error may come from the sink giving up; the caller then reads the file
/// again without one. The document's claimed lists are empty, and a read
/// of a container the sink let go marks it
/// ([`PickleDoc::retired_touched`]).
///
/// `len_hint` (the input's length where it is known before reading, 0 if
/// not) sizes the document's arenas for a stream.
pub(crate) fn parse_with_sink<'i>(
    input: PickleInput<'i>,
    len_hint: usize,
    sink: &'i mut dyn ListSink,
) -> Result<PickleDoc> {
    run_machine(input, len_hint, &ReadOptions::default(), false, Some(sink))
}

fn run_machine<'i>(
    input: PickleInput<'i>,
    len_hint: usize,
    opts: &ReadOptions,
    full_check: bool,
    sink: Option<&'i mut dyn ListSink>,
) -> Result<PickleDoc> {
    {
        let max_len = opts.max_input_len.min(MAX_INPUT_LEN);
        let len = match &input {
            PickleInput::Slice(s) => s.len(),
            PickleInput::Reader(_) => len_hint.min(max_len),
        };
        let Some(input) = Input::new(input, max_len) else {
            return Err(PickleError::LimitExceeded {
                what: "input size",
                limit: max_len,
                offset: None,
            });
        };
        let mut m = Machine {
            input,
            op: 0,
            op_start: 0,
            doc: PickleDoc::empty(),
            stack: Vec::with_capacity(256),
            marks: Vec::with_capacity(64),
            // Capacity hints from typical snapshot proportions (one memo
            // entry per ~60 input bytes, one container per ~80); they only
            // save regrowth, and stay proportional to the input.
            memo: Vec::with_capacity(len / 32),
            sparse_memo: HashMap::new(),
            memo_count: 0,
            meta: Vec::with_capacity(len / 64),
            full_check,
            sink,
            claimed: Vec::new(),
            done: Vec::new(),
            retired_any: false,
            free_ids: Vec::new(),
        };
        m.doc.nodes.reserve(len / 64);
        m.doc.strings.reserve(len / 16);
        let root = m.run()?;
        if m.retired_any && m.full_check {
            // The walk that the depth and cycle check needs would not see
            // the freed containers.
            return Err(m.gave_up());
        }
        m.check_root(root, opts.max_depth)?;
        let mut doc = m.doc;
        doc.root = root;
        doc.bytes_read = m.input.pos;
        Ok(doc)
    }
}

struct Machine<'i> {
    /// The consumer of claimed lists' items, if any.
    sink: Option<&'i mut dyn ListSink>,
    /// The lists the sink claimed.
    claimed: Vec<u32>,
    /// The containers the sink is done with, for the item being handed
    /// over.
    done: Vec<super::sink::Done>,
    /// Whether any container was freed.
    retired_any: bool,
    /// Ids of freed containers that nothing can reach, for new ones.
    free_ids: Vec<u32>,
    /// The bytes, and the offset of the next one to read.
    input: Input<'i>,
    /// The opcode being executed and where it starts (for errors).
    op: u8,
    op_start: usize,
    doc: PickleDoc,
    stack: Vec<Slot>,
    /// Stack heights at each open MARK.
    marks: Vec<usize>,
    /// Memo keys `0..memo.len()` (the dense, usual case: Python numbers its
    /// memo entries from 0).
    memo: Vec<Option<Slot>>,
    /// Memo keys beyond the dense part.
    sparse_memo: HashMap<u64, Slot>,
    /// Number of distinct memo keys set (the key `MEMOIZE` uses).
    memo_count: u64,
    /// Per node (parallel to `doc.nodes`): nesting height and whether it
    /// is inside another container, for the depth check without a walk.
    meta: Vec<Meta>,
    /// Set when the incremental heights may be stale (a contained node was
    /// changed, a container was put into itself, a dict value replaced):
    /// then the depth and cycle check walks the document instead.
    full_check: bool,
}

impl Machine<'_> {
    // ---- errors ----

    fn name(&self) -> &'static str {
        op::name(self.op)
    }

    fn truncated(&self) -> PickleError {
        if let Some(e) = self.input.limit_error() {
            return e;
        }
        PickleError::Truncated {
            offset: self.op_start,
            opcode: self.name(),
        }
    }

    fn underflow(&self) -> PickleError {
        PickleError::StackUnderflow {
            opcode: self.name(),
            offset: self.op_start,
        }
    }

    fn invalid(&self, reason: impl Into<String>) -> PickleError {
        PickleError::InvalidArgument {
            opcode: self.name(),
            offset: self.op_start,
            reason: reason.into(),
        }
    }

    fn wrong_type(&self, expected: &'static str, found: Slot) -> PickleError {
        PickleError::WrongType {
            opcode: self.name(),
            offset: self.op_start,
            expected,
            found: slot_type_name(&self.doc, found),
        }
    }

    fn unhashable(&self, key: Slot) -> PickleError {
        PickleError::Unhashable {
            opcode: self.name(),
            offset: self.op_start,
            type_name: slot_type_name(&self.doc, key),
        }
    }

    // ---- the loop ----

    /// Runs the opcodes up to `STOP` and returns the value it pops. The
    /// `load_*` handlers are `#[inline(always)]`: this is the hot loop of
    /// reading a snapshot, and it compiles to one `match` over the opcode
    /// byte with each handler's code in its arm.
    fn run(&mut self) -> Result<Slot> {
        loop {
            self.op_start = self.input.pos;
            let Some(code) = self.input.u8() else {
                if let Some(e) = self.input.limit_error() {
                    return Err(e);
                }
                return Err(PickleError::Truncated {
                    offset: self.input.len_at_end(),
                    opcode: "next opcode (no STOP)",
                });
            };
            self.op = code;
            match code {
                // Memo (memo.rs); references dominate PyTorch snapshots.
                op::LONG_BINGET => self.load_long_binget()?,
                op::BINGET => self.load_binget()?,
                op::GET => self.load_get()?,
                op::MEMOIZE => self.load_memoize()?,
                op::BINPUT => self.load_binput()?,
                op::LONG_BINPUT => self.load_long_binput()?,
                op::PUT => self.load_put()?,
                // None, bools, ints and floats (numbers.rs).
                op::BININT1 => self.load_binint1()?,
                op::BININT2 => self.load_binint2()?,
                op::BININT => self.load_binint()?,
                op::LONG1 => self.load_long1()?,
                op::LONG4 => self.load_long4()?,
                op::NONE => self.push(Slot::None),
                op::NEWTRUE => self.push(Slot::Bool(true)),
                op::NEWFALSE => self.push(Slot::Bool(false)),
                op::BINFLOAT => self.load_binfloat()?,
                op::FLOAT => self.load_float()?,
                op::INT => self.load_int()?,
                op::LONG => self.load_long()?,
                // Text and bytes (strings.rs).
                op::SHORT_BINUNICODE => self.load_short_binunicode()?,
                op::BINUNICODE => self.load_binunicode()?,
                op::BINUNICODE8 => self.load_binunicode8()?,
                op::SHORT_BINBYTES => self.load_short_binbytes()?,
                op::BINBYTES => self.load_binbytes()?,
                op::BINBYTES8 => self.load_binbytes8()?,
                op::BYTEARRAY8 => self.load_bytearray8()?,
                op::SHORT_BINSTRING => self.load_short_binstring()?,
                op::BINSTRING => self.load_binstring()?,
                op::STRING => self.load_string()?,
                op::UNICODE => self.load_unicode()?,
                // Stack and marks (stack.rs).
                op::MARK => self.load_mark(),
                op::POP => self.load_pop()?,
                op::POP_MARK => self.load_pop_mark()?,
                op::DUP => self.load_dup()?,
                // Containers (containers.rs).
                op::EMPTY_DICT => self.load_empty_dict(),
                op::EMPTY_LIST => self.load_empty_list(),
                op::EMPTY_TUPLE => self.load_empty_tuple(),
                op::EMPTY_SET => self.load_empty_set(),
                op::SETITEMS => self.load_setitems()?,
                op::SETITEM => self.load_setitem()?,
                op::DICT => self.load_dict()?,
                op::APPENDS => self.load_appends()?,
                op::APPEND => self.load_append()?,
                op::LIST => self.load_list()?,
                op::TUPLE => self.load_tuple()?,
                op::TUPLE1 | op::TUPLE2 | op::TUPLE3 => self.load_tuple_n(code)?,
                op::ADDITEMS => self.load_additems()?,
                op::FROZENSET => self.load_frozenset()?,
                // Framing.
                op::PROTO => self.load_proto()?,
                op::FRAME => self.load_frame()?,
                op::STOP => return self.pop(),
                // Refused (refused.rs).
                op::GLOBAL | op::INST => return Err(self.refuse_global()),
                op::STACK_GLOBAL => return Err(self.refuse_stack_global()),
                op::REDUCE
                | op::BUILD
                | op::OBJ
                | op::NEWOBJ
                | op::NEWOBJ_EX
                | op::PERSID
                | op::BINPERSID
                | op::EXT1
                | op::EXT2
                | op::EXT4
                | op::NEXT_BUFFER
                | op::READONLY_BUFFER => return Err(self.refuse_not_plain_data()),
                byte => {
                    return Err(PickleError::UnknownOpcode {
                        byte,
                        offset: self.op_start,
                    });
                }
            }
        }
    }

    // ---- framing ----

    #[inline(always)]
    fn load_proto(&mut self) -> Result<()> {
        let p = self.u8()?;
        if p > 5 {
            return Err(PickleError::UnsupportedProtocol {
                protocol: p,
                offset: self.op_start,
            });
        }
        self.doc.protocol = Some(p);
        Ok(())
    }

    #[inline(always)]
    fn load_frame(&mut self) -> Result<()> {
        // The announced bytes must be there; a stream reads them into its
        // window here, so that the opcodes inside the frame need no read.
        let n = self.u64_len()?;
        if !self.input.ensure(n) {
            return Err(self.truncated());
        }
        Ok(())
    }
}
