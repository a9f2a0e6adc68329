//! A snapshot converted while its pickle is read: the segments when the
//! first trace entry arrives (PyTorch writes them first), then each entry
//! of `device_traces[d]` as the pickle machine appends it; the machine
//! frees the entry's dict and stack list once it is converted. At the peak
//! memory holds the converted entries and what remains of the document,
//! not every entry twice.
//!
//! Whatever the streamed read cannot vouch for — a pickle not shaped as
//! PyTorch writes it, an error, a freed container read again — makes
//! [`snapshot_streamed`] answer `None`, and the caller reads the file whole:
//! the answer, errors included, is always the whole read's.

use std::io::Read;
use std::mem;

use crate::pickle::{
    Claim, Done, ListPlace, ListSink, MAX_INPUT_LEN, NodeId, PickleDoc, PickleInput, Slot,
    ValueRef, parse_with_sink,
};

use super::{Ctx, P, convert_doc, entry, items_allowed, new_ctx, segments};
use crate::snapshot::model::{Segment, Snapshot, TraceEntry};

/// Reads the snapshot pickle `input`, converting its trace entries as they
/// are read. `None`: read it whole instead.
pub(crate) fn snapshot_streamed(input: &[u8]) -> Option<Snapshot> {
    streamed(PickleInput::Slice(input), input.len())
}

/// [`snapshot_streamed`] of a pickle read from `reader` through a window
/// of a few hundred KiB, up to its `STOP` opcode: the file's bytes are
/// never held whole. `len` is the input's length where it is known (a
/// file's size), else 0. `None`: read it whole instead (the reader is then
/// partly consumed; open the file again).
pub(crate) fn snapshot_streamed_from(reader: &mut dyn Read, len: usize) -> Option<Snapshot> {
    streamed(PickleInput::Reader(Box::new(reader)), len)
}

fn streamed(input: PickleInput<'_>, len: usize) -> Option<Snapshot> {
    // Entries are counted against the input's size while they are read
    // (of the largest input accepted where the size is not known), and
    // then against the bytes up to STOP, as a whole read counts them.
    let budget_len = if len > 0 { len } else { MAX_INPUT_LEN };
    let mut sink = EntrySink {
        ctx: new_ctx(budget_len),
        pre: None,
    };
    let doc = parse_with_sink(input, len, &mut sink).ok()?;
    let EntrySink { mut ctx, pre } = sink;
    let snap = match pre {
        // Nothing was taken: the document is whole.
        None => convert_doc(&doc, new_ctx(doc.bytes_read()), None).ok()??,
        Some(mut pre) => {
            let spent = items_allowed(budget_len) - ctx.items_left;
            ctx.items_left = items_allowed(doc.bytes_read()).checked_sub(spent)?;
            convert_doc(&doc, ctx, Some(&mut pre)).ok()??
        }
    };
    (!doc.retired_touched()).then_some(snap)
}

/// What the streamed read converted before the end of the pickle.
pub(super) struct Pre {
    /// The converted `segments`.
    pub(super) segments: Vec<Segment>,
    /// The `segments` list, the root dict and `device_traces` as read.
    segments_node: NodeId,
    root: NodeId,
    outer: NodeId,
    /// The claimed device lists, in the order they were claimed.
    lists: Vec<Claimed>,
    /// Claimed lists handed to the conversion so far.
    next: usize,
}

/// A device list whose entries were taken.
struct Claimed {
    node: u32,
    /// Its position in `device_traces`.
    index: usize,
    entries: Vec<TraceEntry>,
}

impl Pre {
    /// Whether `top` is the root dict read, with the same `segments` and
    /// `device_traces` (a pickle could set either again later).
    pub(super) fn is_at(&self, top: &crate::pickle::DictRef<'_>) -> bool {
        let node = |k: &str| top.get(k).and_then(|v| v.node_id_unread());
        top.node_id() == self.root
            && node("device_traces") == Some(self.outer)
            && node("segments") == Some(self.segments_node)
    }

