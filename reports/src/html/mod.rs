//! The self-contained HTML report.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use vramlab_replay::{Recommendation, Verdict};

use crate::group;
use crate::input::{ReportInput, SettingRun};
use crate::units::{fmt_int, format_bytes};
use crate::{ReportError, Result};

mod data;
mod escape;
mod explorer;
mod host;
mod packed;
mod sections;
mod upgrade;
mod why;

use escape::{esc, esc_inline, script_json};
use sections::{
    settings_table, write_fit, write_oom_points, write_phases, write_pools, write_segment_maps,
    write_trace_plots,
};

const STYLE: &str = r#"
:root { --ink:#212529; --muted:#606870; --line:#dee2e6; --accent:#4e79a7; --good:#3b8a2f; --bad:#c82828; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 "DejaVu Sans", system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: #f6f7f9; }
main { max-width: 1400px; margin: 0 auto; padding: 24px 28px 64px; background: #fff; }
h1 { font-size: 28px; margin: 8px 0 4px; }
h2 { font-size: 21px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.meta { color: var(--muted); margin: 0 0 16px; }
.rec { border-left: 5px solid var(--good); background: #f1f8ef; padding: 12px 18px; margin: 16px 0; }
.rec h2 { border: none; margin: 0 0 6px; }
code { font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: 0.92em; background: #f1f3f5; padding: 0 3px; border-radius: 3px; }
pre { background: #1f2328; color: #f0f3f6; padding: 10px 14px; border-radius: 4px; overflow-x: auto; font: 15px/1.45 "DejaVu Sans Mono", ui-monospace, monospace; }
table { border-collapse: collapse; width: 100%; font-size: 15px; margin: 8px 0 16px; }
th, td { border-bottom: 1px solid var(--line); padding: 6px 10px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; white-space: normal; word-break: normal; overflow-wrap: normal; hyphens: none; min-width: 12em; }
.scroll { overflow-x: auto; max-width: 100%; }
th.text, td.text { text-align: left; white-space: normal; }
.same { color: var(--muted); font-size: 14px; }
@media (max-width: 700px) { main { padding: 12px; } table { font-size: 13px; } }
thead th { background: #f1f3f5; font-weight: 600; }
tbody tr:nth-child(even) { background: #fafbfc; }
tr.recommended td { background: #eaf5e6; font-weight: 600; }
td.oom { color: var(--bad); }
figure { margin: 12px 0 24px; }
figure img { width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 14px; }
.oommsg { color: var(--muted); font-size: 14px; white-space: normal; }
"#;

/// Writes `dir/index.html` (self-contained: every plot inlined as a PNG
/// `data:` URI with its SVG as a `data:` download link, so a lone copy of
/// the page shows everything; tables of per-setting results, the
/// recommendation and the raw data as a
/// `<script type="application/json" id="vramlab-data">` block) and, next to
/// it, the PNG and SVG of every plot the input has data for
/// (`timeline`, `peak_reserved`, `fragmentation`, `oom_points`, `fit`,
/// `segments-N-LABEL`, LABEL the whole setting as a slug: lower-case
/// letters, digits and dashes). Creates `dir` if needed; returns the path of
/// `index.html`.
pub fn write_report(dir: &Path, report: &ReportInput) -> Result<PathBuf> {
    fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    // Settings whose replays came out the same are shown once.
    let (settings, kept) = group::group_identical(&report.settings, &|l| report.min_capacity(l));
    let mut grouped = ReportInput {
        settings,
        ..report.clone()
    };
    // Per-setting columns of other tables follow the settings kept.
    for p in &mut grouped.pools {
        p.at_peak = kept
            .iter()
            .filter_map(|&i| p.at_peak.get(i).copied())
            .collect();
    }
    let report = &grouped;
    let mut h = String::new();
    write_head(&mut h, report);
    if let Some(a) = report.recommendation.as_ref().and_then(Advice::of) {
        write_recommendation(&mut h, &a);
    }
    settings_table(&mut h, report);
    upgrade::write_upgrade(&mut h, report.upgrade.as_ref());
    why::write_why(&mut h, report.explanation.as_ref());
    // The explorer's data goes in as it is (it holds no table).
    let mut page = scroll_tables(&h);
    explorer::write_explorer(&mut page, report.explore.as_ref(), &report.settings)?;
    let mut h = String::new();
    write_phases(&mut h, &report.phases);
    write_pools(&mut h, &report.pools, &report.settings);
    host::write_host(&mut h, report);
    write_trace_plots(&mut h, dir, &report.settings, report.capacity)?;
    let (points, same) = fold_oom_points(&report.oom_points, &report.settings);
    write_oom_points(&mut h, dir, &points, &same)?;
    if let Some(fit) = &report.fit {
        write_fit(&mut h, dir, fit, &report.settings)?;
    }
    write_segment_maps(&mut h, dir, &report.settings)?;
    write_notes(&mut h, &report.notes);
    page.push_str(&scroll_tables(&h));
    write_tail(&mut page, report)?;
    let h = page;
    let index = dir.join("index.html");
    fs::write(&index, h).map_err(|source| ReportError::Io {
        path: index.clone(),
        source,
    })?;
    Ok(index)
}

/// The OOM points of the settings shown (those with identical results
/// folded into the first, as the settings table does): each kept point
/// named "SETTING (+N same)" for the plot, and for the table the settings
/// it stands for, by that name.
fn fold_oom_points(
    points: &[vramlab_replay::OomPoint],
    settings: &[SettingRun],
) -> (Vec<vramlab_replay::OomPoint>, Vec<(String, Vec<String>)>) {
    let folded = |label: &str| {
        settings
            .iter()
            .any(|s| s.same_as.iter().any(|o| o == label))
    };
    let mut out = Vec::new();
    let mut same = Vec::new();
    for p in points.iter().filter(|p| !folded(&p.setting)) {
        let others = settings
            .iter()
            .find(|s| s.label == p.setting)
            .map(|s| s.same_as.clone())
            .unwrap_or_default();
        let mut p = p.clone();
        if !others.is_empty() {
            p.setting = format!("{} (+{} same)", p.setting, others.len());
        }
        same.push((p.setting.clone(), others));
        out.push(p);
    }
    (out, same)
}

/// `html` with every table in a box that scrolls sideways: wide tables
/// scroll instead of squeezing their cells.
fn scroll_tables(html: &str) -> String {
    html.replace("<table", "<div class=\"scroll\"><table")
        .replace("</table>", "</table></div>")
}

/// The start of the page up to the line under the title: the document
/// head (title, style sheet), the title and what was replayed (trace,
/// capacity, settings, events).
fn write_head(h: &mut String, report: &ReportInput) {
    let title = if report.title.trim().is_empty() {
        "vramlab report"
    } else {
        report.title.trim()
    };
    let s = &report.settings;
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"vramlab-reports {}\">\n<title>{}</title>\n<style>{}{}</style>\n</head>\n<body>\n<main>\n<h1>{}</h1>\n",
        env!("CARGO_PKG_VERSION"),
        esc(title),
        STYLE,
        explorer::STYLE,
        esc(title)
    );
    let mut meta = Vec::new();
    if !report.trace.is_empty() {
        meta.push(format!("trace <code>{}</code>", esc(&report.trace)));
    }
    meta.push(match report.capacity {
        Some(c) => format!("simulated capacity {}", esc(&format_bytes(c))),
        None => "unlimited simulated capacity".to_string(),
    });
    meta.push(format!(
        "{} setting{}",
        s.len(),
        if s.len() == 1 { "" } else { "s" }
    ));
    if let Some(first) = s.first() {
        meta.push(format!(
            "{} events",
            fmt_int(
                first
                    .run
                    .summary
                    .events
                    .max(first.run.summary.events_replayed)
            )
        ));
    }
    let _ = writeln!(h, "<p class=\"meta\">{}</p>", meta.join(" · "));
}

/// What the page recommends: a setting, why, and the shell lines that
/// apply it.
#[derive(Serialize)]
struct Advice<'a> {
    /// The recommended setting (a label of the report's settings), or that
    /// PyTorch's defaults are fine.
    setting: &'a str,
    /// Why, in a few sentences.
    reason: &'a str,
    /// `LINE    # SHELL` for each shell.
    export_lines: Vec<String>,
}

impl<'a> Advice<'a> {
    /// What `rec` recommends (`None` when nothing fits).
    fn of(rec: &'a Recommendation) -> Option<Self> {
        match (rec.verdict, rec.ranked.first()) {
            (Verdict::UseSetting, Some(w)) => Some(Advice {
                setting: &w.row.setting,
                reason: &rec.why,
                export_lines: rec
                    .export
                    .iter()
                    .map(|(shell, line)| format!("{line}    # {shell}"))
                    .collect(),
            }),
            (Verdict::DefaultsAreFine, _) => Some(Advice {
                setting: "PyTorch's defaults (change nothing)",
                reason: &rec.why,
                export_lines: Vec::new(),
            }),
            _ => None,
        }
    }
}

/// The recommended setting, why, and the lines that apply it.
fn write_recommendation(h: &mut String, r: &Advice<'_>) {
    let _ = write!(
        h,
        "<section class=\"rec\" id=\"recommendation\">\n<h2>Recommended: <code>{}</code></h2>\n",
        esc(r.setting)
    );
    if !r.reason.is_empty() {
        let _ = writeln!(h, "<p>{}</p>", esc_inline(r.reason));
    }
    if !r.export_lines.is_empty() {
        let lines: Vec<String> = r.export_lines.iter().map(|l| esc(l)).collect();
        let _ = writeln!(h, "<pre>{}</pre>", lines.join("\n"));
    }
    h.push_str("</section>\n");
}

/// The notes, as a list (nothing without notes).
fn write_notes(h: &mut String, notes: &[String]) {
    if notes.is_empty() {
        return;
    }
    h.push_str("<h2 id=\"notes\">Notes</h2>\n<ul>\n");
    for n in notes {
        let _ = writeln!(h, "<li>{}</li>", esc_inline(n));
    }
    h.push_str("</ul>\n");
}

/// The raw data as an embedded JSON block, and the end of the page.
fn write_tail(h: &mut String, report: &ReportInput) -> Result<()> {
    let _ = write!(
        h,
        "<script type=\"application/json\" id=\"vramlab-data\">\n{}\n</script>\n</main>\n</body>\n</html>\n",
        script_json(&data::ReportData::of(report))?
    );
    Ok(())
}
