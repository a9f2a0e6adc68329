//! A binary trace (`.vlt`, `.vlt.zst`) read chunk by chunk: [`VltEvents`]
//! decodes one chunk of events at a time into the caller's buffer, checks
//! each event as it goes, and (with [`IdUse::Recycled`]) renames the
//! file's allocation ids to ids that are reused once an allocation ended,
//! so that a replay fed from it needs memory for what is live, not for
//! every allocation the file names.

use std::io::{BufRead, Read};

use rustc_hash::FxHashMap;

use super::{CHUNK, FLAG_ZSTD, MAGIC, MAX_EVENT_BYTES, MAX_META, VERSION, VERSION_1};
use super::{VERSION_2, VERSION_3, decode_meta};
use crate::csv::{IdUse, StreamCounts, StreamEnd};
use crate::error::{Location, TraceError};
use crate::model::{AllocId, Event, InitialBlockState, Trace};

/// Reads a binary trace. `path` is used in error messages.
pub fn read_binary(input: impl BufRead, path: &str) -> Result<Trace, TraceError> {
    let mut events = VltEvents::open(input, path, IdUse::Unique)?;
    let mut all = Vec::with_capacity((events.num_events as usize).min(1 << 20));
    while events.read_chunk(&mut all)? {}
    let mut end = events.finish()?;
    end.trace.events = all;
    Ok(end.trace)
}

/// The file's body: as it is, or through zstd.
enum Body<R: BufRead> {
    Plain(R),
    Zstd(Box<zstd::stream::read::Decoder<'static, R>>),
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Body::Plain(r) => r.read(buf),
            Body::Zstd(z) => z.read(buf),
        }
    }
}

/// What an allocation id of the file names while it is live, for
/// [`IdUse::Recycled`].
#[derive(Clone, Copy)]
struct Live {
    /// The id handed over in its place.
    dense: AllocId,
    /// Its free was requested (`free_requested` seen, `free_completed` not).
    requested: bool,
}

/// The file's live ids and the ids given out in their place.
#[derive(Default)]
struct Recycler {
    live: FxHashMap<AllocId, Live>,
    /// One bit per file id whose allocation ended (for the words of an
    /// error: "already freed" rather than "never allocated").
    ended: Vec<u64>,
    /// Ids whose allocation ended, to be given out again.
    spare: Vec<AllocId>,
    /// The next id never given out.
    next: AllocId,
}

impl Recycler {
    /// The recycler for `trace`, whose initial state's blocks in use are
    /// renamed `0, 1, 2, …` (the live list in its order, then any block of
    /// the segments' layout not in it; new ids start above them); the
    /// file's id of each is returned, by its new id. `Err` when two live
    /// blocks share an id.
    fn new(trace: &mut Trace) -> Result<(Self, Vec<AllocId>), String> {
        let mut r = Recycler::default();
        let mut numbers = Vec::new();
        let Some(init) = trace.initial.as_mut() else {
            return Ok((r, numbers));
        };
        for b in &mut init.live {
            let (id, requested) = match &mut b.state {
                InitialBlockState::Allocated(id) => (id, false),
                InitialBlockState::PendingFree(id) => (id, true),
                InitialBlockState::Free => continue,
            };
            let dense = numbers.len() as AllocId;
            if r.live.insert(*id, Live { dense, requested }).is_some() {
                return Err(format!("two blocks of the initial state have id {id}"));
            }
            numbers.push(*id);
            *id = dense;
        }
        // The layout's blocks name the same allocations.
        for b in init.segments.iter_mut().flat_map(|s| s.blocks.iter_mut()) {
            let (id, requested) = match &mut b.state {
                InitialBlockState::Allocated(id) => (id, false),
                InitialBlockState::PendingFree(id) => (id, true),
                InitialBlockState::Free => continue,
            };
            let next = numbers.len() as AllocId;
            let l = *r.live.entry(*id).or_insert(Live {
                dense: next,
                requested,
            });
            if l.dense == next {
                numbers.push(*id);
            }
            *id = l.dense;
        }
        r.next = numbers.len() as AllocId;
        Ok((r, numbers))
    }

