//! The pickle machine: a loop over opcodes with an explicit value stack,
//! mark stack and memo. It never recurses on the input's nesting and never
//! sizes an allocation from a length prefix before the bytes are there.

use std::collections::HashMap;

use super::bigint::BigInt;
use super::doc::{
    DictNode, MAX_INPUT_LEN, Node, PickleDoc, ReadOptions, SetNode, Slot, Span, TupleNode, int_slot,
};
use super::error::PickleError;
use super::keys::{INDEX_THRESHOLD, KeyIndex, Keys};
use super::opcodes as op;

/// Python's default limit on digits in `int(text)`
/// (`sys.int_info.default_max_str_digits`).
const MAX_INT_DIGITS: usize = 4300;

type Result<T> = std::result::Result<T, PickleError>;

impl PickleDoc {
    /// Reads a pickle with the default [`ReadOptions`].
    pub fn from_slice(input: &[u8]) -> Result<PickleDoc> {
        Self::from_slice_with(input, &ReadOptions::default())
    }

    /// Reads a pickle (any protocol 0-5) of plain data: `None`, bools, ints
    /// of any size, floats, str, bytes, bytearray, lists, tuples, dicts,
    /// sets and frozensets. Opcodes that import, construct or call objects
    /// are refused with an error naming them; nothing is executed.
    pub fn from_slice_with(input: &[u8], opts: &ReadOptions) -> Result<PickleDoc> {
        parse(input, opts, false)
    }
}

/// The reader; `full_check` forces the depth and cycle walk even where the
/// incremental heights suffice (tests compare both).
pub(crate) fn parse(input: &[u8], opts: &ReadOptions, full_check: bool) -> Result<PickleDoc> {
    {
        let max_len = opts.max_input_len.min(MAX_INPUT_LEN);
        if input.len() > max_len {
            return Err(PickleError::LimitExceeded {
                what: "input size",
                limit: max_len,
                offset: None,
            });
        }
        let mut m = Machine {
            input,
            pos: 0,
            op: 0,
            op_start: 0,
            doc: PickleDoc::empty(),
            stack: Vec::with_capacity(256),
            marks: Vec::with_capacity(64),
            // Capacity hints from typical snapshot proportions (one memo
            // entry per ~60 input bytes, one container per ~80); they only
            // save regrowth, and stay proportional to the input.
            memo: Vec::with_capacity(input.len() / 32),
            sparse_memo: HashMap::new(),
            memo_count: 0,
            meta: Vec::with_capacity(input.len() / 64),
            full_check,
        };
        m.doc.nodes.reserve(input.len() / 64);
        m.doc.strings.reserve(input.len() / 16);
        let root = m.run()?;
        m.check_root(root, opts.max_depth)?;
        let mut doc = m.doc;
        doc.root = root;
        doc.bytes_read = m.pos;
        Ok(doc)
    }
}

struct Machine<'i> {
    input: &'i [u8],
    /// Next byte to read.
    pos: usize,
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

/// Height (a container of scalars has 1) and containment of one node.
#[derive(Clone, Copy)]
struct Meta {
    height: u32,
    contained: bool,
}

/// Marks the node `children` as contained in `parent` and raises
/// `parent`'s height over theirs. Returns false when `parent` is among the
/// children (a self-reference).
fn adopt(meta: &mut [Meta], parent: u32, children: &[Slot]) -> bool {
    let mut tallest = 0;
    for &c in children {
        if let Slot::Node(id) = c {
            if id == parent {
                return false;
            }
            if let Some(m) = meta.get_mut(id as usize) {
                m.contained = true;
                tallest = tallest.max(m.height);
            }
        }
    }
    if let Some(m) = meta.get_mut(parent as usize) {
        m.height = m.height.max(tallest.saturating_add(1));
    }
    true
}

