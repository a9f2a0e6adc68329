//! Writing [`Value`] trees as protocol 4 pickles that both Python and
//! PyTorch's memory viewer (`torch/utils/viz/MemoryViz.js`) can read.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Write};
use std::sync::Arc;

use super::bigint;
use super::opcodes as op;
use super::value::Value;

/// Python writes lists, dicts and sets in batches of this many items.
const BATCH: usize = 1000;
/// Python's target frame size for protocol 4.
const FRAME_TARGET: usize = 64 * 1024;
/// Shortest repeated string worth memoizing (shorter ones cost no more to
/// repeat than a `LONG_BINGET`).
const MIN_MEMO_STR: usize = 4;

/// Hasher for container addresses (not attacker-chosen, so a fast
/// multiplicative hash is fine).
#[derive(Default)]
struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

/// Map keyed by container address.
type PtrMap<V> = HashMap<*const (), V, BuildHasherDefault<PtrHasher>>;

/// Writes [`Value`]s as protocol 4 pickles (`pickle.load` reads them back
/// to the same Python objects).
///
/// Output conventions:
///
/// * Protocol 4 with `FRAME`s of about 64 KiB, like Python's own pickler.
/// * A container referenced more than once (clones of one `Arc`) is
///   written once, memoized with `MEMOIZE`, and referenced afterwards with
///   `BINGET`/`LONG_BINGET`, so shared stack frames cost a few bytes per
///   use and the loaded objects are shared in Python too.
/// * Equal strings of 4 bytes or more that occur more than once are also
///   written once and memoized (Python does the same for interned strings,
///   such as dict keys).
/// * Only opcodes that PyTorch's JavaScript pickle reader (`MemoryViz.js`)
///   supports are used for `None`, bool, int (up to 255 bytes), float, str,
///   list, tuple and dict. `bytes` (`BINBYTES`), sets (`EMPTY_SET`,
///   `ADDITEMS`, `FROZENSET`) and ints of more than 255 bytes (`LONG4`)
///   are written with opcodes Python reads but that viewer does not.
///
/// ```
/// use std::sync::Arc;
/// use vramlab_traces::{PickleDoc, PickleWriter, Value};
/// let frame = Value::dict([("name", Value::from("f")), ("line", Value::from(3))]);
/// let v = Value::list([frame.clone(), frame]);
/// let bytes = PickleWriter::new().to_vec(&v);
/// let back = PickleDoc::from_slice(&bytes).unwrap().root().to_value();
/// assert_eq!(back, v);
/// // The frame was written once: read back, both elements are one object.
/// let Value::List(l) = &back else { unreachable!() };
/// let (Value::Dict(a), Value::Dict(b)) = (&l[0], &l[1]) else { unreachable!() };
/// assert!(Arc::ptr_eq(a, b));
/// ```
#[derive(Debug, Clone, Default)]
pub struct PickleWriter;

impl PickleWriter {
    /// A writer with the defaults described on [`PickleWriter`].
    pub fn new() -> PickleWriter {
        PickleWriter
    }

    /// The pickle of `value`.
    pub fn to_vec(&self, value: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = self.write_to(&mut out, value);
        out
    }

    /// Writes the pickle of `value` to `w`, one frame at a time.
    pub fn write_to<W: Write>(&self, w: &mut W, value: &Value) -> io::Result<()> {
        let plan = Plan::new(value);
        let mut e = Emitter {
            w,
            frame: Vec::with_capacity(FRAME_TARGET + 1024),
            plan,
            memo: PtrMap::default(),
            str_memo: HashMap::new(),
            next_memo: 0,
        };
        e.w.write_all(&[op::PROTO, 4])?;
        e.emit(value)?;
        e.frame.push(op::STOP);
        e.flush_frame()
    }
}

/// What to memoize: containers seen more than once (by address) and
/// strings seen more than once (by content).
struct Plan<'v> {
    shared: PtrMap<u32>,
    strs: HashMap<&'v str, u32>,
}

