//! `vramlab diff`: two runs compared at their reserved peaks — two traces,
//! or one trace under two settings — with the change in allocated bytes
//! by source line (or phase and size class).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_replay::{DiffInput, Scenario, diff, start_for};
use vramlab_traces::Trace;

use crate::args::{ConfArgs, DeviceArgs, StartArgs, TraceArgs, scenarios};
use crate::invoke::BadArgument;

/// Arguments of `vramlab diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Run A's trace (any format `replay` reads).
    #[arg(value_name = "A")]
    a: PathBuf,
    /// Run B's trace; leave it out to compare A under two --conf.
    #[arg(value_name = "B")]
    b: Option<PathBuf>,
    /// The files' format, when their extensions do not say: csv, csv.gz,
    /// vlt, vlt.zst, snapshot, rmm.
    #[arg(long, value_name = "FMT", value_parser = crate::args::parse_format)]
    format: Option<vramlab_traces::Format>,
    /// Which GPU of multi-device snapshots to use (default: the device
    /// with the most allocations, named in a note).
    #[arg(long = "trace-device", value_name = "N")]
    device_index: Option<u32>,
    /// Settings: none (each trace under its recorded settings, else
    /// PyTorch's defaults), one (both runs), or two (A under the first, B
    /// under the second); likewise `--torch-version`: two compare
    /// releases (what an upgrade does).
    #[command(flatten)]
    conf: ConfArgs,
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    start: StartArgs,
    /// How many groups to print (the JSON has them all).
    #[arg(long, value_name = "N", default_value_t = 15)]
    top: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn load(
    args: &DiffArgs,
    path: &std::path::Path,
    release: Option<vramlab_allocator::TorchVersion>,
) -> Result<Trace> {
    let t = TraceArgs {
        trace: path.to_path_buf(),
        format: args.format,
        device: args.device_index,
    };
    Ok(t.load(release)?.trace)
}

/// The one scenario of `conf` (given or recorded) for `trace`.
fn one_scenario(args: &DiffArgs, confs: &ConfArgs, trace: &Trace) -> Result<Scenario> {
    let mut s = scenarios(confs, &args.device, trace)?;
    match s.len() {
        1 => Ok(s.remove(0)),
        n => bail!(BadArgument(format!(
            "diff compares two runs: {n} settings were given for one trace"
        ))),
    }
}

/// Runs `diff`.
pub fn run(args: DiffArgs) -> Result<()> {
    let releases = &args.conf.torch_versions;
    if releases.len() > 2 {
        bail!(BadArgument(format!(
            "diff compares two runs: give at most two --torch-version ({} given)",
            releases.len()
        )));
    }
    let release_at = |i: usize| releases.get(i).or(releases.first()).copied();
    let confs = &args.conf.confs;
    if confs.len() > 2 {
        bail!(BadArgument(format!(
            "diff compares two runs: give at most two --conf ({} given)",
            confs.len()
        )));
    }
    let ta = load(&args, &args.a, release_at(0))?;
    let tb = match &args.b {
        Some(p) => Some(load(&args, p, release_at(1))?),
        // One trace under two releases: laid out under each release's rules.
        None if releases.len() == 2 => Some(load(&args, &args.a, release_at(1))?),
        None if confs.len() == 2 => None,
        None => bail!(BadArgument(
            "diff compares two runs: give a second trace (`vramlab diff A B`), two settings (`vramlab diff A --conf X --conf Y`) or two releases (`vramlab diff A --torch-version 2.11 --torch-version 2.15`)".into()
        )),
    };
    let conf_at = |i: usize| -> ConfArgs {
        let mut c = args.conf.clone();
        c.torch_versions = release_at(i).into_iter().collect();
        c.confs = confs
            .get(i)
            .or(confs.first())
            .cloned()
            .into_iter()
            .collect();
        c
    };
    let tb_ref = tb.as_ref().unwrap_or(&ta);
    let sa = one_scenario(&args, &conf_at(0), &ta)?;
    let sb = one_scenario(&args, &conf_at(1), tb_ref)?;
    let name_a = args.a.display().to_string();
    let name_b = args.b.as_ref().unwrap_or(&args.a).display().to_string();
    let side = |trace: &'_ Trace, name: &'_ str, s: &'_ Scenario| {
        let start = start_for(trace, std::slice::from_ref(s), args.start.start);
        if trace.initial.is_some() {
            errln!(
                "start of {name}: {}",
                vramlab_replay::describe_start(trace, start)
            );
        }
        start.unwrap_or_default()
    };
    let start_a = side(&ta, &name_a, &sa);
    let start_b = side(tb_ref, &name_b, &sb);
    let d = diff(
        DiffInput {
            trace: &ta,
            name: &name_a,
            scenario: &sa,
            start: start_a,
        },
        DiffInput {
            trace: tb_ref,
            name: &name_b,
            scenario: &sb,
            start: start_b,
        },
    )
    .with_context(|| {
        format!(
            "comparing {name_a} ({}) with {name_b} ({})",
            sa.label(),
            sb.label()
        )
    })?;
    if args.json {
        crate::render::json::print(&d)
    } else {
        crate::render::diff::print_diff(&d, args.top);
        Ok(())
    }
}
