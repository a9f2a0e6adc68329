//! What a trace's pinned host memory costs, and the `pinned_*` setting
//! that costs least: the host requests replayed through PyTorch's host
//! allocator under the defaults and under each candidate the release
//! accepts (exact sizes above a round threshold, a per-block cache limit),
//! ranked by the peak pinned bytes, then by the `cudaHostAlloc` calls
//! (slow: they pin pages), then by the fewest keys.

use serde::Serialize;
use vramlab_allocator::AllocConf;

use crate::engine::ReplayOptions;
use crate::engine::passes::ReplayPasses;
use crate::engine::scenario::Scenario;
use crate::engine::start::Start;
use crate::engine::stream::StreamError;

/// Settings tried beside the defaults, in order of preference at a tie.
const CANDIDATES: &[&str] = &[
    "pinned_max_round_threshold_mb:64",
    "pinned_max_round_threshold_mb:16",
    "pinned_max_round_threshold_mb:256",
    "pinned_max_round_threshold_mb:1",
    "pinned_max_round_threshold_mb:64,pinned_max_cached_size_mb:1024",
    "pinned_max_round_threshold_mb:16,pinned_max_cached_size_mb:256",
];

/// One setting's replay of the host requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostSetting {
    /// The `pinned_*` keys (`default`: none).
    pub setting: String,
    /// Peak pinned bytes of one process.
    pub peak_pinned_bytes: u64,
    /// Peak pinned bytes of the node (times the ranks per node).
    pub node_peak_pinned_bytes: u64,
    /// `cudaHostAlloc` calls.
    pub host_allocs_from_cuda: u64,
    /// Whether the peak fits in the process's share of the host's RAM
    /// (`None`: no `host_ram` given).
    pub fits: Option<bool>,
}

/// The pinned host advice for a trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostAdvice {
    /// Peak of live requested host bytes (what the program asked to pin).
    pub peak_requested_bytes: u64,
    /// Processes per node that pin alike.
    pub ranks_per_node: u32,
    /// The pinned bytes a process may hold: its share of the host's RAM.
    pub share_bytes: Option<u64>,
    /// The defaults.
    pub default: HostSetting,
    /// The setting that pins least, when it beats the defaults.
    pub best: Option<HostSetting>,
    /// Every setting tried, defaults first.
    pub tried: Vec<HostSetting>,
    /// When the release has no `pinned_*` key that changes the sizes safely
    /// (before 2.13; 2.13's can hand out a block smaller than its request):
    /// the newest release's best setting and what it would pin.
    pub upgrade: Option<(String, HostSetting)>,
    /// The trace's host sizes are PyTorch's blocks (a snapshot's
    /// `host_traces`), not the requests: rounding cannot be undone.
    pub sizes_are_blocks: bool,
}

impl HostAdvice {
    /// Bytes the best setting saves per process (0 without one).
    pub fn saving_bytes(&self) -> u64 {
        self.best.as_ref().map_or(0, |b| {
            self.default
                .peak_pinned_bytes
                .saturating_sub(b.peak_pinned_bytes)
        })
    }
}

/// The host the processes pin on: its RAM for pinning and how many
/// processes share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostLimits {
    /// The node's RAM that pinned memory may take (`None`: no limit).
    pub host_ram: Option<u64>,
    /// Processes per node that pin alike.
    pub ranks_per_node: u32,
}

impl Default for HostLimits {
    fn default() -> Self {
        HostLimits {
            host_ram: None,
            ranks_per_node: 1,
        }
    }
}

/// The header key a reader sets when the host sizes are PyTorch's blocks.
pub const HOST_SIZES_KEY: &str = "host_sizes";

