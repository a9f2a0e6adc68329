//! What a Python environment's torch wheel is: its version, its CUDA, and
//! the CUDA runtime it links (whose soname the fake must take).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::OracleError;

/// A torch wheel as installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelInfo {
    /// `torch.__version__`, e.g. `2.11.0+cu130`.
    pub torch_version: String,
    /// `torch.version.cuda`, e.g. `13.0` (`None`: a CPU-only wheel).
    pub cuda: Option<String>,
    /// The site-packages folder torch is in.
    pub site_packages: PathBuf,
    /// The real CUDA runtime the wheel loads.
    pub cudart: PathBuf,
    /// Its soname (`libcudart.so.13`).
    pub soname: String,
}

impl WheelInfo {
    /// `cudaRuntimeGetVersion` of the wheel's CUDA (`13.0` → 13000, `12.4` → 12040).
    pub(crate) fn runtime_version(&self) -> i32 {
        let Some(c) = &self.cuda else { return 13000 };
        let mut it = c.split('.').map(|p| p.parse::<i32>().unwrap_or(0));
        let major = it.next().unwrap_or(13);
        let minor = it.next().unwrap_or(0);
        major * 1000 + minor * 10
    }

    /// The release as `X.Y`.
    pub fn release(&self) -> String {
        self.torch_version
            .split('.')
            .take(2)
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// The value of `name = '...'` in a Python source line.
fn assigned(source: &str, name: &str) -> Option<Option<String>> {
    for line in source.lines() {
        let Some(rest) = line.trim().strip_prefix(name) else {
            continue;
        };
        let Some(value) = rest.trim_start().strip_prefix([':', '=']) else {
            continue;
        };
        // `__version__: str = '2.11.0'` or `cuda = '13.0'` or `cuda = None`.
        let value = value.rsplit('=').next().unwrap_or(value).trim();
        if value == "None" {
            return Some(None);
        }
        let v = value.trim_matches(|c| c == '\'' || c == '"');
        return Some(Some(v.to_string()));
    }
    None
}

/// The site-packages folders of `python`, without importing anything.
fn site_packages(python: &Path) -> Result<Vec<PathBuf>, OracleError> {
    let out = Command::new(python)
        .args([
            "-c",
            "import sysconfig; p = sysconfig.get_paths(); print(p['purelib']); print(p['platlib'])",
        ])
        .output()
        .map_err(|source| OracleError::Spawn {
            program: python.display().to_string(),
            source,
        })?;
    if !out.status.success() {
        return Err(OracleError::Wheel(format!(
            "{} does not run: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(PathBuf::from)
        .collect())
}

/// The CUDA runtime a wheel loads: nvidia/*/lib/libcudart.so.N (the CUDA
/// 12 wheels' nvidia/cuda_runtime, the CUDA 13 wheels' nvidia/cu13), else
/// one in torch/lib.
fn find_cudart(site: &Path) -> Option<PathBuf> {
    let mut found = Vec::new();
    let nvidia = site.join("nvidia");
    if let Ok(dirs) = std::fs::read_dir(&nvidia) {
        for d in dirs.flatten() {
            if let Ok(files) = std::fs::read_dir(d.path().join("lib")) {
                found.extend(files.flatten().map(|f| f.path()));
            }
        }
    }
    if let Ok(files) = std::fs::read_dir(site.join("torch").join("lib")) {
        found.extend(files.flatten().map(|f| f.path()));
    }
    found.sort();
    found.into_iter().find(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("libcudart.so.") && n.len() == "libcudart.so.13".len())
    })
}

/// Reads the torch wheel of `python`'s environment.
pub(crate) fn probe(python: &Path) -> Result<WheelInfo, OracleError> {
    let sites = site_packages(python)?;
    let site = sites
        .iter()
        .find(|s| s.join("torch").join("version.py").is_file())
        .ok_or_else(|| {
            OracleError::Wheel(format!(
                "{} has no torch installed (looked in {})",
                python.display(),
                sites
                    .iter()
                    .map(|s| s.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?
        .clone();
    let version_py = site.join("torch").join("version.py");
    let source = std::fs::read_to_string(&version_py).map_err(OracleError::io(&version_py))?;
    let torch_version = assigned(&source, "__version__")
        .flatten()
        .ok_or_else(|| OracleError::Wheel(format!("{}: no __version__", version_py.display())))?;
    let cuda = assigned(&source, "cuda").flatten();
    if cuda.is_none() {
        return Err(OracleError::Wheel(format!(
            "torch {torch_version} in {} is a CPU-only build: the oracle needs the CUDA wheel from PyPI",
            site.display()
        )));
    }
    let cudart = find_cudart(&site).ok_or_else(|| {
        OracleError::Wheel(format!(
            "torch {torch_version} in {}: no libcudart.so.N found under nvidia/*/lib or torch/lib",
            site.display()
        ))
    })?;
    let soname = cudart
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("libcudart.so.13")
        .to_string();
    Ok(WheelInfo {
        torch_version,
        cuda,
        site_packages: site,
        cudart,
        soname,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_version_py() {
        let src = "__version__ = '2.11.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\nhip = None\n";
        assert_eq!(
            assigned(src, "__version__"),
            Some(Some("2.11.0+cu130".into()))
        );
        assert_eq!(assigned(src, "cuda"), Some(Some("13.0".into())));
        assert_eq!(assigned(src, "hip"), Some(None));
        let w = WheelInfo {
            torch_version: "2.6.0+cu124".into(),
            cuda: Some("12.4".into()),
            site_packages: PathBuf::new(),
            cudart: PathBuf::new(),
            soname: "libcudart.so.12".into(),
        };
        assert_eq!(w.runtime_version(), 12040);
        assert_eq!(w.release(), "2.6");
    }
}
