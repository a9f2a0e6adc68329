//! `build::build_report` and `build::state_report`: the whole report of a
//! trace, and the errors they give, worded as the command line prints them.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::out_dir;
use vramlab_replay::parse_grid;
use vramlab_replay::target_of;
use vramlab_reports::{BuildError, ReportRequest, build_report, state_report};
use vramlab_traces::{InitialState, Trace};

fn gpt() -> Trace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    vramlab_replay::Inputs::new([&path]).trace().unwrap()
}

/// A request with the explorer, no card, start and placement as given by
/// default, one plot and one release; tests change what they are about.
fn request<'a>(
    name: &'a str,
    trace: &'a Trace,
    grid: &'a [vramlab_replay::GridEntry],
    target: &'a vramlab_replay::TorchTarget,
    out: &'a Path,
) -> ReportRequest<'a> {
    ReportRequest {
        name,
        trace,
        capacity: None,
        grid,
        plots: 1,
        target,
        start: None,
        placement: Default::default(),
        out,
        upgrade_to: None,
        explorer: true,
        host: Default::default(),
    }
}

#[test]
fn a_report_sweeps_ranks_and_plots_the_defaults_and_the_best() {
    let dir = out_dir("build");
    let trace = gpt();
    let target = target_of(&trace, None);
    let grid = parse_grid(
        "default\nexpandable_segments:True\nmax_split_size_mb:128\nroundup_power2_divisions:4",
        target.rules,
    )
    .unwrap();
    let done = AtomicUsize::new(0);
    let built = build_report(
        &ReportRequest {
            capacity: Some(1 << 30),
            ..request("gpt-small-train.csv", &trace, &grid, &target, &dir)
        },
        &|| {
            done.fetch_add(1, Ordering::Relaxed);
        },
    )
    .unwrap();
    assert_eq!(done.load(Ordering::Relaxed), grid.len());
    assert_eq!(built.index, dir.join("index.html"));
    assert_eq!(built.rec.ranked.len(), grid.len());
    // The defaults and the best setting (one plot besides the defaults).
    assert!(dir.join("segments-1-default.png").is_file());
    assert!(
        dir.join("segments-2-expandable-segments-true.png")
            .is_file()
    );
    let maps = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("segments-") && name.ends_with(".png")
        })
        .count();
    assert_eq!(maps, 2);
    let html = std::fs::read_to_string(&built.index).unwrap();
    assert!(html.contains("vramlab report: gpt-small-train.csv"));
    assert!(html.contains("4 settings were replayed; the table ranks 2 of them."));
    // The explorer: its markup, its data, and a script that cannot end early.
    for part in [
        "<section id=\"explorer\">",
        "data-segment-map",
        "role=\"tooltip\"",
        "type=\"range\"",
        "<script type=\"application/json\" id=\"vramlab-explorer\">",
        "<script type=\"application/octet-stream\" id=\"vramlab-packed\">",
    ] {
        assert!(html.contains(part), "{part}");
    }
    let packed = html.split("id=\"vramlab-packed\">").nth(1).unwrap();
    let packed = &packed[..packed.find("</script>").unwrap()];
    assert!(packed.len() > 1000);
    assert!(
        packed
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
    );
    // Its index names the two settings shown and their peaks.
    let index = html.split("id=\"vramlab-explorer\">").nth(1).unwrap();
    let index: serde_json::Value =
        serde_json::from_str(&index[..index.find("</script>").unwrap()]).unwrap();
    let settings = index["settings"].as_array().unwrap();
    assert_eq!(settings.len(), 2);
    assert_eq!(index["events"], gpt().events.len() as u64);
    for s in settings {
        assert!(s["peak_reserved"].as_u64().unwrap() > 0);
    }
}

#[test]
fn a_report_without_the_explorer_keeps_the_rest() {
    let dir = out_dir("build-no-explorer");
    let trace = gpt();
    let target = target_of(&trace, None);
    let grid = parse_grid("default\nexpandable_segments:True", target.rules).unwrap();
    let built = build_report(
        &ReportRequest {
            explorer: false,
            ..request("gpt-small-train.csv", &trace, &grid, &target, &dir)
        },
        &|| {},
    )
    .unwrap();
    let html = std::fs::read_to_string(&built.index).unwrap();
    assert!(!html.contains("<section id=\"explorer\">"));
    assert!(!html.contains("vramlab-packed"));
    // Asked for: no note of a limit.
    assert!(!html.contains("The explorer is left out"));
    assert!(html.contains("vramlab report: gpt-small-train.csv"));
    assert!(dir.join("segments-1-default.png").is_file());
    assert_eq!(built.rec.ranked.len(), 2);
}

