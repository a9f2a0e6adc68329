//! The allocator state at the first entry of a recording that starts
//! mid-run (the memory history was started after the model was loaded, or
//! its ring buffer overflowed).
//!
//! Two things are rebuilt, separately, so that one failing does not take
//! the other with it:
//!
//! * **The blocks in use** ([`InitialState::live`]): the addresses the
//!   trace frees before allocating them, plus the final allocated blocks
//!   the trace never mentions (their sizes are exact). This always works,
//!   and is all a *fresh* start needs.
//! * **The recorded layout** ([`InitialState::segments`]): the segments
//!   that existed are the final `segments` plus those the trace frees
//!   before allocating them, minus those it allocates first. Expandable
//!   segments' mapped pages are the final mapped ranges with the trace's
//!   `segment_map`s undone and `segment_unmap`s redone, walking backwards.
//!   Block sizes follow from two invariants of PyTorch's allocator: free
//!   neighbours are always merged, so every gap between blocks in use is
//!   one free block; and a block is its rounded request, except that a
//!   block of a large cudaMalloc segment keeps a remainder of 1 MiB or less
//!   unsplit (`should_split`), and an oversize block is never split. When
//!   the layout cannot be rebuilt, [`InitialState::layout_error`] says why.

use std::collections::{BTreeMap, HashMap};

use crate::model::*;
use crate::snapshot::model::*;
use crate::snapshot::size_rules::SizeRules;
use crate::snapshot::walk::{Walked, put};

const MIB: u64 = 1 << 20;
/// Every small-pool cudaMalloc segment is 2 MiB.
const SMALL_BUFFER: u64 = 2 * MIB;

/// A block in use at the first entry, before its size is settled.
#[derive(Debug, Clone, Copy)]
struct Pending {
    address: u64,
    /// Exact size (final blocks the trace never touches).
    exact: Option<u64>,
    requested: u64,
    stream: u64,
    state: InitialBlockState,
    /// Entry at which the trace frees it (`usize::MAX`: never).
    freed_at: usize,
}

/// Rebuilds the initial state of one device; `None` when the recording
/// starts from an empty allocator. `next_id` and the expected addresses
/// are extended with the ids of final blocks the trace never mentions.
pub(super) fn initial_state(
    segments: &[&Segment],
    w: &mut Walked,
    rules: &SizeRules<'_>,
) -> Option<InitialState> {
    let first_kind = first_segment_event(w);
    let starts = SegmentsAtStart::of(segments, w, &first_kind, rules.large_page);
    let mut pending = live_at_start(segments, w, &starts);
    pending.sort_by_key(|b| b.address);
    if starts.is_empty() && pending.is_empty() {
        return None;
    }
    let mut streams = StreamInterner::default();
    let live: Vec<InitialLive> = pending
        .iter()
        .map(|b| InitialLive {
            address: b.address,
            requested: b.requested,
            stream: streams.index(&mut w.trace, b.stream),
            state: b.state,
            pool: w.pools.pool_at_start(b.address),
        })
        .collect();
    let mut state = InitialState {
        live,
        ..Default::default()
    };
    match layout(&starts, &pending, w, rules, &mut streams) {
        Ok((segs, reservations)) => {
            state.segments = segs;
            state.reservations = reservations;
        }
        Err(e) => state.layout_error = Some(e),
    }
    Some(state)
}

/// The first segment event at each address: (kind, size, stream).
fn first_segment_event(w: &Walked) -> HashMap<u64, (SegmentEventKind, u64, u64)> {
    let mut first = HashMap::new();
    for e in &w.segment_entries {
        first.entry(e.address).or_insert((e.kind, e.size, e.stream));
    }
    first
}

/// A mapped range of an expandable segment: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    end: u64,
    stream: u64,
    is_small: bool,
}

/// What existed at the first entry: cudaMalloc segments (base → size,
/// stream, small pool) and expandable segments' mapped ranges.
struct SegmentsAtStart {
    plain: BTreeMap<u64, (u64, u64, bool)>,
    mapped: BTreeMap<u64, Range>,
    /// A segment whose extent is impossible (reported by the layout).
    bad: Option<String>,
    /// Page size of large expandable segments.
    large_page: u64,
}