    /// The entries of `device_traces[d]`, the list `t`: the next claimed
    /// list's, or none for an empty list never claimed. `None` when `t` is
    /// neither.
    pub(super) fn take_list(&mut self, d: usize, t: &ValueRef<'_>) -> Option<Vec<TraceEntry>> {
        let id = t.node_id_unread()?;
        if let Some(c) = self.lists.get_mut(self.next) {
            if NodeId(c.node) == id && c.index == d {
                self.next += 1;
                let mut entries = mem::take(&mut c.entries);
                entries.shrink_to_fit();
                return Some(entries);
            }
        }
        if self.lists.iter().any(|c| NodeId(c.node) == id) {
            return None;
        }
        match t.as_list() {
            Some(l) if l.is_empty() => Some(Vec::new()),
            _ => None,
        }
    }

    /// Whether every claimed list was handed over.
    pub(super) fn all_taken(&self) -> bool {
        self.next == self.lists.len()
    }
}

/// The [`ListSink`] that converts trace entries.
struct EntrySink {
    ctx: Ctx,
    pre: Option<Pre>,
}

/// The value of `segments` in the root dict at `place`: among the pairs
/// still on the stack (the last one wins, as in Python), else in the dict.
fn segments_at<'d>(doc: &'d PickleDoc, place: &ListPlace<'_>) -> Option<ValueRef<'d>> {
    let pending = place.pending.chunks_exact(2).rev().find_map(|kv| match kv {
        [k, v] => {
            let key = ValueRef { doc, slot: *k };
            (key.as_str() == Some("segments")).then_some(ValueRef { doc, slot: *v })
        }
        _ => None,
    });
    pending.or_else(|| {
        let root = ValueRef {
            doc,
            slot: Slot::Node(place.root),
        };
        root.as_dict()?.get("segments")
    })
}

impl ListSink for EntrySink {
    fn claim(&mut self, doc: &PickleDoc, list: u32, place: &ListPlace<'_>) -> Claim {
        if place.key != "device_traces" {
            return Claim::Leave;
        }
        match &mut self.pre {
            Some(p) => {
                let later = p.lists.last().is_none_or(|c| place.index > c.index);
                if NodeId(place.root) != p.root || NodeId(place.outer) != p.outer || !later {
                    return Claim::GiveUp;
                }
                p.lists.push(Claimed {
                    node: list,
                    index: place.index,
                    entries: Vec::new(),
                });
                Claim::Take
            }
            None => {
                // The segments are converted first, as a whole read does
                // (stacks are numbered in the order they are met).
                let Some(v) = segments_at(doc, place) else {
                    return Claim::Leave;
                };
                let Some(segments_node) = v.node_id_unread() else {
                    return Claim::Leave;
                };
                let Ok(segments) = segments(&mut self.ctx, v) else {
                    return Claim::GiveUp;
                };
                self.pre = Some(Pre {
                    segments,
                    segments_node,
                    root: NodeId(place.root),
                    outer: NodeId(place.outer),
                    lists: vec![Claimed {
                        node: list,
                        index: place.index,
                        entries: Vec::new(),
                    }],
                    next: 0,
                });
                Claim::Take
            }
        }
    }

