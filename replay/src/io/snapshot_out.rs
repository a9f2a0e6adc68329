//! A replay written back as a PyTorch memory snapshot, so that PyTorch's
//! memory viewer (pytorch.org/memory_viz, `torch.cuda._memory_viz`) shows
//! how a run *would* have looked under another setting.
//!
//! The trace has PyTorch's entries (`segment_alloc`, `alloc`,
//! `free_requested`, `free_completed`, `segment_free`, `segment_map`,
//! `segment_unmap`, `oom`) with the simulated addresses, and the stacks the
//! source snapshot recorded (shared through the pickle memo, as PyTorch's own
//! pickles share them). `time_us` counts simulated microseconds: one per
//! event plus the simulated driver time, so the viewer's time axis shows
//! where the driver was busy.

use std::sync::Arc;

use vramlab_allocator::DeviceCallKind;
use vramlab_allocator::{AllocConf, BlockState, PoolKind, SegmentView, TorchVersion};
use vramlab_traces::{DictBuilder, Event, PickleWriter, Trace, Value};

use crate::engine::run::Run;

fn frame_lists(trace: &Trace) -> Vec<Value> {
    trace
        .frames
        .iter()
        .map(|list| {
            Value::list(list.iter().map(|f| {
                DictBuilder::new()
                    .entry("filename", f.filename.as_str())
                    .entry("line", f.line)
                    .entry("name", f.name.as_str())
                    .build()
            }))
        })
        .collect()
}

/// Which release-specific keys a written snapshot carries: those of the
/// release whose rules the replay followed, so that reading it back
/// (`fidelity`, release detection) finds that release
/// (traces/src/snapshot/release.rs has the table).
#[derive(Debug, Clone, Copy)]
struct Signals {
    /// Entries carry `compile_context` (2.8+).
    compile_context: bool,
    /// Settings carry `graph_capture_record_stream_reuse` (2.9+).
    graph_reuse: bool,
    /// Entries carry `user_metadata` (2.10+).
    user_metadata: bool,
    /// Entries carry `pool_id` (2.12+).
    pool_id: bool,
    /// Settings carry `max_cached_size` and `max_round_threshold` (2.13+).
    cached_size: bool,
    /// Top-level `host_segments` and `host_traces` (2.14+).
    host: bool,
}

impl Signals {
    fn of(v: TorchVersion) -> Signals {
        Signals {
            compile_context: v.at_least(2, 8),
            graph_reuse: v.at_least(2, 9),
            user_metadata: v.at_least(2, 10),
            pool_id: v.at_least(2, 12),
            cached_size: v.at_least(2, 13),
            host: v.at_least(2, 14),
        }
    }
}

fn settings(conf: &AllocConf) -> Value {
    let sig = Signals::of(conf.version);
    let labels = [
        1u64, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768,
    ];
    let roundup = Value::dict(
        labels
            .iter()
            .zip(conf.roundup_power2_divisions.iter())
            .map(|(l, &d)| (Value::from(l.to_string()), Value::from(d as i64))),
    );
    let d = DictBuilder::new()
        .entry("PYTORCH_CUDA_ALLOC_CONF", conf.to_string())
        .entry("max_split_size", conf.max_split_size_bytes() as i64)
        .entry(
            "garbage_collection_threshold",
            conf.garbage_collection_threshold,
        )
        .entry("expandable_segments", conf.expandable_segments)
        .entry(
            "pinned_num_register_threads",
            conf.pinned_num_register_threads as i64,
        )
        .entry(
            "release_lock_on_cudamalloc",
            conf.release_lock_on_cudamalloc,
        )
        .entry(
            "pinned_use_cuda_host_register",
            conf.pinned_use_cuda_host_register,
        )
        .entry("roundup_power2_divisions", roundup);
    let d = if sig.graph_reuse {
        d.entry(
            "graph_capture_record_stream_reuse",
            conf.graph_capture_record_stream_reuse,
        )
    } else {
        d
    };
    let d = if sig.cached_size {
        d.entry("max_round_threshold", -1i64)
            .entry("max_cached_size", -1i64)
    } else {
        d
    };
    d.entry("vramlab", "replayed by vramlab on a simulated GPU")
        .build()
}

