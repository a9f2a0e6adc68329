//! How well each placement policy of the simulated GPU predicts real
//! drivers: the measurements of docs/driver-placement.md.
//!
//!     cargo run --release --example placement_study -- ../shared/traces/real/*.pickle
//!     cargo run --release --example placement_study -- --h200 docs/results/gpu-2026-11-29
//!
//! For each PyTorch snapshot (its first device):
//!
//! * **order**: the recorded sequence of segment allocations and frees is
//!   replayed on a simulated device under each placement (the recorded
//!   start's segments at their recorded addresses); for every new segment,
//!   does the model put it on the same side of the previous new segment
//!   (direction), and at the same rank among the live segments, as the
//!   driver did?
//! * **standalone vs fidelity**: `vramlab fidelity` (segments placed where
//!   the driver put them; exact on these snapshots) against a standalone
//!   replay of the recorded settings under each placement: the same peak
//!   reserved? the same segment decisions (every device call's event,
//!   kind and size)?
//!
//! With `--h200 DIR` (a `docs/results/gpu-<date>` folder of
//! `scripts/gpu-check.sh`), each trace × setting that PyTorch replayed on
//! the GPU is predicted standalone under each placement and compared with
//! PyTorch's peak reserved and number of cudaMalloc calls.

use std::path::{Path, PathBuf};

use vramlab_allocator::Device;
use vramlab_allocator::{AllocConf, Placement, SimDevice};
use vramlab_replay::target_of;
use vramlab_replay::{Inputs, Pick, recorded_conf};
use vramlab_replay::{ReplayOptions, Run, Scenario, Start, replay, start_for};
use vramlab_traces::{SegmentEventKind, Trace};

type Error = Box<dyn std::error::Error>;

fn mib(b: u64) -> String {
    format!("{:.0}", b as f64 / 1048576.0)
}

/// The segment decisions of a run: (event, kind, size) of every device
/// call made during the events.
fn decisions(run: &Run) -> Vec<(u32, &'static str, u64)> {
    run.device_log
        .iter()
        .filter_map(|c| c.event_index.map(|e| (e, c.kind.name(), c.size)))
        .collect()
}

/// Order agreement of `placement` with the recording: (direction matches,
/// direction steps, rank matches, new segments).
fn order(trace: &Trace, placement: Placement) -> (u32, u32, u32, u32) {
    let Some(exp) = &trace.expected else {
        return (0, 0, 0, 0);
    };
    let mut d = SimDevice::unlimited();
    d.set_placement(placement);
    // Live segments: recorded address → (predicted address, size).
    let mut live: std::collections::BTreeMap<u64, (u64, u64)> = Default::default();
    if let Some(init) = &trace.initial {
        for s in init.segments.iter().filter(|s| !s.is_expandable) {
            d.place_next(s.address);
            if let Ok(p) = d.malloc(s.size) {
                live.insert(s.address, (p, s.size));
            }
            d.clear_placements();
        }
    }
    let (mut dir_ok, mut dirs, mut rank_ok, mut news) = (0, 0, 0, 0);
    let mut prev: Option<(u64, u64)> = None;
    for e in &exp.segment_events {
        match e.kind {
            SegmentEventKind::Alloc => {
                let Ok(p) = d.malloc(e.size) else { continue };
                let rank_rec = live.range(..e.address).count();
                let rank_pred = live.values().filter(|&&(q, _)| q < p).count();
                news += 1;
                rank_ok += u32::from(rank_rec == rank_pred);
                if let Some((ra, pa)) = prev {
                    dirs += 1;
                    dir_ok += u32::from((e.address > ra) == (p > pa));
                }
                prev = Some((e.address, p));
                live.insert(e.address, (p, e.size));
            }
            SegmentEventKind::Free => {
                if let Some((p, s)) = live.remove(&e.address) {
                    let _ = d.free(p, s);
                }
            }
            _ => {}
        }
    }
    (dir_ok, dirs, rank_ok, news)
}

fn fidelity_run(trace: &Trace, conf: &AllocConf) -> Result<Run, Error> {
    let mut a = Scenario::native(conf.clone())
        .native_allocator(trace)
        .ok_or("native policy")?;
    let opts = ReplayOptions {
        stop_at_oom: false,
        place_at_expected: true,
        check_invariants: false,
        ..Default::default()
    };
    Ok(replay(trace, &mut a, &opts)?)
}