impl SegmentsAtStart {
    fn of(
        segments: &[&Segment],
        w: &Walked,
        first_kind: &HashMap<u64, (SegmentEventKind, u64, u64)>,
        large_page: u64,
    ) -> Self {
        let mut s = SegmentsAtStart {
            plain: BTreeMap::new(),
            mapped: BTreeMap::new(),
            bad: None,
            large_page,
        };
        for seg in segments {
            if seg.address.checked_add(seg.total_size).is_none() {
                s.bad.get_or_insert(format!(
                    "the segment at {:#x} of {} bytes runs past the end of the address space",
                    seg.address, seg.total_size
                ));
                continue;
            }
            if seg.is_expandable {
                s.add_mapped(seg.address, seg.total_size, seg.stream, seg.is_small);
            } else if !first_kind.contains_key(&seg.address) {
                s.plain
                    .insert(seg.address, (seg.total_size, seg.stream, seg.is_small));
            }
        }
        for (&addr, &(kind, size, stream)) in first_kind {
            if kind == SegmentEventKind::Free {
                if addr.checked_add(size).is_none() {
                    s.bad.get_or_insert(format!(
                        "the segment at {addr:#x} of {size} bytes runs past the end of the address space"
                    ));
                    continue;
                }
                s.plain.insert(addr, (size, stream, size == SMALL_BUFFER));
            }
        }
        // Undo the trace's page mappings, newest first.
        for e in w.segment_entries.iter().rev() {
            let Some(end) = e.address.checked_add(e.size) else {
                continue;
            };
            match e.kind {
                SegmentEventKind::Map => s.remove_mapped(e.address, end),
                SegmentEventKind::Unmap => {
                    let small = s.pool_of(e.address, end, e.stream, e.size);
                    s.add_mapped(e.address, e.size, e.stream, small);
                }
                _ => {}
            }
        }
        s
    }

    fn is_empty(&self) -> bool {
        self.plain.is_empty() && self.mapped.is_empty()
    }

    /// The pool of an unmapped range: that of a mapped neighbour on the
    /// same stream, else small unless its size is a multiple of the large
    /// page.
    fn pool_of(&self, start: u64, end: u64, stream: u64, size: u64) -> bool {
        let before = self.mapped.range(..=start).next_back();
        let after = self.mapped.range(end..).next();
        for (&a, r) in before.into_iter().chain(after) {
            if r.stream == stream && (r.end == start || a == end) {
                return r.is_small;
            }
        }
        self.large_page == 0 || size % self.large_page != 0
    }

    fn add_mapped(&mut self, start: u64, size: u64, stream: u64, is_small: bool) {
        let mut start = start;
        let mut end = start.saturating_add(size);
        // Merge with touching or overlapping ranges of the same kind.
        while let Some((&a, &r)) = self.mapped.range(..=end).next_back() {
            if r.end < start || r.stream != stream || r.is_small != is_small {
                break;
            }
            self.mapped.remove(&a);
            start = start.min(a);
            end = end.max(r.end);
        }
        self.mapped.insert(
            start,
            Range {
                end,
                stream,
                is_small,
            },
        );
    }

    fn remove_mapped(&mut self, start: u64, end: u64) {
        let hit: Vec<(u64, Range)> = self
            .mapped
            .range(..end)
            .rev()
            .take_while(|(_, r)| r.end > start)
            .map(|(&a, &r)| (a, r))
            .collect();
        for (a, r) in hit {
            self.mapped.remove(&a);
            if a < start {
                self.mapped.insert(a, Range { end: start, ..r });
            }
            if r.end > end {
                self.mapped.insert(end, r);
            }
        }
    }

    /// The segment or mapped range holding `addr`: (base, end, stream,
    /// small, expandable).
    fn holder(&self, addr: u64) -> Option<(u64, u64, u64, bool, bool)> {
        let plain = self
            .plain
            .range(..=addr)
            .next_back()
            .filter(|(b, (size, ..))| addr < b.saturating_add(*size))
            .map(|(&b, &(size, stream, small))| (b, b + size, stream, small, false));
        plain.or_else(|| {
            self.mapped
                .range(..=addr)
                .next_back()
                .filter(|(_, r)| addr < r.end)
                .map(|(&b, r)| (b, r.end, r.stream, r.is_small, true))
        })
    }
}

