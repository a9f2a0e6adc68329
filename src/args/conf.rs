//! `--conf`, `--policy`, `--torch-version` and friends: which policy and
//! settings to replay.

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_allocator::{AllocConf, PolicyKind, TorchVersion};
use vramlab_replay::{PolicySpec, Scenario};
use vramlab_replay::{TorchTarget, target_of};
use vramlab_traces::Trace;

use crate::args::DeviceArgs;

/// Which allocator settings to use.
#[derive(Debug, Clone, Args)]
pub struct ConfArgs {
    /// A PYTORCH_ALLOC_CONF string, e.g. "expandable_segments:True" or
    /// "max_split_size_mb:512,roundup_power2_divisions:4". Repeat to compare
    /// several settings side by side. Use "" or "default" for the defaults.
    #[arg(long = "conf", value_name = "STR")]
    pub confs: Vec<String>,

    /// Read the settings from PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF
    /// with the precedence of the target PyTorch version.
    #[arg(long)]
    pub conf_from_env: bool,

    /// Replay the trace's recorded settings (snapshots record them).
    #[arg(long)]
    pub recorded_conf: bool,

    /// PyTorch release whose allocator rules apply (2.1 … 2.15). Default:
    /// the release the snapshot was recorded with (detected from its keys;
    /// the newest of the possible ones), else the trace's framework header,
    /// else 2.15. `replay` takes it more than once to show what an upgrade
    /// does (each setting under each release, side by side).
    #[arg(long = "torch-version", value_name = "X.Y")]
    pub torch_versions: Vec<TorchVersion>,

    /// Per-process memory fraction, as torch.cuda.set_per_process_memory_fraction(F).
    #[arg(long, value_name = "F")]
    pub fraction: Option<f64>,

    /// Allocation policy the --conf strings configure: native (PyTorch's
    /// caching allocator), direct (no cache), bfc (TensorFlow/XLA), async
    /// (cudaMallocAsync-like pool), stitch (GMLake-style stitching), plan
    /// (the trace's own offline plan, STAlloc-style, with PyTorch's
    /// allocator under --conf for the rest).
    #[arg(long, value_name = "NAME", default_value = "native")]
    pub policy: PolicyKind,
}

impl ConfArgs {
    /// The one `--torch-version` given (the first; `replay` compares
    /// several, other commands refuse them in [`ConfArgs::one_release`]).
    pub fn torch_version(&self) -> Option<TorchVersion> {
        self.torch_versions.first().copied()
    }

    /// Refuses more than one `--torch-version` for `command`.
    pub fn one_release(&self, command: &str) -> Result<()> {
        one_release(&self.torch_versions, command)
    }

    /// The same arguments with `v` as the only release.
    pub fn with_release(&self, v: TorchVersion) -> ConfArgs {
        ConfArgs {
            torch_versions: vec![v],
            ..self.clone()
        }
    }

    /// The PyTorch release(s) that apply to `trace`.
    pub fn target(&self, trace: Option<&Trace>) -> TorchTarget {
        match trace {
            Some(t) => target_of(t, self.torch_version()),
            None => TorchTarget::user(self.torch_version().unwrap_or(TorchVersion::NEWEST)),
        }
    }

    /// The release whose rules apply to `trace`.
    pub fn version_for(&self, trace: Option<&Trace>) -> TorchVersion {
        self.target(trace).rules
    }

