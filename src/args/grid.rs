//! `--grid`, extra `--conf` lines and `--torch-version` of the sweeping
//! commands.

use anyhow::{Context, Result};
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_replay::{GridEntry, default_grid_for, parse_grid, parse_grid_line};
use vramlab_replay::{TorchTarget, target_of};
use vramlab_traces::Trace;

/// Where a grid comes from.
#[derive(Debug, Clone, Args)]
pub struct GridArgs {
    /// `default` (the built-in grid of 44 settings) or a grid file (one
    /// setting per line; `fraction=F` and `policy=NAME` prefixes allowed).
    #[arg(long, value_name = "default|FILE", default_value = "default")]
    pub grid: String,
    /// Extra settings to add to the grid (same syntax as a grid line).
    #[arg(long = "conf", value_name = "STR")]
    pub extra: Vec<String>,
    /// PyTorch release whose rules apply (default: the release the trace
    /// was recorded with, detected from a snapshot's keys, else the
    /// newest). `recommend` and `report` take two: the first is the
    /// release upgraded from, the second the one upgraded to, and both are
    /// shown side by side.
    #[arg(long = "torch-version", value_name = "X.Y")]
    pub torch_versions: Vec<TorchVersion>,
}

impl GridArgs {
    /// The release named first with `--torch-version`, if any.
    pub fn torch_version(&self) -> Option<TorchVersion> {
        self.torch_versions.first().copied()
    }

    /// The release upgraded to: the second `--torch-version`, refusing a
    /// third (`None`: one release or none).
    pub fn upgrade_to(&self, command: &str) -> Result<Option<TorchVersion>> {
        match self.torch_versions.as_slice() {
            [] | [_] => Ok(None),
            [a, b] if a == b => Err(crate::invoke::BadArgument(format!(
                "{command}: --torch-version {a} is given twice; name two releases to compare, e.g. --torch-version 2.11 --torch-version {}",
                TorchVersion::NEWEST
            ))
            .into()),
            [_, b] => Ok(Some(*b)),
            _ => Err(crate::invoke::BadArgument(format!(
                "{command} compares two releases at most: give --torch-version twice (`vramlab replay` compares more)"
            ))
            .into()),
        }
    }

    /// Refuses more than one `--torch-version` for `command`.
    pub fn one_release(&self, command: &str) -> Result<()> {
        super::conf::one_release(&self.torch_versions, command)
    }

    /// The PyTorch release(s) that apply to `trace`.
    pub fn target(&self, trace: &Trace) -> TorchTarget {
        target_of(trace, self.torch_version())
    }

    /// The PyTorch release(s) that apply to several traces: the user's, or
    /// the one every trace agrees on, else the newest (said in a note).
    pub fn target_of_all<'t>(&self, traces: impl IntoIterator<Item = &'t Trace>) -> TorchTarget {
        if let Some(v) = self.torch_version() {
            return TorchTarget::user(v);
        }
        let targets: Vec<TorchTarget> = traces.into_iter().map(|t| target_of(t, None)).collect();
        match targets.first() {
            Some(first) if targets.iter().all(|t| t.releases == first.releases) => first.clone(),
            _ => {
                errln!(
                    "note: the traces were recorded by different PyTorch releases; the grid uses the rules of {} (name one with --torch-version)",
                    TorchVersion::NEWEST
                );
                TorchTarget::user(TorchVersion::NEWEST)
            }
        }
    }

    /// The grid entries for `target`: the default grid keeps only what
    /// every release of the target accepts.
    pub fn entries(&self, target: &TorchTarget) -> Result<Vec<GridEntry>> {
        let v = target.rules;
        let mut g = if self.grid == "default" {
            default_grid_for(target)
        } else {
            let text = std::fs::read_to_string(&self.grid)
                .with_context(|| format!("cannot read grid file {}", self.grid))?;
            parse_grid(&text, v).map_err(|e| anyhow::anyhow!("{}: {e}", self.grid))?
        };
        for e in &self.extra {
            g.push(parse_grid_line(e, v).map_err(|m| anyhow::anyhow!("--conf {e:?}: {m}"))?);
        }
        Ok(g)
    }
}