impl<'i> Machine<'i> {
    fn name(&self) -> &'static str {
        op::name(self.op)
    }

    fn truncated(&self) -> PickleError {
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
            found: super::doc::slot_type_name(&self.doc, found),
        }
    }

    fn unhashable(&self, key: Slot) -> PickleError {
        PickleError::Unhashable {
            opcode: self.name(),
            offset: self.op_start,
            type_name: super::doc::slot_type_name(&self.doc, key),
        }
    }

    // ---- input ----

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'i [u8]> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.truncated())?;
        let s = self
            .input
            .get(self.pos..end)
            .ok_or_else(|| self.truncated())?;
        self.pos = end;
        Ok(s)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        <[u8; N]>::try_from(s).map_err(|_| self.truncated())
    }

    #[inline]
    fn u8(&mut self) -> Result<u8> {
        let b = *self.input.get(self.pos).ok_or_else(|| self.truncated())?;
        self.pos += 1;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A length prefix that must be non-negative (Python reads these
    /// `BINSTRING`/`LONG4` lengths as signed).
    fn i32_len(&mut self) -> Result<usize> {
        let n = i32::from_le_bytes(self.array()?);
        usize::try_from(n).map_err(|_| self.invalid(format!("negative byte count {n}")))
    }

    fn u64_len(&mut self) -> Result<usize> {
        let n = u64::from_le_bytes(self.array()?);
        // A length beyond usize cannot be satisfied by the input anyway.
        usize::try_from(n).map_err(|_| self.truncated())
    }

    /// Text up to (not including) the next `\n`, which is consumed.
    fn line(&mut self) -> Result<&'i [u8]> {
        let rest = self.input.get(self.pos..).unwrap_or(&[]);
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| self.truncated())?;
        let line = self.take(n)?;
        self.pos += 1; // the `\n`
        Ok(line)
    }

    fn line_str(&mut self) -> Result<&'i str> {
        let line = self.line()?;
        std::str::from_utf8(line).map_err(|_| self.invalid("text line is not ASCII"))
    }

    /// A memo key written as decimal text (`PUT`, `GET`).
    fn line_key(&mut self) -> Result<u64> {
        let text = self.line_str()?;
        text.trim()
            .parse::<u64>()
            .map_err(|_| self.invalid(format!("memo key {text:?} is not a non-negative integer")))
    }

    // ---- arenas ----

    fn str_span(&mut self, s: &str) -> Slot {
        let start = self.doc.strings.len();
        self.doc.strings.push_str(s);
        // Arena < 4 GiB: input <= 1 GiB and decoding at most triples it.
        Slot::Str(Span {
            start: start as u32,
            len: s.len() as u32,
        })
    }

    /// UTF-8 text (Python writes lone surrogates with `surrogatepass`; those
    /// and any other invalid sequences become U+FFFD).
    #[inline]
    fn push_utf8(&mut self, b: &[u8]) -> Slot {
        match std::str::from_utf8(b) {
            Ok(s) => self.str_span(s),
            Err(_) => {
                let s = String::from_utf8_lossy(b);
                self.str_span(&s)
            }
        }
    }

    /// Python 2 `str` bytes (`STRING`, `BINSTRING`), decoded as Latin-1
    /// (lossless; equal to ASCII for ASCII text).
    fn push_latin1(&mut self, b: &[u8]) -> Slot {
        if b.is_ascii() {
            // ASCII is valid UTF-8.
            return self.push_utf8(b);
        }
        let s: String = b.iter().map(|&c| char::from(c)).collect();
        self.str_span(&s)
    }

    fn push_bytes(&mut self, b: &[u8]) -> Span {
        let start = self.doc.bytes.len();
        self.doc.bytes.extend_from_slice(b);
        Span {
            start: start as u32, // arena < 4 GiB, see str_span
            len: b.len() as u32,
        }
    }

    fn new_node(&mut self, node: Node) -> Slot {
        let id = self.doc.nodes.len() as u32; // < input length <= 1 GiB
        self.doc.nodes.push(node);
        self.meta.push(Meta {
            height: 1,
            contained: false,
        });
        Slot::Node(id)
    }

    /// Before changing container `id`: a contained one makes the cached
    /// heights of its ancestors stale.
    #[inline]
    fn before_change(&mut self, id: u32) {
        if self.meta.get(id as usize).is_none_or(|m| m.contained) {
            self.full_check = true;
        }
    }

    /// After putting `children` into container `id`.
    #[inline]
    fn adopted(&mut self, id: u32, children_from: usize, children_to: usize) {
        let children = self.stack.get(children_from..children_to).unwrap_or(&[]);
        if !adopt(&mut self.meta, id, children) {
            self.full_check = true;
        }
    }

    fn adopt_items(&mut self, id: u32, items: &[Slot]) {
        if !adopt(&mut self.meta, id, items) {
            self.full_check = true;
        }
    }

    /// Refuses cycles and nesting deeper than `max_depth` in the value
    /// returned by STOP.
    fn check_root(&self, root: Slot, max_depth: usize) -> Result<()> {
        if self.full_check {
            return check_tree(&self.doc, root, max_depth);
        }
        let height = match root {
            Slot::Node(id) => self.meta.get(id as usize).map_or(0, |m| m.height),
            _ => 0,
        };
        if height as usize > max_depth {
            return Err(PickleError::LimitExceeded {
                what: "nesting depth",
                limit: max_depth,
                offset: None,
            });
        }
        Ok(())
    }

    // ---- stack ----

    #[inline]
    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    #[inline]
    fn push(&mut self, v: Slot) {
        self.stack.push(v);
    }

    #[inline]
    fn pop(&mut self) -> Result<Slot> {
        if self.stack.len() > self.floor() {
            self.stack.pop().ok_or_else(|| self.underflow())
        } else {
            Err(self.underflow())
        }
    }

    #[inline]
    fn top(&self) -> Result<Slot> {
        if self.stack.len() > self.floor() {
            self.stack.last().copied().ok_or_else(|| self.underflow())
        } else {
            Err(self.underflow())
        }
    }

    /// Pops the innermost MARK; the values above it are `stack[mark..]`.
    #[inline]
    fn pop_mark(&mut self) -> Result<usize> {
        self.marks.pop().ok_or(PickleError::MarkMismatch {
            opcode: op::name(self.op),
            offset: self.op_start,
            problem: "without a preceding MARK",
        })
    }

    /// After `pop_mark`: the container just below the marked values, which
    /// must itself be above the enclosing MARK.
    fn target_below(&self, mark: usize) -> Result<(usize, Slot)> {
        if mark > self.floor() {
            let i = mark - 1;
            let slot = *self.stack.get(i).ok_or_else(|| self.underflow())?;
            Ok((i, slot))
        } else {
            Err(self.underflow())
        }
    }

    // ---- memo ----

    fn memo_put(&mut self, key: u64) -> Result<()> {
        let v = self.top()?;
        let dense = self.memo.len() as u64;
        if let Some(cell) = usize::try_from(key).ok().and_then(|k| self.memo.get_mut(k)) {
            if cell.is_none() {
                self.memo_count += 1;
            }
            *cell = Some(v);
        } else if key == dense {
            self.memo.push(Some(v));
            if self.sparse_memo.is_empty() || self.sparse_memo.remove(&key).is_none() {
                self.memo_count += 1;
            }
            // Pull in sparse keys that the dense part now reaches.
            while !self.sparse_memo.is_empty() {
                let next = self.memo.len() as u64;
                match self.sparse_memo.remove(&next) {
                    Some(s) => self.memo.push(Some(s)),
                    None => break,
                }
            }
        } else if self.sparse_memo.insert(key, v).is_none() {
            self.memo_count += 1;
        }
        Ok(())
    }

    #[inline(always)]
    fn memo_get(&mut self, key: u64) -> Result<()> {
        let found = match usize::try_from(key).ok().and_then(|k| self.memo.get(k)) {
            Some(&dense) => dense,
            None => self.sparse_memo.get(&key).copied(),
        };
        match found {
            Some(v) => {
                self.push(v);
                Ok(())
            }
            None => Err(PickleError::MemoKeyMissing {
                key,
                opcode: self.name(),
                offset: self.op_start,
            }),
        }
    }

    // ---- containers ----

    fn new_tuple(&mut self, items: Vec<Slot>) -> Slot {
        let hashable = items.iter().all(|&s| self.doc.is_hashable(s));
        let id = self.doc.nodes.len() as u32;
        self.meta.push(Meta {
            height: 1,
            contained: false,
        });
        self.adopt_items(id, &items);
        self.doc.nodes.push(Node::Tuple(TupleNode {
            items,
            hashable,
            hash: std::cell::Cell::new(None),
        }));
        Slot::Node(id)
    }

    /// `dict[key] = value` (Python semantics: an existing key keeps its
    /// position and gets the new value).
    fn dict_set(&mut self, id: u32, key: Slot, value: Slot) -> Result<()> {
        if !self.doc.is_hashable(key) {
            return Err(self.unhashable(key));
        }
        let doc = &self.doc;
        let Some(Node::Dict(d)) = doc.nodes.get(id as usize) else {
            return Err(self.underflow());
        };
        let (found, h, new_index) = locate(doc, Keys::of_dict(&d.entries), d.index.as_deref(), key);
        let Some(Node::Dict(d)) = self.doc.nodes.get_mut(id as usize) else {
            return Err(self.underflow());
        };
        match found {
            Some(i) => {
                if let Some(e) = d.entries.get_mut(i) {
                    e[1] = value;
                }
                // The old value's height no longer counts.
                self.full_check = true;
            }
            None => {
                d.entries.push([key, value]);
                if let Some(ix) = new_index {
                    d.index = Some(ix);
                } else if let (Some(ix), Some(h)) = (d.index.as_deref_mut(), h) {
                    ix.insert(d.entries.len() - 1, h);
                }
            }
        }
        Ok(())
    }

    fn set_add(&mut self, id: u32, item: Slot) -> Result<()> {
        if !self.doc.is_hashable(item) {
            return Err(self.unhashable(item));
        }
        let doc = &self.doc;
        let (Some(Node::Set(s)) | Some(Node::FrozenSet(s))) = doc.nodes.get(id as usize) else {
            return Err(self.underflow());
        };
        let (found, h, new_index) = locate(doc, Keys::of_set(&s.items), s.index.as_deref(), item);
        let (Some(Node::Set(s)) | Some(Node::FrozenSet(s))) = self.doc.nodes.get_mut(id as usize)
        else {
            return Err(self.underflow());
        };
        if found.is_none() {
            s.items.push(item);
            if let Some(ix) = new_index {
                s.index = Some(ix);
            } else if let (Some(ix), Some(h)) = (s.index.as_deref_mut(), h) {
                ix.insert(s.items.len() - 1, h);
            }
        }
        Ok(())
    }

    /// Sets `dict[k] = v` for the pairs `stack[mark..]`, then drops them.
    fn set_items(&mut self, id: u32, mark: usize) -> Result<()> {
        let n = self.stack.len().saturating_sub(mark);
        if n % 2 != 0 {
            return Err(self.invalid("odd number of values for dict keys and values"));
        }
        self.before_change(id);
        self.adopted(id, mark, self.stack.len());
        if let Some(Node::Dict(d)) = self.doc.nodes.get_mut(id as usize) {
            d.entries.reserve(n / 2);
        }
        let mut i = mark;
        while let (Some(&k), Some(&v)) = (self.stack.get(i), self.stack.get(i + 1)) {
            self.dict_set(id, k, v)?;
            i += 2;
        }
        self.stack.truncate(mark);
        Ok(())
    }

    // ---- the loop ----

    fn run(&mut self) -> Result<Slot> {
        loop {
            self.op_start = self.pos;
            let Some(&code) = self.input.get(self.pos) else {
                return Err(PickleError::Truncated {
                    offset: self.input.len(),
                    opcode: "next opcode (no STOP)",
                });
            };
            self.op = code;
            self.pos += 1;
            match code {
                // Hottest first (memo references dominate PyTorch snapshots).
                op::LONG_BINGET => {
                    let k = self.u32()?;
                    self.memo_get(u64::from(k))?;
                }
                op::BINGET => {
                    let k = self.u8()?;
                    self.memo_get(u64::from(k))?;
                }
                op::MEMOIZE => {
                    let k = self.memo_count;
                    self.memo_put(k)?;
                }
                op::BININT1 => {
                    let v = self.u8()?;
                    self.push(Slot::Int(i64::from(v)));
                }
                op::BININT2 => {
                    let v = u16::from_le_bytes(self.array()?);
                    self.push(Slot::Int(i64::from(v)));
                }
                op::BININT => {
                    let v = i32::from_le_bytes(self.array()?);
                    self.push(Slot::Int(i64::from(v)));
                }
                op::LONG1 => {
                    let n = usize::from(self.u8()?);
                    let b = self.take(n)?;
                    let s = int_slot(&mut self.doc, b);
                    self.push(s);
                }
                op::LONG4 => {
                    let n = self.i32_len()?;
                    let b = self.take(n)?;
                    let s = int_slot(&mut self.doc, b);
                    self.push(s);
                }
                op::SHORT_BINUNICODE => {
                    let n = usize::from(self.u8()?);
                    let b = self.take(n)?;
                    let s = self.push_utf8(b);
                    self.push(s);
                }
                op::BINUNICODE => {
                    let n = self.u32()? as usize;
                    let b = self.take(n)?;
                    let s = self.push_utf8(b);
                    self.push(s);
                }
                op::BINUNICODE8 => {
                    let n = self.u64_len()?;
                    let b = self.take(n)?;
                    let s = self.push_utf8(b);
                    self.push(s);
                }
                op::MARK => self.marks.push(self.stack.len()),
                op::EMPTY_DICT => {
                    let s = self.new_node(Node::Dict(DictNode::default()));
                    self.push(s);
                }
                op::EMPTY_LIST => {
                    let s = self.new_node(Node::List(Vec::new()));
                    self.push(s);
                }
                op::EMPTY_TUPLE => {
                    let s = self.new_tuple(Vec::new());
                    self.push(s);
                }
                op::EMPTY_SET => {
                    let s = self.new_node(Node::Set(SetNode::default()));
                    self.push(s);
                }
                op::SETITEMS => {
                    let mark = self.pop_mark()?;
                    let (_, target) = self.target_below(mark)?;
                    match target {
                        Slot::Node(id) if matches!(self.doc.node(id), Some(Node::Dict(_))) => {
                            self.set_items(id, mark)?;
                        }
                        other => return Err(self.wrong_type("dict", other)),
                    }
                }
                op::SETITEM => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    match self.top()? {
                        Slot::Node(id) if matches!(self.doc.node(id), Some(Node::Dict(_))) => {
                            self.before_change(id);
                            self.adopt_items(id, &[k, v]);
                            self.dict_set(id, k, v)?;
                        }
                        other => return Err(self.wrong_type("dict", other)),
                    }
                }
                op::DICT => {
                    let mark = self.pop_mark()?;
                    let s = self.new_node(Node::Dict(DictNode::default()));
                    let Slot::Node(id) = s else {
                        return Err(self.underflow());
                    };
                    self.set_items(id, mark)?;
                    self.push(s);
                }
                op::APPENDS => {
                    let mark = self.pop_mark()?;
                    let (_, target) = self.target_below(mark)?;
                    if let Slot::Node(id) = target {
                        self.before_change(id);
                        self.adopted(id, mark, self.stack.len());
                    }
                    let list = match target {
                        Slot::Node(id) => match self.doc.nodes.get_mut(id as usize) {
                            Some(Node::List(l)) => Some(l),
                            _ => None,
                        },
                        _ => None,
                    };
                    let Some(list) = list else {
                        return Err(self.wrong_type("list", target));
                    };
                    // mark <= stack.len() always holds (marks record heights
                    // and the stack never shrinks below an open mark); `get`
                    // keeps a broken invariant from panicking.
                    list.extend_from_slice(self.stack.get(mark..).unwrap_or(&[]));
                    self.stack.truncate(mark);
                }
                op::APPEND => {
                    let v = self.pop()?;
                    let target = self.top()?;
                    if let Slot::Node(id) = target {
                        self.before_change(id);
                        self.adopt_items(id, &[v]);
                    }
                    match target {
                        Slot::Node(id) => match self.doc.nodes.get_mut(id as usize) {
                            Some(Node::List(l)) => l.push(v),
                            _ => return Err(self.wrong_type("list", target)),
                        },
                        _ => return Err(self.wrong_type("list", target)),
                    }
                }
                op::LIST => {
                    let mark = self.pop_mark()?;
                    let items = self.stack.split_off(mark.min(self.stack.len()));
                    let id = self.doc.nodes.len() as u32;
                    let s = self.new_node(Node::List(Vec::new()));
                    self.adopt_items(id, &items);
                    if let Some(Node::List(l)) = self.doc.nodes.get_mut(id as usize) {
                        *l = items;
                    }
                    self.push(s);
                }
                op::TUPLE => {
                    let mark = self.pop_mark()?;
                    let items = self.stack.split_off(mark.min(self.stack.len()));
                    let s = self.new_tuple(items);
                    self.push(s);
                }
                op::TUPLE1 | op::TUPLE2 | op::TUPLE3 => {
                    let n = usize::from(code - op::TUPLE1) + 1;
                    if self.stack.len() < self.floor() + n {
                        return Err(self.underflow());
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    let s = self.new_tuple(items);
                    self.push(s);
                }
                op::ADDITEMS => {
                    let mark = self.pop_mark()?;
                    let (_, target) = self.target_below(mark)?;
                    let id = match target {
                        Slot::Node(id) if matches!(self.doc.node(id), Some(Node::Set(_))) => id,
                        other => return Err(self.wrong_type("set", other)),
                    };
                    self.before_change(id);
                    self.adopted(id, mark, self.stack.len());
                    let mut i = mark;
                    while let Some(&item) = self.stack.get(i) {
                        self.set_add(id, item)?;
                        i += 1;
                    }
                    self.stack.truncate(mark);
                }
                op::FROZENSET => {
                    let mark = self.pop_mark()?;
                    let s = self.new_node(Node::FrozenSet(SetNode::default()));
                    let Slot::Node(id) = s else {
                        return Err(self.underflow());
                    };
                    self.adopted(id, mark, self.stack.len());
                    let mut i = mark;
                    while let Some(&item) = self.stack.get(i) {
                        self.set_add(id, item)?;
                        i += 1;
                    }
                    self.stack.truncate(mark);
                    let hash = match self.doc.node(id) {
                        Some(Node::FrozenSet(fs)) => self.doc.frozenset_hash(&fs.items),
                        _ => 0,
                    };
                    if let Some(Node::FrozenSet(fs)) = self.doc.nodes.get_mut(id as usize) {
                        fs.hash = hash;
                    }
                    self.push(s);
                }
                op::BINPUT => {
                    let k = self.u8()?;
                    self.memo_put(u64::from(k))?;
                }
                op::LONG_BINPUT => {
                    let k = self.u32()?;
                    self.memo_put(u64::from(k))?;
                }
                op::PUT => {
                    let k = self.line_key()?;
                    self.memo_put(k)?;
                }
                op::GET => {
                    let k = self.line_key()?;
                    self.memo_get(k)?;
                }
                op::NONE => self.push(Slot::None),
                op::NEWTRUE => self.push(Slot::Bool(true)),
                op::NEWFALSE => self.push(Slot::Bool(false)),
                op::BINFLOAT => {
                    let v = f64::from_be_bytes(self.array()?);
                    self.push(Slot::Float(v));
                }
                op::FLOAT => {
                    let text = self.line_str()?;
                    let v = parse_float(text)
                        .ok_or_else(|| self.invalid(format!("{text:?} is not a float")))?;
                    self.push(Slot::Float(v));
                }
                op::INT => {
                    let text = self.line_str()?;
                    let s = match text {
                        "00" => Slot::Bool(false),
                        "01" => Slot::Bool(true),
                        _ => self.int_text(text)?,
                    };
                    self.push(s);
                }
                op::LONG => {
                    let text = self.line_str()?;
                    let text = text.strip_suffix('L').unwrap_or(text);
                    let s = self.int_text(text)?;
                    self.push(s);
                }
                op::SHORT_BINBYTES => {
                    let n = usize::from(self.u8()?);
                    let b = self.take(n)?;
                    let sp = self.push_bytes(b);
                    self.push(Slot::Bytes(sp));
                }
                op::BINBYTES => {
                    let n = self.u32()? as usize;
                    let b = self.take(n)?;
                    let sp = self.push_bytes(b);
                    self.push(Slot::Bytes(sp));
                }
                op::BINBYTES8 => {
                    let n = self.u64_len()?;
                    let b = self.take(n)?;
                    let sp = self.push_bytes(b);
                    self.push(Slot::Bytes(sp));
                }
                op::BYTEARRAY8 => {
                    let n = self.u64_len()?;
                    let b = self.take(n)?;
                    let sp = self.push_bytes(b);
                    let s = self.new_node(Node::ByteArray(sp));
                    self.push(s);
                }
                op::SHORT_BINSTRING => {
                    let n = usize::from(self.u8()?);
                    let b = self.take(n)?;
                    let s = self.push_latin1(b);
                    self.push(s);
                }
                op::BINSTRING => {
                    let n = self.i32_len()?;
                    let b = self.take(n)?;
                    let s = self.push_latin1(b);
                    self.push(s);
                }
                op::STRING => {
                    let line = self.line()?;
                    let inner = match line {
                        [q @ (b'\'' | b'"'), inner @ .., last] if last == q => inner,
                        _ => return Err(self.invalid("the STRING opcode argument must be quoted")),
                    };
                    let bytes = escape_decode(inner).map_err(|e| self.invalid(e))?;
                    let s = self.push_latin1(&bytes);
                    self.push(s);
                }
                op::UNICODE => {
                    let line = self.line()?;
                    let text = raw_unicode_escape_decode(line).map_err(|e| self.invalid(e))?;
                    let s = self.str_span(&text);
                    self.push(s);
                }
                op::POP => {
                    if self.stack.len() > self.floor() {
                        self.stack.pop();
                    } else if self.marks.pop().is_none() {
                        // Python's POP discards the innermost MARK when
                        // nothing is above it.
                        return Err(self.underflow());
                    }
                }
                op::POP_MARK => {
                    let mark = self.pop_mark()?;
                    self.stack.truncate(mark);
                }
                op::DUP => {
                    let v = self.top()?;
                    self.push(v);
                }
                op::PROTO => {
                    let p = self.u8()?;
                    if p > 5 {
                        return Err(PickleError::UnsupportedProtocol {
                            protocol: p,
                            offset: self.op_start,
                        });
                    }
                    self.doc.protocol = Some(p);
                }
                op::FRAME => {
                    // Frames only help streaming readers; check that the
                    // announced bytes are there and read on.
                    let n = self.u64_len()?;
                    let end = self.pos.checked_add(n);
                    if end.is_none_or(|e| e > self.input.len()) {
                        return Err(self.truncated());
                    }
                }
                op::STOP => {
                    let v = self.pop()?;
                    return Ok(v);
                }
                op::GLOBAL | op::INST => {
                    // Best effort at naming what would be imported.
                    let module = self.line().map(lossy).unwrap_or_else(|_| "?".into());
                    let name = self.line().map(lossy).unwrap_or_else(|_| "?".into());
                    return Err(PickleError::Global {
                        module,
                        name,
                        offset: self.op_start,
                        opcode: self.name(),
                    });
                }
                op::STACK_GLOBAL => {
                    let n = self.stack.len();
                    let text = |i: Option<usize>| {
                        i.and_then(|i| self.stack.get(i))
                            .and_then(|&s| match s {
                                Slot::Str(sp) => Some(self.doc.str_of(sp).to_owned()),
                                _ => None,
                            })
                            .unwrap_or_else(|| "?".into())
                    };
                    return Err(PickleError::Global {
                        module: text(n.checked_sub(2)),
                        name: text(n.checked_sub(1)),
                        offset: self.op_start,
                        opcode: self.name(),
                    });
                }
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
                | op::READONLY_BUFFER => {
                    return Err(PickleError::NotPlainData {
                        opcode: self.name(),
                        offset: self.op_start,
                    });
                }
                byte => {
                    return Err(PickleError::UnknownOpcode {
                        byte,
                        offset: self.op_start,
                    });
                }
            }
        }
    }

    /// An `int` from text: a plain int when it fits `i64`, else a big int.
    fn int_text(&mut self, text: &str) -> Result<Slot> {
        if let Ok(v) = text.trim().parse::<i64>() {
            return Ok(Slot::Int(v));
        }
        let b = BigInt::parse_text(text, MAX_INT_DIGITS).map_err(|e| self.invalid(e))?;
        Ok(int_slot(&mut self.doc, b.as_signed_le_bytes()))
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Finds `key` among `keys`; when a hash index is (or is about to be)
/// needed, also returns the key's hash and, if the container outgrows the
/// linear search with this insertion, a freshly built index.
fn locate(
    doc: &PickleDoc,
    keys: Keys<'_>,
    index: Option<&KeyIndex>,
    key: Slot,
) -> (Option<usize>, Option<u64>, Option<Box<KeyIndex>>) {
    let grows_index = index.is_none() && keys.len() >= INDEX_THRESHOLD;
    let h = (index.is_some() || grows_index).then(|| doc.key_hash(key));
    let found = doc.find_key(keys, index, key, h);
    let new_index = match (found, grows_index, h) {
        (None, true, Some(h)) => {
            let mut ix = KeyIndex::default();
            for (i, k) in keys.iter().enumerate() {
                ix.insert(i, doc.key_hash(k));
            }
            ix.insert(keys.len(), h);
            Some(Box::new(ix))
        }
        _ => None,
    };
    (found, h, new_index)
}

/// Python's `float(text)` for the forms `repr` produces.
fn parse_float(text: &str) -> Option<f64> {
    let t = text.trim();
    if t.contains('_') {
        // Python allows digit separators; Rust's parser does not.
        let cleaned: String = t.chars().filter(|&c| c != '_').collect();
        return cleaned.parse().ok();
    }
    t.parse().ok()
}

/// `codecs.escape_decode`: Python 2 string-literal escapes.
fn escape_decode(s: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while let Some(&c) = s.get(i) {
        i += 1;
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let Some(&e) = s.get(i) else {
            return Err("trailing \\ in string".into());
        };
        i += 1;
        match e {
            b'\n' => {}
            b'\\' => out.push(b'\\'),
            b'\'' => out.push(b'\''),
            b'"' => out.push(b'"'),
            b'a' => out.push(7),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                for _ in 0..2 {
                    match s.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push((v & 0xff) as u8); // Python keeps the low byte
            }
            b'x' => {
                let hex = s
                    .get(i..i + 2)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("invalid \\x escape at position {}", i - 2))?;
                out.push(hex);
                i += 2;
            }
            other => {
                out.push(b'\\');
                out.push(other);
            }
        }
    }
    Ok(out)
}