    fn take(&mut self, doc: &PickleDoc, list: u32, item: Slot, done: &mut Vec<Done>) -> bool {
        let Some(p) = self.pre.as_mut() else {
            return false;
        };
        let Some(c) = p.lists.iter_mut().rev().find(|c| c.node == list) else {
            return false;
        };
        let traces_p = P::Root("device_traces");
        let dev_p = traces_p.index(c.index);
        let i = c.entries.len();
        if self.ctx.spend(&dev_p.index(i)).is_err() {
            return false;
        }
        let v = ValueRef { doc, slot: item };
        match entry(&mut self.ctx, v, &dev_p, i) {
            Ok(e) => c.entries.push(e),
            Err(_) => return false,
        }
        // The entry's dict and the containers it holds: its stack list,
        // converted (later entries that share it find it by its node), and
        // the others (its pool id), which the machine frees when nothing
        // else can reach them. An empty stack list is left alone: PyTorch
        // gives one list to every entry without a stack, and freeing it
        // would gain nothing.
        if let Slot::Node(id) = item {
            let Some(d) = v.as_dict() else {
                return false;
            };
            for (k, f) in d.iter() {
                let Some(f_id) = f.node_id_unread() else {
                    continue;
                };
                match k.as_str() {
                    Some("frames") if self.ctx.frame_cache.contains_key(&f_id) => {
                        done.push(Done::Converted(f_id.0));
                    }
                    Some("frames") => {}
                    _ => done.push(Done::Part(f_id.0)),
                }
            }
            done.push(Done::Item(id));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::parse::snapshot_from_doc;

    /// The streamed read of `bytes`, from memory and from a reader of
    /// 4,093-byte reads (a prime, so that the window's end falls anywhere
    /// in the opcodes): both must answer alike.
    fn streamed_both(bytes: &[u8], name: &str) -> Option<Snapshot> {
        let s = snapshot_streamed(bytes);
        let mut reader = crate::ShortReads::new(bytes, &[4093]);
        let r = snapshot_streamed_from(&mut reader, bytes.len());
        assert_eq!(s, r, "{name}: read from a reader");
        s
    }

    /// The whole read of `bytes`.
    fn whole(bytes: &[u8]) -> Option<Snapshot> {
        let doc = PickleDoc::from_slice(bytes).ok()?;
        snapshot_from_doc(&doc).ok()
    }

    /// Every snapshot pickle under `dir` (none if it is absent).
    fn pickles(dir: &str) -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
            .collect();
        v.sort();
        v
    }

    /// Every snapshot of the tests (and the real ones, when they are
    /// there): a streamed read equals the whole read, or hands the file
    /// back. Those PyTorch writes, and the reshaped copies that keep the
    /// pickle's shape, stream; broken files, and containers freed with an
    /// entry but referenced again (a pool id shared by entries, entries
    /// listed again after the traces), are read whole.
    #[test]
    fn files_stream_and_equal_the_whole_read() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let mut streamed = 0;
        for dir in [
            "tests/pools/snapshots",
            "tests/snapshot_shapes",
            "tests/releases",
            "tests/malformed",
            "../shared/traces/real",
        ] {
            for path in pickles(&format!("{root}/{dir}")) {
                let bytes = std::fs::read(&path).unwrap();
                let name = path.display().to_string();
                let s = streamed_both(&bytes, &name);
                let w = whole(&bytes);
                if let Some(s) = &s {
                    assert_eq!(Some(s), w.as_ref(), "{name}");
                    streamed += 1;
                }
                let should_stream = !["/malformed/", "shared-pool-id", "entries-again"]
                    .iter()
                    .any(|k| name.contains(k));
                if should_stream {
                    assert!(s.is_some(), "{name} was read whole");
                }
            }
        }
        assert!(streamed >= 30, "{streamed}");
    }

    /// Mutated snapshots (bytes changed, memo keys redirected, cut): a
    /// streamed read that answers at all answers as the whole read does.
    /// `VRAMLAB_MUTATIONS` sets how many per file (default 200).
    #[test]
    fn mutated_files_stream_or_hand_back() {
        let n: u64 = std::env::var("VRAMLAB_MUTATIONS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(200);
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let mut files = pickles(&format!("{root}/tests/snapshot_shapes"));
        files.extend(
            pickles(&format!("{root}/tests/pools/snapshots"))
                .into_iter()
                .take(4),
        );
        let mut next = crate::test_rng::xorshift(0x9e37_79b9_7f4a_7c15);
        let (mut streamed, mut runs) = (0, 0);
        for path in files {
            let original = std::fs::read(&path).unwrap();
            for _ in 0..n {
                let mut bytes = original.clone();
                for _ in 0..1 + next() % 3 {
                    let at = (next() % bytes.len() as u64) as usize;
                    let b = next() as u8;
                    let how = next() % 4;
                    match bytes.get_mut(at) {
                        // A small change to a byte: a memo key, a length,
                        // a number.
                        Some(x) if how < 2 => *x = x.wrapping_add(1 + b % 3),
                        Some(x) if how == 2 => *x = b,
                        _ => bytes.truncate(at.max(1)),
                    }
                }
                runs += 1;
                if let Some(s) = streamed_both(&bytes, &path.display().to_string()) {
                    streamed += 1;
                    assert_eq!(Some(s), whole(&bytes), "{} mutated", path.display());
                }
            }
        }
        assert!(streamed > runs / 20, "{streamed} of {runs}");
    }
}
