//! The sections of the report: the results table and the plots with
//! their tables, each figure inlined.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use vramlab_allocator::SegmentView;
use vramlab_replay::OomEvent;
use vramlab_replay::OomPoint;
use vramlab_traces::advice::Cmd;

use super::Advice;
use super::escape::{esc, esc_breakable, esc_inline, slug};
use crate::input::{FitChart, ReportInput, SettingRun};
use crate::plots::{
    PlotFiles, plot_external_fragmentation, plot_fit_ordered, plot_memory_timeline,
    plot_oom_points, plot_peak_reserved, plot_segment_map,
};
use crate::units::{fmt_int, fmt_pct, format_bytes};
use crate::{ReportError, Result, base64};

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

/// The per-setting results table.
pub(super) fn settings_table(h: &mut String, report: &ReportInput) {
    let s = &report.settings;
    h.push_str("<h2 id=\"results\">Results per setting</h2>\n");
    if s.is_empty() {
        h.push_str("<p>No settings were replayed.</p>\n");
        return;
    }
    let recommended = report
        .recommendation
        .as_ref()
        .and_then(Advice::of)
        .map(|a| a.setting);
    let any_min = s.iter().any(|r| report.min_capacity(&r.label).is_some());
    h.push_str("<table id=\"settings\">\n<thead><tr><th>setting</th><th>peak live</th><th>peak allocated</th><th>peak reserved</th><th>waste at peak</th><th>utilization</th><th>device allocs / frees</th><th>driver time</th><th>OOM</th>");
    if any_min {
        h.push_str("<th>min capacity</th>");
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for r in s {
        let m = &r.run.summary;
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
        let oom = match &r.run.oom {
            Some(o) => format!(
                "<td class=\"oom\">at event {}<br><span class=\"oommsg\">{}</span></td>",
                fmt_int(o.event_index),
                esc(&o.message)
            ),
            None => "<td>none</td>".to_string(),
        };
        let name = if r.same_as.is_empty() {
            esc_breakable(&r.label)
        } else {
            let others: Vec<String> = r.same_as.iter().map(|n| esc_breakable(n)).collect();
            format!(
                "{}<br><span class=\"same\">the same results: {}</span>",
                esc_breakable(&r.label),
                others.join("; ")
            )
        };
        let _ = write!(
            h,
            "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td><td>{} / {}</td><td>{:.1} ms</td>{}",
            class,
            name,
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
                esc(&report
                    .min_capacity(&r.label)
                    .map_or("n/a".to_string(), format_bytes))
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
}

/// Live memory per recorded phase of the trace (nothing without phases).
pub(super) fn write_phases(h: &mut String, phases: &[vramlab_traces::PhaseSummary]) {
    if phases.is_empty() {
        return;
    }
    h.push_str("<h2 id=\"phases\">Memory per recorded phase</h2>\n<p>Live (requested) bytes of the trace itself, whatever the setting: where the peak is, and what each phase leaves behind.</p>\n<table id=\"phases\">\n<thead><tr><th>phase</th><th>events</th><th>allocations</th><th>frees</th><th>live at start</th><th>peak live</th><th>live at end</th></tr></thead>\n<tbody>\n");
    let top = phases.iter().map(|p| p.peak_live_bytes).max().unwrap_or(0);
    for p in phases {
        let class = if p.peak_live_bytes == top {
            " class=\"recommended\""
        } else {
            ""
        };
        let _ = writeln!(
            h,
            "<tr{class}><td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&p.label),
            fmt_int(p.events),
            fmt_int(p.allocs),
            esc(&format_bytes(p.allocated_bytes)),
            fmt_int(p.frees),
            esc(&format_bytes(p.live_at_start_bytes)),
            esc(&format_bytes(p.peak_live_bytes)),
            esc(&format_bytes(p.live_at_end_bytes)),
        );
    }
    h.push_str("</tbody>\n</table>\n");
}

/// Each pool of a trace with private pools: requests routed to it, its
/// peak live bytes, and per setting what it reserves at the replay's peak.
pub(super) fn write_pools(h: &mut String, pools: &[crate::input::ReportPool], s: &[SettingRun]) {
    if pools.is_empty() {
        return;
    }
    h.push_str("<h2 id=\"pools\">Private pools (CUDA graphs, MemPools)</h2>\n<p>Requests go to a graph's pool while it is captured, to a MemPool inside <code>use_mem_pool</code>; a pool's memory serves no other pool. Reserved (allocated) bytes of each pool at each setting's peak.</p>\n<table id=\"pools\">\n<thead><tr><th>pool</th><th>requests</th><th>peak live</th>");
    for r in s {
        let _ = write!(h, "<th>{}</th>", esc(&r.label));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for p in pools {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td>",
            esc(&p.name),
            fmt_int(p.allocations),
            esc(&format_bytes(p.peak_live_bytes))
        );
        for &(reserved, allocated) in &p.at_peak {
            let _ = write!(
                h,
                "<td>{} ({})</td>",
                esc(&format_bytes(reserved)),
                esc(&format_bytes(allocated))
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
}

/// The plots over the trace: memory timeline, peak reserved and waste,
/// external fragmentation (nothing without settings).
pub(super) fn write_trace_plots(
    h: &mut String,
    dir: &Path,
    s: &[SettingRun],
    capacity: Option<u64>,
) -> Result<()> {
    if s.is_empty() {
        return Ok(());
    }
    h.push_str("<h2 id=\"timeline\">Memory over the trace</h2>\n");
    let f = plot_memory_timeline(&dir.join("timeline"), s, capacity)?;
    figure(
        h,
        &f,
        "Allocated and reserved memory over the trace",
        "Solid lines: reserved bytes; dashed: allocated; thin black: live (requested) bytes.",
    )?;
    h.push_str("<h2 id=\"peak\">Peak reserved and waste</h2>\n");
    let f = plot_peak_reserved(&dir.join("peak_reserved"), s, capacity)?;
    figure(
        h,
        &f,
        "Peak reserved memory per setting",
        "Waste at peak = reserved − allocated when reserved bytes peaked; the dashed line is the live-bytes lower bound.",
    )?;
    h.push_str("<h2 id=\"fragmentation\">External fragmentation</h2>\n");
    let f = plot_external_fragmentation(&dir.join("fragmentation"), s)?;
    figure(
        h,
        &f,
        "External fragmentation over the trace",
        "1 − largest free cached block / free cached bytes.",
    )
}

/// The OOM points: their plot and their table (nothing without points).
pub(super) fn write_oom_points(
    h: &mut String,
    dir: &Path,
    points: &[OomPoint],
    same: &[(String, Vec<String>)],
) -> Result<()> {
    if points.is_empty() {
        return Ok(());
    }
    h.push_str("<h2 id=\"oom-points\">OOM points</h2>\n");
    let f = plot_oom_points(&dir.join("oom_points"), points)?;
    let caption = format!(
        "Minimum capacity per setting; black ticks: live-bytes lower bound; dashed: the memory PyTorch can use on named GPUs (what the driver reports less 512 MiB for the CUDA context; `{}` lists them).",
        Cmd::Gpus.alone()
    );
    figure(h, &f, "Smallest card each setting fits on", &caption)?;
    write_oom_table(h, points, same);
    Ok(())
}

/// A point's setting, with the settings whose results are the same
/// (folded into it) under it.
fn oom_setting_cell(p: &OomPoint, same: &[(String, Vec<String>)]) -> String {
    let others = same
        .iter()
        .find(|(n, _)| *n == p.setting)
        .map_or(&[][..], |(_, o)| o.as_slice());
    let name = p
        .setting
        .rsplit_once(" (+")
        .filter(|_| !others.is_empty())
        .map_or(p.setting.as_str(), |(n, _)| n);
    let mut cell = esc_breakable(name);
    for o in others {
        cell.push_str("<br>= ");
        cell.push_str(&esc_breakable(o));
    }
    cell
}

/// The table of OOM points: minimum capacity, lower bound, how far over
/// it, and the smallest named card each setting fits on.
fn write_oom_table(h: &mut String, points: &[OomPoint], same: &[(String, Vec<String>)]) {
    h.push_str("<table>\n<thead><tr><th>setting</th><th>minimum capacity</th><th>live-bytes lower bound</th><th>over the bound</th><th>smallest named card</th></tr></thead>\n<tbody>\n");
    for p in points {
        let over = if p.lower_bound > 0 {
            format!(
                "{:+.1}%",
                (p.min_capacity as f64 / p.lower_bound as f64 - 1.0) * 100.0
            )
        } else {
            "n/a".to_string()
        };
        let card = match vramlab_replay::gpus::smallest_gpu_for(p.min_capacity) {
            Some(g) => format!("{} ({} usable)", g.name, format_bytes(g.usable_bytes())),
            None => "none listed".to_string(),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            oom_setting_cell(p, same),
            esc(&format_bytes(p.min_capacity)),
            esc(&format_bytes(p.lower_bound)),
            esc(&over),
            esc(&card)
        );
    }
    h.push_str("</tbody>\n</table>\n");
}

/// The fit sweep: its plot, coloured like the other plots (`s`, the
/// report's settings, give the colours), and the largest size that fits
/// under each setting.
pub(super) fn write_fit(
    h: &mut String,
    dir: &Path,
    fit: &FitChart,
    s: &[SettingRun],
) -> Result<()> {
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
        h,
        &f,
        &format!("Peak reserved memory vs {dim}"),
        "Dots: fits; crosses: out of memory; rings: the largest size that fits under each setting.",
    )?;
    write_fit_table(h, fit, dim);
    Ok(())
}

/// The table of the largest size of `dim` that fits under each setting.
fn write_fit_table(h: &mut String, fit: &FitChart, dim: &str) {
    let groups = fit.by_setting();
    if groups.is_empty() {
        return;
    }
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

/// The first OOM of `r`, when its segments were recorded.
fn oom_with_segments(r: &SettingRun) -> Option<&OomEvent> {
    r.run.oom.as_ref().filter(|o| !o.segments.is_empty())
}

/// The segments a segment map of `r` shows: those at the OOM when there
/// was one and they were recorded, else those at peak reserved; `None`
/// when neither was recorded.
fn segment_map(r: &SettingRun) -> Option<&[SegmentView]> {
    match oom_with_segments(r) {
        Some(o) => Some(&o.segments),
        None if r.run.segments_at_peak.is_empty() => None,
        None => Some(&r.run.segments_at_peak),
    }
}

/// A segment map for every setting that has one (`segments-N-LABEL`).
pub(super) fn write_segment_maps(h: &mut String, dir: &Path, s: &[SettingRun]) -> Result<()> {
    let maps: Vec<(usize, &SettingRun)> = s
        .iter()
        .enumerate()
        .filter(|(_, r)| segment_map(r).is_some())
        .collect();
    if maps.is_empty() {
        return Ok(());
    }
    h.push_str("<h2 id=\"segments\">Segment maps</h2>\n");
    for (i, r) in maps {
        let Some(segs) = segment_map(r) else {
            continue;
        };
        let title = match oom_with_segments(r) {
            Some(o) => format!(
                "Segments at the OOM (request of {}) — {}",
                format_bytes(o.requested_bytes),
                r.label
            ),
            None => format!("Segments at peak reserved — {}", r.label),
        };
        let base = dir.join(format!("segments-{}-{}", i + 1, slug(&r.label)));
        let f = plot_segment_map(&base, &title, segs)?;
        figure(
            h,
            &f,
            &title,
            "Blue: allocated; orange: freed but in use on another stream; grey: free cached.",
        )?;
    }
    Ok(())
}