/// The blocks in use at the first entry: those the trace frees first, and
/// the final ones it never mentions inside segments that existed then.
fn live_at_start(segments: &[&Segment], w: &mut Walked, starts: &SegmentsAtStart) -> Vec<Pending> {
    let mut out: Vec<Pending> = w
        .freed_first
        .iter()
        .map(|b| Pending {
            address: b.address,
            exact: None,
            requested: b.requested,
            stream: b.stream,
            state: if b.pending {
                InitialBlockState::PendingFree(b.id)
            } else {
                InitialBlockState::Allocated(b.id)
            },
            freed_at: b.freed_at,
        })
        .collect();
    for seg in segments {
        let existed = if seg.is_expandable {
            true // checked per block against the mapped pages below
        } else {
            starts.plain.contains_key(&seg.address)
        };
        if !existed {
            continue; // created (or re-created) during the trace
        }
        for b in &seg.blocks {
            if b.state == SnapshotBlockState::Inactive || w.touched.contains(&b.address) {
                continue;
            }
            if seg.is_expandable && starts.holder(b.address).is_none_or(|h| !h.4) {
                continue; // its pages were mapped during the trace
            }
            // Ids are 32-bit; the walk already refused traces that use
            // them all, and a snapshot holds far fewer blocks.
            let id = w.next_id;
            w.next_id = id.saturating_add(1);
            let state = if b.state == SnapshotBlockState::ActivePendingFree {
                InitialBlockState::PendingFree(id)
            } else {
                InitialBlockState::Allocated(id)
            };
            put(&mut w.expected.alloc_addresses, id, Some(b.address));
            if let Some(f) = b.frames {
                put(&mut w.trace.alloc_frames, id, Some(f.0));
            }
            out.push(Pending {
                address: b.address,
                exact: Some(b.size),
                requested: b.requested_size.unwrap_or(b.size),
                stream: seg.stream,
                state,
                freed_at: usize::MAX,
            });
        }
    }
    out
}

/// The segments (and expandable reservations) at the first entry, with
/// every block laid out; `Err` says why that cannot be done.
fn layout(
    starts: &SegmentsAtStart,
    blocks: &[Pending],
    w: &mut Walked,
    rules: &SizeRules<'_>,
    streams: &mut StreamInterner,
) -> Result<(Vec<InitialSegment>, Vec<InitialReservation>), String> {
    if let Some(bad) = &starts.bad {
        return Err(bad.clone());
    }
    // Blocks per holder (segment or mapped range base), in address order.
    let mut per_holder: BTreeMap<u64, Vec<Pending>> = BTreeMap::new();
    for b in blocks {
        let h = starts.holder(b.address).ok_or_else(|| {
            format!(
                "the block at {:#x} was in use when the recording began, but no segment holds it (the final segments are missing or incomplete)",
                b.address
            )
        })?;
        per_holder.entry(h.0).or_default().push(*b);
    }
    let mut out = Vec::new();
    let holders = starts
        .plain
        .iter()
        .map(|(&b, &(size, stream, small))| (b, b + size, stream, small, false))
        .chain(
            starts
                .mapped
                .iter()
                .map(|(&b, r)| (b, r.end, r.stream, r.is_small, true)),
        );
    let mut all: Vec<_> = holders.collect();
    all.sort_by_key(|h| h.0);
    for (base, end, stream, is_small, expandable) in all {
        let mine = per_holder.remove(&base).unwrap_or_default();
        let laid = lay_out_blocks(base, end, is_small, expandable, &mine, w, rules)?;
        out.push(InitialSegment {
            address: base,
            size: end - base,
            stream: streams.index(&mut w.trace, stream),
            is_small,
            is_expandable: expandable,
            pool: w.pools.pool_at_start(base),
            blocks: laid,
        });
    }
    let reservations = reservations(starts, w, streams);
    Ok((out, reservations))
}

