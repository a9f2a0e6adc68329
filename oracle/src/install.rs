//! The torch wheels, installed from PyPI into one cached virtual
//! environment per release, on first use.
//!
//! Where: `$VRAMLAB_ORACLE_CACHE`, else `$XDG_CACHE_HOME/vramlab/oracle`,
//! else `~/.cache/vramlab/oracle`; one folder `torch-X.Y` per release
//! (`torch-X.Y.Z` when a patch release is asked for), with a `complete`
//! marker written after a successful install so that an interrupted one is
//! redone. pip is pip: `PIP_INDEX_URL`, `PIP_CACHE_DIR` and the rest apply.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::OracleError;
use crate::wheel::{WheelInfo, probe};

/// The oracle's cache folder.
pub fn cache_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("VRAMLAB_ORACLE_CACHE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("vramlab").join("oracle")
}

/// A Python interpreter with a torch wheel.
#[derive(Debug, Clone)]
pub struct Interpreter {
    /// The interpreter.
    pub python: PathBuf,
    /// Its wheel.
    pub wheel: WheelInfo,
}

impl Interpreter {
    /// An interpreter the user chose (`--python`); it must have torch.
    pub fn given(python: &Path) -> Result<Interpreter, OracleError> {
        Ok(Interpreter {
            python: python.to_path_buf(),
            wheel: probe(python)?,
        })
    }
}

/// Checks a release name: `X.Y` or `X.Y.Z`, digits only.
pub(crate) fn check_release(release: &str) -> Result<(), OracleError> {
    let parts: Vec<&str> = release.split('.').collect();
    let ok = (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if ok {
        Ok(())
    } else {
        Err(OracleError::BadRelease(release.to_string()))
    }
}

/// Makes the cached environments.
#[derive(Debug, Clone)]
pub struct Installer {
    /// The cache folder.
    pub cache: PathBuf,
    /// The Python that creates the environments (`python3` by default).
    pub base_python: PathBuf,
}

impl Default for Installer {
    fn default() -> Self {
        Installer {
            cache: cache_dir(),
            base_python: std::env::var_os("VRAMLAB_ORACLE_PYTHON")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("python3")),
        }
    }
}

fn run_to_stderr(cmd: &mut Command, what: &str) -> Result<std::process::ExitStatus, OracleError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(std::io::stderr()))
        .stderr(Stdio::inherit())
        .status()
        .map_err(|source| OracleError::Spawn {
            program: what.to_string(),
            source,
        })
}

impl Installer {
    /// The environment folder of `release`.
    pub(crate) fn venv(&self, release: &str) -> PathBuf {
        self.cache.join(format!("torch-{release}"))
    }

    /// The interpreter of `release`'s environment, installing torch
    /// `release` (its newest patch for `X.Y`) first if needed. pip's
    /// progress goes to stderr.
    pub fn ensure(&self, release: &str) -> Result<Interpreter, OracleError> {
        check_release(release)?;
        let venv = self.venv(release);
        let python = venv.join("bin").join("python");
        let marker = venv.join("complete");
        if marker.is_file() && python.exists() {
            return Interpreter::given(&python);
        }
        std::fs::create_dir_all(&self.cache).map_err(OracleError::io(&self.cache))?;
        if !python.exists() {
            eprintln!("oracle: creating {}", venv.display());
            let st = run_to_stderr(
                Command::new(&self.base_python)
                    .arg("-m")
                    .arg("venv")
                    .arg(&venv),
                &format!("{} -m venv", self.base_python.display()),
            )?;
            if !st.success() {
                return Err(OracleError::Wheel(format!(
                    "{} -m venv {} failed ({st})",
                    self.base_python.display(),
                    venv.display()
                )));
            }
        }
        let spec = if release.split('.').count() == 2 {
            format!("torch=={release}.*")
        } else {
            format!("torch=={release}")
        };
        eprintln!(
            "oracle: installing {spec} from PyPI into {} (first use of this release: a few GB)",
            venv.display()
        );
        let st = run_to_stderr(
            Command::new(&python)
                // No copy of the multi-GB wheel in pip's cache: the venv is
                // the cache, and disks on CI machines can be small.
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--no-cache-dir",
                ])
                .arg(&spec)
                .arg("numpy"),
            "pip",
        )?;
        if !st.success() {
            return Err(OracleError::Install {
                release: release.to_string(),
                venv,
                status: st.to_string(),
            });
        }
        let interp = Interpreter::given(&python)?;
        std::fs::write(&marker, format!("{}\n", interp.wheel.torch_version))
            .map_err(OracleError::io(&marker))?;
        Ok(interp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_names() {
        for ok in ["2.11", "2.6", "2.11.0", "3.0"] {
            assert!(check_release(ok).is_ok(), "{ok}");
        }
        for bad in ["", "2", "2.x", "2.11.0.1", "latest", "2.11-rc1", "../2.11"] {
            assert!(check_release(bad).is_err(), "{bad}");
        }
    }
}
