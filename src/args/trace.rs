//! The trace argument (`TRACE`, `--format`, `--trace-device`) and how a
//! trace recorded mid-run begins (`--start`).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_replay::{Input, Inputs, Pick, Start};
use vramlab_traces::Format;

/// The trace to read.
#[derive(Debug, Clone, Args)]
pub struct TraceArgs {
    /// Trace file: a PyTorch memory snapshot (.pickle, .pkl, also
    /// gzip-compressed .pickle.gz), a native trace (.csv, .csv.gz, .vlt,
    /// .vlt.zst) or a RAPIDS RMM log (.csv).
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// The file's format, when its extension does not say: csv, csv.gz,
    /// vlt, vlt.zst, snapshot, rmm.
    #[arg(long, value_name = "FMT", value_parser = parse_format)]
    pub format: Option<Format>,

    /// Which GPU of a multi-device snapshot to use (default: the device
    /// with the most allocations, named in a note).
    #[arg(long = "trace-device", value_name = "N")]
    pub device: Option<u32>,
}

/// How a replay of a snapshot recorded mid-run begins.
#[derive(Debug, Clone, Args)]
pub struct StartArgs {
    /// For snapshots recorded mid-run: `recorded` seeds the allocator state
    /// the recording began with, as it was; `fresh` allocates the blocks in
    /// use at the first entry under each setting, then replays. Default:
    /// `recorded` when only the recorded settings are replayed on an
    /// unlimited device, `fresh` for every what-if (another setting, policy
    /// or capacity).
    #[arg(long, value_name = "recorded|fresh")]
    pub start: Option<Start>,
}

pub fn parse_format(s: &str) -> Result<Format, String> {
    Format::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Format::ALL.iter().map(|(_, n, _)| *n).collect();
        format!("unknown format '{s}' (known: {})", names.join(", "))
    })
}

impl TraceArgs {
    /// Reads the trace; snapshots are laid out under PyTorch `version` rules.
    pub fn load(&self, version: Option<TorchVersion>) -> Result<Input> {
        let input = self.load_any(version)?;
        if input.trace.events.is_empty() {
            return Err(crate::inputs::nothing_to_replay(
                &self.trace,
                &input.trace.notes,
            ));
        }
        Ok(input)
    }

    /// Reads the trace, which may have no events (a state-only snapshot).
    pub fn load_any(&self, version: Option<TorchVersion>) -> Result<Input> {
        if let Some(file) = vramlab_traces::Job::file_of(&self.trace) {
            bail!(
                "{} is a multi-rank job ({}): `replay`, `recommend`, `oom-point` and `sweep` take a job; this command takes one trace (give one rank's trace file)",
                self.trace.display(),
                file.display()
            );
        }
        if self.trace.is_dir() {
            bail!(
                "{} is a folder: give one trace file (`vramlab sweep {}` takes every trace in a folder)",
                self.trace.display(),
                self.trace.display()
            );
        }
        let inputs = Inputs::new([&self.trace])
            .format(self.format)
            .pick(Pick::One(self.device))
            .torch(version);
        crate::inputs::read(inputs)?
            .into_iter()
            .next()
            .context("no trace")
    }
}
