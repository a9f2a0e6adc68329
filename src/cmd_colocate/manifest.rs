//! A colocation job in one file: the card, the release, the schedule and
//! each tenant (its trace, settings and engine utilization), so that a job
//! is named once and rerun with `vramlab colocate JOB.json`. Paths are
//! relative to the manifest's folder. Options given on the command line
//! take precedence over the file's.
//!
//! ```json
//! {
//!   "gpu": "h100-80gb",
//!   "torch_version": "2.15",
//!   "schedule": "trainer,rollout,trainer",
//!   "tenants": [
//!     {"name": "trainer", "trace": "trainer.csv", "conf": "expandable_segments:True"},
//!     {"name": "rollout", "trace": "rollout.csv", "kv_util": 0.4}
//!   ]
//! }
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// The file a job folder keeps its manifest in.
pub const IN_FOLDER: &str = "colocate.json";

/// A colocation job.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The card, by name (`vramlab gpus`).
    #[serde(default)]
    pub gpu: Option<String>,
    /// Or the device's memory (`2GiB`, bytes).
    #[serde(default)]
    pub capacity: Option<String>,
    /// The release whose rules the allocators follow.
    #[serde(default)]
    pub torch_version: Option<String>,
    /// Whose phases run when (as `--schedule`).
    #[serde(default)]
    pub schedule: Option<String>,
    /// The tenant whose largest utilization is searched (as
    /// `--search-util`).
    #[serde(default)]
    pub search_util: Option<String>,
    /// The tenants, one process each.
    pub tenants: Vec<TenantEntry>,
}

/// One tenant of a manifest.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantEntry {
    /// Its name (default: the trace's file name).
    #[serde(default)]
    pub name: Option<String>,
    /// Its trace, relative to the manifest's folder.
    pub trace: PathBuf,
    /// Its `PYTORCH_ALLOC_CONF` (default: PyTorch's defaults).
    #[serde(default)]
    pub conf: Option<String>,
    /// An inference engine sized by vLLM's rule: its utilization.
    #[serde(default)]
    pub kv_util: Option<f64>,
}

/// The manifest `path` names, if it names one: a `.json` file with a
/// `tenants` list, or a folder holding [`IN_FOLDER`]. `Ok(None)`: a trace.
pub fn find(path: &Path) -> Result<Option<(Manifest, PathBuf)>> {
    let file = if path.is_dir() {
        let f = path.join(IN_FOLDER);
        if !f.is_file() {
            bail!(
                "{}: a folder, but no {IN_FOLDER} in it (a colocation job folder keeps its manifest there)",
                path.display()
            );
        }
        f
    } else if path.extension().is_some_and(|e| e == "json") {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        if value.get("tenants").is_none() {
            return Ok(None);
        }
        path.to_path_buf()
    } else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let m: Manifest = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a colocation manifest", file.display()))?;
    if m.tenants.is_empty() {
        bail!("{}: the manifest lists no tenants", file.display());
    }
    if m.gpu.is_some() && m.capacity.is_some() {
        bail!(
            "{}: the manifest names both a gpu and a capacity: give one",
            file.display()
        );
    }
    for (i, t) in m.tenants.iter().enumerate() {
        if let Some(u) = t.kv_util {
            check_util(u).with_context(|| format!("{}: tenant {i}", file.display()))?;
        }
    }
    let base = file.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(Some((m, base)))
}

/// A utilization is a share of the device: above 0, at most 1.
pub fn check_util(u: f64) -> Result<()> {
    if !(u > 0.0 && u <= 1.0) {
        bail!("utilization {u} is not a share of the device (above 0, at most 1)");
    }
    Ok(())
}