    /// Renames the ids of `ev` in place; `Err` says why the event cannot
    /// be, in the words a replay of the trace read whole uses (an id that
    /// is not live where it must be, or live where it must not be).
    fn rename(&mut self, ev: &mut Event) -> Result<(), String> {
        let host = if ev.is_host() {
            "host_"
        } else if ev.is_tenant() {
            "raw_"
        } else {
            ""
        };
        match ev {
            Event::Alloc { id, .. } | Event::HostAlloc { id, .. } | Event::RawAlloc { id, .. } => {
                if self.live.contains_key(id) || self.has_ended(*id) {
                    return Err(format!(
                        "{host}alloc of id {id}, which {}",
                        self.describe(*id)
                    ));
                }
                let dense = self.spare.pop().unwrap_or_else(|| {
                    let d = self.next;
                    self.next = self.next.saturating_add(1);
                    d
                });
                let l = Live {
                    dense,
                    requested: false,
                };
                self.live.insert(*id, l);
                *id = dense;
            }
            Event::Free { .. }
            | Event::FreeRequested { .. }
            | Event::HostFree { .. }
            | Event::HostFreeRequested { .. }
            | Event::RawFree { .. } => {
                let is_free = matches!(
                    ev,
                    Event::Free { .. } | Event::HostFree { .. } | Event::RawFree { .. }
                );
                let id = match ev {
                    Event::Free { id }
                    | Event::FreeRequested { id }
                    | Event::HostFree { id }
                    | Event::HostFreeRequested { id }
                    | Event::RawFree { id } => id,
                    _ => return Ok(()),
                };
                let what = if is_free { "free" } else { "free_requested" };
                let Some(l) = self.live.get_mut(id).filter(|l| !l.requested) else {
                    return Err(format!(
                        "{host}{what} of id {id}, which {}",
                        self.describe(*id)
                    ));
                };
                if is_free {
                    let dense = l.dense;
                    self.end(*id, dense);
                    *id = dense;
                } else {
                    l.requested = true;
                    *id = l.dense;
                }
            }
            Event::FreeCompleted { id } | Event::HostFreeCompleted { id } => {
                let Some(&l) = self.live.get(id).filter(|l| l.requested) else {
                    return Err(format!(
                        "{host}free_completed of id {id}, which {} (no {host}free_requested before it)",
                        self.describe(*id)
                    ));
                };
                self.end(*id, l.dense);
                *id = l.dense;
            }
            _ => {}
        }
        Ok(())
    }

    /// The allocation of file id `id`, handed over as `dense`, ended.
    fn end(&mut self, id: AllocId, dense: AllocId) {
        self.live.remove(&id);
        self.spare.push(dense);
        let word = id as usize / 64;
        if self.ended.len() <= word {
            self.ended.resize(word + 1, 0);
        }
        if let Some(w) = self.ended.get_mut(word) {
            *w |= 1 << (id % 64);
        }
    }