impl<'v> Plan<'v> {
    /// Counts references without recursion; a shared container's contents
    /// are counted once, since it is written once.
    fn new(root: &'v Value) -> Plan<'v> {
        let mut shared: PtrMap<u32> = PtrMap::default();
        let mut strs: HashMap<&'v str, u32> = HashMap::new();
        let mut work: Vec<&'v Value> = vec![root];
        while let Some(v) = work.pop() {
            match v {
                Value::Str(s) => {
                    if s.len() >= MIN_MEMO_STR {
                        *strs.entry(s).or_insert(0) += 1;
                    }
                    continue;
                }
                Value::List(a) | Value::Tuple(a) | Value::Set(a) | Value::FrozenSet(a) => {
                    if Arc::strong_count(a) > 1 {
                        let n = shared.entry(Arc::as_ptr(a).cast()).or_insert(0);
                        *n += 1;
                        if *n > 1 {
                            continue;
                        }
                    }
                }
                Value::Dict(a) => {
                    if Arc::strong_count(a) > 1 {
                        let n = shared.entry(Arc::as_ptr(a).cast()).or_insert(0);
                        *n += 1;
                        if *n > 1 {
                            continue;
                        }
                    }
                }
                _ => continue,
            }
            work.extend(v.children());
        }
        shared.retain(|_, n| *n > 1);
        strs.retain(|_, n| *n > 1);
        Plan { shared, strs }
    }
}

/// A step of the iterative writer.
enum Task<'v> {
    Value(&'v Value),
    Op(u8),
    /// Memoize the value just written (a tuple or frozenset, after its
    /// items) under this address.
    Memoize(*const ()),
}

struct Emitter<'v, 'w, W: Write> {
    w: &'w mut W,
    /// The frame being filled (opcodes never straddle frames).
    frame: Vec<u8>,
    plan: Plan<'v>,
    memo: PtrMap<u32>,
    str_memo: HashMap<&'v str, u32>,
    next_memo: u32,
}

impl<'v, W: Write> Emitter<'v, '_, W> {
    fn flush_frame(&mut self) -> io::Result<()> {
        if self.frame.is_empty() {
            return Ok(());
        }
        let mut header = [0u8; 9];
        header[0] = op::FRAME;
        header[1..].copy_from_slice(&(self.frame.len() as u64).to_le_bytes());
        self.w.write_all(&header)?;
        self.w.write_all(&self.frame)?;
        self.frame.clear();
        Ok(())
    }

    fn memoize(&mut self) -> u32 {
        self.frame.push(op::MEMOIZE);
        let id = self.next_memo;
        self.next_memo += 1;
        id
    }

    fn get(&mut self, id: u32) {
        match u8::try_from(id) {
            Ok(b) => self.frame.extend_from_slice(&[op::BINGET, b]),
            Err(_) => {
                self.frame.push(op::LONG_BINGET);
                self.frame.extend_from_slice(&id.to_le_bytes());
            }
        }
    }

    fn int(&mut self, i: i64) {
        let f = &mut self.frame;
        if (0..=0xff).contains(&i) {
            f.extend_from_slice(&[op::BININT1, i as u8]);
        } else if (0..=0xffff).contains(&i) {
            f.push(op::BININT2);
            f.extend_from_slice(&(i as u16).to_le_bytes());
        } else if let Ok(v) = i32::try_from(i) {
            f.push(op::BININT);
            f.extend_from_slice(&v.to_le_bytes());
        } else {
            let bytes = i.to_le_bytes();
            let le = bigint::minimal(&bytes);
            f.extend_from_slice(&[op::LONG1, le.len() as u8]); // at most 8 bytes
            f.extend_from_slice(le);
        }
    }

    fn str(&mut self, s: &'v str) {
        if let Some(&id) = self.str_memo.get(s) {
            self.get(id);
            return;
        }
        let f = &mut self.frame;
        let b = s.as_bytes();
        if let Ok(n) = u8::try_from(b.len()) {
            f.extend_from_slice(&[op::SHORT_BINUNICODE, n]);
        } else if let Ok(n) = u32::try_from(b.len()) {
            f.push(op::BINUNICODE);
            f.extend_from_slice(&n.to_le_bytes());
        } else {
            f.push(op::BINUNICODE8);
            f.extend_from_slice(&(b.len() as u64).to_le_bytes());
        }
        f.extend_from_slice(b);
        if self.plan.strs.contains_key(s) {
            let id = self.memoize();
            self.str_memo.insert(s, id);
        }
    }