fn snapshots(paths: &[PathBuf]) -> Result<(), Error> {
    println!(
        "| snapshot | new segments | segment frees | placement | direction | rank | peak reserved, fidelity | standalone | segment decisions |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for path in paths {
        let Some(trace) = Inputs::new([path])
            .pick(Pick::Each(None))
            .read()?
            .into_traces()
            .into_iter()
            .next()
        else {
            continue;
        };
        let v = target_of(&trace, None).rules;
        let conf = recorded_conf(&trace, v)?.unwrap_or_else(|| AllocConf::new(v));
        let fid = fidelity_run(&trace, &conf)?;
        let want = decisions(&fid);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().replace(".pickle", ""))
            .unwrap_or_default();
        let frees = trace.expected.as_ref().map_or(0, |e| {
            e.segment_events
                .iter()
                .filter(|s| s.kind == SegmentEventKind::Free)
                .count()
        });
        for p in Placement::ALL {
            let s = Scenario::native(conf.clone()).with_placement(p);
            let start = start_for(&trace, std::slice::from_ref(&s), None);
            let opts = ReplayOptions {
                check_invariants: false,
                start: start.unwrap_or(Start::Recorded),
                ..Default::default()
            };
            let run = s.run(&trace, &opts)?;
            let got = decisions(&run);
            let same = got.iter().zip(&want).filter(|(a, b)| a == b).count();
            let (dok, dn, rok, n) = order(&trace, p);
            println!(
                "| {name} | {n} | {frees} | {p} | {dok} of {dn} | {rok} of {n} | {} | {}{} | {} |",
                mib(fid.summary.peak_reserved_bytes),
                mib(run.summary.peak_reserved_bytes),
                if run.summary.peak_reserved_bytes == fid.summary.peak_reserved_bytes {
                    " (same)"
                } else {
                    ""
                },
                if got == want {
                    format!("identical ({})", want.len())
                } else {
                    format!(
                        "{same} of {} at the same position ({} made)",
                        want.len(),
                        got.len()
                    )
                }
            );
        }
    }
    Ok(())
}

/// The trace a GPU-check folder was made from.
fn source_of(name: &str) -> Option<PathBuf> {
    let real =
        Path::new("../shared/traces/real").join(format!("{}.pickle", name.strip_prefix("real-")?));
    Some(real)
}

fn h200(dir: &Path) -> Result<(), Error> {
    println!(
        "| trace | setting | PyTorch peak reserved (MiB) | ascending | driver | PyTorch cudaMallocs | ascending | driver |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut exact = [0u32; 2];
    let mut rows = 0;
    let mut entries: Vec<_> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for tdir in entries.iter().filter(|p| p.is_dir()) {
        let name = tdir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let src =
            source_of(&name).unwrap_or_else(|| PathBuf::from(format!("workloads/data/{name}.csv")));
        if !src.exists() {
            eprintln!("{name}: {} not found, skipped", src.display());
            continue;
        }
        let Some(trace) = Inputs::new([&src])
            .pick(Pick::Each(None))
            .read()?
            .into_traces()
            .into_iter()
            .next()
        else {
            continue;
        };
        let mut runs: Vec<_> = std::fs::read_dir(tdir)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("summary.json").exists())
            .filter(|p| {
                p.file_name().is_some_and(|n| {
                    n.to_string_lossy().starts_with("torch-")
                        && !n.to_string_lossy().contains("timing")
                        && !n.to_string_lossy().contains("oom")
                })
            })
            .collect();
        runs.sort();
        for r in runs {
            let j: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(r.join("summary.json"))?)?;
            let conf_s = j["alloc_conf"].as_str().unwrap_or("");
            let total = j["gpu"]["total_bytes"].as_u64().ok_or("total_bytes")?;
            let peak = j["peak_reserved_bytes"].as_u64().ok_or("peak")?;
            let mallocs = j["num_device_alloc"].as_u64().unwrap_or(0);
            let v = vramlab_allocator::TorchVersion::NEWEST;
            let conf = AllocConf::parse(conf_s, v)?;
            let mut cells = Vec::new();
            let mut calls = Vec::new();
            for (k, p) in [Placement::Ascending, Placement::Driver]
                .into_iter()
                .enumerate()
            {
                let mut s = Scenario::native(conf.clone())
                    .with_capacity(Some(total))
                    .with_placement(p);
                s.memory_fraction = j["memory_fraction"].as_f64();
                let opts = ReplayOptions {
                    check_invariants: false,
                    ..Default::default()
                };
                let run = s.run(&trace, &opts)?;
                let got = run.summary.peak_reserved_bytes;
                if got == peak {
                    exact[k] += 1;
                }
                cells.push(format!(
                    "{}{}",
                    mib(got),
                    if got == peak { "" } else { " ≠" }
                ));
                calls.push(run.summary.num_device_alloc.to_string());
            }
            rows += 1;
            println!(
                "| {name} | {} | {} | {} | {} | {mallocs} | {} | {} |",
                if conf_s.is_empty() { "default" } else { conf_s },
                mib(peak),
                cells[0],
                cells[1],
                calls[0],
                calls[1]
            );
        }
    }
    println!(
        "\nexact peak reserved: ascending {} of {rows}, driver {} of {rows}",
        exact[0], exact[1]
    );
    Ok(())
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(k) = args.iter().position(|a| a == "--h200") {
        let dir = args.get(k + 1).ok_or("--h200 DIR")?;
        return h200(Path::new(dir));
    }
    let paths: Vec<PathBuf> = args.iter().map(PathBuf::from).collect();
    if paths.is_empty() {
        return Err("usage: placement_study SNAPSHOT... | --h200 DIR".into());
    }
    snapshots(&paths)
}
