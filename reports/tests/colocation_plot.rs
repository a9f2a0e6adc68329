//! The colocation plot: several tenants on one GPU over the steps of a
//! colocated replay, written as PNG and SVG, the same bytes for the same
//! input, readable when crowded, a placeholder when empty.

mod common;

use std::fs;
use std::path::Path;

use common::out_dir;
use common::svg::{self, Lines};
use vramlab_reports::{ColocationChart, ColocationStep, PlotFiles, plot_colocation};

const GIB: u64 = 1 << 30;
const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

fn step(label: &str, held: &[u64], device_peak: u64, oom: Option<&str>) -> ColocationStep {
    ColocationStep {
        label: label.to_string(),
        held: held.to_vec(),
        device_peak,
        oom: oom.map(str::to_string),
    }
}

/// A trainer and a rollout engine taking turns on an 80 GiB card; the
/// rollout runs out of memory in the fifth step.
fn two_tenants() -> ColocationChart {
    ColocationChart {
        title: "trainer + rollout on one H100".to_string(),
        capacity: 80 * GIB,
        tenants: vec!["trainer".to_string(), "rollout".to_string()],
        steps: vec![
            step("trainer: forward", &[30 * GIB, 0], 34 * GIB, None),
            step("trainer: backward", &[42 * GIB, 0], 51 * GIB, None),
            step("rollout: generate", &[42 * GIB, 24 * GIB], 70 * GIB, None),
            step("trainer: optimizer", &[46 * GIB, 24 * GIB], 74 * GIB, None),
            step(
                "rollout: generate",
                &[46 * GIB, 30 * GIB],
                80 * GIB,
                Some("rollout"),
            ),
            step("trainer: forward", &[40 * GIB, 30 * GIB], 72 * GIB, None),
        ],
    }
}

/// Checks both files exist and are what they claim to be; returns the
/// SVG's text.
fn check(files: &PlotFiles) -> String {
    let png = fs::read(&files.png).unwrap();
    assert!(png.starts_with(PNG_MAGIC), "{}", files.png.display());
    assert!(png.len() > 5_000, "{} is almost empty", files.png.display());
    let svg = fs::read_to_string(&files.svg).unwrap();
    assert!(svg.starts_with("<svg width=\"1200\" height=\"700\""));
    svg
}

/// Fails listing every readability problem of the SVG at `path`, and
/// returns its texts in drawing order, joined.
fn assert_readable(path: &Path) -> String {
    let doc = svg::parse(&fs::read_to_string(path).unwrap());
    let found = svg::problems(&doc, Lines::UnlessBoxed);
    assert!(
        found.is_empty(),
        "{} is hard to read:\n  {}",
        path.display(),
        found.join("\n  ")
    );
    doc.texts.iter().map(|t| t.content.as_str()).collect()
}

#[test]
fn two_tenants_over_six_steps() {
    let dir = out_dir("colocation");
    let f = plot_colocation(&dir.join("colocation"), &two_tenants()).unwrap();
    assert_eq!(f.png, dir.join("colocation.png"));
    assert_eq!(f.svg, dir.join("colocation.svg"));
    let svg = check(&f);
    assert!(!svg.contains("no data"));
    for s in ["trainer", "rollout", "capacity", "OOM: rollout"] {
        assert!(svg.contains(s), "{s} is not in the SVG");
    }
    let all = assert_readable(&f.svg);
    // Every step numbered and labelled whole.
    for s in [
        "trainer: optimizer",
        "capacity 80.0 GiB",
        "peak during step",
    ] {
        assert!(all.contains(s), "{s}: {all}");
    }
}

#[test]
fn output_is_deterministic() {
    let dir = out_dir("colocation-determinism");
    let chart = two_tenants();
    let a = plot_colocation(&dir.join("a"), &chart).unwrap();
    let b = plot_colocation(&dir.join("b"), &chart).unwrap();
    assert_eq!(fs::read(&a.png).unwrap(), fs::read(&b.png).unwrap());
    assert_eq!(fs::read(&a.svg).unwrap(), fs::read(&b.svg).unwrap());
}

#[test]
fn no_steps_draw_a_placeholder() {
    let dir = out_dir("colocation-empty");
    let chart = ColocationChart {
        title: String::new(),
        capacity: 80 * GIB,
        tenants: vec!["trainer".to_string()],
        steps: Vec::new(),
    };
    let svg = check(&plot_colocation(&dir.join("empty"), &chart).unwrap());
    assert!(svg.contains("no data"));
}

#[test]
fn many_steps_and_long_names_stay_readable() {
    let dir = out_dir("colocation-crowded");
    let tenants = [
        "trainer-policy-fsdp",
        "rollout-engine-vllm",
        "reference-model-frozen",
    ];
    let steps: Vec<ColocationStep> = (0..60u64)
        .map(|i| {
            let t = (i % 3) as usize;
            let held = [20 + i % 7, 10 + (i * 5) % 13, 4 + i % 2].map(|g| g * GIB);
            let sum: u64 = held.iter().sum();
            let oom = (i == 41).then_some(tenants[t]);
            let label = format!("{}: phase_{}_with_a_long_name", tenants[t], i / 3);
            step(&label, &held, sum + (i % 4) * GIB, oom)
        })
        .collect();
    let chart = ColocationChart {
        title: "Three tenants, sixty steps".to_string(),
        capacity: 48 * GIB,
        tenants: tenants.iter().map(|t| t.to_string()).collect(),
        steps,
    };
    let f = plot_colocation(&dir.join("crowded"), &chart).unwrap();
    check(&f);
    let all = assert_readable(&f.svg);
    for t in tenants {
        assert!(all.contains(t), "{t}: {all}");
    }
    assert!(all.contains("OOM: reference-model-frozen"), "{all}");
    assert!(
        all.contains("labelled"),
        "the subtitle says which steps are labelled"
    );

    // Extremes: nothing held, no capacity, sums past u64::MAX, more
    // values than names.
    let extremes = ColocationChart {
        title: String::new(),
        capacity: 0,
        tenants: vec!["only".to_string()],
        steps: vec![
            step("", &[], 0, None),
            step("a: b", &[u64::MAX, u64::MAX], u64::MAX, Some("only")),
        ],
    };
    check(&plot_colocation(&dir.join("extremes"), &extremes).unwrap());
}
