//! `write_report`: a self-contained page with tables, figures and the raw
//! data, and the plot files next to it.

mod common;

use std::fs;

use common::{out_dir, replay, report};
use vramlab_reports::{ReportInput, write_report};

/// The JSON inside `<script type="application/json" id="vramlab-data">`.
fn embedded_json(html: &str) -> serde_json::Value {
    let open = "<script type=\"application/json\" id=\"vramlab-data\">";
    let start = html.find(open).expect("no JSON block") + open.len();
    let end = start
        + html[start..]
            .find("</script>")
            .expect("unclosed JSON block");
    serde_json::from_str(&html[start..end]).expect("the JSON block does not parse")
}

#[test]
fn report_has_tables_figures_recommendation_and_data() {
    let dir = out_dir("report");
    let settings = replay(&["", "expandable_segments:True"], 800);
    assert!(
        settings[0].run.oom.is_some(),
        "the default setting should OOM on 800 MiB"
    );
    let mut input = report(settings);
    input.notes.push(
        "Full results: `vramlab sweep gpt.csv --gpu … --csv rows.csv` (the `--csv` file is <csv>)."
            .into(),
    );
    if let Some(r) = input.recommendation.as_mut() {
        r.why = "Set `expandable_segments:True` & rerun.".into();
    }
    let index = write_report(&dir, &input).unwrap();
    assert_eq!(index, dir.join("index.html"));
    let html = fs::read_to_string(&index).unwrap();

    // Tables.
    assert!(html.contains("<table id=\"settings\">"));
    for col in [
        "peak reserved",
        "waste at peak",
        "utilization",
        "device allocs / frees",
        "OOM",
    ] {
        assert!(html.contains(&format!("<th>{col}</th>")), "column {col}");
    }
    assert!(html.contains("<td>expandable_segments:True</td>"));
    // The recorded phases, the one with the highest peak marked.
    assert!(html.contains("<table id=\"phases\">"));
    for phase in ["build", "step 0", "step 2", "teardown"] {
        assert!(html.contains(&format!("<td>{phase}</td>")), "phase {phase}");
    }
    assert!(
        html.contains("<tr class=\"recommended\"><td>step 0</td>"),
        "the peak phase is marked"
    );
    assert!(html.contains("at event"), "the OOM is reported");
    assert!(
        html.contains("CUDA out of memory"),
        "with PyTorch's message"
    );
    assert!(html.contains("minimum capacity"));

    // Recommendation and export line.
    assert!(html.contains("id=\"recommendation\""));
    assert!(html.contains("export PYTORCH_ALLOC_CONF=expandable_segments:True"));
    assert!(html.contains("class=\"recommended\""));

    // Figures inlined (PNG shown, SVG as a download link), nothing read
    // from next to the page; the files are still written there.
    assert!(html.matches("src=\"data:image/png;base64,").count() >= 7);
    assert!(html.matches("href=\"data:image/svg+xml;base64,").count() >= 7);
    for attr in ["src=\"", "href=\""] {
        for (at, _) in html.match_indices(attr) {
            let rest = &html[at + attr.len()..];
            assert!(
                rest.starts_with("data:") || rest.starts_with('#'),
                "{attr}{} links outside the page",
                &rest[..rest.find('"').unwrap_or(rest.len()).min(80)]
            );
        }
    }
    for name in [
        "timeline",
        "peak_reserved",
        "fragmentation",
        "oom_points",
        "fit",
    ] {
        assert!(dir.join(format!("{name}.png")).exists(), "{name}.png");
        assert!(dir.join(format!("{name}.svg")).exists(), "{name}.svg");
        assert!(
            html.contains(&format!(
                "download=\"{name}.svg\" href=\"data:image/svg+xml;base64,"
            )),
            "{name}.svg inlined"
        );
    }
    assert!(dir.join("segments-1-default.png").exists());
    assert!(dir.join("segments-2-expandable-segments-true.svg").exists());
    assert!(html.contains("Segments at the OOM (request of"));

    // Markdown-style code spans become <code>, escaped.
    assert!(html.contains(
        "Full results: <code>vramlab sweep gpt.csv --gpu … --csv rows.csv</code> (the <code>--csv</code> file is &lt;csv&gt;)."
    ));
    assert!(html.contains("Set <code>expandable_segments:True</code> &amp; rerun."));
    let page = &html[..html.find("<script").unwrap()];
    assert!(!page.contains('`'), "a backtick is shown as it is");

    // Escaping.
    assert!(html.contains("A note with &lt;html&gt; &amp; &quot;quotes&quot;."));
    assert!(!html.contains("<html> &"));

    // Raw data.
    let data = embedded_json(&html);
    assert_eq!(data["title"], "vramlab test report");
    let s = data["settings"].as_array().unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[1]["label"], "expandable_segments:True");
    assert!(s[0]["summary"]["peak_reserved_bytes"].as_u64().unwrap() > 0);
    assert!(!s[0]["timeline"].as_array().unwrap().is_empty());
    assert!(s[0]["oom"]["event_index"].as_u64().is_some());
    assert!(!s[0]["oom_segments"].as_array().unwrap().is_empty());
    assert!(!s[1]["segments_at_peak"].as_array().unwrap().is_empty());
    assert_eq!(data["oom_points"].as_array().unwrap().len(), 2);
    assert_eq!(data["fit"]["dimension"], "batch size");
    assert_eq!(
        data["notes"][0], "A note with <html> & \"quotes\".",
        "the JSON keeps the text as it was"
    );
}

#[test]
fn report_is_deterministic() {
    let input = report(replay(&["", "roundup_power2_divisions:4"], 1024));
    let a = out_dir("report-a");
    let b = out_dir("report-b");
    let ha = fs::read(write_report(&a, &input).unwrap()).unwrap();
    let hb = fs::read(write_report(&b, &input).unwrap()).unwrap();
    assert!(ha == hb, "index.html differs between two runs");
}

#[test]
fn empty_report_is_still_a_page() {
    let dir = out_dir("report-empty");
    let index = write_report(&dir, &ReportInput::default()).unwrap();
    let html = fs::read_to_string(index).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<title>vramlab report</title>"));
    assert!(html.contains("No settings were replayed."));
    let data = embedded_json(&html);
    assert!(data["settings"].as_array().unwrap().is_empty());
    assert!(data["fit"].is_null());
}