/// Lays out the blocks in use of one segment (or mapped range) and the
/// free blocks between them.
fn lay_out_blocks(
    base: u64,
    end: u64,
    is_small: bool,
    expandable: bool,
    blocks: &[Pending],
    w: &Walked,
    rules: &SizeRules<'_>,
) -> Result<Vec<InitialBlock>, String> {
    let mut laid = Vec::with_capacity(blocks.len() * 2 + 1);
    let mut cursor = base;
    for (i, b) in blocks.iter().enumerate() {
        let next_start = blocks.get(i + 1).map_or(end, |n| n.address);
        if b.address < cursor {
            return Err(format!("blocks overlap at {:#x}", b.address));
        }
        if b.address > cursor {
            laid.push(free_block(cursor, b.address - cursor));
        }
        let size = match b.exact {
            Some(s) => s,
            None => block_size(b, next_start, is_small || expandable, w, rules)?,
        };
        laid.push(InitialBlock {
            address: b.address,
            size,
            requested: b.requested,
            state: b.state,
        });
        cursor = b
            .address
            .checked_add(size)
            .ok_or_else(|| format!("blocks run past the end of the segment at {base:#x}"))?;
    }
    if cursor > end {
        return Err(format!(
            "blocks run past the end of the segment at {base:#x}"
        ));
    }
    if cursor < end {
        laid.push(free_block(cursor, end - cursor));
    }
    Ok(laid)
}

fn free_block(address: u64, size: u64) -> InitialBlock {
    InitialBlock {
        address,
        size,
        requested: 0,
        state: InitialBlockState::Free,
    }
}

/// The size of a block the trace frees before allocating it.
/// `splits_exactly`: small pool or expandable, where any remainder of 512
/// bytes or more is split off, so the block is its rounded request.
fn block_size(
    b: &Pending,
    next_start: u64,
    splits_exactly: bool,
    w: &Walked,
    rules: &SizeRules<'_>,
) -> Result<u64, String> {
    // Requests of 2^60 bytes or more are never served (and rounding one
    // could overflow): taken as they are.
    let s = if b.requested < 1 << 60 {
        (rules.round)(b.requested)
    } else {
        b.requested
    };
    let room = next_start.saturating_sub(b.address);
    if s > room {
        return Err(format!(
            "the block at {:#x} needs {s} bytes but only {room} lie before the next block",
            b.address
        ));
    }
    if splits_exactly {
        return Ok(s);
    }
    if s >= rules.max_split_size || room - s <= MIB {
        return Ok(room);
    }
    // The block may have kept an unsplit remainder of up to 1 MiB when it
    // was allocated. Any block address the trace mentions in
    // (addr+s, addr+s+1 MiB] while this block is live is where it ends: no
    // large-pool block is 1 MiB or smaller, so nothing else can start there.
    let lo = b.address.saturating_add(s);
    Ok(w.first_mention
        .range(lo.saturating_add(1)..=lo.saturating_add(MIB))
        .find(|&(_, &at)| at < b.freed_at)
        .map_or(s, |(&end, _)| end - b.address))
}

/// One reservation per (stream, pool) of the mapped ranges at the start.
/// Its address is the lowest mapped address, lowered to any page the trace
/// maps or unmaps below it (at a whole number of pages from it, and not
/// past another reservation's range).
fn reservations(
    starts: &SegmentsAtStart,
    w: &mut Walked,
    streams: &mut StreamInterner,
) -> Vec<InitialReservation> {
    let mut lowest: BTreeMap<(u64, bool), u64> = BTreeMap::new();
    for (&a, r) in &starts.mapped {
        lowest.entry((r.stream, r.is_small)).or_insert(a);
    }
    let mut out = Vec::new();
    for (&(stream, is_small), &low) in &lowest {
        let page = if is_small {
            SMALL_BUFFER
        } else {
            starts.large_page.max(1)
        };
        // Another pool's or stream's range below ours bounds how far down
        // this reservation can reach.
        let floor = starts
            .mapped
            .range(..low)
            .next_back()
            .map_or(0, |(_, r)| r.end);
        let base = w
            .segment_entries
            .iter()
            .filter(|e| match e.kind {
                SegmentEventKind::Map => e.is_small == Some(is_small),
                SegmentEventKind::Unmap => {
                    (starts.large_page == 0 || e.size % starts.large_page != 0) == is_small
                }
                _ => false,
            })
            .filter(|e| e.stream == stream && e.address < low && e.address >= floor)
            .filter(|e| (low - e.address) % page == 0)
            .map(|e| e.address)
            .min()
            .unwrap_or(low);
        out.push(InitialReservation {
            address: base,
            stream: streams.index(&mut w.trace, stream),
            is_small,
            pool: w.pools.pool_at_start(base),
        });
    }
    out.sort_by_key(|r| r.address);
    out
}
