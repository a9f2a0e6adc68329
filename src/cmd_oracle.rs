//! `vramlab oracle`: PyTorch's own allocator (the official wheel of a
//! release, on vramlab's fake CUDA device) next to vramlab's replay, for
//! every trace and setting: "exact", or the first decision that differs.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_oracle::fake::{locate, prepare};
use vramlab_oracle::{Installer, Interpreter, JudgeOptions, OracleRow, judge_trace, oracle_trace};
use vramlab_replay::Start;
use vramlab_traces::Format;

use crate::args::{ConfArgs, DeviceArgs, StartArgs, TraceArgs, parse_format, scenarios};
use crate::render::oracle::human;
use crate::scratch::Scratch;

/// Arguments of `vramlab oracle`.
#[derive(Debug, Args)]
pub struct OracleArgs {
    /// Traces or folders of traces (snapshots, native CSV, .vlt, RMM logs).
    #[arg(value_name = "TRACE", required = true)]
    traces: Vec<PathBuf>,
    /// The files' format, when their extension does not say.
    #[arg(long, value_name = "FMT", value_parser = parse_format)]
    format: Option<Format>,
    /// Which GPU of a multi-device snapshot to use (default: the device
    /// with the most allocations).
    #[arg(long = "trace-device", value_name = "N")]
    trace_device: Option<u32>,
    /// The PyTorch release that judges: its official wheel from PyPI (the
    /// newest patch of X.Y, or exactly X.Y.Z), installed on first use into
    /// a cached environment under $VRAMLAB_ORACLE_CACHE (default
    /// ~/.cache/vramlab/oracle).
    #[arg(long = "torch", value_name = "X.Y", default_value = "2.15")]
    torch: String,
    /// Run this Python instead of the cached environment; it must have a
    /// CUDA build of torch installed (nothing is installed into it).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    #[command(flatten)]
    conf: ConfArgs,
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    start: StartArgs,
    /// Print the rows as a JSON array.
    #[arg(long)]
    json: bool,
    /// Also write PyTorch's own memory snapshot of each replay here
    /// (`TRACE.SETTING.pickle`; slower: memory history on).
    #[arg(long, value_name = "DIR")]
    snapshot_out: Option<PathBuf>,
    /// Keep the CSV, PyTorch's outputs and the device-call logs here
    /// (default: a temporary folder, removed afterwards).
    #[arg(long, value_name = "DIR")]
    work: Option<PathBuf>,
}

/// The release whose rules vramlab replays: `--torch-version`, else the
/// judge's release when vramlab knows it, else vramlab's newest (said in a
/// note: that is a release vramlab has no rules for yet).
fn rules_for(args: &OracleArgs, judge: &str) -> TorchVersion {
    if let Some(v) = args.conf.torch_version() {
        return v;
    }
    match judge.parse::<TorchVersion>() {
        Ok(v) => v,
        Err(_) => {
            errln!(
                "note: vramlab has no rules for PyTorch {judge}: its replay uses the newest it has ({}), so rows that differ show what changed",
                TorchVersion::NEWEST
            );
            TorchVersion::NEWEST
        }
    }
}

/// Runs the command.
pub fn run(args: OracleArgs) -> Result<()> {
    if args.start.start == Some(Start::Recorded) {
        bail!(
            "--start recorded: PyTorch's allocator cannot be put into a recorded state; the oracle starts every mid-run recording fresh (--start fresh)"
        );
    }
    args.conf.one_release("oracle")?;
    let paths = vramlab_replay::Inputs::new(&args.traces).files()?;
    let interp = match &args.python {
        Some(p) => Interpreter::given(p)?,
        None => Installer::default().ensure(&args.torch)?,
    };
    let release = interp.wheel.release();
    if args.python.is_some() && !interp.wheel.torch_version.starts_with(&args.torch) {
        errln!(
            "note: {} has torch {}, not {}: it judges",
            interp.python.display(),
            interp.wheel.torch_version,
            args.torch
        );
    }
    let rules = rules_for(&args, &release);
    let lib = locate()?;
    let fake = prepare(&lib, &interp.wheel.soname, &vramlab_oracle::cache_dir())?;
    let scratch = Scratch::new(args.work.as_deref(), "oracle");
    let mut conf = args.conf.clone();
    conf.torch_versions = vec![rules];
    let mut rows: Vec<OracleRow> = Vec::new();
    for (n, path) in paths.iter().enumerate() {
        let ta = TraceArgs {
            trace: path.clone(),
            format: args.format,
            device: args.trace_device,
        };
        let vramlab_replay::Input { trace, label, .. } = ta.load(Some(rules))?;
        let (t, notes) = oracle_trace(&trace);
        for note in notes {
            errln!("note: {label}: {note}");
        }
        let s = scenarios(&conf, &args.device, &t)?;
        let opts = JudgeOptions {
            interp: &interp,
            fake: &fake,
            work: scratch.dir().join(format!("{n}")),
            snapshot_out: args.snapshot_out.clone(),
            vramlab_rules: rules.to_string(),
        };
        let got = judge_trace(&label, &t, &s, &opts, |r| {
            errln!(
                "oracle: {} [{}] torch {}: {}",
                r.trace,
                r.setting,
                r.torch_version,
                if r.exact { "exact" } else { "differs" }
            );
        })
        .with_context(|| format!("judging {}", path.display()))?;
        rows.extend(got);
    }
    if args.json {
        crate::render::json::print(&rows)?;
    } else {
        out!("{}", human(&rows));
    }
    if rows.iter().any(|r| !r.exact) {
        return Err(crate::CheckFailed.into());
    }
    Ok(())
}
