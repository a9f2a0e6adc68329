//! What a user can apply to PyTorch today, learned from a trace and its
//! plan, each replayed: priming the cache with one block of the plan's
//! peak (`torch.empty(N, dtype=torch.uint8, device="cuda")` then `del`,
//! before the step), `roundup_power2_divisions` from the sizes the trace
//! asks for (more divisions where a power-of-two band holds many distinct
//! sizes), and the `max_split_size_mb` of a few that replays lowest.

use serde::Serialize;
use vramlab_allocator::{AllocConf, PolicySpec, TorchVersion};
use vramlab_traces::{Event, PhaseMark, Trace};

use crate::engine::scenario::Scenario;
use crate::engine::{ReplayError, ReplayOptions};

/// One recipe, replayed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recipe {
    /// What to do, in words.
    pub what: String,
    /// The `PYTORCH_ALLOC_CONF` it needs (`""`: the defaults).
    pub conf: String,
    /// Its peak reserved bytes, replayed.
    pub peak_reserved_bytes: u64,
    /// The replay ran out of memory.
    pub oom: bool,
}

/// `trace` with one block of `bytes` allocated and freed before its first
/// event (priming the cache).
pub(crate) fn primed(trace: &Trace, bytes: u64) -> Trace {
    let mut t = trace.clone();
    let id = t.num_ids;
    t.num_ids += 1;
    // On the stream the step begins on: a cached block serves only its own
    // stream.
    let stream = trace
        .events
        .iter()
        .find_map(|e| match *e {
            Event::Alloc { stream, .. } => Some(stream),
            _ => None,
        })
        .unwrap_or(0);
    let mut events = Vec::with_capacity(t.events.len() + 2);
    events.push(Event::Alloc {
        id,
        stream,
        size: bytes,
    });
    events.push(Event::Free { id });
    events.extend_from_slice(&trace.events);
    t.events = events;
    t.phases = trace
        .phases
        .iter()
        .map(|m| PhaseMark {
            event_index: m.event_index + 2,
            label: m.label.clone(),
        })
        .collect();
    if !t.alloc_frames.is_empty() {
        t.alloc_frames.push(None);
    }
    if let Some(x) = &mut t.expected {
        x.alloc_addresses.push(None);
    }
    t
}

/// `roundup_power2_divisions` from the sizes of `trace`: per power-of-two
/// band from 1 MiB up, the number of distinct request sizes in it, rounded
/// down to a power of two, at most 8 (`None`: no band above 1 MiB).
pub(crate) fn learned_divisions(trace: &Trace) -> Option<String> {
    const MIB: u64 = 1 << 20;
    let mut bands: Vec<std::collections::BTreeSet<u64>> = Vec::new();
    for ev in &trace.events {
        if let Event::Alloc { size, .. } = *ev {
            if size < MIB {
                continue;
            }
            let band = (size / MIB).ilog2() as usize;
            if bands.len() <= band {
                bands.resize(band + 1, Default::default());
            }
            if let Some(b) = bands.get_mut(band) {
                b.insert(size);
            }
        }
    }
    if bands.is_empty() {
        return None;
    }
    let div = |n: usize| -> u64 {
        let n = n.clamp(1, 8) as u64;
        1 << n.ilog2()
    };
    let mut entries: Vec<String> = bands
        .iter()
        .enumerate()
        .take(bands.len().saturating_sub(1))
        .map(|(k, b)| format!("{}:{}", 1u64 << k, div(b.len())))
        .collect();
    entries.push(format!(">:{}", div(bands.last().map_or(1, |b| b.len()))));
    Some(format!("roundup_power2_divisions:[{}]", entries.join(",")))
}

/// The recipes for `trace` under `release`, against a plan of
/// `planned_peak` bytes, on the device of `base` (its capacity, total and
/// placement).
pub(crate) fn recipes(
    trace: &Trace,
    release: TorchVersion,
    planned_peak: u64,
    base: Option<&Scenario>,
) -> Result<Vec<Recipe>, ReplayError> {
    let opts = ReplayOptions {
        check_invariants: false,
        ..Default::default()
    };
    let run = |t: &Trace, conf: &str| -> Result<(u64, bool), ReplayError> {
        let c = AllocConf::parse(conf, release)
            .map_err(|e| ReplayError::Malformed(format!("{conf}: {e}")))?;
        let mut s = Scenario::new(PolicySpec::Native(c));
        if let Some(b) = base {
            s.capacity = b.capacity;
            s.device_total = b.device_total;
            s.placement = b.placement;
        }
        let r = s.run(t, &opts)?;
        Ok((r.summary.peak_reserved_bytes, r.oom.is_some()))
    };
    let mut out = Vec::new();
    let (p, o) = run(&primed(trace, planned_peak), "")?;
    out.push(Recipe {
        what: format!(
            "prime the cache with the plan's peak: torch.empty({planned_peak}, dtype=torch.uint8, device=\"cuda\") then del, before the step"
        ),
        conf: String::new(),
        peak_reserved_bytes: p,
        oom: o,
    });
    if let Some(div) = learned_divisions(trace) {
        let (p, o) = run(trace, &div)?;
        out.push(Recipe {
            what: "round sizes by the trace's own bands".into(),
            conf: div,
            peak_reserved_bytes: p,
            oom: o,
        });
    }
    let mut best: Option<Recipe> = None;
    for mb in [64u64, 128, 256, 512, 1024] {
        let conf = format!("max_split_size_mb:{mb}");
        let (p, o) = run(trace, &conf)?;
        if best
            .as_ref()
            .is_none_or(|b| (o, p) < (b.oom, b.peak_reserved_bytes))
        {
            best = Some(Recipe {
                what: "keep large cached blocks whole (the best of 64, 128, 256, 512 and 1024 MiB)"
                    .into(),
                conf,
                peak_reserved_bytes: p,
                oom: o,
            });
        }
    }
    out.extend(best);
    Ok(out)
}