    fn has_ended(&self, id: AllocId) -> bool {
        self.ended
            .get(id as usize / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    /// The state of file id `id`, as a replay's error words it.
    fn describe(&self, id: AllocId) -> &'static str {
        match self.live.get(&id) {
            Some(l) if l.requested => "has a free pending",
            Some(_) => "is live",
            None if self.has_ended(id) => "was already freed",
            None => "was never allocated",
        }
    }
}

/// A binary trace being read: open it (the header and metadata are read
/// at once), take its events with [`VltEvents::next_block`] until it says
/// the end, then [`VltEvents::finish`].
pub struct VltEvents<R: BufRead> {
    body: Body<R>,
    path: String,
    /// The trace without its events.
    trace: Trace,
    /// Events the metadata says the file holds.
    num_events: u64,
    /// Offset in the (decompressed) body, for messages.
    at: u64,
    /// Events decoded so far; `alloc` events among them.
    read: u64,
    allocs: u64,
    /// `HostAlloc` and `RawAlloc` events read (they take ids too).
    host_allocs: u64,
    done: bool,
    /// One chunk's bytes (kept between chunks).
    bytes: Vec<u8>,
    /// With [`IdUse::Recycled`], the live ids.
    recycler: Option<Recycler>,
    /// The file's id of each `alloc` of the last block (recycled ids only).
    numbers: Vec<AllocId>,
    /// The file's id of each live block of the initial state, by the id
    /// handed over (recycled ids only).
    initial_numbers: Vec<AllocId>,
}

impl<R: BufRead> VltEvents<R> {
    /// Starts reading `input` (named `path` in errors): the header and the
    /// metadata, so that [`VltEvents::trace`] holds everything but the
    /// events.
    pub fn open(mut input: R, path: &str, id_use: IdUse) -> Result<Self, TraceError> {
        let mut head = [0u8; 12];
        read_exact(&mut input, &mut head, 0, path, "the file header")?;
        if &head[..8] != MAGIC {
            return Err(TraceError::new(
                path,
                Location::Byte(0),
                "not a vramlab binary trace (the file does not start with VRAMLABT)",
            ));
        }
        let version = u16::from_le_bytes([head[8], head[9]]);
        if ![
            super::VERSION_TENANTS,
            super::VERSION_HOST,
            VERSION,
            VERSION_3,
            VERSION_2,
            VERSION_1,
        ]
        .contains(&version)
        {
            return Err(TraceError::new(
                path,
                Location::Byte(8),
                format!(
                    "binary trace format version {version}; this version of vramlab reads versions {VERSION_1} to {}",
                    super::VERSION_TENANTS
                ),
            ));
        }
        let flags = u16::from_le_bytes([head[10], head[11]]);
        if flags & !FLAG_ZSTD != 0 {
            return Err(TraceError::new(
                path,
                Location::Byte(10),
                format!("unknown flags {flags:#06x}"),
            ));
        }
        let body = if flags & FLAG_ZSTD != 0 {
            let z = zstd::stream::read::Decoder::with_buffer(input).map_err(|e| {
                TraceError::new(
                    path,
                    Location::Byte(12),
                    format!("cannot start zstd decoding: {e}"),
                )
            })?;
            Body::Zstd(Box::new(z))
        } else {
            Body::Plain(input)
        };
        let mut s = VltEvents {
            body,
            path: path.to_string(),
            trace: Trace::default(),
            num_events: 0,
            at: 12,
            read: 0,
            allocs: 0,
            host_allocs: 0,
            done: false,
            bytes: Vec::new(),
            recycler: None,
            numbers: Vec::new(),
            initial_numbers: Vec::new(),
        };
        s.read_meta(version)?;
        if id_use == IdUse::Recycled {
            let (r, numbers) = Recycler::new(&mut s.trace)
                .map_err(|m| TraceError::new(path, Location::File, m))?;
            s.recycler = Some(r);
            s.initial_numbers = numbers;
        }
        Ok(s)
    }

    /// The trace: header, streams, initial state, pools, phases, notes,
    /// frames and the expected record; no events.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Events handed over so far.
    pub fn handed_over(&self) -> u64 {
        self.read
    }

    /// The file's id of each `alloc` in the last block, in order (the
    /// allocation's name in the trace read whole); empty unless ids are
    /// recycled.
    pub fn numbers(&self) -> &[AllocId] {
        &self.numbers
    }

    /// The file's id of each live block of the initial state, by the id
    /// [`VltEvents::trace`] gives it; empty unless ids are recycled (then
    /// the initial state's blocks are renamed `0, 1, 2, …`).
    pub fn initial_numbers(&self) -> &[AllocId] {
        &self.initial_numbers
    }

    /// Moves the next chunk of events into `out` (cleared first; its
    /// capacity is kept). `Ok(false)` at the end of the events.
    pub fn next_block(&mut self, out: &mut Vec<Event>) -> Result<bool, TraceError> {
        out.clear();
        self.numbers.clear();
        self.read_chunk(out)
    }

    /// Reads what is left and ends the read: the trace (no events) and the
    /// counts of the whole file. The end marker must end the file, and the
    /// file must hold the events and ids its metadata says.
    pub fn finish(mut self) -> Result<StreamEnd, TraceError> {
        let mut rest = Vec::new();
        while self.read_chunk(&mut rest)? {
            rest.clear();
        }
        self.check_nothing_after()?;
        let err = |m: String| TraceError::new(&*self.path, Location::File, m);
        if self.read != self.num_events {
            return Err(err(format!(
                "the file says {} events but holds {}",
                self.num_events, self.read
            )));
        }
        // Every id is an allocation or a block of the initial state; a
        // larger count would only size the replay's per-id tables (a few
        // bytes of file could otherwise claim four billion ids).
        let initial = self
            .trace
            .initial
            .as_ref()
            .map_or(0, |i| i.live_blocks() as u64);
        if u64::from(self.trace.num_ids) > self.allocs + self.host_allocs + initial {
            return Err(err(format!(
                "the file declares {} allocation ids but holds {} allocations and {initial} live initial blocks",
                self.trace.num_ids,
                self.allocs + self.host_allocs
            )));
        }
        Ok(StreamEnd {
            counts: StreamCounts {
                events: self.read,
                allocs: self.allocs,
            },
            trace: self.trace,
        })
    }

