//! The self-contained HTML report.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use crate::input::{ReportInput, SegmentMapSource, SettingResult};
use crate::plots::{
    PlotFiles, plot_external_fragmentation, plot_fit_ordered, plot_memory_timeline,
    plot_oom_points, plot_peak_reserved, plot_segment_map,
};
use crate::units::{fmt_int, fmt_pct, format_bytes};
use crate::{ReportError, Result, base64};

/// Escapes text for HTML element content and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes text like [`esc`], and shows Markdown-style `` `code` `` spans
/// as `<code>` (a backtick without a partner stays a backtick).
fn esc_inline(s: &str) -> String {
    let parts: Vec<&str> = s.split('`').collect();
    let mut out = String::with_capacity(s.len() + 16);
    for (i, part) in parts.iter().enumerate() {
        if i % 2 == 0 {
            out.push_str(&esc(part));
        } else if i + 1 < parts.len() {
            out.push_str("<code>");
            out.push_str(&esc(part));
            out.push_str("</code>");
        } else {
            out.push('`');
            out.push_str(&esc(part));
        }
    }
    out
}

/// Longest slug [`slug`] returns (file names stay well below the 255
/// bytes file systems allow).
const SLUG_MAX: usize = 150;

/// FNV-1a, 64 bits: a hash that is the same in every run and build.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A file-name-safe form of a label: lower-case letters, digits and
/// dashes, all of the label (punctuation becomes a dash). A slug longer
/// than [`SLUG_MAX`] keeps its start and its end around a hash of the
/// whole label, so two labels never share a shortened slug by chance.
fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-').to_string();
    if out.is_empty() {
        return "setting".to_string();
    }
    if out.len() <= SLUG_MAX {
        return out;
    }
    let hash = format!("{:08x}", fnv1a(s) >> 32);
    let keep = (SLUG_MAX - hash.len() - 2) / 2;
    // The slug is ASCII: byte offsets are character offsets.
    let head = out.get(..keep).unwrap_or_default().trim_end_matches('-');
    let tail = out
        .get(out.len() - keep..)
        .unwrap_or_default()
        .trim_start_matches('-');
    format!("{head}-{hash}-{tail}")
}