/// `raw-unicode-escape` decoding: Latin-1 bytes, except `\uXXXX` and
/// `\UXXXXXXXX` after an odd number of backslashes. Surrogate code points
/// become U+FFFD.
fn raw_unicode_escape_decode(s: &[u8]) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while let Some(&c) = s.get(i) {
        if c != b'\\' {
            out.push(char::from(c));
            i += 1;
            continue;
        }
        // Count the run of backslashes.
        let run_start = i;
        while s.get(i) == Some(&b'\\') {
            i += 1;
        }
        let run = i - run_start;
        let digits = match s.get(i) {
            Some(b'u') if run % 2 == 1 => 4,
            Some(b'U') if run % 2 == 1 => 8,
            _ => {
                out.extend(std::iter::repeat_n('\\', run));
                continue;
            }
        };
        out.extend(std::iter::repeat_n('\\', run - 1));
        i += 1;
        let hex = s
            .get(i..i + digits)
            .and_then(|h| std::str::from_utf8(h).ok())
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| {
                format!(
                    "truncated \\{} escape",
                    if digits == 4 { "uXXXX" } else { "UXXXXXXXX" }
                )
            })?;
        if hex > 0x10ffff {
            return Err("\\Uxxxxxxxx out of range".into());
        }
        out.push(char::from_u32(hex).unwrap_or('\u{fffd}'));
        i += digits;
    }
    Ok(out)
}

