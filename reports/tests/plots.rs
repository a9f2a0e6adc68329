//! Every plot is written as a PNG and an SVG, byte-for-byte the same for
//! the same input, and draws a placeholder (not a panic) for empty or
//! extreme data.

mod common;

use std::fs;
use std::path::Path;

use common::svg::{self, Lines};
use common::{fit_chart, many_segments, oom_point, out_dir, replay, report, setting, synthetic};
use vramlab_replay::{Summary, TimelinePoint};
use vramlab_reports::{
    FitChart, PlotFiles, plot_external_fragmentation, plot_fit, plot_memory_timeline,
    plot_oom_points, plot_peak_reserved, plot_segment_map,
};

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Checks both files exist, are non-trivial and are what they claim to be.
fn check(files: &PlotFiles) -> (Vec<u8>, String) {
    let png = fs::read(&files.png).unwrap();
    assert!(
        png.starts_with(PNG_MAGIC),
        "{} is not a PNG",
        files.png.display()
    );
    assert!(png.len() > 5_000, "{} is almost empty", files.png.display());
    let svg = fs::read_to_string(&files.svg).unwrap();
    assert!(
        svg.starts_with("<svg"),
        "{} is not an SVG",
        files.svg.display()
    );
    assert!(svg.len() > 1_000);
    // An 8-bit RGB picture of the SVG's size.
    let reader = png::Decoder::new(png.as_slice()).read_info().unwrap();
    let info = reader.info();
    assert_eq!(
        (info.color_type, info.bit_depth),
        (png::ColorType::Rgb, png::BitDepth::Eight)
    );
    let size = format!("<svg width=\"{}\" height=\"{}\"", info.width, info.height);
    assert!(
        svg.starts_with(&size),
        "{} is not {}×{}",
        files.svg.display(),
        info.width,
        info.height
    );
    (png, svg)
}

/// Renders all six plots from real replays into `dir`.
fn render_all(dir: &Path) -> Vec<PlotFiles> {
    let settings = replay(
        &["", "expandable_segments:True", "max_split_size_mb:128"],
        1024,
    );
    let r = report(settings);
    let s = &r.settings;
    vec![
        plot_memory_timeline(&dir.join("timeline"), s, r.capacity).unwrap(),
        plot_peak_reserved(&dir.join("peak_reserved"), s, r.capacity).unwrap(),
        plot_oom_points(&dir.join("oom_points"), &r.oom_points).unwrap(),
        plot_fit(&dir.join("fit"), r.fit.as_ref().unwrap()).unwrap(),
        plot_segment_map(
            &dir.join("segments"),
            "Segments at peak reserved — default",
            &s[0].run.segments_at_peak,
        )
        .unwrap(),
        plot_external_fragmentation(&dir.join("fragmentation"), s).unwrap(),
    ]
}

#[test]
fn all_plots_are_written_from_real_replays() {
    let dir = out_dir("real");
    let files = render_all(&dir);
    assert_eq!(files.len(), 6);
    for f in &files {
        let (_, svg) = check(f);
        assert!(
            !svg.contains("no data"),
            "{} is a placeholder",
            f.svg.display()
        );
    }
    let timeline = fs::read_to_string(dir.join("timeline.svg")).unwrap();
    assert!(timeline.contains("expandable_segments:True"));
    assert!(timeline.contains("event index"));
    assert!(timeline.contains("memory (MiB)"));
}

#[test]
fn output_is_deterministic() {
    let a = out_dir("determinism-a");
    let b = out_dir("determinism-b");
    let fa = render_all(&a);
    let fb = render_all(&b);
    for (x, y) in fa.iter().zip(&fb) {
        assert_eq!(
            fs::read(&x.png).unwrap(),
            fs::read(&y.png).unwrap(),
            "{}",
            x.png.display()
        );
        assert_eq!(
            fs::read(&x.svg).unwrap(),
            fs::read(&y.svg).unwrap(),
            "{}",
            x.svg.display()
        );
    }
}

