//! Shared pieces of the fuzz targets: building policies and traces from
//! fuzzer input, and the checks every target applies to a trace it got.

use arbitrary::Arbitrary;
use vramlab_allocator::policies::{async_pool, bfc, direct, stitch};
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_sim::{PolicySpec, ReplayError, ReplayOptions, Scenario};
use vramlab_traces::binary::validate;
use vramlab_traces::{Event, Trace, TraceHeader};

/// Every PyTorch release whose rules vramlab models.
pub fn versions() -> impl Iterator<Item = TorchVersion> {
    (1..=11).map(|m| TorchVersion::new(2, m))
}

/// A version chosen by a byte.
pub fn version_of(b: u8) -> TorchVersion {
    TorchVersion::new(2, 1 + u16::from(b % 11))
}

/// Replays `trace` under `scenario` with the invariant checker after every
/// event. Panics on an invariant violation (a policy bug) and on allocator
/// errors that a simulated device cannot legitimately cause; trace errors
/// (invalid sequences) and errors of the initial state are fine.
pub fn replay_checked(trace: &Trace, scenario: &Scenario, stop_at_oom: bool) {
    let opts = ReplayOptions {
        stop_at_oom,
        timeline_points: 16,
        check_invariants: true,
        ..Default::default()
    };
    match scenario.run(trace, &opts) {
        Ok(run) => {
            let s = &run.summary;
            assert!(s.events_replayed <= s.events);
            assert!(
                s.peak_reserved_bytes >= s.final_reserved_bytes,
                "{} {s:?}",
                scenario.label()
            );
        }
        Err(ReplayError::Invariant {
            event_index,
            message,
        }) => panic!(
            "invariant violated under {} after event {event_index}: {message}",
            scenario.label()
        ),
        Err(ReplayError::Allocator {
            event_index,
            message,
        }) if message.contains("invalid block handle") => panic!(
            "policy lost a handle under {} at event {event_index}: {message}",
            scenario.label()
        ),
        Err(_) => {}
    }
}

/// What every reader's output must satisfy: the structural checks of
/// [`validate`], and a replay through the default native policy without an
/// invariant violation.
pub fn check_read_trace(trace: &Trace) {
    if let Err((i, m)) = validate(trace) {
        panic!("a reader returned a trace that fails validation at entry {i}: {m}");
    }
    if trace.events.len() > 20_000 {
        return;
    }
    replay_checked(
        trace,
        &Scenario::native(AllocConf::default()),
        trace.events.len() % 2 == 0,
    );
}

// ---- policies from fuzzer input ----

/// `roundup_power2_divisions` spellings.
#[derive(Debug, Arbitrary)]
pub enum Roundup {
    /// Not set.
    Off,
    /// One value for every interval.
    Single(u8),
    /// A list of `(interval label exponent, divisions)` plus the `>` entry.
    List(Vec<(u8, u8)>, Option<u8>),
}

/// Native settings, spelled as a settings string so that the parser runs.
#[derive(Debug, Arbitrary)]
pub struct NativeIn {
    /// Release selector.
    pub version: u8,
    /// `expandable_segments`.
    pub expandable: bool,
    /// `max_split_size_mb` above the minimum.
    pub mss: Option<u8>,
    /// `roundup_power2_divisions`.
    pub roundup: Roundup,
    /// `garbage_collection_threshold` in 1/256.
    pub gc: Option<u8>,
    /// `max_non_split_rounding_mb`.
    pub nsr: Option<u8>,
    /// `large_segment_size_mb` steps of 2 MiB above 20.
    pub lss: Option<u8>,
    /// `torch.cuda.set_per_process_memory_fraction` in 1/256.
    pub fraction: Option<u8>,
}