    /// Writes `root` with an explicit task stack (no recursion on depth).
    fn emit(&mut self, root: &'v Value) -> io::Result<()> {
        let mut tasks: Vec<Task<'v>> = vec![Task::Value(root)];
        while let Some(t) = tasks.pop() {
            if self.frame.len() >= FRAME_TARGET {
                self.flush_frame()?;
            }
            let v = match t {
                Task::Op(code) => {
                    self.frame.push(code);
                    continue;
                }
                Task::Memoize(ptr) => {
                    let id = self.memoize();
                    self.memo.insert(ptr, id);
                    continue;
                }
                Task::Value(v) => v,
            };
            let ptr = v.container_ptr();
            if let Some(&id) = ptr.and_then(|p| self.memo.get(&p)) {
                self.get(id);
                continue;
            }
            let shared = ptr.filter(|p| self.plan.shared.contains_key(p));
            match v {
                Value::None => self.frame.push(op::NONE),
                Value::Bool(b) => self.frame.push(if *b { op::NEWTRUE } else { op::NEWFALSE }),
                Value::Int(i) => self.int(*i),
                Value::BigInt(b) => match b.to_i64() {
                    Some(i) => self.int(i),
                    None => {
                        let bytes = b.as_signed_le_bytes();
                        match u8::try_from(bytes.len()) {
                            Ok(n) => self.frame.extend_from_slice(&[op::LONG1, n]),
                            Err(_) => {
                                self.frame.push(op::LONG4);
                                // Lengths beyond i32 cannot be pickled.
                                let n = i32::try_from(bytes.len()).unwrap_or(i32::MAX);
                                self.frame.extend_from_slice(&n.to_le_bytes());
                            }
                        }
                        self.frame.extend_from_slice(bytes);
                    }
                },
                Value::Float(x) => {
                    self.frame.push(op::BINFLOAT);
                    self.frame.extend_from_slice(&x.to_be_bytes());
                }
                Value::Str(s) => self.str(s),
                Value::Bytes(b) => {
                    if let Ok(n) = u8::try_from(b.len()) {
                        self.frame.extend_from_slice(&[op::SHORT_BINBYTES, n]);
                    } else if let Ok(n) = u32::try_from(b.len()) {
                        self.frame.push(op::BINBYTES);
                        self.frame.extend_from_slice(&n.to_le_bytes());
                    } else {
                        self.frame.push(op::BINBYTES8);
                        self.frame
                            .extend_from_slice(&(b.len() as u64).to_le_bytes());
                    }
                    self.frame.extend_from_slice(b);
                }
                Value::List(items) => {
                    self.frame.push(op::EMPTY_LIST);
                    self.memo_now(shared);
                    push_batches(&mut tasks, items, op::APPEND, op::APPENDS);
                }
                Value::Set(items) => {
                    self.frame.push(op::EMPTY_SET);
                    self.memo_now(shared);
                    push_batches(&mut tasks, items, op::ADDITEMS, op::ADDITEMS);
                }
                Value::Dict(entries) => {
                    self.frame.push(op::EMPTY_DICT);
                    self.memo_now(shared);
                    // Batches in reverse, since tasks pop last-first.
                    for chunk in entries.chunks(BATCH).rev() {
                        if let [(k, v)] = chunk {
                            tasks.push(Task::Op(op::SETITEM));
                            tasks.push(Task::Value(v));
                            tasks.push(Task::Value(k));
                        } else {
                            tasks.push(Task::Op(op::SETITEMS));
                            for (k, v) in chunk.iter().rev() {
                                tasks.push(Task::Value(v));
                                tasks.push(Task::Value(k));
                            }
                            tasks.push(Task::Op(op::MARK));
                        }
                    }
                }
                Value::Tuple(items) => {
                    if let Some(p) = shared {
                        tasks.push(Task::Memoize(p));
                    }
                    match items.len() {
                        0 => self.frame.push(op::EMPTY_TUPLE),
                        n @ 1..=3 => {
                            tasks.push(Task::Op(op::TUPLE1 + (n as u8 - 1)));
                            tasks.extend(items.iter().rev().map(Task::Value));
                        }
                        _ => {
                            tasks.push(Task::Op(op::TUPLE));
                            tasks.extend(items.iter().rev().map(Task::Value));
                            tasks.push(Task::Op(op::MARK));
                        }
                    }
                }
                Value::FrozenSet(items) => {
                    if let Some(p) = shared {
                        tasks.push(Task::Memoize(p));
                    }
                    tasks.push(Task::Op(op::FROZENSET));
                    tasks.extend(items.iter().rev().map(Task::Value));
                    tasks.push(Task::Op(op::MARK));
                }
            }
        }
        Ok(())
    }

    /// Memoizes a just-created mutable container that is shared.
    fn memo_now(&mut self, shared: Option<*const ()>) {
        if let Some(p) = shared {
            let id = self.memoize();
            self.memo.insert(p, id);
        }
    }
}

/// Queues `items` in batches: `MARK items... many` per batch (`one` for a
/// batch of a single item when it differs from `many`).
fn push_batches<'v>(tasks: &mut Vec<Task<'v>>, items: &'v [Value], one: u8, many: u8) {
    for chunk in items.chunks(BATCH).rev() {
        if chunk.len() == 1 && one != many {
            tasks.push(Task::Op(one));
            tasks.extend(chunk.iter().map(Task::Value));
        } else {
            tasks.push(Task::Op(many));
            tasks.extend(chunk.iter().rev().map(Task::Value));
            tasks.push(Task::Op(op::MARK));
        }
    }
}
