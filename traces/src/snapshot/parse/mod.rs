//! From a parsed pickle to a typed [`Snapshot`], checking every field's type
//! and naming the exact place of anything wrong.

mod entry;
mod settings;
mod streamed;

use std::collections::HashMap;

use crate::pickle::{DictRef, NodeId, PickleDoc, ValueRef, View};
use crate::snapshot::model::*;

use entry::entry;
use settings::settings;
use streamed::Pre;
pub(crate) use streamed::{snapshot_streamed, snapshot_streamed_from};

/// A problem at a path such as `device_traces[0][12].size`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseProblem {
    /// Where.
    pub path: String,
    /// What.
    pub message: String,
}

type R<T> = Result<T, ParseProblem>;

/// A place in the document, formatted only when a problem is reported (so
/// that reading a good file builds no path strings).
#[derive(Clone, Copy)]
enum P<'a> {
    Root(&'a str),
    Field(&'a P<'a>, &'a str),
    Index(&'a P<'a>, usize),
}

impl<'a> P<'a> {
    fn field(&'a self, name: &'a str) -> P<'a> {
        P::Field(self, name)
    }
    fn index(&'a self, i: usize) -> P<'a> {
        P::Index(self, i)
    }
}

impl std::fmt::Display for P<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            P::Root(s) => write!(f, "{s}"),
            P::Field(parent, name) => write!(f, "{parent}.{name}"),
            P::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

fn problem(path: impl std::fmt::Display, message: impl Into<String>) -> ParseProblem {
    ParseProblem {
        path: path.to_string(),
        message: message.into(),
    }
}

struct Ctx {
    frames: Vec<Vec<Frame>>,
    /// Frame lists already converted, by pickle node.
    frame_cache: HashMap<NodeId, FramesRef>,
    /// Frames already converted, by pickle node of the frame dict.
    frame_ids: HashMap<NodeId, u32>,
    /// The converted frames.
    frame_store: Vec<Frame>,
    /// Distinct stacks (lists of frame indices).
    stacks: HashMap<Vec<u32>, FramesRef>,
    unknown: std::collections::BTreeMap<String, u64>,
    /// Keys seen, sampled on the first [`KEY_SAMPLES`] dicts of each level
    /// (every release writes the same keys on every dict of a level).
    keys_seen: std::collections::BTreeSet<String>,
    /// Dicts sampled so far per level prefix.
    sampled: Vec<(&'static str, u32)>,
    /// Segments, blocks and trace entries still allowed (see
    /// [`items_allowed`]).
    items_left: u64,
    /// Texts that entries share ([`Ctx::shared_text`]).
    texts: HashMap<Box<str>, std::sync::Arc<str>>,
}

/// At most one segment, block or trace entry per 8 bytes of pickle. Real
/// snapshots hold 130-470 bytes per trace entry and the most compact
/// pickle of an entry is about 20; but a pickle can repeat one memoized
/// container any number of times (a list of 16k references to a segment of
/// 16k references to one block is 64 KiB), and each repetition becomes a
/// separate block here. The budget keeps memory proportional to the input.
fn items_allowed(input_len: usize) -> u64 {
    input_len as u64 / 8 + 1024
}

/// Distinct texts shared by [`Ctx::shared_text`]; past this many, a text
/// gets a copy of its own (a field that differs on every entry).
const SHARED_TEXTS: usize = 4096;

impl Ctx {
    /// `s` as an `Arc` shared with every equal text read before.
    fn shared_text(&mut self, s: &str) -> std::sync::Arc<str> {
        if let Some(t) = self.texts.get(s) {
            return t.clone();
        }
        let t: std::sync::Arc<str> = s.into();
        if self.texts.len() < SHARED_TEXTS {
            self.texts.insert(s.into(), t.clone());
        }
        t
    }

    /// Counts one segment, block or trace entry against the budget.
    fn spend(&mut self, path: &P<'_>) -> R<()> {
        match self.items_left.checked_sub(1) {
            Some(left) => {
                self.items_left = left;
                Ok(())
            }
            None => Err(problem(
                path,
                "the snapshot expands to more segments, blocks and trace entries than its size allows (one per 8 bytes): are memoized containers repeated?",
            )),
        }
    }
}

const TOP_KEYS: &[&str] = &[
    "segments",
    "device_traces",
    "allocator_settings",
    "external_annotations",
    "host_segments",
    "host_traces",
    "vramlab_host_requests",
];
const SEGMENT_KEYS: &[&str] = &[
    "device",
    "address",
    "total_size",
    "allocated_size",
    "active_size",
    "requested_size",
    "stream",
    "segment_type",
    "segment_pool_id",
    "is_expandable",
    "frames",
    "blocks",
    "registration_counter",
];
const BLOCK_KEYS: &[&str] = &[
    "address",
    "size",
    "requested_size",
    "state",
    "frames",
    "history",
];
/// A conversion context for a pickle of `input_len` bytes.
fn new_ctx(input_len: usize) -> Ctx {
    Ctx {
        frames: Vec::new(),
        frame_cache: HashMap::new(),
        frame_ids: HashMap::new(),
        frame_store: Vec::new(),
        stacks: HashMap::new(),
        unknown: Default::default(),
        keys_seen: Default::default(),
        sampled: Vec::new(),
        items_left: items_allowed(input_len),
        texts: HashMap::new(),
    }
}

/// How many dicts of each level have their keys recorded.
const KEY_SAMPLES: u32 = 64;

/// Records the keys of `d` (a dict at level `prefix`) in
/// [`Snapshot::keys_seen`], for the first [`KEY_SAMPLES`] dicts of a level.
fn sample_keys(ctx: &mut Ctx, d: &DictRef<'_>, prefix: &'static str) {
    let n = match ctx.sampled.iter_mut().find(|(p, _)| *p == prefix) {
        Some((_, n)) => n,
        None => {
            ctx.sampled.push((prefix, 0));
            match ctx.sampled.last_mut() {
                Some((_, n)) => n,
                None => return,
            }
        }
    };
    if *n >= KEY_SAMPLES {
        return;
    }
    *n += 1;
    for k in d.keys() {
        let name = k.as_str().map(str::to_string).unwrap_or_else(|| text(&k));
        ctx.keys_seen.insert(format!("{prefix}{name}"));
    }
}

/// Converts a snapshot pickle's root value: the dict of
/// `torch.cuda.memory._snapshot()`, or the segment list of
/// `torch.cuda.memory_snapshot()`.
pub(crate) fn snapshot_from_doc(doc: &PickleDoc) -> R<Snapshot> {
    let snap = convert_doc(doc, new_ctx(doc.bytes_read()), None)?;
    // Without converted parts nothing is left to a streamed read.
    snap.ok_or_else(|| problem("(top level)", "cannot be read"))
}

/// [`snapshot_from_doc`], where `pre` (from a streamed read) holds the
/// segments and the claimed device lists' entries, converted while the
/// pickle was read with `ctx`. `Ok(None)`: the document is not what the
/// streamed read took it for, and the file is read again whole.
fn convert_doc(doc: &PickleDoc, mut ctx: Ctx, mut pre: Option<&mut Pre>) -> R<Option<Snapshot>> {
    let root = doc.root();
    if let Some(list) = root.as_list() {
        if pre.is_some() {
            return Ok(None);
        }
        return legacy_segment_list(doc, list);
    }
    let top = root.as_dict().ok_or_else(|| {
        problem(
            "(top level)",
            format!(
                "is a {}, expected a dict with 'segments' and 'device_traces': not a PyTorch memory snapshot",
                root.type_name()
            ),
        )
    })?;
    if top.get("segments").is_none() && top.get("device_traces").is_none() {
        return Err(problem(
            "(top level)",
            "has neither 'segments' nor 'device_traces': not a PyTorch memory snapshot",
        ));
    }
    if let Some(p) = pre.as_deref() {
        if !p.is_at(&top) {
            return Ok(None);
        }
    }
    note_unknown(&mut ctx, &top, TOP_KEYS, "");
    sample_keys(&mut ctx, &top, "");
    let mut snap = Snapshot::default();
    let traces_p = P::Root("device_traces");
    if let Some(p) = pre.as_deref_mut() {
        snap.segments = std::mem::take(&mut p.segments);
    } else if let Some(v) = top.get("segments") {
        snap.segments = segments(&mut ctx, v)?;
    }
    if let Some(v) = top.get("device_traces") {
        let devs = seq(v, &traces_p)?;
        for (d, t) in devs.iter().enumerate() {
            if let Some(p) = pre.as_deref_mut() {
                match p.take_list(d, &t) {
                    Some(out) => snap.device_traces.push(out),
                    None => return Ok(None),
                }
                continue;
            }
            let path = traces_p.index(d);
            let entries = seq(t, &path)?;
            let mut out = Vec::with_capacity(entries.len());
            for (i, e) in entries.iter().enumerate() {
                ctx.spend(&path.index(i))?;
                out.push(entry(&mut ctx, e, &path, i)?);
            }
            snap.device_traces.push(out);
        }
    }
    if pre.is_some_and(|p| !p.all_taken()) {
        return Ok(None);
    }
    if let Some(v) = top.get("host_traces") {
        let path = P::Root("host_traces");
        let entries = seq(v, &path)?;
        for (i, e) in entries.iter().enumerate() {
            ctx.spend(&path.index(i))?;
            snap.host_traces.push(entry(&mut ctx, e, &path, i)?);
        }
    }
    if let Some(v) = top.get("host_segments") {
        snap.host_segments = host_segments(v)?;
    }
    if let Some(v) = top.get("vramlab_host_requests") {
        let path = P::Root("vramlab_host_requests");
        for (i, r) in seq(v, &path)?.iter().enumerate() {
            let p = path.index(i);
            let pair = seq(r, &p)?;
            let (Some(a), Some(n)) = (pair.get(0), pair.get(1)) else {
                return Err(problem(p, "expected [address, bytes]"));
            };
            snap.host_requests
                .push((uint(&a, &p.index(0))?, uint(&n, &p.index(1))?));
        }
    }
    if let Some(v) = top.get("allocator_settings") {
        if !v.is_none() {
            snap.allocator_settings = Some(settings(v)?);
        }
    }
    if let Some(v) = top.get("external_annotations") {
        let ann_p = P::Root("external_annotations");
        let list = seq(v, &ann_p)?;
        for (i, a) in list.iter().enumerate() {
            let d = dict(&a, &ann_p.index(i))?;
            snap.external_annotations
                .push(d.iter().map(|(k, v)| (text(&k), text(&v))).collect());
        }
    }
    snap.frames = ctx.frames;
    snap.unknown_keys = ctx.unknown;
    snap.keys_seen = ctx.keys_seen;
    Ok(Some(snap))
}

/// `host_segments`: each entry's blocks (one per segment, R6.3).
fn host_segments(v: ValueRef<'_>) -> R<Vec<(u64, u64, String)>> {
    let path = P::Root("host_segments");
    let list = seq(v, &path)?;
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let sp = path.index(i);
        let d = dict(&s, &sp)?;
        let Some(blocks) = d.get("blocks") else {
            continue;
        };
        let bp = sp.field("blocks");
        for (j, b) in seq(blocks, &bp)?.iter().enumerate() {
            let p = bp.index(j);
            let bd = dict(&b, &p)?;
            let address = sint(&req(&bd, "address", &p)?, &p.field("address"))? as u64;
            let size = field_u64(&bd, "size", &p)?;
            let state = bd.get("state").map(|v| text(&v)).unwrap_or_default();
            out.push((address, size, state));
        }
    }
    Ok(out)
}

/// The list `torch.cuda.memory_snapshot()` returns (segments only; older
/// tutorials still pickle it): a state-only snapshot.
fn legacy_segment_list(doc: &PickleDoc, list: crate::pickle::ListRef<'_>) -> R<Option<Snapshot>> {
    let mut ctx = new_ctx(doc.bytes_read());
    let mut snap = Snapshot {
        legacy_segment_list: true,
        ..Default::default()
    };
    let segs_p = P::Root("(list)");
    snap.segments.reserve(list.len());
    for (i, s) in list.iter().enumerate() {
        let p = segs_p.index(i);
        ctx.spend(&p)?;
        if s.as_dict().is_none() {
            return Err(problem(
                p,
                format!(
                    "is a {}: a list at the top level is read as torch.cuda.memory_snapshot()'s list of segment dicts; not a PyTorch memory snapshot",
                    s.type_name()
                ),
            ));
        }
        snap.segments.push(segment(&mut ctx, s, &p)?);
    }
    snap.frames = ctx.frames;
    snap.unknown_keys = ctx.unknown;
    snap.keys_seen = ctx.keys_seen;
    Ok(Some(snap))
}

fn note_unknown(ctx: &mut Ctx, d: &DictRef<'_>, known: &[&str], prefix: &str) {
    for k in d.keys() {
        let name = k.as_str().map(str::to_string).unwrap_or_else(|| text(&k));
        if !known.contains(&name.as_str()) {
            *ctx.unknown.entry(format!("{prefix}{name}")).or_default() += 1;
        }
    }
}

fn text(v: &ValueRef<'_>) -> String {
    match v.view() {
        View::Str(s) => s.to_string(),
        View::Int(i) => i.to_string(),
        View::Float(f) => f.to_string(),
        View::Bool(b) => if b { "True" } else { "False" }.to_string(),
        View::None => "None".to_string(),
        _ => format!("<{}>", v.type_name()),
    }
}

fn seq<'d>(v: ValueRef<'d>, path: &P<'_>) -> R<crate::pickle::ListRef<'d>> {
    v.as_seq()
        .ok_or_else(|| problem(path, format!("is a {}, expected a list", v.type_name())))
}

fn dict<'d>(v: &ValueRef<'d>, path: &P<'_>) -> R<DictRef<'d>> {
    v.as_dict()
        .ok_or_else(|| problem(path, format!("is a {}, expected a dict", v.type_name())))
}

fn req<'d>(d: &DictRef<'d>, key: &str, path: &P<'_>) -> R<ValueRef<'d>> {
    d.get(key)
        .ok_or_else(|| problem(path, format!("has no '{key}' key")))
}

/// An int that PyTorch writes from an unsigned quantity; must be >= 0.
fn uint(v: &ValueRef<'_>, path: &P<'_>) -> R<u64> {
    match v.view() {
        View::Int(i) if i >= 0 => Ok(i as u64),
        View::Int(i) => Err(problem(
            path,
            format!("is {i}, expected a non-negative int"),
        )),
        View::BigInt(_) => v
            .as_u64()
            .ok_or_else(|| problem(path, "is an int too large for 64 bits")),
        _ => Err(problem(
            path,
            format!("is a {}, expected an int", v.type_name()),
        )),
    }
}

/// A signed int (stream handles, pool ids, times).
fn sint(v: &ValueRef<'_>, path: &P<'_>) -> R<i64> {
    match v.view() {
        View::Int(i) => Ok(i),
        View::BigInt(_) => v
            .as_u64()
            .map(|u| u as i64)
            .ok_or_else(|| problem(path, "is an int that does not fit 64 bits")),
        _ => Err(problem(
            path,
            format!("is a {}, expected an int", v.type_name()),
        )),
    }
}

fn field_u64(d: &DictRef<'_>, key: &str, path: &P<'_>) -> R<u64> {
    uint(&req(d, key, path)?, &path.field(key))
}

fn opt_u64(d: &DictRef<'_>, key: &str, path: &P<'_>) -> R<Option<u64>> {
    opt_uint(d.get(key), &path.field(key))
}

/// [`uint`] of a value that may be absent or `None`.
fn opt_uint(v: Option<ValueRef<'_>>, path: &P<'_>) -> R<Option<u64>> {
    match v {
        Some(v) if !v.is_none() => uint(&v, path).map(Some),
        _ => Ok(None),
    }
}

fn boolean(v: &ValueRef<'_>, path: &P<'_>) -> R<bool> {
    match v.view() {
        View::Bool(b) => Ok(b),
        View::Int(i) => Ok(i != 0),
        _ => Err(problem(
            path,
            format!("is a {}, expected a bool", v.type_name()),
        )),
    }
}

fn string(v: &ValueRef<'_>, path: &P<'_>) -> R<String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| problem(path, format!("is a {}, expected a str", v.type_name())))
}