    /// Reads the metadata of a file of `version` into the trace.
    fn read_meta(&mut self, version: u16) -> Result<(), TraceError> {
        let path = &*self.path;
        let at = self.at;
        let meta_len = read_u32(&mut self.body, at, path, "the metadata length")? as usize;
        let at = at + 4;
        if meta_len > MAX_META {
            return Err(TraceError::new(
                path,
                Location::Byte(at),
                format!("metadata of {meta_len} bytes is implausible"),
            ));
        }
        let m = read_block(&mut self.body, meta_len, at, path, "the metadata")?;
        let corrupt = |why: String| {
            TraceError::new(path, Location::Byte(at), format!("corrupt metadata: {why}"))
        };
        let (mut meta, phases, mut initial_pools, expected_host) =
            decode_meta(&m, version).map_err(|e| corrupt(e.to_string()))?;
        let pools = std::mem::take(&mut initial_pools.pools);
        if let Some(x) = &mut meta.expected {
            initial_pools.apply_final(x).map_err(corrupt)?;
        }
        if let Some(init) = &mut meta.initial {
            initial_pools.apply(init).map_err(corrupt)?;
        }
        // Event indices are 32-bit throughout (expected records, device logs).
        if meta.num_events > u64::from(u32::MAX) {
            return Err(TraceError::new(
                path,
                Location::Byte(at),
                format!(
                    "the file says {} events; vramlab reads at most {} events per trace",
                    meta.num_events,
                    u32::MAX
                ),
            ));
        }
        if meta.streams.is_empty() {
            return Err(TraceError::new(
                path,
                Location::Entry(0),
                "the stream table is empty",
            ));
        }
        self.at = at + meta_len as u64;
        self.num_events = meta.num_events;
        self.trace = Trace {
            header: meta.header,
            streams: meta.streams,
            initial: meta.initial,
            events: Vec::new(),
            num_ids: meta.num_ids,
            expected: meta.expected,
            notes: meta.notes,
            frames: meta.frames,
            alloc_frames: meta.alloc_frames,
            phases,
            pools,
            host_events: version >= super::VERSION_HOST,
            tenant_events: version >= super::VERSION_TENANTS,
            expected_host,
        };
        Ok(())
    }

    /// Decodes the next chunk onto the end of `out`, checking each event
    /// (and renaming its ids, when they are recycled); `Ok(false)` at the
    /// end marker.
    fn read_chunk(&mut self, out: &mut Vec<Event>) -> Result<bool, TraceError> {
        if self.done {
            return Ok(false);
        }
        let path = &*self.path;
        let at = self.at;
        let count = read_u32(&mut self.body, at, path, "an event chunk header")? as usize;
        let len = read_u32(&mut self.body, at + 4, path, "an event chunk header")? as usize;
        let at = at + 8;
        self.at = at;
        if count == 0 {
            self.done = true;
            return Ok(false);
        }
        let bad = |m: String| TraceError::new(path, Location::Byte(at - 8), m);
        if count > CHUNK || len > count * MAX_EVENT_BYTES {
            return Err(bad(format!(
                "corrupt event chunk ({count} events in {len} bytes)"
            )));
        }
        if self.read + count as u64 > self.num_events {
            // Stop before reading more than the file says it holds.
            return Err(bad(format!(
                "the file says {} events but holds more",
                self.num_events
            )));
        }
        fill_block(
            &mut self.body,
            &mut self.bytes,
            len,
            at,
            path,
            "an event chunk",
        )?;
        let corrupt = |m: String| TraceError::new(path, Location::Byte(at), m);
        // A chunk is a postcard sequence: its length, then the events.
        let (n, mut rest) = postcard::take_from_bytes::<u64>(&self.bytes)
            .map_err(|e| corrupt(format!("corrupt event chunk: {e}")))?;
        if n != count as u64 {
            return Err(corrupt(format!(
                "event chunk says {count} events but holds {n}"
            )));
        }
        let first = out.len();
        out.reserve(count);
        for _ in 0..count {
            let (ev, tail) = postcard::take_from_bytes::<Event>(rest)
                .map_err(|e| corrupt(format!("corrupt event chunk: {e}")))?;
            out.push(ev);
            rest = tail;
        }
        if !rest.is_empty() {
            return Err(corrupt(format!(
                "corrupt event chunk: {} bytes after its {count} events",
                rest.len()
            )));
        }
        let base = self.read;
        for (k, ev) in out.iter_mut().skip(first).enumerate() {
            let i = base + k as u64;
            let entry = |m: String| TraceError::new(path, Location::Entry(i), m);
            check_event(&self.trace, ev).map_err(entry)?;
            if let Event::Alloc { id, .. }
            | Event::HostAlloc { id, .. }
            | Event::RawAlloc { id, .. } = *ev
            {
                if matches!(ev, Event::Alloc { .. }) {
                    self.allocs += 1;
                } else {
                    self.host_allocs += 1;
                }
                if self.recycler.is_some() {
                    self.numbers.push(id);
                }
            }
            if let Some(r) = &mut self.recycler {
                r.rename(ev).map_err(entry)?;
            }
        }
        self.read += count as u64;
        self.at = at + len as u64;
        Ok(true)
    }