fn entry(
    sig: Signals,
    action: &str,
    addr: u64,
    size: u64,
    stream: u64,
    time_us: u64,
    frames: Option<&Value>,
) -> Value {
    let mut d = DictBuilder::with_capacity(9)
        .entry("action", action)
        .entry("addr", addr as i64)
        .entry("size", size as i64)
        .entry("stream", stream as i64)
        .entry("time_us", time_us as i64);
    if let Some(f) = frames {
        d.insert("frames", f.clone());
    }
    if sig.compile_context {
        d.insert("compile_context", Value::from("N/A"));
    }
    if sig.user_metadata {
        d.insert("user_metadata", Value::from(""));
    }
    if sig.pool_id {
        d.insert(
            "pool_id",
            Value::list(vec![Value::from(0i64), Value::from(0i64)]),
        );
    }
    d.build()
}

/// Builds the snapshot of `run`, a replay of `trace` made with
/// `record_addresses` and `final_segments` on. `conf` gives the
/// `allocator_settings` (for the native policy; other policies are named
/// by `run.policy` there).
pub fn snapshot_value(trace: &Trace, run: &Run, conf: Option<&AllocConf>) -> Value {
    let frames = frame_lists(trace);
    let sig = Signals::of(conf.map_or(TorchVersion::NEWEST, |c| c.version));
    let mut w = EntryWriter::new(trace, run, &frames, sig);
    for (i, ev) in trace.events.iter().enumerate() {
        if i as u64 >= run.summary.events_replayed {
            break;
        }
        w.event(i, ev);
    }
    let entries = w.entries;
    // The allocation id that owns each live block address at the end.
    let mut owner = std::collections::HashMap::new();
    for (id, &a) in run.alloc_addresses.iter().enumerate() {
        if a != 0 {
            owner.insert(a, id as u32);
        }
    }
    let frames_of = |id: u32| frames_of_id(trace, &frames, id);
    let segments: Vec<Value> = run
        .final_segments
        .iter()
        .map(|s| {
            segment(s, trace.header.device, &trace.pools, |ptr| {
                owner.get(&ptr).and_then(|&id| frames_of(id))
            })
        })
        .collect();
    let top = DictBuilder::new()
        .entry("segments", Value::List(Arc::new(segments)))
        .entry("device_traces", {
            // One list per device ordinal up to this trace's device.
            let mut lists: Vec<Value> = (0..trace.header.device)
                .map(|_| Value::list(Vec::<Value>::new()))
                .collect();
            lists.push(Value::List(Arc::new(entries)));
            Value::list(lists)
        })
        .entry(
            "allocator_settings",
            match conf {
                Some(c) => settings(c),
                None => DictBuilder::new()
                    .entry("PYTORCH_CUDA_ALLOC_CONF", "")
                    .entry(
                        "vramlab",
                        format!("replayed by vramlab's {} policy ({})", run.policy, run.conf),
                    )
                    .build(),
            },
        )
        .entry("external_annotations", Value::list(Vec::<Value>::new()));
    let top = if sig.host {
        top.entry("host_segments", Value::list(Vec::<Value>::new()))
            .entry("host_traces", Value::list(Vec::<Value>::new()))
    } else {
        top
    };
    top.build()
}

/// The stack of allocation `id`, as a pickled frame list.
fn frames_of_id<'a>(trace: &Trace, frames: &'a [Value], id: u32) -> Option<&'a Value> {
    trace
        .alloc_frames
        .get(id as usize)
        .copied()
        .flatten()
        .and_then(|f| frames.get(f as usize))
}

/// Writes the trace entries of a replay, in PyTorch's order: a malloc's
/// segment entries before its `alloc`, frees as `free_requested` +
/// `free_completed`.
struct EntryWriter<'a> {
    trace: &'a Trace,
    run: &'a Run,
    frames: &'a [Value],
    entries: Vec<Value>,
    /// The release's keys.
    sig: Signals,
    /// Requested size and raw stream of each id, for its free entries (ids
    /// of blocks in use at the start come from the initial state).
    sizes: Vec<u64>,
    streams: Vec<u64>,
    /// Raw stream of each segment or mapped range, for its segment entries.
    segment_streams: std::collections::HashMap<u64, u64>,
    calls: std::iter::Peekable<std::slice::Iter<'a, crate::engine::run::LoggedCall>>,
    time: u64,
    device_time: f64,
    per_call: f64,
}