// Indexing: the only index is `frame_store[x]`, for `x` in `key`; every
// such `x` comes from `frame_ids`, whose values are only ever the length of
// `frame_store` just before a push to it (below), and `frame_store` never
// shrinks. (The `as u32` does not wrap: the input is capped at 1 GiB.)
#[allow(clippy::indexing_slicing)]
fn frames(ctx: &mut Ctx, v: Option<ValueRef<'_>>, path: &P<'_>) -> R<Option<FramesRef>> {
    let Some(v) = v else { return Ok(None) };
    // A list converted before is not read again: a streamed read freed the
    // lists of the entries it took.
    if let Some(id) = v.node_id_unread() {
        if let Some(&r) = ctx.frame_cache.get(&id) {
            return Ok(Some(r));
        }
    }
    if v.is_none() {
        return Ok(None);
    }
    let list = seq(v, path)?;
    if list.is_empty() {
        return Ok(None);
    }
    let id = list.node_id();
    if let Some(&r) = ctx.frame_cache.get(&id) {
        return Ok(Some(r));
    }
    // PyTorch shares each frame dict between entries but gives every entry
    // its own list: convert each frame once, and each distinct stack once.
    let mut key = Vec::with_capacity(list.len());
    for (i, f) in list.iter().enumerate() {
        let fp = path.index(i);
        let d = dict(&f, &fp)?;
        let fid = d.node_id();
        let idx = match ctx.frame_ids.get(&fid) {
            Some(&x) => x,
            None => {
                let frame = Frame {
                    filename: d.get("filename").map(|v| text(&v)).unwrap_or_default(),
                    line: match d.get("line") {
                        Some(v) => sint(&v, &fp.field("line"))?,
                        None => 0,
                    },
                    name: d.get("name").map(|v| text(&v)).unwrap_or_default(),
                };
                let x = ctx.frame_store.len() as u32;
                ctx.frame_store.push(frame);
                ctx.frame_ids.insert(fid, x);
                x
            }
        };
        key.push(idx);
    }
    let r = match ctx.stacks.get(&key) {
        Some(&r) => r,
        None => {
            let r = FramesRef(ctx.frames.len() as u32);
            ctx.frames.push(
                key.iter()
                    .map(|&x| ctx.frame_store[x as usize].clone())
                    .collect(),
            );
            ctx.stacks.insert(key, r);
            r
        }
    };
    ctx.frame_cache.insert(id, r);
    Ok(Some(r))
}