#[test]
fn empty_data_draws_placeholders() {
    let dir = out_dir("empty");
    let no_timeline = vec![setting("default", Summary::default(), Vec::new())];
    let all = [
        plot_memory_timeline(&dir.join("timeline"), &[], None).unwrap(),
        plot_memory_timeline(&dir.join("timeline-no-points"), &no_timeline, Some(1 << 30)).unwrap(),
        plot_peak_reserved(&dir.join("peak_reserved"), &[], None).unwrap(),
        plot_oom_points(&dir.join("oom_points"), &[]).unwrap(),
        plot_fit(&dir.join("fit"), &FitChart::default()).unwrap(),
        plot_segment_map(&dir.join("segments"), "Segments", &[]).unwrap(),
        plot_external_fragmentation(&dir.join("fragmentation"), &[]).unwrap(),
    ];
    for f in &all {
        let (_, svg) = check(f);
        assert!(
            svg.contains("no data"),
            "{} has no placeholder",
            f.svg.display()
        );
    }
}

#[test]
fn zero_and_huge_values_do_not_panic() {
    let dir = out_dir("extremes");
    let zero = setting("zero", Summary::default(), vec![TimelinePoint::default()]);
    let huge_point = TimelinePoint {
        event_index: u64::MAX,
        requested: u64::MAX,
        allocated: u64::MAX,
        active: u64::MAX,
        reserved: u64::MAX,
        largest_free: u64::MAX,
    };
    let huge = setting(
        "huge",
        Summary {
            peak_requested_bytes: u64::MAX,
            peak_reserved_bytes: u64::MAX,
            waste_at_peak_bytes: u64::MAX,
            ..Summary::default()
        },
        vec![TimelinePoint::default(), huge_point],
    );
    for (name, set) in [("zero", vec![zero.clone()]), ("both", vec![zero, huge])] {
        check(&plot_memory_timeline(&dir.join(format!("timeline-{name}")), &set, Some(0)).unwrap());
        check(
            &plot_peak_reserved(&dir.join(format!("peak-{name}")), &set, Some(u64::MAX)).unwrap(),
        );
        check(&plot_external_fragmentation(&dir.join(format!("frag-{name}")), &set).unwrap());
    }
    let points = [
        oom_point("zero", 0, 0),
        oom_point("huge", u64::MAX, u64::MAX),
    ];
    check(&plot_oom_points(&dir.join("oom-zero"), &points[..1]).unwrap());
    check(&plot_oom_points(&dir.join("oom-huge"), &points).unwrap());
    let fit = fit_chart(
        "",
        Some(0),
        &[("a", 0, true, 0), ("a", u64::MAX, false, u64::MAX)],
    );
    check(&plot_fit(&dir.join("fit-extremes"), &fit).unwrap());
    let one = fit_chart("sequence length", None, &[("a", 512, true, 3 << 30)]);
    check(&plot_fit(&dir.join("fit-one-point"), &one).unwrap());
    let zero_seg = many_segments(3, 4)
        .into_iter()
        .map(|mut s| {
            s.size = 0;
            s.blocks.clear();
            s
        })
        .collect::<Vec<_>>();
    check(&plot_segment_map(&dir.join("segments-zero"), "zero-size segments", &zero_seg).unwrap());
}

/// Fails listing every readability problem of the SVG at `path`, and
/// returns its texts in drawing order, joined.
fn assert_readable(path: &Path, lines: Lines) -> String {
    let doc = svg::parse(&fs::read_to_string(path).unwrap());
    let found = svg::problems(&doc, lines);
    assert!(
        found.is_empty(),
        "{} is hard to read:\n  {}",
        path.display(),
        found.join("\n  ")
    );
    doc.texts.iter().map(|t| t.content.as_str()).collect()
}

/// Capacity and OOM red.
const ALERT: &str = "#C82828";
/// The grey of the named cards' lines.
const CARD_GREY: &str = "#606870";

const LONG_LABELS: [&str; 8] = [
    "default",
    "expandable_segments:True",
    "max_split_size_mb:128",
    "max_split_size_mb:512,roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "roundup_power2_divisions:4",
    "garbage_collection_threshold:0.6,max_split_size_mb:256",
    "expandable_segments:True,roundup_power2_divisions:16",
    "max_non_split_rounding_mb:1024",
];

