//! What can stop the oracle.

use std::path::PathBuf;

/// Why the oracle could not judge.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    /// A release name that is not `X.Y` or `X.Y.Z`.
    #[error("'{0}' is not a PyTorch release (expected X.Y or X.Y.Z, e.g. 2.11)")]
    BadRelease(String),
    /// pip could not install the wheel.
    #[error(
        "pip could not install torch {release} into {venv} (exit status {status}; its output is above). \
         Is PyPI reachable (PIP_INDEX_URL for a mirror), and is {release} a release on PyPI?"
    )]
    Install {
        /// The release asked for.
        release: String,
        /// The environment.
        venv: PathBuf,
        /// pip's exit status.
        status: String,
    },
    /// A program could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// What was run.
        program: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The interpreter has no usable torch wheel.
    #[error("{0}")]
    Wheel(String),
    /// The fake CUDA library is missing or could not be prepared.
    #[error("{0}")]
    Fake(String),
    /// The PyTorch replay failed.
    #[error("PyTorch's replay of {trace} under {setting:?} failed: {why}")]
    TorchReplay {
        /// The trace file.
        trace: String,
        /// The setting.
        setting: String,
        /// What happened (the end of its stderr).
        why: String,
    },
    /// A script could not be recorded.
    #[error("{0}")]
    Record(String),
    /// vramlab's own replay failed.
    #[error("vramlab's replay failed: {0}")]
    Replay(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl OracleError {
    /// An I/O error on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> OracleError {
        let path = path.into();
        move |source| OracleError::Io { path, source }
    }
}
