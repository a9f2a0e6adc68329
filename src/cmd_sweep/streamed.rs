//! `vramlab sweep` of native trace files (`.csv`, `.csv.gz`, `.vlt`,
//! `.vlt.zst`, RMM logs) replayed as they are read: each file is read
//! once, every setting of the grid replays each block of events (the
//! settings in parallel), and memory is bounded by what the settings hold
//! live, not by the length of the traces. The rows are those of the traces
//! read whole. A snapshot among the traces, `--plan`, or `--shard` over
//! several traces (whose pair numbers depend on which traces turn out to
//! have events) take the path that reads every trace whole.

use std::path::PathBuf;

use anyhow::Result;
use vramlab_replay::{InputNote, Inputs, StreamError, SweepFile, SweepRow, sweep_streamed};
use vramlab_traces::{EventBlocks, IdUse, Trace, TraceEvents, open_events};

use super::SweepArgs;

/// One file to sweep: its path, label and its trace without events.
struct Opened {
    path: PathBuf,
    label: String,
    skeleton: Trace,
}

/// Sweeps the traces of `args` as they are read and says how long it
/// took; `Ok(None)` when they must be read whole (see the module's doc).
pub(super) fn sweep(args: &SweepArgs) -> Result<Option<Vec<SweepRow>>> {
    let Some(files) = open_all(args)? else {
        return Ok(None);
    };
    if files.is_empty() {
        return Ok(None);
    }
    let pairs: Vec<(String, Trace)> = files
        .iter()
        .map(|f| (f.label.clone(), f.skeleton.clone()))
        .collect();
    let target = args.grid.target_of_all(&pairs);
    let grid = args.grid.entries(&target)?;
    let t0 = std::time::Instant::now();
    let mut rows = Vec::new();
    let mut swept = 0usize;
    for (t, file) in files.iter().enumerate() {
        let doing = format!("sweeping {} settings over", grid.len());
        let bar = (!args.quiet)
            .then(|| crate::progress::stream_bar(&file.path, &doing))
            .flatten();
        let (pb, hook) = bar.map_or((None, None), |(pb, hook)| (Some(pb), Some(hook)));
        let Some(events) = open_events(&file.path, None, IdUse::Recycled, hook)? else {
            anyhow::bail!("{} changed while it was swept", file.path.display());
        };
        let swept_file = sweep_streamed(
            events,
            SweepFile {
                name: &file.label,
                first_index: (t * grid.len()) as u64,
            },
            &grid,
            (args.card.bytes(), args.card.placement),
            args.shard,
            args.start.start,
        );
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        let done = swept_file.map_err(|e| in_words(e, &file.label))?;
        let counts = done.end.counts;
        if counts.events == 0 {
            errln!(
                "{}",
                InputNote::NoEvents {
                    label: file.label.clone()
                }
            );
            continue;
        }
        if counts.allocs == 0 {
            errln!(
                "{}",
                InputNote::NoAllocations {
                    name: file.label.clone()
                }
            );
        }
        swept += 1;
        rows.extend(done.rows);
    }
    if swept == 0 {
        anyhow::bail!(
            "no traces with events to sweep{}",
            args.device
                .map_or(String::new(), |d| format!(" on device {d}"))
        );
    }
    if args.shard.is_none() {
        // A trace without events is left out, as a whole read leaves it
        // out before the pairs are numbered.
        for (i, row) in rows.iter_mut().enumerate() {
            row.index = i as u64;
        }
    }
    errln!(
        "{} replays ({} traces x {} settings{}, each trace read once) in {:.2} s",
        rows.len(),
        swept,
        grid.len(),
        args.shard
            .map_or(String::new(), |s| format!(", shard {}/{}", s.k, s.n)),
        t0.elapsed().as_secs_f64()
    );
    Ok(Some(rows))
}

/// The files of `args`, each opened to read its header; `None` when one
/// must be read whole (a snapshot, or a file that does not open: the
/// whole read words its error), or when `--shard` splits several traces.
fn open_all(args: &SweepArgs) -> Result<Option<Vec<Opened>>> {
    if args.plan.is_some() {
        return Ok(None);
    }
    let Ok(paths) = Inputs::new(&args.traces).files() else {
        return Ok(None);
    };
    if args.shard.is_some() && paths.len() > 1 {
        return Ok(None);
    }
    let mut files = Vec::new();
    for path in paths {
        let Ok(Some(events)) = open_events(&path, None, IdUse::Recycled, None::<fn(u64)>) else {
            return Ok(None);
        };
        let skeleton = skeleton(&events);
        let device = skeleton.header.device;
        if args.device.is_some_and(|d| d != device) {
            continue;
        }
        files.push(Opened {
            label: vramlab_replay::input_label(&path, device),
            path,
            skeleton,
        });
    }
    Ok(Some(files))
}

/// The trace as opened, without the events read with its header.
fn skeleton(events: &TraceEvents) -> Trace {
    let t = events.trace();
    Trace {
        header: t.header.clone(),
        streams: t.streams.clone(),
        initial: t.initial.clone(),
        pools: t.pools.clone(),
        ..Trace::default()
    }
}

/// A streamed sweep's error as the sweep of traces read whole words it.
fn in_words(e: StreamError, label: &str) -> anyhow::Error {
    match e {
        StreamError::Read(e) => e.into(),
        StreamError::Replay { scenario, error } => {
            anyhow::anyhow!("{label} under {scenario}: {error}")
        }
    }
}