#[test]
fn crowded_inputs_stay_readable() {
    // Hundreds of segments, many settings with long labels, big cards: no
    // label is cut, none covers another, no line runs through one, and
    // every setting's name is shown whole.
    let dir = out_dir("crowded");
    let segs = many_segments(300, 512);
    let f = plot_segment_map(&dir.join("segments-300"), "300 segments", &segs).unwrap();
    check(&f);
    assert_readable(&f.svg, Lines::UnlessBoxed);
    let f = plot_segment_map(
        &dir.join("segments-12"),
        &format!("Segments at peak reserved — {}", LONG_LABELS[3]),
        &many_segments(12, 64),
    )
    .unwrap();
    check(&f);
    let all = assert_readable(&f.svg, Lines::UnlessBoxed);
    assert!(all.contains(LONG_LABELS[3]), "the title is cut: {all}");

    let gib = 1u64 << 30;
    let settings: Vec<_> = LONG_LABELS
        .iter()
        .enumerate()
        .map(|(i, l)| synthetic(l, (20 + 3 * i as u64) * gib, 1500))
        .collect();
    let f = plot_memory_timeline(&dir.join("timeline-8"), &settings, Some(80 * gib)).unwrap();
    check(&f);
    assert_readable(&f.svg, Lines::UnlessBoxed);
    let f = plot_external_fragmentation(&dir.join("frag-8"), &settings).unwrap();
    check(&f);
    assert_readable(&f.svg, Lines::UnlessBoxed);
    // Capacities just above the bars: the value labels go over the line.
    for cap in [40 * gib, 42 * gib, 45 * gib] {
        let f =
            plot_peak_reserved(&dir.join(format!("peak-8-{cap}")), &settings, Some(cap)).unwrap();
        check(&f);
        let all = assert_readable(&f.svg, Lines::NeverOf(&[ALERT]));
        for l in LONG_LABELS {
            assert!(all.contains(l), "{l} is not shown whole");
        }
    }
    let points: Vec<_> = LONG_LABELS
        .iter()
        .enumerate()
        .map(|(i, l)| oom_point(l, (30 + 9 * i as u64) * gib, 29 * gib))
        .collect();
    let f = plot_oom_points(&dir.join("oom-8"), &points).unwrap();
    check(&f);
    let all = assert_readable(&f.svg, Lines::NeverOf(&[CARD_GREY]));
    for l in LONG_LABELS {
        assert!(all.contains(l), "{l} is not shown whole");
    }
    // Named cards, with the nearly equal ones sharing a line and a label.
    assert!(all.contains("usable memory of named GPUs"), "{all}");
    assert!(all.contains("h100-80gb / a100-80gb · 79.1 GiB"), "{all}");
    assert!(all.contains("a100-40gb · 39.5 GiB"), "{all}");
    assert!(all.contains("l40s · 44.5 GiB"), "{all}");
    // The largest bar says the card it fits on (by smallest_gpu_for).
    let doc = svg::parse(&fs::read_to_string(&f.svg).unwrap());
    assert!(
        doc.texts
            .iter()
            .any(|t| t.content == "fits h100-94gb" || t.content == "h100-94gb"),
        "{all}"
    );
    assert!(!all.contains("N GB"), "{all}");

    let mut fit = Vec::new();
    for (i, l) in LONG_LABELS.iter().take(4).enumerate() {
        for seq in [512u64, 1024, 2048, 4096, 8192, 16384, 32768] {
            let peak = (4 + i as u64) * gib + seq * (1 + i as u64) * (1 << 20);
            fit.push((*l, seq, peak <= 24 * gib, peak.min(24 * gib)));
        }
    }
    let sweep = fit_chart("sequence length", Some(24 * gib), &fit);
    let f = plot_fit(&dir.join("fit-seq"), &sweep).unwrap();
    check(&f);
    assert_readable(&f.svg, Lines::Never);
}

