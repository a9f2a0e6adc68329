//! A work folder for a command that runs PyTorch (`oracle`, `record`): the
//! one the user named with `--work` (kept), else a temporary one, removed
//! when the command ends.

use std::path::{Path, PathBuf};

/// The folder; removed on drop unless the user named it.
pub(crate) struct Scratch {
    dir: PathBuf,
    keep: bool,
}

impl Scratch {
    /// `work` if given (kept), else `$TMPDIR/vramlab-<what>-<pid>` (removed).
    pub(crate) fn new(work: Option<&Path>, what: &str) -> Scratch {
        match work {
            Some(dir) => Scratch {
                dir: dir.to_path_buf(),
                keep: true,
            },
            None => Scratch {
                dir: std::env::temp_dir().join(format!("vramlab-{what}-{}", std::process::id())),
                keep: false,
            },
        }
    }

    /// The folder.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
