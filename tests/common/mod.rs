//! Shared by the end-to-end tests: running the `vramlab` binary.

use std::ffi::OsStr;
use std::process::Command;

/// Runs `vramlab` with `args` from the repository root; returns the exit
/// status (-1 when killed by a signal), stdout and stderr. Output is at
/// full width (as `--wide` prints it), so that a test finds a sentence on
/// one line; [`vramlab_in_columns`] runs it as a terminal of N columns.
pub fn vramlab<S: AsRef<OsStr>>(args: &[S]) -> (i32, String, String) {
    vramlab_in_columns(usize::MAX, args)
}

/// [`vramlab`] with `COLUMNS=columns` (`usize::MAX`: as wide as it gets).
#[allow(dead_code)] // not every test binary runs it in columns
pub fn vramlab_in_columns<S: AsRef<OsStr>>(columns: usize, args: &[S]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramlab"))
        .args(args)
        .env("COLUMNS", columns.min(1 << 20).to_string())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run vramlab");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