    /// The policies to run, in order: `--policy` with each `--conf`.
    pub fn policies(&self, trace: Option<&Trace>) -> Result<Vec<PolicySpec>> {
        if self.policy == PolicyKind::Native {
            return Ok(self
                .settings(trace)?
                .into_iter()
                .map(PolicySpec::Native)
                .collect());
        }
        if self.policy == PolicyKind::Plan {
            // The settings are the fallback's PYTORCH_ALLOC_CONF.
            if self.fraction.is_some() {
                bail!("--fraction is PyTorch's memory fraction: the plan policy has none");
            }
            let native = ConfArgs {
                policy: PolicyKind::Native,
                ..self.clone()
            };
            return Ok(native
                .settings(trace)?
                .into_iter()
                .map(|fallback| {
                    PolicySpec::Plan(vramlab_allocator::policies::plan::Settings {
                        fallback,
                        plan: None,
                    })
                })
                .collect());
        }
        if self.conf_from_env || self.recorded_conf {
            bail!(
                "--conf-from-env and --recorded-conf are PyTorch settings: they need --policy native"
            );
        }
        if self.fraction.is_some() {
            bail!("--fraction is PyTorch's memory fraction: it needs --policy native");
        }
        let confs: Vec<&str> = if self.confs.is_empty() {
            vec![""]
        } else {
            self.confs.iter().map(String::as_str).collect()
        };
        confs
            .into_iter()
            .map(|c| {
                PolicySpec::of(self.policy, c, self.version_for(trace)).map_err(|e| {
                    anyhow::Error::new(crate::invoke::BadArgument(format!(
                        "--policy {} --conf {c:?}: {e}",
                        self.policy
                    )))
                })
            })
            .collect()
    }

    /// The native policy's settings to run, in order.
    pub fn settings(&self, trace: Option<&Trace>) -> Result<Vec<AllocConf>> {
        if self.policy != PolicyKind::Native {
            bail!(
                "this command runs PyTorch's native allocator only (not --policy {})",
                self.policy
            );
        }
        let v = self.version_for(trace);
        let mut out = Vec::new();
        if self.conf_from_env {
            let (c, var) = AllocConf::from_env(v, |k| std::env::var(k).ok())
                .context("in the environment's allocator settings")?;
            if let Some(var) = var {
                errln!("note: settings from {var}: {:?}", c.raw);
            } else {
                errln!("note: no allocator settings in the environment; using the defaults");
            }
            out.push(c);
        }
        if self.recorded_conf {
            let Some(t) = trace else {
                bail!("--recorded-conf needs a trace");
            };
            match &t.header.alloc_conf {
                Some(s) => out.push(
                    AllocConf::parse(s, v)
                        .with_context(|| format!("in the trace's recorded settings {s:?}"))?,
                ),
                None => bail!("the trace does not record the settings it ran under"),
            }
        }
        for s in &self.confs {
            let s = if s == "default" { "" } else { s.as_str() };
            out.push(AllocConf::parse(s, v).with_context(|| format!("in --conf {s:?}"))?);
        }
        if out.is_empty() {
            out.push(AllocConf::new(v));
        }
        if let Some(f) = self.fraction {
            if !(0.0..=1.0).contains(&f) {
                return Err(crate::invoke::BadArgument(format!(
                    "--fraction {f}: must be between 0 and 1, as torch.cuda.set_per_process_memory_fraction requires"
                ))
                .into());
            }
        }
        Ok(out)
    }
}

/// Builds the scenarios for a trace.
pub fn scenarios(confs: &ConfArgs, dev: &DeviceArgs, trace: &Trace) -> Result<Vec<Scenario>> {
    let policies = confs.policies(Some(trace))?;
    if !trace.pools.is_empty()
        && policies
            .iter()
            .any(|p| !matches!(p, vramlab_allocator::PolicySpec::Native(_)))
    {
        errln!(
            "note: the trace routes requests to {} private pool(s) (CUDA graphs, MemPools); only PyTorch's native policy keeps them apart: the other policies serve every request from their one pool",
            trace.pools.len()
        );
    }
    Ok(policies
        .into_iter()
        .map(|p| {
            let mut s = Scenario::new(p)
                .with_capacity(dev.bytes())
                .with_placement(dev.placement);
            s.memory_fraction = confs.fraction;
            s
        })
        .collect())
}

/// Refuses more than one `--torch-version` for `command`, naming the
/// commands that compare releases.
pub(crate) fn one_release(versions: &[TorchVersion], command: &str) -> Result<()> {
    if versions.len() > 1 {
        return Err(crate::invoke::BadArgument(format!(
            "{command} takes one --torch-version (`vramlab replay`, `diff`, `recommend` and `report` compare releases)"
        ))
        .into());
    }
    Ok(())
}