/// JSON that can sit inside a `<script>` element: `<`, `>` and `&` are
/// written as `\u003c`, `\u003e`, `\u0026` (they can only occur in strings).
fn script_json(value: &impl serde::Serialize) -> Result<String> {
    let raw = serde_json::to_string(value)?;
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Reads a plot file.
fn read_plot(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// A figure, self-contained: the PNG inlined as a `data:` URI, and the SVG
/// inlined too, as a download link (the page needs no file next to it).
fn figure(out: &mut String, files: &PlotFiles, alt: &str, caption: &str) -> Result<()> {
    let png = read_plot(&files.png)?;
    let svg = read_plot(&files.svg)?;
    let svg_name = files
        .svg
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "<figure><img alt=\"{}\" src=\"data:image/png;base64,{}\"><figcaption>{} <a download=\"{}\" href=\"data:image/svg+xml;base64,{}\">SVG</a></figcaption></figure>",
        esc(alt),
        base64::encode(&png),
        esc_inline(caption),
        esc(&svg_name),
        base64::encode(&svg)
    );
    Ok(())
}

const STYLE: &str = r#"
:root { --ink:#212529; --muted:#606870; --line:#dee2e6; --accent:#4e79a7; --good:#3b8a2f; --bad:#c82828; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 "DejaVu Sans", system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: #f6f7f9; }
main { max-width: 1260px; margin: 0 auto; padding: 24px 28px 64px; background: #fff; }
h1 { font-size: 28px; margin: 8px 0 4px; }
h2 { font-size: 21px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.meta { color: var(--muted); margin: 0 0 16px; }
.rec { border-left: 5px solid var(--good); background: #f1f8ef; padding: 12px 18px; margin: 16px 0; }
.rec h2 { border: none; margin: 0 0 6px; }
code { font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: 0.92em; background: #f1f3f5; padding: 0 3px; border-radius: 3px; }
pre { background: #1f2328; color: #f0f3f6; padding: 10px 14px; border-radius: 4px; overflow-x: auto; font: 15px/1.45 "DejaVu Sans Mono", ui-monospace, monospace; }
table { border-collapse: collapse; width: 100%; font-size: 15px; margin: 8px 0 16px; }
th, td { border-bottom: 1px solid var(--line); padding: 6px 10px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; white-space: normal; word-break: break-all; }
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
    let title = if report.title.trim().is_empty() {
        "vramlab report"
    } else {
        report.title.trim()
    };
    let s = &report.settings;
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"vramlab-reports {}\">\n<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n<h1>{}</h1>\n",
        env!("CARGO_PKG_VERSION"),
        esc(title),
        STYLE,
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
            fmt_int(first.summary.events.max(first.summary.events_replayed))
        ));
    }
    let _ = writeln!(h, "<p class=\"meta\">{}</p>", meta.join(" · "));

    if let Some(r) = &report.recommendation {
        let _ = write!(
            h,
            "<section class=\"rec\" id=\"recommendation\">\n<h2>Recommended: <code>{}</code></h2>\n",
            esc(&r.setting)
        );
        if !r.reason.is_empty() {
            let _ = writeln!(h, "<p>{}</p>", esc_inline(&r.reason));
        }
        if !r.export_lines.is_empty() {
            let lines: Vec<String> = r.export_lines.iter().map(|l| esc(l)).collect();
            let _ = writeln!(h, "<pre>{}</pre>", lines.join("\n"));
        }
        h.push_str("</section>\n");
    }

    settings_table(&mut h, report);

    if !s.is_empty() {
        h.push_str("<h2 id=\"timeline\">Memory over the trace</h2>\n");
        let f = plot_memory_timeline(&dir.join("timeline"), s, report.capacity)?;
        figure(
            &mut h,
            &f,
            "Allocated and reserved memory over the trace",
            "Solid lines: reserved bytes; dashed: allocated; thin black: live (requested) bytes.",
        )?;
        h.push_str("<h2 id=\"peak\">Peak reserved and waste</h2>\n");
        let f = plot_peak_reserved(&dir.join("peak_reserved"), s, report.capacity)?;
        figure(
            &mut h,
            &f,
            "Peak reserved memory per setting",
            "Waste at peak = reserved − allocated when reserved bytes peaked; the dashed line is the live-bytes lower bound.",
        )?;
        h.push_str("<h2 id=\"fragmentation\">External fragmentation</h2>\n");
        let f = plot_external_fragmentation(&dir.join("fragmentation"), s)?;
        figure(
            &mut h,
            &f,
            "External fragmentation over the trace",
            "1 − largest free cached block / free cached bytes.",
        )?;
    }

    if !report.oom_points.is_empty() {
        h.push_str("<h2 id=\"oom-points\">OOM points</h2>\n");
        let f = plot_oom_points(&dir.join("oom_points"), &report.oom_points)?;
        figure(
            &mut h,
            &f,
            "Smallest card each setting fits on",
            "Minimum capacity per setting; black ticks: live-bytes lower bound; dashed: the memory PyTorch can use on named GPUs (what the driver reports less 512 MiB for the CUDA context; `vramlab gpus` lists them).",
        )?;
        h.push_str("<table>\n<thead><tr><th>setting</th><th>minimum capacity</th><th>live-bytes lower bound</th><th>over the bound</th><th>smallest named card</th></tr></thead>\n<tbody>\n");
        for p in &report.oom_points {
            let over = if p.lower_bound > 0 {
                format!(
                    "{:+.1}%",
                    (p.min_capacity as f64 / p.lower_bound as f64 - 1.0) * 100.0
                )
            } else {
                "n/a".to_string()
            };
            let card = match vramlab_replay::target::gpus::smallest_gpu_for(p.min_capacity) {
                Some(g) => format!("{} ({} usable)", g.name, format_bytes(g.usable_bytes())),
                None => "none listed".to_string(),
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&p.label),
                esc(&format_bytes(p.min_capacity)),
                esc(&format_bytes(p.lower_bound)),
                esc(&over),
                esc(&card)
            );
        }
        h.push_str("</tbody>\n</table>\n");
    }

    if let Some(fit) = &report.fit {
        let dim = if fit.dimension.trim().is_empty() {
            "size"
        } else {
            fit.dimension.trim()
        };
        let _ = writeln!(
            h,
            "<h2 id=\"fit\">What fits: peak reserved vs {}</h2>",
            esc(dim)
        );
        let order: Vec<String> = s.iter().map(|r| r.label.clone()).collect();
        let f = plot_fit_ordered(&dir.join("fit"), fit, &order)?;
        figure(
            &mut h,
            &f,
            &format!("Peak reserved memory vs {dim}"),
            "Dots: fits; crosses: out of memory; rings: the largest size that fits under each setting.",
        )?;
        let groups = fit.by_setting();
        if !groups.is_empty() {
            let _ = writeln!(
                h,
                "<table>\n<thead><tr><th>setting</th><th>largest {} that fits</th></tr></thead>\n<tbody>",
                esc(dim)
            );
            for (setting, _) in &groups {
                let best = fit
                    .largest_fitting(setting)
                    .map_or("none".to_string(), fmt_int);
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td>{}</td></tr>",
                    esc(setting),
                    esc(&best)
                );
            }
            h.push_str("</tbody>\n</table>\n");
        }
    }

    let maps: Vec<(usize, &SettingResult)> = s
        .iter()
        .enumerate()
        .filter(|(_, r)| r.segment_map().is_some())
        .collect();
    if !maps.is_empty() {
        h.push_str("<h2 id=\"segments\">Segment maps</h2>\n");
        for (i, r) in maps {
            let Some((source, segs)) = r.segment_map() else {
                continue;
            };
            let title = match (source, &r.oom) {
                (SegmentMapSource::AtOom, Some(o)) => format!(
                    "Segments at the OOM (request of {}) — {}",
                    format_bytes(o.requested_bytes),
                    r.label
                ),
                _ => format!("Segments {} — {}", source.describe(), r.label),
            };
            let base = dir.join(format!("segments-{}-{}", i + 1, slug(&r.label)));
            let f = plot_segment_map(&base, &title, segs)?;
            figure(
                &mut h,
                &f,
                &title,
                "Blue: allocated; orange: freed but in use on another stream; grey: free cached.",
            )?;
        }
    }

    if !report.notes.is_empty() {
        h.push_str("<h2 id=\"notes\">Notes</h2>\n<ul>\n");
        for n in &report.notes {
            let _ = writeln!(h, "<li>{}</li>", esc_inline(n));
        }
        h.push_str("</ul>\n");
    }

    let _ = write!(
        h,
        "<script type=\"application/json\" id=\"vramlab-data\">\n{}\n</script>\n</main>\n</body>\n</html>\n",
        script_json(report)?
    );
    let index = dir.join("index.html");
    fs::write(&index, h).map_err(|source| ReportError::Io {
        path: index.clone(),
        source,
    })?;
    Ok(index)
}

/// The per-setting results table.
fn settings_table(h: &mut String, report: &ReportInput) {
    let s = &report.settings;
    h.push_str("<h2 id=\"results\">Results per setting</h2>\n");
    if s.is_empty() {
        h.push_str("<p>No settings were replayed.</p>\n");
        return;
    }
    let recommended = report.recommendation.as_ref().map(|r| r.setting.as_str());
    let any_min = s.iter().any(|r| r.min_capacity.is_some());
    h.push_str("<table id=\"settings\">\n<thead><tr><th>setting</th><th>peak live</th><th>peak allocated</th><th>peak reserved</th><th>waste at peak</th><th>utilization</th><th>device allocs / frees</th><th>driver time</th><th>OOM</th>");
    if any_min {
        h.push_str("<th>min capacity</th>");
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for r in s {
        let m = &r.summary;
        let class = if Some(r.label.as_str()) == recommended {
            " class=\"recommended\""
        } else {
            ""
        };
        let waste_pct = if m.peak_reserved_bytes > 0 {
            m.waste_at_peak_bytes as f64 / m.peak_reserved_bytes as f64
        } else {
            0.0
        };
        let oom = match &r.oom {
            Some(o) => format!(
                "<td class=\"oom\">at event {}<br><span class=\"oommsg\">{}</span></td>",
                fmt_int(o.event_index),
                esc(&o.message)
            ),
            None => "<td>none</td>".to_string(),
        };
        let _ = write!(
            h,
            "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td><td>{} / {}</td><td>{:.1} ms</td>{}",
            class,
            esc(&r.label),
            esc(&format_bytes(m.peak_requested_bytes)),
            esc(&format_bytes(m.peak_allocated_bytes)),
            esc(&format_bytes(m.peak_reserved_bytes)),
            esc(&format_bytes(m.waste_at_peak_bytes)),
            esc(&fmt_pct(waste_pct)),
            esc(&fmt_pct(m.utilization)),
            fmt_int(m.num_device_alloc),
            fmt_int(m.num_device_free),
            m.device_time_us / 1000.0,
            oom
        );
        if any_min {
            let _ = write!(
                h,
                "<td>{}</td>",
                esc(&r.min_capacity.map_or("n/a".to_string(), format_bytes))
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(
            slug("roundup_power2_divisions:[256:1,>:8]"),
            "roundup-power2-divisions-256-1-8"
        );
        assert_eq!(slug(""), "setting");
        assert_eq!(
            slug("roundup_power2_divisions:4,expandable_segments:True"),
            "roundup-power2-divisions-4-expandable-segments-true"
        );
        // Long labels: start and end kept around a hash of the whole.
        let a = format!(
            "max_split_size_mb:128,{},x:1",
            "garbage_collection_threshold:0.5,".repeat(8)
        );
        let b = a.replace("x:1", "x:2");
        let (sa, sb) = (slug(&a), slug(&b));
        assert!(sa.len() <= SLUG_MAX && sb.len() <= SLUG_MAX, "{sa}");
        assert_ne!(sa, sb);
        assert!(sa.starts_with("max-split-size-mb-128-garbage"), "{sa}");
        assert!(sa.ends_with("x-1") && sb.ends_with("x-2"), "{sa} {sb}");
        assert_eq!(sa, slug(&a), "stable");
        assert_eq!(
            esc_inline("run `vramlab sweep x --csv <rows>` & see"),
            "run <code>vramlab sweep x --csv &lt;rows&gt;</code> &amp; see"
        );
        assert_eq!(esc_inline("a `b"), "a `b");
        assert_eq!(
            esc_inline("`a` and `b`"),
            "<code>a</code> and <code>b</code>"
        );
        assert_eq!(
            script_json(&"</script><!--&").unwrap(),
            "\"\\u003c/script\\u003e\\u003c!--\\u0026\""
        );
    }
}
