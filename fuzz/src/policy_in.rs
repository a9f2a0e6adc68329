//! Policies with settings, built from fuzzer input.

use arbitrary::Arbitrary;
use vramlab_allocator::AllocConf;
use vramlab_allocator::policies::{async_pool, bfc, direct, stitch};
use vramlab_replay::{PolicySpec, Scenario};

use crate::check::version_of;

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
                PolicySpec::Direct(direct::Settings::parse("").expect("empty settings")),
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
                    PolicySpec::Bfc(bfc::Settings::parse(&s).expect("valid bfc settings")),
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
                    PolicySpec::Async(
                        async_pool::Settings::parse(&s).expect("valid async settings"),
                    ),
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
                    PolicySpec::Stitch(stitch::Settings::parse(&s).expect("valid stitch settings")),
                    None,
                )
            }
        };
        let mut sc = Scenario::new(spec).with_capacity(capacity);
        sc.memory_fraction = fraction;
        sc
    }
}