    /// Nothing may follow the end marker (two files concatenated would
    /// otherwise read as the first alone).
    fn check_nothing_after(&mut self) -> Result<(), TraceError> {
        let mut one = [0u8; 1];
        let trailing = loop {
            match self.body.read(&mut one) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(TraceError::new(
                        &*self.path,
                        Location::Byte(self.at),
                        format!("cannot read after the end of the events: {e}"),
                    ));
                }
            }
        };
        if trailing > 0 {
            return Err(TraceError::new(
                &*self.path,
                Location::Byte(self.at),
                "data after the end of the trace (two files concatenated?)",
            ));
        }
        Ok(())
    }
}

/// The checks of [`super::validate`] on one event: its id below the
/// trace's id count, its pool declared, its stream in the table.
fn check_event(t: &Trace, e: &Event) -> Result<(), String> {
    if let Some(id) = e.id() {
        if id >= t.num_ids {
            return Err(format!(
                "id {id} is not below the trace's {} ids",
                t.num_ids
            ));
        }
    }
    if let Some(pool) = e.pool() {
        if pool as usize >= t.pools.len() {
            return Err(format!(
                "pool index {pool} is not among the trace's {} private pools",
                t.pools.len()
            ));
        }
        let engine = t
            .pools
            .get(pool as usize)
            .is_some_and(|d| d.kind == crate::pools::PrivatePoolKind::Engine);
        if matches!(e, Event::PoolSleep { .. } | Event::PoolWake { .. }) && !engine {
            return Err(format!(
                "pool {pool} sleeps or wakes, but it is not an engine pool"
            ));
        }
    }
    if let Event::Alloc { stream, .. } | Event::CaptureBegin { stream, .. } = *e {
        if stream as usize >= t.streams.len() {
            return Err(format!("stream index {stream} is not in the stream table"));
        }
    }
    Ok(())
}

fn read_exact(
    r: &mut impl Read,
    buf: &mut [u8],
    at: u64,
    path: &str,
    what: &str,
) -> Result<(), TraceError> {
    r.read_exact(buf).map_err(|e| {
        let msg = if e.kind() == std::io::ErrorKind::UnexpectedEof {
            format!("file truncated while reading {what}")
        } else {
            format!("cannot read {what}: {e}")
        };
        TraceError::new(path, Location::Byte(at), msg)
    })
}

fn read_u32(r: &mut impl Read, at: u64, path: &str, what: &str) -> Result<u32, TraceError> {
    let mut b = [0u8; 4];
    read_exact(r, &mut b, at, path, what)?;
    Ok(u32::from_le_bytes(b))
}

/// Reads `len` bytes without trusting `len` for the allocation.
fn read_block(
    r: &mut impl Read,
    len: usize,
    at: u64,
    path: &str,
    what: &str,
) -> Result<Vec<u8>, TraceError> {
    let mut buf = Vec::new();
    fill_block(r, &mut buf, len, at, path, what)?;
    Ok(buf)
}

