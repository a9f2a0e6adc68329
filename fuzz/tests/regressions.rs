//! Runs every fuzz target over its committed inputs: the minimized crashers
//! and hangs in `regressions/<target>/` (each once made a target fail) and
//! the seed corpus in `corpus/<target>/`. No libFuzzer needed:
//!
//!     cargo test --manifest-path fuzz/Cargo.toml --no-default-features --locked
//!
//! `.ci/run` runs this, so a fixed bug that comes back fails CI.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Instant;

use vramlab_fuzz::snapshot_in::SnapshotIn;
use vramlab_fuzz::targets::{ALL, ReplayIn, decode};

/// An input still running after this long is a hang (libFuzzer's limit
/// under the fuzz script is 10 s on an optimized build; this is a debug
/// build on a possibly busy CI machine).
const HANG: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether a regression input of a structured target still decodes to the
/// target's input type (an input that no longer does tests nothing).
fn decodes(target: &str, data: &[u8]) -> bool {
    match target {
        "replay" => decode::<ReplayIn>(data).is_some(),
        "snapshot_model" => decode::<SnapshotIn>(data).is_some(),
        _ => true,
    }
}

/// The files of `dir`, sorted by name (none if it does not exist).
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("reading a corpus directory").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `target` over every file of `dirs`; returns the number of inputs
/// and the failures as `path: message`.
fn run_all(
    name: &str,
    target: vramlab_fuzz::targets::Target,
    dirs: &[PathBuf],
    must_decode: bool,
) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut n = 0;
    for dir in dirs {
        for path in inputs(dir) {
            let data = std::fs::read(&path).expect("reading a corpus file");
            n += 1;
            if must_decode && !decodes(name, &data) {
                failures.push(format!(
                    "{name}: {}: no longer decodes as the target's input (the input types changed: re-minimize it)",
                    path.display()
                ));
                continue;
            }
            let start = Instant::now();
            // On a thread, so that a hang fails the test instead of
            // blocking CI (the thread is abandoned; the process ends with
            // the tests).
            let (send, recv) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let result = catch_unwind(AssertUnwindSafe(|| target(&data)));
                let _ = send.send(result);
            });
            let Ok(result) = recv.recv_timeout(HANG) else {
                failures.push(format!(
                    "{name}: {}: still running after {} s (a hang)",
                    path.display(),
                    HANG.as_secs()
                ));
                continue;
            };
            let took = start.elapsed().as_secs_f64();
            if let Err(e) = result {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{name}: {}: {msg}", path.display()));
            } else if took > 10.0 {
                // libFuzzer's -timeout=10 under the fuzz script: a hang.
                failures.push(format!("{name}: {}: took {took:.1} s", path.display()));
            }
        }
    }
    (n, failures)
}

#[test]
fn every_committed_input_passes_its_target() {
    let mut failures = Vec::new();
    let mut regressions = 0;
    for (name, target) in ALL {
        let reg = root().join("regressions").join(name);
        let corpus = root().join("corpus").join(name);
        let (r, f1) = run_all(name, target, std::slice::from_ref(&reg), true);
        let (c, f2) = run_all(name, target, std::slice::from_ref(&corpus), false);
        eprintln!("{name:>15}: {r} regression inputs, {c} corpus inputs");
        assert!(c > 0, "{name}: no seed corpus in {}", corpus.display());
        regressions += r;
        failures.extend(f1);
        failures.extend(f2);
    }
    assert!(regressions > 0, "no regression inputs found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A directory under `regressions/` or `corpus/` that names no target
/// would be skipped silently; refuse it.
#[test]
fn every_input_directory_belongs_to_a_target() {
    for top in ["regressions", "corpus"] {
        for entry in std::fs::read_dir(root().join(top)).expect("listing") {
            let path = entry.expect("listing").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            assert!(
                path.is_dir() && ALL.iter().any(|(t, _)| *t == name),
                "{}: not the directory of a fuzz target ({})",
                path.display(),
                ALL.map(|(t, _)| t).join(", ")
            );
        }
    }
}