impl<'a> EntryWriter<'a> {
    fn new(trace: &'a Trace, run: &'a Run, frames: &'a [Value], sig: Signals) -> Self {
        let mut w = EntryWriter {
            trace,
            run,
            frames,
            sig,
            entries: Vec::with_capacity(trace.events.len() * 2),
            sizes: vec![0u64; trace.num_ids as usize],
            streams: vec![0u64; trace.num_ids as usize],
            segment_streams: Default::default(),
            // The initial state's calls (event_index None) come first.
            calls: run.device_log.iter().peekable(),
            time: 0,
            device_time: 0.0,
            per_call: if run.device_log.is_empty() {
                0.0
            } else {
                run.summary.device_time_us / run.device_log.len() as f64
            },
        };
        while w.calls.next_if(|c| c.event_index.is_none()).is_some() {}
        if let Some(init) = &trace.initial {
            for b in &init.live {
                let raw = trace.streams.get(b.stream as usize).copied().unwrap_or(0);
                if let Some(s) = w.sizes.get_mut(b.id() as usize) {
                    *s = b.requested;
                }
                if let Some(s) = w.streams.get_mut(b.id() as usize) {
                    *s = raw;
                }
            }
            for g in &init.segments {
                let raw = trace.streams.get(g.stream as usize).copied().unwrap_or(0);
                w.segment_streams.insert(g.address, raw);
            }
        }
        w
    }

    fn frames_of(&self, id: u32) -> Option<&'a Value> {
        frames_of_id(self.trace, self.frames, id)
    }

    fn addr_of(&self, id: u32) -> u64 {
        self.run
            .alloc_addresses
            .get(id as usize)
            .copied()
            .unwrap_or(0)
    }

    /// The entries of event `i`.
    fn event(&mut self, i: usize, ev: &Event) {
        self.time += 1;
        self.segment_entries(i, ev);
        let t = self.time + self.device_time as u64;
        match *ev {
            Event::Alloc { id, stream, size } => self.alloc(i, id, stream, size, t),
            Event::Free { id } => {
                self.free("free_requested", id, t);
                self.free("free_completed", id, t);
            }
            Event::FreeRequested { id } => self.free("free_requested", id, t),
            Event::FreeCompleted { id } => self.free("free_completed", id, t),
            _ => {}
        }
    }

    /// The device calls made during event `i`, as segment entries.
    fn segment_entries(&mut self, i: usize, ev: &Event) {
        // A new segment belongs to the stream of the allocation it serves.
        let event_stream = match *ev {
            Event::Alloc { stream, .. } => self
                .trace
                .streams
                .get(stream as usize)
                .copied()
                .unwrap_or(0),
            _ => 0,
        };
        while let Some(c) = self.calls.next_if(|c| c.event_index == Some(i as u32)) {
            self.device_time += self.per_call;
            let action = match c.kind {
                DeviceCallKind::Malloc => "segment_alloc",
                DeviceCallKind::Free => "segment_free",
                DeviceCallKind::Map => "segment_map",
                DeviceCallKind::Unmap => "segment_unmap",
                _ => continue,
            };
            let stream = match c.kind {
                DeviceCallKind::Malloc | DeviceCallKind::Map => {
                    self.segment_streams.insert(c.ptr, event_stream);
                    event_stream
                }
                _ => stream_of_range(&self.segment_streams, c.ptr),
            };
            let t = self.time + self.device_time as u64;
            self.entries
                .push(entry(self.sig, action, c.ptr, c.size, stream, t, None));
        }
    }

    fn alloc(&mut self, i: usize, id: u32, stream: u32, size: u64, t: u64) {
        let s = self
            .trace
            .streams
            .get(stream as usize)
            .copied()
            .unwrap_or(0);
        let a = self.addr_of(id);
        if a == 0 && size > 0 {
            let (free, rounded) = match &self.run.oom {
                Some(o) if o.event_index == i as u64 => (o.device_free_bytes, o.rounded_bytes),
                _ => (0, size),
            };
            self.entries.push(
                DictBuilder::new()
                    .entry("action", "oom")
                    .entry("device_free", free as i64)
                    .entry("size", rounded as i64)
                    .entry("stream", s as i64)
                    .entry("time_us", t as i64)
                    .build(),
            );
        } else if size > 0 {
            if let Some(sz) = self.sizes.get_mut(id as usize) {
                *sz = size;
            }
            if let Some(st) = self.streams.get_mut(id as usize) {
                *st = s;
            }
            let frames = self.frames_of(id);
            self.entries
                .push(entry(self.sig, "alloc", a, size, s, t, frames));
        }
    }

    fn free(&mut self, action: &str, id: u32, t: u64) {
        let a = self.addr_of(id);
        if a == 0 {
            return;
        }
        let sz = self.sizes.get(id as usize).copied().unwrap_or(0);
        let st = self.streams.get(id as usize).copied().unwrap_or(0);
        let frames = self.frames_of(id);
        self.entries
            .push(entry(self.sig, action, a, sz, st, t, frames));
    }
}

