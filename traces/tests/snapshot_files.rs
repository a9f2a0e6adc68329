//! Snapshot files read from disk (`read_snapshot_file`, which parses the
//! pickle as it reads it): the same snapshot, and the same errors, as the
//! bytes read whole (`read_snapshot`), plain or gzipped.

use std::io::Write;
use std::path::{Path, PathBuf};

use vramlab_traces::read_snapshot_file;
use vramlab_traces::snapshot::read_snapshot;

/// The snapshots of the tests, and the real ones where they are.
fn pickles() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut v = Vec::new();
    for dir in [
        "tests/snapshot_shapes",
        "tests/pools/snapshots",
        "tests/releases",
        "tests/malformed",
        "../shared/traces/real",
    ] {
        let Ok(rd) = std::fs::read_dir(root.join(dir)) else {
            println!("SKIPPED {dir}: not there");
            continue;
        };
        v.extend(
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "pickle")),
        );
    }
    v.sort();
    v
}

/// A folder of this test's own under the system's temporary folder.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vramlab-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// What a read gives, as text: the snapshot's debug form or the error.
fn outcome<E: std::fmt::Display>(r: Result<vramlab_traces::snapshot::Snapshot, E>) -> String {
    match r {
        Ok(s) => format!("{s:?}"),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn files_read_as_their_bytes_plain_and_gzipped() {
    let dir = scratch("snapshot-files");
    let files = pickles();
    assert!(files.len() >= 30, "{} snapshot files", files.len());
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let name = path.display().to_string();
        let whole = outcome(read_snapshot(&bytes, &name));
        let read = outcome(read_snapshot_file(path, None));
        assert_eq!(read, whole, "{name}");
        // The same bytes gzipped, under the same name as far as messages go.
        let gz = dir.join(format!(
            "{}.gz",
            path.file_name().unwrap().to_string_lossy()
        ));
        std::fs::write(&gz, gzip(&bytes)).unwrap();
        let read_gz = outcome(read_snapshot_file(&gz, None));
        let gz_name = gz.display().to_string();
        assert_eq!(
            read_gz,
            outcome(read_snapshot(&bytes, &gz_name)),
            "{name} gzipped"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cut_and_foreign_files_get_the_whole_reads_messages() {
    let dir = scratch("snapshot-cut");
    let real = pickles()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("snapshot_shapes"))
        .expect("a test snapshot");
    let bytes = std::fs::read(&real).unwrap();
    for (i, cut) in [1, bytes.len() / 3, bytes.len() - 1]
        .into_iter()
        .enumerate()
    {
        let p = dir.join(format!("cut{i}.pickle"));
        std::fs::write(&p, &bytes[..cut]).unwrap();
        let name = p.display().to_string();
        let want = outcome(read_snapshot(&bytes[..cut], &name));
        assert!(want.starts_with("error: "), "{want}");
        assert_eq!(outcome(read_snapshot_file(&p, None)), want, "cut at {cut}");
    }
    // A binary trace under a snapshot's name.
    let vlt = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/browser/pending-free-start.vlt");
    let p = dir.join("binary.pickle");
    std::fs::copy(&vlt, &p).unwrap();
    let got = outcome(read_snapshot_file(&p, None));
    assert!(
        got.contains("this is a vramlab binary trace, not a PyTorch snapshot"),
        "{got}"
    );
    // A gzip stream that is cut short.
    let gz = gzip(&bytes);
    let p = dir.join("cut.pickle.gz");
    std::fs::write(&p, &gz[..gz.len() / 2]).unwrap();
    let got = outcome(read_snapshot_file(&p, None));
    assert!(got.contains("cannot decompress"), "{got}");
    std::fs::remove_dir_all(&dir).unwrap();
}