/// Replays the host requests of `passes` on top of `base` (the device
/// settings the advice keeps) under the defaults and each candidate the
/// release accepts; `None` when the trace has no host requests.
pub fn advise_host(
    passes: &dyn ReplayPasses,
    base: &AllocConf,
    limits: HostLimits,
    start: Start,
) -> Result<Option<HostAdvice>, StreamError> {
    let HostLimits {
        host_ram,
        ranks_per_node,
    } = limits;
    let Some(mut advice) = advise_under(passes, base, host_ram, ranks_per_node, start)? else {
        return Ok(None);
    };
    let newest = vramlab_allocator::TorchVersion::all().last();
    if advice.tried.len() == 1 {
        if let Some(v) = newest.filter(|v| *v != base.version) {
            let later = advise_under(passes, &AllocConf::new(v), host_ram, ranks_per_node, start)?;
            advice.upgrade = later.and_then(|l| Some((v.to_string(), l.best?)));
        }
    }
    Ok(Some(advice))
}

/// [`advise_host`] under `base`'s release alone.
fn advise_under(
    passes: &dyn ReplayPasses,
    base: &AllocConf,
    host_ram: Option<u64>,
    ranks_per_node: u32,
    start: Start,
) -> Result<Option<HostAdvice>, StreamError> {
    let trace = passes.trace();
    if !trace.host_events {
        return Ok(None);
    }
    let mut lines = vec!["default".to_string()];
    let mut scenarios = vec![Scenario::native(base.clone())];
    // 2.13 takes a bucket's newest block whatever its size (R2.3): with
    // exact sizes a request can get a block smaller than itself, PyTorch's
    // bug, which no advice may lead to.
    let candidates = if base.version.at_least(2, 14) {
        CANDIDATES
    } else {
        &[]
    };
    for c in candidates {
        if let Ok(conf) = base.parse_update(c) {
            lines.push((*c).to_string());
            scenarios.push(Scenario::native(conf));
        }
    }
    // The peaks are what each setting needs: replayed without a limit,
    // then held against the process's share.
    let share = host_ram.map(|r| r / u64::from(ranks_per_node.max(1)));
    let opts = ReplayOptions {
        ranks_per_node,
        ..ReplayOptions::figures_only(start)
    };
    let runs = passes.replay(&scenarios, &opts)?;
    let mut peak_requested = 0;
    let mut tried = Vec::new();
    for (line, run) in lines.into_iter().zip(runs) {
        let Some(h) = run.host else {
            return Ok(None);
        };
        peak_requested = h.host_peak_requested_bytes;
        tried.push(HostSetting {
            setting: line,
            peak_pinned_bytes: h.host_peak_reserved_bytes,
            node_peak_pinned_bytes: h.node_peak_reserved_bytes,
            host_allocs_from_cuda: h.host_cuda_allocs,
            fits: share.map(|s| h.host_peak_reserved_bytes <= s),
        });
    }
    let Some(default) = tried.first().cloned() else {
        return Ok(None);
    };
    // The fewest pinned bytes (within 1%: a setting that saves less is
    // not worth more cudaHostAlloc calls), then the fewest calls; the
    // candidates keep their order at a tie.
    let fitting = || tried.iter().skip(1).filter(|s| s.fits != Some(false));
    let least = fitting().map(|s| s.peak_pinned_bytes).min();
    let best = least.and_then(|least| {
        let near = least.saturating_add(least / 100);
        fitting()
            .filter(|s| s.peak_pinned_bytes <= near)
            .min_by_key(|s| s.host_allocs_from_cuda)
            .filter(|b| {
                b.peak_pinned_bytes < default.peak_pinned_bytes
                    && (default.peak_pinned_bytes - b.peak_pinned_bytes)
                        > default.peak_pinned_bytes / 100
                    || default.fits == Some(false)
            })
            .cloned()
    });
    Ok(Some(HostAdvice {
        peak_requested_bytes: peak_requested,
        ranks_per_node,
        share_bytes: share,
        default,
        best,
        tried,
        upgrade: None,
        sizes_are_blocks: trace.header.extra.get(HOST_SIZES_KEY).map(String::as_str)
            == Some("blocks"),
    }))
}