#[test]
fn the_answers_of_a_fit_search_are_labelled_apart() {
    // A sweep over powers of two, then a bisection for the largest size
    // that fits: the sizes crowd near the answers (12,580 and 12,835).
    let gib = 1u64 << 30;
    let mut points = Vec::new();
    for (setting, answer, base) in [
        ("default", 12_580u64, 76u64),
        ("expandable_segments:True", 12_835, 75),
    ] {
        let mut sizes: Vec<u64> = (7..=14).map(|e| 1u64 << e).collect();
        sizes.extend([answer, answer + 1, 12_000, 13_000, 14_000]);
        for size in sizes {
            let fits = size <= answer;
            let peak = base * gib + size * 5 * (1 << 20);
            points.push((
                setting,
                size,
                fits,
                if fits { peak } else { peak.min(141 * gib) },
            ));
        }
    }
    let sweep = fit_chart("sequence length (tokens)", Some(141 * gib), &points);
    let dir = out_dir("fit-answers");
    let f = plot_fit(&dir.join("fit"), &sweep).unwrap();
    check(&f);
    assert_readable(&f.svg, Lines::Never);
    let doc = svg::parse(&fs::read_to_string(&f.svg).unwrap());
    let count = |s: &str| doc.texts.iter().filter(|t| t.content == s).count();
    // Each answer labelled once in the plot (and in the legend).
    assert_eq!(count("12,580"), 1);
    assert_eq!(count("12,835"), 1);
    // Ticks are powers of two, not the replayed sizes.
    for tick in ["128", "1,024", "8,192", "16,384"] {
        assert_eq!(count(tick), 1, "tick {tick}");
    }
    for replayed in ["12,581", "12,836", "12,000", "13,000", "14,000"] {
        assert_eq!(count(replayed), 0, "{replayed} drawn as a tick");
    }
    assert!(
        doc.texts
            .iter()
            .any(|t| t.content == "default (largest that fits: 12,580)")
    );
}

#[test]
fn six_settings_get_six_colours_in_every_plot() {
    let labels = [
        "",
        "roundup_power2_divisions:2",
        "roundup_power2_divisions:8",
        "roundup_power2_divisions:4",
        "garbage_collection_threshold:0.6,max_split_size_mb:64",
        "roundup_power2_divisions:[256:1,512:2,1024:4,>:8],expandable_segments:True",
    ];
    // Six settings with six different results (identical ones are drawn once).
    let mut input = report(replay(&labels, 1024));
    // The fit sweep lists the settings in another order: the colours
    // still follow the report's settings.
    if let Some(fit) = input.fit.as_mut() {
        fit.searches.reverse();
    }
    let dir = out_dir("six-colours");
    vramlab_reports::write_report(&dir, &input).unwrap();
    let names: Vec<&str> = input.settings.iter().map(|s| s.label.as_str()).collect();
    let mut by_plot = Vec::new();
    for plot in ["timeline", "fragmentation", "fit"] {
        let doc = svg::parse(&fs::read_to_string(dir.join(format!("{plot}.svg"))).unwrap());
        let colors: Vec<String> = names
            .iter()
            .map(|n| {
                svg::legend_color(&doc, n).unwrap_or_else(|| panic!("{n} not in the {plot} legend"))
            })
            .collect();
        let mut distinct = colors.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 6, "{plot}: {colors:?}");
        // Each colour is drawn in the plot, not just in the legend.
        for c in &colors {
            let uses = doc.colors.iter().filter(|(_, x)| x == c).count();
            assert!(uses >= 2, "{plot}: {c} only in the legend");
        }
        by_plot.push(colors);
    }
    assert_eq!(by_plot[0], by_plot[1], "timeline vs fragmentation");
    assert_eq!(by_plot[0], by_plot[2], "timeline vs fit");

    // Every plot of the report reads well; segment maps are named after
    // the whole setting.
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "svg") {
            let lines = match path.file_stem().and_then(|s| s.to_str()) {
                Some("fit") => Lines::Never,
                Some("peak_reserved") => Lines::NeverOf(&[ALERT]),
                Some("oom_points") => Lines::NeverOf(&[CARD_GREY]),
                _ => Lines::UnlessBoxed,
            };
            assert_readable(&path, lines);
        }
    }
    assert!(
        dir.join(
            "segments-6-roundup-power2-divisions-256-1-512-2-1024-4-8-expandable-segments-true.svg"
        )
        .exists()
    );
    assert!(
        dir.join("segments-5-garbage-collection-threshold-0-6-max-split-size-mb-64.png")
            .exists()
    );
}

#[test]
fn a_dot_in_the_base_name_is_kept() {
    let dir = out_dir("names");
    let f = plot_oom_points(&dir.join("run.v2"), &[]).unwrap();
    assert_eq!(f.png, dir.join("run.v2.png"));
    assert_eq!(f.svg, dir.join("run.v2.svg"));
    check(&f);
}

