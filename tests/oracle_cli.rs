//! `vramlab oracle` refuses what it cannot judge, with messages that say
//! why, before installing anything (the judging itself needs a torch wheel:
//! oracle/tests/oracle.rs, run by CI).

mod common;
use common::vramlab;

const TRACE: &str = "workloads/data/gpt-small-train.csv";

#[test]
fn a_release_that_is_not_one_is_refused() {
    let (code, _, err) = vramlab(&["oracle", TRACE, "--torch", "latest"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("'latest' is not a PyTorch release (expected X.Y or X.Y.Z, e.g. 2.11)"),
        "{err}"
    );
}

#[test]
fn a_recorded_start_is_refused() {
    let (code, _, err) = vramlab(&["oracle", TRACE, "--start", "recorded"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("PyTorch's allocator cannot be put into a recorded state"),
        "{err}"
    );
}

#[test]
fn an_interpreter_without_torch_is_named() {
    // A fresh virtual environment: certainly no torch in it.
    let dir = std::env::temp_dir().join(format!("vramlab-oracle-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&dir)
        .status()
        .expect("python3 runs");
    assert!(made.success());
    let py = dir.join("bin").join("python");
    let (code, _, err) = vramlab(&["oracle", TRACE, "--python", py.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has no torch installed"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn other_policies_and_several_releases_are_refused() {
    let (code, _, err) = vramlab(&[
        "oracle",
        TRACE,
        "--torch-version",
        "2.11",
        "--torch-version",
        "2.15",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("oracle takes one --torch-version"), "{err}");
}
