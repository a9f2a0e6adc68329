//! What the streamed-versus-whole test files share: PyTorch's own
//! snapshots of private pools and of recordings begun mid-run.

use std::path::{Path, PathBuf};

use vramlab_traces::{Trace, read_traces};

/// Every device trace of tests/pools/snapshots (PyTorch 2.15's), with its
/// file's name; at least one of them starts mid-run.
pub fn pool_snapshot_traces() -> Vec<(String, Trace)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/pools/snapshots");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".torch2.15.pickle"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "{files:?}");
    let traces: Vec<(String, Trace)> = files
        .iter()
        .flat_map(|path| {
            read_traces(path, None, &Default::default(), None)
                .unwrap()
                .into_iter()
                .map(|t| (path.display().to_string(), t))
        })
        .collect();
    assert!(
        traces.iter().any(|(_, t)| t.initial.is_some()),
        "no mid-run snapshot among {files:?}"
    );
    traces
}
