//! Malformed and hostile inputs (`tests/malformed/`): every file listed in
//! `tests/malformed/README.md` makes `vramlab` exit with status 2 and
//! exactly the message the index gives, naming the file and the line, byte
//! or entry. Also inputs too large to commit (sparse files): a pickle above
//! the 1 GiB cap, an endless line, a binary trace followed by gigabytes.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const DIR: &str = "tests/malformed";

mod common;
use common::vramlab;

/// One row of the index: file, command (with `{file}` / `{content}`),
/// expected stderr.
struct Case {
    file: String,
    command: String,
    expected: String,
}

/// The rows of the table in `tests/malformed/README.md`:
/// `` | `file` | what | `command` | expected | ``.
fn cases() -> Vec<Case> {
    let index = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(DIR)
        .join("README.md");
    let text = fs::read_to_string(&index).expect("tests/malformed/README.md");
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line
            .trim_start_matches("| ")
            .trim_end_matches(" |")
            .split(" | ")
            .collect();
        if cells.len() != 4 || !cells[2].starts_with("`vramlab ") {
            continue; // the table of generated inputs
        }
        out.push(Case {
            file: cells[0].trim_matches('`').to_string(),
            command: cells[2].trim_matches('`').to_string(),
            expected: cells[3].to_string(),
        });
    }
    out
}

#[test]
fn every_malformed_file_gets_its_exact_error() {
    let cases = cases();
    assert!(cases.len() >= 50, "only {} rows in the index", cases.len());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR);
    let mut failures = Vec::new();
    for c in &cases {
        let path = format!("{DIR}/{}", c.file);
        let content = fs::read_to_string(dir.join(&c.file)).unwrap_or_default();
        let args: Vec<String> = c
            .command
            .split_whitespace()
            .skip(1) // "vramlab"
            .map(|a| match a {
                "{file}" => path.clone(),
                "{content}" => content.clone(),
                other => other.to_string(),
            })
            .collect();
        let (code, _, err) = vramlab(&args);
        if code != 2 || err.trim_end() != c.expected {
            failures.push(format!(
                "{}: status {code}\n  want: {}\n  got:  {}",
                c.file,
                c.expected,
                err.trim_end()
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn every_file_of_the_corpus_is_in_the_index() {
    let listed: Vec<String> = cases().into_iter().map(|c| c.file).collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR);
    for entry in fs::read_dir(&dir).expect("tests/malformed") {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name == "README.md" || name == "make.py" {
            continue;
        }
        assert!(listed.contains(&name), "{name} has no row in README.md");
    }
}

/// A fresh folder for the generated inputs.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// A sparse file of `len` bytes starting with `head` (zeros after it).
fn sparse(path: &Path, head: &[u8], len: u64) {
    fs::write(path, head).unwrap();
    File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn timed(args: &[String]) -> (i32, String, String, Duration) {
    let start = Instant::now();
    let (code, out, err) = vramlab(args);
    (code, out, err, start.elapsed())
}

/// A mistyped path is named as missing, whether or not its name has an
/// extension (a missing job folder has none): not as a file of unknown
/// format.
#[test]
fn a_missing_path_is_named_missing() {
    let d = scratch("malformed-missing-path");
    for name in ["no-such-job", "no-such-run.pickle", "no-such-trace.csv"] {
        let p = d.join(name).display().to_string();
        for cmd in ["replay", "stats"] {
            let (code, _, err, _) = timed(&[cmd.into(), p.clone()]);
            assert_eq!(code, 2, "{cmd} {name}: {err}");
            assert!(
                err.starts_with(&format!("error: {p}: cannot open: ")),
                "{cmd} {name}: {err}"
            );
        }
    }
}

#[test]
fn a_pickle_above_one_gib_is_refused_without_reading_it() {
    let d = scratch("malformed-huge-pickle");
    let f = d.join("huge.pickle");
    sparse(&f, b"\x80\x04", (1 << 30) + 1);
    let p = f.display().to_string();
    let (code, _, err, took) = timed(&["stats".into(), p.clone()]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim_end(),
        format!(
            "error: {p}: the snapshot is 1073741825 bytes; the pickle reader accepts at most 1073741824 bytes (1 GiB): record fewer entries (_record_memory_history(max_entries=...))"
        )
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn an_endless_line_stops_the_text_readers_after_one_mib() {
    let d = scratch("malformed-long-line");
    let f = d.join("long-line.csv");
    sparse(&f, b"", 8 << 30);
    let p = f.display().to_string();
    let (code, _, err, took) = timed(&["stats".into(), p.clone()]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim_end(),
        format!("error: {p}:1: line longer than 1048576 bytes (is this a text trace?)")
    );
    // Reading 8 GiB (even of a sparse file) takes seconds; 1 MiB does not.
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn data_after_a_binary_traces_end_marker_is_refused_without_reading_it() {
    let d = scratch("malformed-endless-vlt");
    let small = d.join("small.vlt");
    let csv = d.join("small.csv");
    fs::write(&csv, "action,id,size,stream\nalloc,a,512\nfree,a\n").unwrap();
    let (code, _, err) = vramlab(&[
        "convert".into(),
        csv.display().to_string(),
        small.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let head = fs::read(&small).unwrap();
    let f = d.join("endless.vlt");
    sparse(&f, &head, 8 << 30);
    let (code, _, err, took) = timed(&["stats".into(), f.display().to_string()]);
    // Refused at the first byte after the end marker (not silently
    // ignored, and not read to the end).
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("data after the end of the trace (two files concatenated?)"),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// Valid files with absurd values: sizes up to 2^64 - 1 (the CSV format
/// accepts any u64). Summaries saturate instead of overflowing (`stats`
/// panicked), replays report the OOM as a result under every policy.
#[test]
fn absurd_sizes_are_results_not_panics() {
    let d = scratch("malformed-absurd-sizes");
    let f = d.join("huge-sizes.csv");
    fs::write(
        &f,
        "action,id,size,stream\nalloc,a,18446744073709551615\nalloc,b,18446744073709551615\n\
         alloc,c,1152921504606846975\nalloc,d,1152921504606846975\nfree,a\nfree,c\nempty_cache\n",
    )
    .unwrap();
    let p = f.display().to_string();
    let (code, out, err) = vramlab(&["stats".into(), p.clone()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("allocations 4"), "{out}");
    for policy in ["native", "direct", "bfc", "async", "stitch"] {
        let (code, out, err) = vramlab(&[
            "replay".into(),
            p.clone(),
            "--policy".into(),
            policy.into(),
            "--continue-on-oom".into(),
            "--json".into(),
        ]);
        assert_eq!(code, 0, "{policy}: {err}");
        assert!(out.contains("\"oom\""), "{policy}: {out}");
    }
}