/// The top-level `segments` list.
fn segments(ctx: &mut Ctx, v: ValueRef<'_>) -> R<Vec<Segment>> {
    let segs_p = P::Root("segments");
    let list = seq(v, &segs_p)?;
    let mut out = Vec::with_capacity(list.len());
    for (i, s) in list.iter().enumerate() {
        let p = segs_p.index(i);
        ctx.spend(&p)?;
        out.push(segment(ctx, s, &p)?);
    }
    Ok(out)
}

fn segment(ctx: &mut Ctx, v: ValueRef<'_>, path: &P<'_>) -> R<Segment> {
    let d = dict(&v, path)?;
    note_unknown(ctx, &d, SEGMENT_KEYS, "segments[].");
    sample_keys(ctx, &d, "segments[].");
    let address = field_u64(&d, "address", path)?;
    let total_size = field_u64(&d, "total_size", path)?;
    let seg_type = match d.get("segment_type") {
        Some(t) => string(&t, &path.field("segment_type"))?,
        None => String::new(),
    };
    let is_small = match seg_type.as_str() {
        "small" => true,
        "large" => false,
        // Older snapshots: infer from the size (small segments are 2 MiB).
        "" => total_size == 2 << 20,
        other => {
            return Err(problem(
                path.field("segment_type"),
                format!("is '{other}', expected 'small' or 'large'"),
            ));
        }
    };
    let pool_id =
        pool_id(d.get("segment_pool_id"), &path.field("segment_pool_id"))?.unwrap_or((0, 0));
    let blocks_v = req(&d, "blocks", path)?;
    let blocks_p = path.field("blocks");
    let bl = seq(blocks_v, &blocks_p)?;
    let mut blocks = Vec::with_capacity(bl.len());
    let mut next_addr = address;
    for (i, b) in bl.iter().enumerate() {
        let bp = blocks_p.index(i);
        ctx.spend(&bp)?;
        let bd = dict(&b, &bp)?;
        note_unknown(ctx, &bd, BLOCK_KEYS, "segments[].blocks[].");
        sample_keys(ctx, &bd, "segments[].blocks[].");
        let size = field_u64(&bd, "size", &bp)?;
        let addr = opt_u64(&bd, "address", &bp)?.unwrap_or(next_addr);
        next_addr = addr.saturating_add(size);
        let state_s = string(&req(&bd, "state", &bp)?, &bp.field("state"))?;
        let state = match state_s.as_str() {
            "active_allocated" => SnapshotBlockState::ActiveAllocated,
            "active_pending_free" | "active_awaiting_free" => SnapshotBlockState::ActivePendingFree,
            "inactive" => SnapshotBlockState::Inactive,
            other => {
                return Err(problem(
                    bp.field("state"),
                    format!(
                        "is '{other}', expected active_allocated, active_pending_free or inactive"
                    ),
                ));
            }
        };
        blocks.push(SnapshotBlock {
            address: addr,
            size,
            requested_size: opt_u64(&bd, "requested_size", &bp)?,
            state,
            frames: frames(ctx, bd.get("frames"), &bp.field("frames"))?,
        });
    }
    Ok(Segment {
        device: match d.get("device") {
            Some(x) => u32::try_from(uint(&x, &path.field("device"))?)
                .map_err(|_| problem(path.field("device"), "is not a device index"))?,
            None => 0,
        },
        address,
        total_size,
        allocated_size: opt_u64(&d, "allocated_size", path)?.unwrap_or(0),
        active_size: opt_u64(&d, "active_size", path)?.unwrap_or(0),
        requested_size: opt_u64(&d, "requested_size", path)?.unwrap_or(0),
        stream: match d.get("stream") {
            Some(x) => sint(&x, &path.field("stream"))? as u64,
            None => 0,
        },
        is_small,
        pool_id,
        is_expandable: match d.get("is_expandable") {
            Some(x) => boolean(&x, &path.field("is_expandable"))?,
            None => false,
        },
        frames: frames(ctx, d.get("frames"), &path.field("frames"))?,
        blocks,
    })
}

/// A `MempoolId_t` pair (`segment_pool_id`, an entry's `pool_id`); `None`
/// when the key is absent or `None`.
fn pool_id(v: Option<ValueRef<'_>>, path: &P<'_>) -> R<Option<(i64, i64)>> {
    let Some(p) = v.filter(|p| !p.is_none()) else {
        return Ok(None);
    };
    let t = seq(p, path)?;
    let part = |i: usize| t.get(i).map(|x| sint(&x, &path.index(i))).transpose();
    Ok(Some((part(0)?.unwrap_or(0), part(1)?.unwrap_or(0))))
}