/// The stream of the segment or mapped range that holds `ptr` (a range
/// unmapped from the middle of a mapping keeps the mapping's stream).
fn stream_of_range(streams: &std::collections::HashMap<u64, u64>, ptr: u64) -> u64 {
    if let Some(&s) = streams.get(&ptr) {
        return s;
    }
    streams
        .iter()
        .filter(|(a, _)| **a <= ptr)
        .max_by_key(|(a, _)| **a)
        .map_or(0, |(_, &s)| s)
}

fn segment<'a>(
    s: &SegmentView,
    device: u32,
    pools: &[vramlab_traces::PoolDecl],
    frames_of: impl Fn(u64) -> Option<&'a Value>,
) -> Value {
    let mut allocated = 0u64;
    let mut active = 0u64;
    let mut requested = 0u64;
    let blocks: Vec<Value> = s
        .blocks
        .iter()
        .map(|b| {
            if b.state == BlockState::Allocated {
                allocated += b.size;
            }
            if b.state != BlockState::Free {
                active += b.size;
                requested += b.requested;
            }
            let mut d = DictBuilder::new()
                .entry("address", b.ptr as i64)
                .entry("size", b.size as i64)
                .entry("requested_size", b.requested as i64)
                .entry("state", b.state.snapshot_name());
            let f = if b.state == BlockState::Free {
                None
            } else {
                frames_of(b.ptr)
            };
            d.insert(
                "frames",
                f.cloned()
                    .unwrap_or_else(|| Value::list(Vec::<Value>::new())),
            );
            d.build()
        })
        .collect();
    DictBuilder::new()
        .entry("device", device as i64)
        .entry("address", s.ptr as i64)
        .entry("total_size", s.size as i64)
        .entry("allocated_size", allocated as i64)
        .entry("active_size", active as i64)
        .entry("requested_size", requested as i64)
        .entry("stream", s.stream as i64)
        .entry(
            "segment_type",
            if s.pool == PoolKind::Small {
                "small"
            } else {
                "large"
            },
        )
        .entry("segment_pool_id", {
            let (a, b) = s
                .private_pool
                .and_then(|p| pools.get(p as usize))
                .map_or((0, 0), |d| d.id);
            Value::tuple([Value::from(a as i64), Value::from(b as i64)])
        })
        .entry("is_expandable", s.is_expandable)
        .entry("frames", Value::list(Vec::<Value>::new()))
        .entry("blocks", Value::List(Arc::new(blocks)))
        .build()
}

/// Writes the snapshot of `run` as a pickle.
pub fn write_snapshot(
    trace: &Trace,
    run: &Run,
    conf: Option<&AllocConf>,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    PickleWriter::new().write_to(out, &snapshot_value(trace, run, conf))
}