impl NativeIn {
    /// The settings string.
    pub fn settings(&self) -> String {
        let mut parts = Vec::new();
        if self.expandable {
            parts.push("expandable_segments:True".to_string());
        }
        if let Some(m) = self.mss {
            parts.push(format!("max_split_size_mb:{}", 21 + u32::from(m)));
        }
        match &self.roundup {
            Roundup::Off => {}
            Roundup::Single(d) => {
                parts.push(format!("roundup_power2_divisions:{}", 1u32 << (d % 6)));
            }
            Roundup::List(items, rest) => {
                let mut entries: Vec<String> = items
                    .iter()
                    .take(6)
                    .map(|&(e, d)| format!("{}:{}", 1u32 << (e % 16), 1u32 << (d % 6)))
                    .collect();
                if let Some(d) = rest {
                    entries.push(format!(">:{}", 1u32 << (d % 6)));
                }
                parts.push(format!("roundup_power2_divisions:[{}]", entries.join(",")));
            }
        }
        if let Some(g) = self.gc {
            let t = (f64::from(g) + 1.0) / 258.0;
            parts.push(format!("garbage_collection_threshold:{t}"));
        }
        if let Some(n) = self.nsr {
            parts.push(format!("max_non_split_rounding_mb:{}", 20 + u32::from(n)));
        }
        if let Some(l) = self.lss {
            parts.push(format!(
                "large_segment_size_mb:{}",
                20 + 2 * u32::from(l % 64)
            ));
        }
        parts.join(",")
    }

    /// The settings, parsed (falling back to the defaults where this
    /// release rejects a key).
    pub fn conf(&self) -> AllocConf {
        let v = version_of(self.version);
        AllocConf::parse(&self.settings(), v)
            .or_else(|_| {
                let plain = NativeIn {
                    nsr: None,
                    lss: None,
                    roundup: Roundup::Off,
                    ..*self
                };
                AllocConf::parse(&plain.settings(), v)
            })
            .unwrap_or_else(|_| AllocConf::new(v))
    }
}

/// Any policy with settings.
#[derive(Debug, Arbitrary)]
pub enum PolicyIn {
    /// PyTorch's caching allocator.
    Native(NativeIn),
    /// No cache.
    Direct,
    /// TensorFlow's BFC.
    Bfc {
        /// `allow_growth`.
        allow_growth: bool,
        /// `memory_limit` in MiB.
        limit_mib: Option<u16>,
        /// `memory_fraction` in 1/256.
        fraction: Option<u8>,
        /// `garbage_collection`.
        gc: bool,
        /// `fragmentation_fraction` in 1/256.
        frag: Option<u8>,
    },
    /// A stream-ordered pool.
    Async {
        /// `release_threshold` in MiB (`None`: `max`).
        threshold_mib: Option<u16>,
        /// `reuse_across_streams`.
        reuse: bool,
    },
    /// GMLake stitching.
    Stitch {
        /// `stitch`.
        stitch: bool,
        /// `fragment_limit` in MiB.
        fragment_limit_mib: u16,
        /// `reuse_limit` (1 + n/16).
        reuse_limit: u8,
        /// `defragment_level` (mod 3).
        level: u8,
        /// `max_pieces` (2 + n).
        max_pieces: Option<u8>,
        /// `gc_limit` in MiB.
        gc_limit_mib: u16,
    },
}

impl PolicyIn {
    /// The scenario on a device of `capacity` bytes.
    pub fn scenario(&self, capacity: Option<u64>) -> Scenario {
        let (spec, fraction) = match self {
            PolicyIn::Native(n) => (
                PolicySpec::Native(n.conf()),
                n.fraction.map(|f| (f64::from(f) + 1.0) / 256.0),
            ),
            PolicyIn::Direct => (
                PolicySpec::Direct(direct::Config::parse("").expect("empty settings")),
                None,
            ),
            PolicyIn::Bfc {
                allow_growth,
                limit_mib,
                fraction,
                gc,
                frag,
            } => {
                let mut s = format!("allow_growth:{allow_growth},garbage_collection:{gc}");
                match (limit_mib, fraction) {
                    (Some(l), _) => s.push_str(&format!(",memory_limit:{}MiB", u32::from(*l) + 1)),
                    (None, Some(f)) => s.push_str(&format!(
                        ",memory_fraction:{}",
                        (f64::from(*f) + 1.0) / 256.0
                    )),
                    (None, None) => {}
                }
                if let Some(f) = frag {
                    s.push_str(&format!(
                        ",fragmentation_fraction:{}",
                        f64::from(*f) / 255.0
                    ));
                }
                (
                    PolicySpec::Bfc(bfc::Config::parse(&s).expect("valid bfc settings")),
                    None,
                )
            }
            PolicyIn::Async {
                threshold_mib,
                reuse,
            } => {
                let t = match threshold_mib {
                    Some(m) => format!("{m}MiB"),
                    None => "max".into(),
                };
                let s = format!("release_threshold:{t},reuse_across_streams:{reuse}");
                (
                    PolicySpec::Async(async_pool::Config::parse(&s).expect("valid async settings")),
                    None,
                )
            }
            PolicyIn::Stitch {
                stitch,
                fragment_limit_mib,
                reuse_limit,
                level,
                max_pieces,
                gc_limit_mib,
            } => {
                let mut s = format!(
                    "stitch:{stitch},fragment_limit:{fragment_limit_mib}MiB,reuse_limit:{},defragment_level:{},gc_limit:{gc_limit_mib}MiB",
                    1.0 + f64::from(*reuse_limit) / 16.0,
                    level % 3
                );
                if let Some(p) = max_pieces {
                    s.push_str(&format!(",max_pieces:{}", 2 + u32::from(*p)));
                }
                (
                    PolicySpec::Stitch(stitch::Config::parse(&s).expect("valid stitch settings")),
                    None,
                )
            }
        };
        let mut sc = Scenario::new(spec).with_capacity(capacity);
        sc.memory_fraction = fraction;
        sc
    }
}