/// Walks the value returned by `STOP` once (shared containers once),
/// without recursion: refuses cycles and nesting deeper than `max_depth`.
fn check_tree(doc: &PickleDoc, root: Slot, max_depth: usize) -> Result<()> {
    const UNSEEN: u32 = 0;
    const OPEN: u32 = u32::MAX;
    let Slot::Node(root) = root else {
        return Ok(());
    };
    let too_deep = || PickleError::LimitExceeded {
        what: "nesting depth",
        limit: max_depth,
        offset: None,
    };
    if max_depth == 0 {
        return Err(too_deep());
    }
    // Per node: UNSEEN, OPEN (on the current path) or its height (>= 1).
    let mut state: Vec<u32> = vec![UNSEEN; doc.nodes.len()];
    // Path from the root: (node, next child position, tallest child so far).
    let mut path: Vec<(u32, usize, u32)> = vec![(root, 0, 0)];
    if let Some(s) = state.get_mut(root as usize) {
        *s = OPEN;
    }
    loop {
        let depth = path.len();
        let Some(&mut (id, ref mut pos, ref mut tallest)) = path.last_mut() else {
            break;
        };
        let node = doc.node(id);
        let mut descend = None;
        while let Some(child) = child_at(node, *pos) {
            *pos += 1;
            let Slot::Node(c) = child else { continue };
            match state.get(c as usize).copied() {
                Some(UNSEEN) => {
                    descend = Some(c);
                    break;
                }
                Some(OPEN) => return Err(PickleError::Cycle),
                Some(h) => {
                    if depth + h as usize > max_depth {
                        return Err(too_deep());
                    }
                    *tallest = (*tallest).max(h);
                }
                None => {}
            }
        }
        if let Some(c) = descend {
            if depth + 1 > max_depth {
                return Err(too_deep());
            }
            if let Some(s) = state.get_mut(c as usize) {
                *s = OPEN;
            }
            path.push((c, 0, 0));
            continue;
        }
        let height = *tallest + 1;
        path.pop();
        if let Some(s) = state.get_mut(id as usize) {
            *s = height;
        }
        if let Some((_, _, parent_tallest)) = path.last_mut() {
            *parent_tallest = (*parent_tallest).max(height);
        }
    }
    Ok(())
}

