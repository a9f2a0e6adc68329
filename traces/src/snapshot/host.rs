//! A snapshot's `host_traces` (2.14+: PyTorch's pinned host allocator keeps
//! its own history, docs/host-allocator-spec.md R6) as host events, put
//! among the device's events by their time.
//!
//! The entries carry PyTorch's **block** sizes, not the requests (R6.2):
//! the host requests of a trace read from a snapshot are the blocks, so a
//! replay under the recording's settings reproduces its decisions, but
//! the rounding waste itself is not in the file (a note says so).
//!
//! Entries → events: `alloc` is a `HostAlloc` (the `segment_alloc` before
//! it is the block it made); `free_requested` directly followed by the
//! block's `free_completed` is a `HostFree`, otherwise a
//! `HostFreeRequested`, whose `free_completed` becomes a
//! `HostFreeCompleted`; `segment_free` right after a `HostFree` of the
//! same block is that free's (a block above the cached-size limit), after
//! a completion it is the next request's (events are processed there),
//! and a run of others is an `empty_cache` (there is no entry for that
//! call). A block freed before it was allocated was pinned before the
//! history began: it is allocated at the start.

use std::collections::HashMap;

use crate::error::{Location, TraceError};
use crate::model::{AllocId, Event, ExpectedHostDecision, Trace};
use crate::snapshot::model::{Action, TraceEntry};

/// The host events of a snapshot, before they are put among the device's.
pub(super) struct HostWalked {
    /// Events of blocks pinned before the history began: at the start.
    /// Their `HostAlloc`s, all first (so that none takes another's block
    /// from the cache), with the blocks' bytes.
    prologue: Vec<(Event, u64)>,
    /// Then the frees that leave them cached, waiting or in use: blocks
    /// no entry mentions first, then those the entries reuse, the first
    /// reused freed last (the newest cached block is the first handed out).
    untouched_frees: Vec<Event>,
    reused_frees: Vec<Event>,
    pending_frees: Vec<Event>,
    /// Each event, and the time of the entry it comes from.
    events: Vec<(Option<i64>, Event)>,
    /// Decisions, by index into `events`.
    decisions: Vec<ExpectedHostDecision>,
    /// Blocks pinned before the history began.
    pinned_before: u32,
    /// Ids used: `first_id..next_id`.
    next_id: AllocId,
    /// `alloc` entries, and those whose request `vramlab record` noted.
    allocs: u32,
    requests_found: u32,
}

/// What the walk keeps while it reads the entries.
struct Walk<'e> {
    entries: &'e [TraceEntry],
    path: &'e str,
    out: HostWalked,
    /// Live blocks by address, and whether their free was requested.
    live: HashMap<u64, (AllocId, bool)>,
    /// Blocks made, to be given to the next `alloc`.
    made: (u32, u64),
    /// Blocks destroyed when events were processed, for the next request.
    carried: (u32, u64),
    /// The `empty_cache` event a run of `segment_free` belongs to.
    burst: Option<usize>,
    /// The requests `vramlab record` noted, by address, oldest first.
    requests: HashMap<u64, std::collections::VecDeque<u64>>,
    /// The recording's cached-size limit (`pinned_max_cached_size_mb`): a
    /// larger block goes back to CUDA at its free.
    max_cached: CacheLimit,
    /// Block addresses the entries mention so far.
    seen: std::collections::HashSet<u64>,
}

/// Walks `entries` (a snapshot's `host_traces`), naming allocations from
/// `first_id`.
pub(super) fn walk_host(
    entries: &[TraceEntry],
    blocks: &[(u64, u64, String)],
    requests: &[(u64, u64)],
    limit: CacheLimit,
    first_id: AllocId,
    path: &str,
) -> Result<HostWalked, TraceError> {
    let mut by_addr: HashMap<u64, std::collections::VecDeque<u64>> = HashMap::new();
    for &(addr, bytes) in requests {
        by_addr.entry(addr).or_default().push_back(bytes);
    }
    let mut w = Walk {
        entries,
        path,
        out: HostWalked {
            prologue: Vec::new(),
            untouched_frees: Vec::new(),
            reused_frees: Vec::new(),
            pending_frees: Vec::new(),
            events: Vec::new(),
            decisions: Vec::new(),
            pinned_before: 0,
            next_id: first_id,
            allocs: 0,
            requests_found: 0,
        },
        live: HashMap::new(),
        made: (0, 0),
        carried: (0, 0),
        burst: None,
        requests: by_addr,
        max_cached: limit,
        seen: std::collections::HashSet::new(),
    };
    let mut k = 0;
    while let Some(e) = entries.get(k) {
        k += w.entry(k, e)?;
    }
    w.untouched(blocks)?;
    Ok(w.out)
}