// ---- traces from fuzzer input ----

/// A request size.
#[derive(Debug, Arbitrary)]
pub enum SizeIn {
    /// Below 1 MiB: the small pool.
    Small(u32),
    /// Below 32 MiB.
    Medium(u32),
    /// Whole MiB up to 64 GiB.
    LargeMib(u16),
    /// Any value, including 0 and the >= 2^60 refusals.
    Exact(u64),
}

impl SizeIn {
    /// Bytes.
    pub fn bytes(&self) -> u64 {
        match *self {
            SizeIn::Small(n) => u64::from(n) % (1 << 20) + 1,
            SizeIn::Medium(n) => u64::from(n) % (32 << 20) + 1,
            SizeIn::LargeMib(m) => u64::from(m) << 20,
            SizeIn::Exact(n) => n,
        }
    }
}

/// One step of a generated trace. Frees name a live id by position, so
/// most sequences are valid; `Raw` events make invalid ones.
#[derive(Debug, Arbitrary)]
pub enum OpIn {
    /// `malloc`.
    Alloc(SizeIn, u8),
    /// Free the `n`-th live allocation.
    Free(u8),
    /// Request the free of the `n`-th live allocation.
    FreeRequested(u8),
    /// Complete the `n`-th pending free.
    FreeCompleted(u8),
    /// `empty_cache()`.
    EmptyCache,
    /// An event with an arbitrary id.
    Raw(u8, u16),
}

/// Raw stream handles the generated traces use.
pub const STREAMS: [u64; 5] = [0, 7, 0x5555_0000, u64::MAX, 1];

/// A trace of `ops` (at most `max_ops` of them).
pub fn build_trace(ops: &[OpIn], max_ops: usize) -> Trace {
    let mut t = Trace::new(TraceHeader {
        source: "fuzz".into(),
        ..Default::default()
    });
    let mut live: Vec<u32> = Vec::new();
    let mut pending: Vec<u32> = Vec::new();
    let mut next = 0u32;
    for op in ops.iter().take(max_ops) {
        match op {
            OpIn::Alloc(size, s) => {
                let stream = t.stream_index(STREAMS[usize::from(*s) % STREAMS.len()]);
                t.events.push(Event::Alloc {
                    id: next,
                    stream,
                    size: size.bytes(),
                });
                live.push(next);
                next += 1;
            }
            OpIn::Free(n) | OpIn::FreeRequested(n) if !live.is_empty() => {
                let id = live.swap_remove(usize::from(*n) % live.len());
                if matches!(op, OpIn::Free(_)) {
                    t.events.push(Event::Free { id });
                } else {
                    t.events.push(Event::FreeRequested { id });
                    pending.push(id);
                }
            }
            OpIn::FreeCompleted(n) if !pending.is_empty() => {
                let id = pending.swap_remove(usize::from(*n) % pending.len());
                t.events.push(Event::FreeCompleted { id });
            }
            OpIn::EmptyCache => t.events.push(Event::EmptyCache),
            OpIn::Raw(kind, id) => {
                let id = u32::from(*id) % (next + 2);
                t.events.push(match kind % 5 {
                    0 => Event::Alloc {
                        id,
                        stream: 0,
                        size: 4096,
                    },
                    1 => Event::Free { id },
                    2 => Event::FreeRequested { id },
                    3 => Event::FreeCompleted { id },
                    _ => Event::EmptyCache,
                });
            }
            _ => {}
        }
    }
    // Raw events may name ids beyond the allocations.
    t.num_ids = next + 2;
    t
}