/// Child `pos` of a container (dict keys first, then values).
#[inline]
fn child_at(node: Option<&Node>, pos: usize) -> Option<Slot> {
    match node? {
        Node::List(items) => items.get(pos).copied(),
        Node::Tuple(t) => t.items.get(pos).copied(),
        Node::Dict(d) => d.entries.as_flattened().get(pos).copied(),
        Node::Set(s) | Node::FrozenSet(s) => s.items.get(pos).copied(),
        Node::ByteArray(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(escape_decode(br"a\n\x41\101\\\'").unwrap(), b"a\nAA\\'");
        assert_eq!(escape_decode(br"\q").unwrap(), b"\\q");
        assert!(escape_decode(b"\\").is_err());
        assert!(escape_decode(br"\x4").is_err());
        assert_eq!(
            raw_unicode_escape_decode(br"a\u00e9\U0001F600").unwrap(),
            "a\u{e9}\u{1F600}"
        );
        assert_eq!(raw_unicode_escape_decode(br"\\u0041").unwrap(), r"\\u0041");
        assert_eq!(raw_unicode_escape_decode(br"\\\u0041").unwrap(), r"\\A");
        assert_eq!(raw_unicode_escape_decode(b"\xe9").unwrap(), "\u{e9}");
        assert_eq!(raw_unicode_escape_decode(br"\ud800").unwrap(), "\u{fffd}");
        assert!(raw_unicode_escape_decode(br"\u12").is_err());
        assert!(raw_unicode_escape_decode(br"\U00110000").is_err());
    }

    #[test]
    fn floats() {
        assert_eq!(parse_float(" 1.5 "), Some(1.5));
        assert_eq!(parse_float("1_0.5"), Some(10.5));
        assert!(parse_float("inf").unwrap().is_infinite());
        assert!(parse_float("nan").unwrap().is_nan());
        assert_eq!(parse_float("x"), None);
    }
}
