//! Shared by the end-to-end tests: running the `vramlab` binary.

use std::ffi::OsStr;
use std::process::Command;

/// Runs `vramlab` with `args` from the repository root; returns the exit
/// status (-1 when killed by a signal), stdout and stderr.
pub fn vramlab<S: AsRef<OsStr>>(args: &[S]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramlab"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run vramlab");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