impl Walk<'_> {
    fn err(&self, k: usize, msg: String) -> TraceError {
        TraceError::new(
            self.path,
            Location::Entry(k as u64),
            format!("host_traces: {msg}"),
        )
    }

    fn new_id(&mut self, k: usize) -> Result<AllocId, TraceError> {
        let id = self.out.next_id;
        self.out.next_id = id
            .checked_add(1)
            .ok_or_else(|| self.err(k, "more than 4294967295 allocations".into()))?;
        Ok(id)
    }

    fn push(&mut self, time: Option<i64>, ev: Event) -> usize {
        self.out.events.push((time, ev));
        self.out.events.len() - 1
    }

    /// Records `blocks`/`bytes` made or destroyed by event `at`.
    fn decide(&mut self, at: usize, made: (u32, u64), destroyed: (u32, u64)) {
        if made.0 == 0 && destroyed.0 == 0 {
            return;
        }
        let at = at as u64;
        match self.out.decisions.last_mut() {
            Some(d) if d.event_index == at => {
                d.blocks_made += made.0;
                d.bytes_made += made.1;
                d.blocks_destroyed += destroyed.0;
                d.bytes_destroyed += destroyed.1;
            }
            _ => self.out.decisions.push(ExpectedHostDecision {
                event_index: at,
                blocks_made: made.0,
                bytes_made: made.1,
                blocks_destroyed: destroyed.0,
                bytes_destroyed: destroyed.1,
            }),
        }
    }

    /// Entry `k`; the number of entries it took.
    fn entry(&mut self, k: usize, e: &TraceEntry) -> Result<usize, TraceError> {
        let addr = e.addr.unwrap_or(0);
        if !matches!(e.action, Action::Alloc) {
            self.seen.insert(addr);
        }
        if !matches!(e.action, Action::SegmentFree) {
            self.burst = None;
        }
        match e.action {
            Action::SegmentAlloc => {
                self.made.0 += 1;
                self.made.1 += e.size;
            }
            Action::Alloc => {
                if self.live.contains_key(&addr) {
                    return Err(self.err(k, format!("alloc of block {addr:#x}, which is live")));
                }
                if self.made.0 == 0 && !self.seen.contains(&addr) {
                    // A cache hit on a block no entry made: it was cached
                    // before the history began.
                    self.cached_before(k, e.size)?;
                }
                self.seen.insert(addr);
                let id = self.new_id(k)?;
                self.live.insert(addr, (id, false));
                let size = self.request_of(addr, e.size);
                let at = self.push(e.time_us, Event::HostAlloc { id, size });
                let made = std::mem::take(&mut self.made);
                let carried = std::mem::take(&mut self.carried);
                self.decide(at, made, carried);
            }
            Action::FreeRequested => return self.free_requested(k, e, addr),
            Action::FreeCompleted => {
                let id = match self.live.remove(&addr) {
                    Some((id, true)) => id,
                    Some((_, false)) => {
                        return Err(self.err(
                            k,
                            format!("free_completed of block {addr:#x} without free_requested"),
                        ));
                    }
                    None => {
                        // Its free was requested before the history began.
                        let id = self.pinned_before(k, e)?;
                        self.out.pending_frees.push(Event::HostFreeRequested { id });
                        id
                    }
                };
                self.push(e.time_us, Event::HostFreeCompleted { id });
                if let Some(n) = self.entries.get(k + 1) {
                    let own = self.own_release(e.size, k + 2);
                    if n.action == Action::SegmentFree && n.addr == Some(addr) && own {
                        // Destroyed when its event was processed: at the
                        // next request (or empty_cache).
                        self.carried.0 += 1;
                        self.carried.1 += n.size;
                        return Ok(2);
                    }
                }
            }
            Action::SegmentFree => {
                let at = match self.burst {
                    Some(at) => at,
                    None => {
                        let at = self.push(e.time_us, Event::HostEmptyCache);
                        let carried = std::mem::take(&mut self.carried);
                        self.decide(at, (0, 0), carried);
                        self.burst = Some(at);
                        at
                    }
                };
                self.decide(at, (0, 0), (1, e.size));
            }
            // Nothing else changes host memory hands.
            _ => {}
        }
        Ok(1)
    }

    /// The request behind an `alloc` of a `block`-byte block at `addr`,
    /// where `vramlab record` noted it (else the block).
    fn request_of(&mut self, addr: u64, block: u64) -> u64 {
        self.out.allocs += 1;
        let noted = self.requests.get_mut(&addr).and_then(|q| {
            // A request the block holds; one larger was another block's.
            while q.front().is_some_and(|&n| n > block) {
                q.pop_front();
            }
            q.pop_front()
        });
        match noted {
            Some(n) => {
                self.out.requests_found += 1;
                n
            }
            None => block,
        }
    }

    /// A block of `size` bytes cached before the history began: made and
    /// freed at the start.
    fn cached_before(&mut self, k: usize, size: u64) -> Result<(), TraceError> {
        let id = self.new_id(k)?;
        self.out.pinned_before += 1;
        self.out
            .prologue
            .push((Event::HostAlloc { id, size }, size));
        self.out.reused_frees.push(Event::HostFree { id });
        Ok(())
    }

    /// The blocks of `host_segments` at the dump that no entry mentions:
    /// pinned before the history began and untouched since (weights pinned
    /// at load time, in a snapshot dumped mid-run), made at the start in
    /// the state they were left in.
    fn untouched(&mut self, blocks: &[(u64, u64, String)]) -> Result<(), TraceError> {
        for (addr, size, state) in blocks {
            if self.seen.contains(addr) {
                continue;
            }
            let id = self.new_id(self.entries.len())?;
            self.out.pinned_before += 1;

            let asked = self.request_of(*addr, *size);
            self.out
                .prologue
                .push((Event::HostAlloc { id, size: asked }, *size));
            match state.as_str() {
                "inactive" => self.out.untouched_frees.push(Event::HostFree { id }),
                "active_pending_free" => {
                    self.out.pending_frees.push(Event::HostFreeRequested { id });
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A block pinned before the history began: allocated at the start.
    fn pinned_before(&mut self, k: usize, e: &TraceEntry) -> Result<AllocId, TraceError> {
        let id = self.new_id(k)?;
        self.out.pinned_before += 1;
        let size = self.request_of(e.addr.unwrap_or(0), e.size);
        self.out
            .prologue
            .push((Event::HostAlloc { id, size }, e.size));
        Ok(id)
    }

    fn free_requested(&mut self, k: usize, e: &TraceEntry, addr: u64) -> Result<usize, TraceError> {
        let id = match self.live.get(&addr) {
            Some(&(id, false)) => id,
            Some(&(_, true)) => {
                return Err(self.err(
                    k,
                    format!("free_requested of block {addr:#x}, whose free was already requested"),
                ));
            }
            None => self.pinned_before(k, e)?,
        };
        let next = self.entries.get(k + 1);
        let immediate =
            next.is_some_and(|n| n.action == Action::FreeCompleted && n.addr == Some(addr));
        if !immediate {
            self.live.insert(addr, (id, true));
            self.push(e.time_us, Event::HostFreeRequested { id });
            return Ok(1);
        }
        self.live.remove(&addr);
        let at = self.push(e.time_us, Event::HostFree { id });
        let after = self.entries.get(k + 2);
        let alone = self.own_release(e.size, k + 3);
        if let Some(n) = after.filter(|n| n.action == Action::SegmentFree && n.addr == Some(addr)) {
            if alone {
                self.decide(at, (0, 0), (1, n.size));
                return Ok(3);
            }
        }
        Ok(2)
    }
}

/// The recording's per-block cache limit, as far as the snapshot says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CacheLimit {
    /// Blocks above it are released at their free.
    Bytes(u64),
    /// No limit: a block is only released by `empty_cache`.
    Unlimited,
    /// The snapshot does not say.
    Unknown,
}

impl CacheLimit {
    /// From a snapshot's `allocator_settings`: its `max_cached_size` in
    /// bytes (−1: none, 2.13+), else `pinned_max_cached_size_mb` of its
    /// settings string.
    pub(super) fn of(other: Option<&str>, conf: Option<&str>) -> CacheLimit {
        if let Some(v) = other.and_then(|v| v.trim().parse::<i64>().ok()) {
            return u64::try_from(v).map_or(CacheLimit::Unlimited, CacheLimit::Bytes);
        }
        let mb = conf.and_then(|c| {
            c.split(',').find_map(|kv| {
                let (k, v) = kv.split_once(':')?;
                (k.trim() == "pinned_max_cached_size_mb").then(|| v.trim().parse::<u64>().ok())?
            })
        });
        mb.map_or(CacheLimit::Unknown, |mb| {
            CacheLimit::Bytes(mb.saturating_mul(1 << 20))
        })
    }
}

impl Walk<'_> {
    /// Whether a `segment_free` of a block of `size` right after its free
    /// is that free's own release (a block above the cached-size limit),
    /// not the first of an `empty_cache`'s; without the recorded limit,
    /// a release alone (entry `next` is no release) is taken for the
    /// free's.
    fn own_release(&self, size: u64, next: usize) -> bool {
        match self.max_cached {
            CacheLimit::Bytes(limit) => size > limit,
            CacheLimit::Unlimited => false,
            CacheLimit::Unknown => self
                .entries
                .get(next)
                .is_none_or(|n| n.action != Action::SegmentFree),
        }
    }
}

/// Puts the host events of `host` among `t`'s events: each after the
/// device's events of entries no later than it (`starts[k]`: the device
/// events before device entry `k`; `times[k]`: that entry's time), and
/// moves every event index the trace keeps.
pub(super) fn interleave(t: &mut Trace, host: HostWalked, starts: &[u32], times: &[Option<i64>]) {
    let mut prologue: Vec<Event> = host.prologue.iter().map(|&(e, _)| e).collect();
    prologue.extend_from_slice(&host.untouched_frees);
    prologue.extend(host.reused_frees.iter().rev());
    prologue.extend_from_slice(&host.pending_frees);
    let n_host = prologue.len() + host.events.len();
    if n_host == 0 {
        return;
    }
    let total = t.events.len();
    // The device position of each host event (an entry without a time
    // stays where the one before it is).
    let mut k = 0usize;
    let positions: Vec<usize> = host
        .events
        .iter()
        .map(|(time, _)| {
            if let Some(time) = time {
                while times.get(k).is_some_and(|d| d.is_none_or(|d| d <= *time)) {
                    k += 1;
                }
            }
            starts.get(k).map_or(total, |&s| s as usize).min(total)
        })
        .collect();
    let mut device_new = Vec::with_capacity(total + 1);
    let mut host_new = Vec::with_capacity(n_host);
    let mut events = Vec::with_capacity(total + n_host);
    events.extend_from_slice(&prologue);
    let mut h = 0usize;
    for (i, ev) in t.events.iter().enumerate() {
        while let (Some(&p), Some((_, hev))) = (positions.get(h), host.events.get(h)) {
            if p > i {
                break;
            }
            host_new.push(events.len() as u64);
            events.push(*hev);
            h += 1;
        }
        device_new.push(events.len() as u64);
        events.push(*ev);
    }
    for (_, hev) in host.events.iter().skip(h) {
        host_new.push(events.len() as u64);
        events.push(*hev);
    }
    device_new.push(events.len() as u64);
    let moved = |i: u64| device_new.get(i as usize).copied().unwrap_or(i);
    t.move_event_indices(moved);
    // The blocks pinned before the history began are made at the start.
    let made_first =
        host.prologue
            .iter()
            .enumerate()
            .map(|(i, &(_, bytes))| ExpectedHostDecision {
                event_index: i as u64,
                blocks_made: 1,
                bytes_made: bytes,
                blocks_destroyed: 0,
                bytes_destroyed: 0,
            });
    let moved_host = host.decisions.into_iter().map(|mut d| {
        d.event_index = host_new.get(d.event_index as usize).copied().unwrap_or(0);
        d
    });
    t.expected_host = Some(made_first.chain(moved_host).collect());
    t.events = events;
    t.num_ids = t.num_ids.max(host.next_id);
    if !t.alloc_frames.is_empty() {
        t.alloc_frames.resize(t.num_ids as usize, None);
    }
    if let Some(x) = &mut t.expected {
        x.alloc_addresses.resize(t.num_ids as usize, None);
    }
    t.host_events = true;
    // Read by the advice: block sizes cannot show what rounding wasted.
    let (sizes, words) = match (host.requests_found, host.allocs) {
        (f, n) if f == n => (
            "requests",
            "their sizes are the requests `vramlab record` noted".to_string(),
        ),
        (0, _) => (
            "blocks",
            "their sizes are PyTorch's blocks (the requests are not recorded), so the rounding waste is not measured: record with `vramlab record` for the requests".to_string(),
        ),
        (f, n) => (
            "blocks",
            format!(
                "{f} of their {n} sizes are the requests `vramlab record` noted, the others PyTorch's blocks"
            ),
        ),
    };
    t.header.extra.insert("host_sizes".into(), sizes.into());
    t.notes.push(format!(
        "pinned host memory: {n_host} event(s) from the snapshot's host_traces and host_segments, put among the device's by time; {words}{}",
        if host.pinned_before > 0 {
            format!(
                "; {} block(s) pinned before the history began are made at the start (in use, cached or waiting, as the entries and host_segments show)",
                host.pinned_before
            )
        } else {
            String::new()
        }
    ));
}