#[test]
fn an_unwritable_path_is_an_error_not_a_panic() {
    let dir = out_dir("unwritable");
    let blocker = dir.join("file");
    fs::write(&blocker, b"x").unwrap();
    // A folder cannot be created under a file.
    let err = plot_oom_points(&blocker.join("sub").join("plot"), &[]).unwrap_err();
    assert!(err.to_string().contains("file"), "{err}");
    // The PNG file cannot be written: the error names it.
    let png = dir.join("plot.png");
    fs::create_dir(&png).unwrap();
    let err = plot_oom_points(&dir.join("plot"), &[]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("cannot write {}: ", png.display())),
        "{err}"
    );
}

/// A matrix of long variant and setting names, some cells not fitting.
fn crowded_matrix() -> vramlab_replay::Matrix {
    use vramlab_replay::{Matrix, MatrixCell};
    let variants: Vec<String> = [
        "--precision bf16 --attention flash --kv-cache dynamic",
        "--precision nf4 --attention flash --kv-cache dynamic",
        "--precision bf16 --attention eager --kv-cache static",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let settings: Vec<String> = LONG_LABELS.iter().map(|s| s.to_string()).collect();
    let gib = 1u64 << 30;
    let mut cells = Vec::new();
    for (i, v) in variants.iter().enumerate() {
        for (j, s) in settings.iter().enumerate() {
            let peak = (10 + 3 * i as u64 + j as u64) * gib;
            cells.push(MatrixCell {
                variant: v.clone(),
                setting: s.clone(),
                peak_reserved_bytes: peak,
                peak_live_bytes: 9 * gib,
                min_capacity_bytes: peak - gib,
                smallest_gpu: Some("rtx4090".into()),
                saved_vs_baseline: 1.0 - peak as f64 / (10 * gib) as f64,
                fits: Some(peak < 16 * gib),
                largest_fitting: None,
                largest_hit_limit: false,
                search_note: None,
            });
        }
    }
    Matrix {
        preset: "llama-3-8b-infer".into(),
        dimension: "seq".into(),
        size: 1024,
        batch: 1,
        capacity: Some(16 * gib),
        searched_largest: false,
        baseline_variant: variants[0].clone(),
        baseline_setting: settings[0].clone(),
        variants,
        settings,
        cells,
        notes: Vec::new(),
    }
}

#[test]
fn the_matrix_heatmap_shows_every_name_whole_and_marks_what_does_not_fit() {
    let dir = out_dir("matrix");
    let m = crowded_matrix();
    let f = vramlab_reports::plot_matrix(&dir.join("matrix"), &m).unwrap();
    check(&f);
    let all = assert_readable(&f.svg, Lines::UnlessBoxed);
    for l in LONG_LABELS {
        assert!(all.contains(l), "{l} is not shown whole: {all}");
    }
    // Variant names wrap at spaces.
    let squeezed: String = all.split_whitespace().collect();
    for v in &m.variants {
        let v: String = v.split_whitespace().collect();
        assert!(squeezed.contains(&v), "{v} is not shown whole");
    }
    let unfit = m.cells.iter().filter(|c| c.fits == Some(false)).count();
    assert!(unfit > 0);
    // Each such cell, and the subtitle that explains the frame.
    assert_eq!(all.matches("does not fit").count(), unfit + 1);
    assert_eq!(all.matches("baseline").count(), 1);
    // Deterministic.
    let again = vramlab_reports::plot_matrix(&dir.join("matrix-again"), &m).unwrap();
    assert_eq!(fs::read(&f.png).unwrap(), fs::read(&again.png).unwrap());
}

#[test]
fn settings_with_identical_results_are_shown_once_and_names_never_break_inside_a_word() {
    // On this trace and card max_split_size_mb:128 changes nothing.
    let labels = ["", "max_split_size_mb:128", "expandable_segments:True"];
    let input = report(replay(&labels, 1024));
    let dir = out_dir("grouped");
    vramlab_reports::write_report(&dir, &input).unwrap();
    let html = fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(
        html.contains("<td>default<br><span class=\"same\">the same results: max_split_size_mb:<wbr>128</span></td>"),
        "one row for both"
    );
    let maps = fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            let n = e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .into_owned();
            n.starts_with("segments-") && n.ends_with(".png")
        })
        .count();
    assert_eq!(maps, 2, "one segment map per distinct result");
    assert!(!html.contains("break-all"));
    assert!(html.contains("<div class=\"scroll\"><table id=\"settings\">"));
}