#[test]
fn errors_read_as_the_command_line_prints_them() {
    let dir = out_dir("build-errors");
    let e = state_report("t.csv", &Trace::new(Default::default()), &dir).unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.csv: the snapshot holds neither events nor segments: nothing to report"
    );
    let mut t = Trace::new(Default::default());
    t.initial = Some(InitialState {
        layout_error: Some("blocks overlap".into()),
        ..Default::default()
    });
    let e = state_report("s.pickle", &t, &dir).unwrap_err();
    assert_eq!(
        e.to_string(),
        "s.pickle: the allocator state could not be laid out: blocks overlap"
    );
    // The message is whole: no source to repeat it.
    assert!(std::error::Error::source(&e).is_none());

    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let trace = gpt();
    let target = target_of(&trace, None);
    let grid = parse_grid("default", target.rules).unwrap();
    let e = build_report(
        &ReportRequest {
            plots: 0,
            ..request("gpt-small-train.csv", &trace, &grid, &target, &file)
        },
        &|| {},
    )
    .unwrap_err();
    assert!(matches!(e, BuildError::Write(_)), "{e:?}");
    assert!(
        e.to_string().starts_with(&format!(
            "writing the report: cannot write {}: ",
            file.display()
        )),
        "{e}"
    );
}

/// A mid-run trace whose first block had its free requested before the
/// recording (`active_pending_free` in a snapshot): the fixture the browser
/// check opens (`tests/browser/pending-free-start.vlt`, `.ci/run`), whose
/// explorer must rebuild the replay's peaks without counting that block
/// as allocated. `VRAMLAB_BLESS=1` rewrites the fixture.
#[test]
fn the_pending_free_fixture_is_current() {
    use vramlab_traces::{
        Event, InitialBlock, InitialBlockState, InitialSegment, TraceHeader, write_binary,
    };
    const MIB: u64 = 1 << 20;
    let base = 0x7f00_0000_0000u64;
    let block = |at: u64, size: u64, state| InitialBlock {
        address: base + at,
        size,
        requested: size,
        state,
    };
    let mut t = Trace::new(TraceHeader {
        source: "pending-free-start".into(),
        ..Default::default()
    });
    t.streams = vec![0];
    t.num_ids = 4;
    t.initial = Some(InitialState::from_segments(vec![InitialSegment {
        address: base,
        size: 20 * MIB,
        stream: 0,
        is_small: false,
        is_expandable: false,
        pool: None,
        blocks: vec![
            block(0, 2 * MIB, InitialBlockState::PendingFree(0)),
            block(2 * MIB, 2 * MIB, InitialBlockState::Allocated(1)),
            block(4 * MIB, 16 * MIB, InitialBlockState::Free),
        ],
    }]));
    let alloc = |id, size| Event::Alloc {
        id,
        stream: 0,
        size,
    };
    t.events = vec![
        alloc(2, 3 * MIB),
        Event::FreeCompleted { id: 0 },
        alloc(3, 18 * MIB),
        Event::Free { id: 1 },
        Event::Free { id: 2 },
        Event::Free { id: 3 },
    ];
    let mut bytes = Vec::new();
    write_binary(&t, &mut bytes, false, "pending-free-start.vlt").unwrap();
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/browser/pending-free-start.vlt");
    if std::env::var_os("VRAMLAB_BLESS").is_some() {
        std::fs::write(&path, &bytes).unwrap();
    }
    let committed = std::fs::read(&path).expect("the fixture (VRAMLAB_BLESS=1 writes it)");
    assert_eq!(
        committed, bytes,
        "tests/browser/pending-free-start.vlt is out of date"
    );
    // The report builds, and its explorer knows the block was freed before
    // the recording.
    let dir = out_dir("pending-free");
    let target = target_of(&t, None);
    let grid = parse_grid("default\nexpandable_segments:True", target.rules).unwrap();
    let built = build_report(
        &ReportRequest {
            plots: 2,
            ..request("pending-free-start", &t, &grid, &target, &dir)
        },
        &|| {},
    )
    .unwrap();
    let html = std::fs::read_to_string(built.index).unwrap();
    assert!(html.contains("vramlab-explorer"));
}