/// Reads `len` bytes into `buf` (cleared first), growing it only as the
/// bytes arrive.
fn fill_block(
    r: &mut impl Read,
    buf: &mut Vec<u8>,
    len: usize,
    at: u64,
    path: &str,
    what: &str,
) -> Result<(), TraceError> {
    buf.clear();
    buf.reserve(len.min(1 << 20));
    let got = r.take(len as u64).read_to_end(buf).map_err(|e| {
        TraceError::new(path, Location::Byte(at), format!("cannot read {what}: {e}"))
    })?;
    if got != len {
        return Err(TraceError::new(
            path,
            Location::Byte(at),
            format!("file truncated while reading {what} ({got} of {len} bytes)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::write_binary;
    use crate::model::TraceHeader;

    fn file_of(t: &Trace) -> Vec<u8> {
        let mut out = Vec::new();
        write_binary(t, &mut out, false, "t.vlt").unwrap();
        out
    }

    /// `n` allocations, each freed before the next but every fifth, whose
    /// free is requested and completed later.
    fn trace(n: u32) -> Trace {
        let mut t = Trace::new(TraceHeader::default());
        for id in 0..n {
            t.events.push(Event::Alloc {
                id,
                stream: 0,
                size: 512,
            });
            if id % 5 == 0 {
                t.events.push(Event::FreeRequested { id });
            } else {
                t.events.push(Event::Free { id });
            }
        }
        for id in (0..n).step_by(5) {
            t.events.push(Event::FreeCompleted { id });
        }
        t.num_ids = n;
        t
    }

    fn read_all(bytes: &[u8], id_use: IdUse) -> Result<(Vec<Event>, Vec<AllocId>), TraceError> {
        let mut e = VltEvents::open(bytes, "t.vlt", id_use)?;
        let (mut all, mut numbers, mut block) = (Vec::new(), Vec::new(), Vec::new());
        while e.next_block(&mut block)? {
            all.extend_from_slice(&block);
            numbers.extend_from_slice(e.numbers());
        }
        e.finish()?;
        Ok((all, numbers))
    }

    /// Recycled ids stay below the allocations live at once, and the
    /// numbers give back the file's ids.
    #[test]
    fn recycled_ids_follow_what_is_live() {
        let t = trace(100_000);
        let (events, numbers) = read_all(&file_of(&t), IdUse::Recycled).unwrap();
        assert_eq!(events.len(), t.events.len());
        let most_live = 100_000 / 5 + 1;
        assert!(
            events
                .iter()
                .filter_map(Event::id)
                .all(|id| id <= most_live)
        );
        let file_ids: Vec<AllocId> = t
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Alloc { id, .. } => Some(*id),
                _ => None,
            })
            .collect();
        assert_eq!(numbers, file_ids);
        // Read whole, the ids are the file's.
        let (whole, numbers) = read_all(&file_of(&t), IdUse::Unique).unwrap();
        assert_eq!(whole, t.events);
        assert!(numbers.is_empty());
    }

    /// With recycled ids, an event that names an id in the wrong state is
    /// an error at that event.
    #[test]
    fn misused_ids_are_errors_at_their_event() {
        let cases: [(&[Event], &str); 4] = [
            (
                &[Event::Free { id: 1 }],
                "t.vlt: entry 0: free of id 1, which was never allocated",
            ),
            (
                &[
                    Event::Alloc {
                        id: 0,
                        stream: 0,
                        size: 1,
                    },
                    Event::Alloc {
                        id: 0,
                        stream: 0,
                        size: 1,
                    },
                ],
                "t.vlt: entry 1: alloc of id 0, which is live",
            ),
            (
                &[
                    Event::Alloc {
                        id: 0,
                        stream: 0,
                        size: 1,
                    },
                    Event::FreeCompleted { id: 0 },
                ],
                "t.vlt: entry 1: free_completed of id 0, which is live (no free_requested before it)",
            ),
            (
                &[
                    Event::Alloc {
                        id: 0,
                        stream: 0,
                        size: 1,
                    },
                    Event::FreeRequested { id: 0 },
                    Event::Free { id: 0 },
                ],
                "t.vlt: entry 2: free of id 0, which has a free pending",
            ),
        ];
        for (events, want) in cases {
            let mut t = Trace::new(TraceHeader::default());
            t.events = events.to_vec();
            t.num_ids = 2;
            let err = read_all(&file_of(&t), IdUse::Recycled).unwrap_err();
            assert_eq!(err.to_string(), want);
        }
    }

    /// An event outside the trace's tables is an error at that event,
    /// whether ids are recycled or not.
    #[test]
    fn events_are_checked_as_they_are_read() {
        let mut t = trace(10);
        t.events.push(Event::Alloc {
            id: 3,
            stream: 7,
            size: 1,
        });
        let at = t.events.len() - 1;
        for id_use in [IdUse::Unique, IdUse::Recycled] {
            let err = read_all(&file_of(&t), id_use).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("t.vlt: entry {at}: stream index 7 is not in the stream table")
            );
        }
    }
}
