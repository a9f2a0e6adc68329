//! Plots over the trace: memory timeline and external fragmentation.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::{Axes, Chart2d, Figure, draw_polyline, draw_polyline_phased, line_chart, mesh};
use crate::Result;
use crate::input::SettingRun;
use crate::style::*;
use crate::units::{Unit, fmt_count_tick, fmt_tick, format_bytes, unit_for};

/// Memory timeline of several settings.
pub(crate) struct Timeline<'a> {
    pub settings: &'a [SettingRun],
    pub capacity: Option<u64>,
}

/// The largest event index of any shown timeline (at least 1).
fn x_max(shown: &[(usize, &SettingRun)]) -> f64 {
    shown
        .iter()
        .flat_map(|(_, s)| s.run.timeline.last().map(|p| p.event_index))
        .chain(
            shown
                .iter()
                .filter_map(|(_, s)| s.run.oom.as_ref().map(|o| o.event_index)),
        )
        .max()
        .unwrap_or(0)
        .max(1) as f64
}

/// A step path through `points`: each value holds from the previous
/// point's x (or 0) to its own, as the timeline's per-interval maxima do.
/// Steps only turn by right angles, so thick lines never grow miter spikes.
pub(crate) fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    let mut prev = points.first().map_or(0.0, |p| p.0.min(0.0));
    for &(x, y) in points {
        out.push((prev, y));
        out.push((x, y));
        prev = x;
    }
    out
}

/// For each shown series, the first earlier one it is identical to, as its
/// index in `items` and the item. `keys[i]` is what is compared of
/// `items[i]`.
pub(crate) fn duplicates<'a, T, K: PartialEq>(
    items: &'a [T],
    keys: &[K],
) -> Vec<Option<(usize, &'a T)>> {
    keys.iter()
        .enumerate()
        .map(|(i, key)| {
            keys.iter()
                .zip(items)
                .take(i)
                .enumerate()
                .find(|(_, (earlier, _))| *earlier == key)
                .map(|(j, (_, item))| (j, item))
        })
        .collect()
}

/// Line width of the `rank`-th of `n` drawn series: earlier series are
/// drawn wider so a later one on top of them leaves them visible.
pub(crate) fn layered_width(base: u32, rank: usize, n: usize) -> u32 {
    base + (n.saturating_sub(rank + 1)).min(2) as u32
}

/// Dash length of a series drawn over an identical earlier one.
pub(crate) const COPY_DASH: i32 = 12;

/// For the `k`-th series, a copy of the `first`-th: which copy of it it is
/// (1 = the first copy) and how many copies `first` has. The copies of one
/// line are dashed in turns over it, so every colour shows.
pub(crate) fn copy_rank<T>(dup: &[Option<(usize, T)>], k: usize, first: usize) -> (i32, i32) {
    let is_copy = |e: &Option<(usize, T)>| e.as_ref().is_some_and(|(j, _)| *j == first);
    let n = dup.iter().filter(|e| is_copy(e)).count() as i32;
    let nth = dup.iter().take(k).filter(|e| is_copy(e)).count() as i32 + 1;
    (nth, n)
}

/// The legend swatch of the series with palette index `i`, drawn over
/// the one with palette index `under` when it is a copy of it.
fn swatch_of(i: usize, under: Option<usize>, width: u32) -> Swatch {
    match under {
        Some(j) => Swatch::Over(series_color(j), series_color(i), width),
        None => series_swatch(series_look(i), width),
    }
}

/// Settings that have a timeline, with their palette index.
fn shown(settings: &[SettingRun]) -> Vec<(usize, &SettingRun)> {
    settings
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.run.timeline.is_empty())
        .collect()
}

/// A shown setting: its palette index and its results.
type Shown<'a> = (usize, &'a SettingRun);

/// For a shown setting, the earlier one its line is identical to: its
/// index among the shown settings, and it.
type Dup<'s, 'a> = Option<(usize, &'s Shown<'a>)>;

/// The top of the data: the most reserved, allocated or live bytes at any
/// point of a shown timeline, or reserved at an OOM.
fn data_max(shown: &[Shown<'_>]) -> u64 {
    shown
        .iter()
        .flat_map(|(_, s)| {
            s.run
                .timeline
                .iter()
                .map(|p| p.reserved.max(p.allocated).max(p.requested))
                .chain(s.run.oom.as_ref().map(|o| o.reserved_bytes))
        })
        .max()
        .unwrap_or(0)
}

/// `f` of each of `s`'s timeline points in `unit`, as a step path (see
/// [`steps`]).
fn step_points(
    s: &SettingRun,
    unit: Unit,
    f: fn(&vramlab_replay::TimelinePoint) -> u64,
) -> Vec<(f64, f64)> {
    let p: Vec<(f64, f64)> = s
        .run
        .timeline
        .iter()
        .map(|p| (p.event_index as f64, unit.of(f(p))))
        .collect();
    steps(&p)
}

impl Timeline<'_> {
    /// The capacity, unless it is far above the data (it would squash
    /// the data: the subtitle mentions it instead).
    fn capacity_on_scale(&self, data_max: u64) -> Option<u64> {
        self.capacity
            .filter(|&c| (c as f64) <= (data_max as f64) * 2.0)
    }

    /// The subtitle: what the lines are, and the capacity when it is off
    /// the scale.
    fn subtitle(&self, cap_on_scale: Option<u64>) -> String {
        let mut subtitle =
            "Solid: reserved, dashed: allocated, thin black: live (requested) bytes; maximum over each interval"
                .to_string();
        if let Some(c) = self.capacity.filter(|_| cap_on_scale.is_none()) {
            subtitle.push_str(&format!("; capacity {} (off the scale)", format_bytes(c)));
        }
        subtitle
    }
}

/// The legend: each setting with its peak (or the setting its line is a
/// copy of), the live bytes, the OOM marker and the capacity line when
/// they are drawn.
fn timeline_legend(shown: &[Shown<'_>], dup: &[Dup<'_, '_>], capacity: bool) -> Vec<LegendItem> {
    let mut items: Vec<LegendItem> = shown
        .iter()
        .zip(dup)
        .map(|(&(i, s), d)| {
            let what = match d {
                Some((_, (_, first))) => format!("same as {}", first.label),
                None => format!("peak {}", format_bytes(s.run.summary.peak_reserved_bytes)),
            };
            LegendItem::new(
                swatch_of(i, d.map(|(_, &(j, _))| j), 4),
                format!("{} ({what})", s.label),
            )
        })
        .collect();
    items.push(LegendItem::new(Swatch::Line(INK, 1), "live (requested)"));
    if shown.iter().any(|(_, s)| s.run.oom.is_some()) {
        items.push(LegendItem::new(Swatch::Cross(ALERT), "out of memory"));
    }
    if capacity {
        items.push(LegendItem::new(Swatch::Dashed(ALERT, 2), "capacity"));
    }
    items
}

/// Draws every setting's allocated (dashed) and reserved (solid) bytes,
/// the copies of identical lines dashed over them in turns, and the live
/// bytes on top.
fn draw_memory_lines<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &mut Chart2d<'_, DB>,
    unit: Unit,
    shown: &[Shown<'_>],
    dup: &[Dup<'_, '_>],
) -> Result<()> {
    let drawn: Vec<(usize, &SettingRun)> = shown
        .iter()
        .zip(dup)
        .filter(|(_, d)| d.is_none())
        .map(|(x, _)| *x)
        .collect();
    for &(i, s) in &drawn {
        let c = series_color(i);
        draw_polyline(
            root,
            chart,
            &step_points(s, unit, |p| p.allocated),
            stroke(c, 2),
            Some((9, 6)),
        )?;
    }
    for (rank, &(i, s)) in drawn.iter().enumerate() {
        let look = series_look(i);
        let p = step_points(s, unit, |p| p.reserved);
        if s.run.timeline.len() == 1 {
            chart.draw_series(
                p.iter()
                    .take(1)
                    .map(|&q| Circle::new(q, 4, fill(look.color))),
            )?;
        }
        let width = layered_width(3, rank, drawn.len());
        draw_polyline(root, chart, &p, stroke(look.color, width), look.dash)?;
    }
    for (k, (&(i, s), d)) in shown.iter().zip(dup).enumerate() {
        if let Some((first, _)) = d {
            let (nth, n) = copy_rank(dup, k, *first);
            draw_polyline_phased(
                root,
                chart,
                &step_points(s, unit, |p| p.reserved),
                stroke(series_color(i), layered_width(3, 0, drawn.len())),
                Some((COPY_DASH, COPY_DASH * n)),
                COPY_DASH * nth,
            )?;
        }
    }
    // The live bytes are the same under every setting: draw them once,
    // from the setting that replayed furthest.
    if let Some(&(_, longest)) = shown
        .iter()
        .max_by_key(|(i, s)| (s.run.timeline.last().map(|p| p.event_index), usize::MAX - i))
    {
        chart.draw_series(LineSeries::new(
            step_points(longest, unit, |p| p.requested),
            stroke(INK, 1),
        ))?;
    }
    Ok(())
}

/// Draws the capacity `c` as a dashed line across the plot, labelled at
/// its right end.
fn draw_capacity<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    unit: Unit,
    c: u64,
    placer: &mut Placer,
) -> Result<()> {
    let (xr, _) = chart.plotting_area().get_pixel_range();
    let (_, y) = chart.backend_coord(&(0.0, unit.of(c)));
    dashed(root, (xr.start, y), (xr.end, y), stroke(ALERT, 2), 10, 6)?;
    placer.place(
        root,
        &format!("capacity {}", format_bytes(c)),
        &font(LABEL_SIZE, ALERT),
        &[((xr.end - 8, y - 6), HPos::Right, VPos::Bottom)],
    )
}

/// Marks each OOM with a cross and a label naming the settings that
/// failed there (settings that failed at the same spot share a label).
fn mark_ooms<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    unit: Unit,
    shown: &[Shown<'_>],
    placer: &mut Placer,
) -> Result<()> {
    let (xr, yr) = chart.plotting_area().get_pixel_range();
    let mut marks: Vec<((i32, i32), Vec<&str>)> = Vec::new();
    for &(_, s) in shown {
        if let Some(o) = &s.run.oom {
            let p = chart.backend_coord(&(o.event_index as f64, unit.of(o.reserved_bytes)));
            match marks
                .iter_mut()
                .find(|(q, _)| (q.0 - p.0).abs() <= 12 && (q.1 - p.1).abs() <= 12)
            {
                Some((_, names)) => names.push(&s.label),
                None => marks.push((p, vec![&s.label])),
            }
        }
    }
    let oom_style = bold(LABEL_SIZE, ALERT);
    for (p, names) in &marks {
        root.draw(&Cross::new(*p, 9, stroke(ALERT, 3)))?;
        let label = wrap_lines(
            &format!("OOM: {}", names.join(", ")),
            &oom_style,
            (xr.end - xr.start) / 2,
        );
        // Towards the middle of the plot, above the marker unless that
        // leaves the plot or covers another label.
        let towards = if p.0 > (xr.start + xr.end) / 2 {
            [(p.0 - 14, HPos::Right), (p.0 + 14, HPos::Left)]
        } else {
            [(p.0 + 14, HPos::Left), (p.0 - 14, HPos::Right)]
        };
        let above = p.1 - 40 >= yr.start;
        let mut cands = Vec::new();
        for (vy, vp, ok) in [(p.1 - 12, VPos::Bottom, above), (p.1 + 12, VPos::Top, true)] {
            if ok {
                for (x, hp) in towards {
                    cands.push(((x, vy), hp, vp));
                }
            }
        }
        placer.place_lines(root, &label, &oom_style, &cands)?;
    }
    Ok(())
}

/// Draws the grid and axes of a plot over the trace, `y_desc` up.
fn draw_trace_axes<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &mut Chart2d<'_, DB>,
    y_desc: &str,
) -> Result<()> {
    mesh(
        root,
        chart,
        &Axes {
            x_desc: "event index",
            y_desc,
            x_fmt: Some(&|v| fmt_count_tick(*v)),
            y_fmt: &|v| fmt_tick(*v),
            x_grid: true,
            x_ticks: true,
        },
    )
}

impl Figure for Timeline<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        let title = "Memory over the trace";
        let shown = shown(self.settings);
        if shown.is_empty() {
            return no_data(root, title, "no timeline points to draw");
        }
        let data_max = data_max(&shown);
        let cap_on_scale = self.capacity_on_scale(data_max);
        let top = frame(root, title, &self.subtitle(cap_on_scale))?;

        let keys: Vec<Vec<(u64, u64, u64)>> = shown
            .iter()
            .map(|(_, s)| {
                s.run
                    .timeline
                    .iter()
                    .map(|p| (p.event_index, p.reserved, p.allocated))
                    .collect()
            })
            .collect();
        let dup = duplicates(&shown, &keys);
        let items = timeline_legend(&shown, &dup, cap_on_scale.is_some());

        let (w, h) = root.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let lh = legend_height(root, &items, w - 48)?;
        let area = root.clone().shrink((0, top), (w, h - top - lh - 4));
        let unit = unit_for(data_max);
        let y_top = unit.of(data_max.max(cap_on_scale.unwrap_or(0))) * 1.08;
        let y_top = if y_top > 0.0 { y_top } else { 1.0 };
        let mut chart = line_chart(&area, 0f64..x_max(&shown), y_top)?;
        draw_trace_axes(root, &mut chart, &format!("memory ({})", unit.name))?;
        draw_memory_lines(root, &mut chart, unit, &shown, &dup)?;

        let (xr, yr) = chart.plotting_area().get_pixel_range();
        let mut placer = Placer::within(xr, yr);
        if let Some(c) = cap_on_scale {
            draw_capacity(root, &chart, unit, c, &mut placer)?;
        }
        mark_ooms(root, &chart, unit, &shown, &mut placer)?;
        draw_legend(root, &items, 24, h - lh - 4, w - 48)
    }
}

/// External fragmentation of several settings over the trace.
pub(crate) struct Fragmentation<'a> {
    pub settings: &'a [SettingRun],
}

impl Figure for Fragmentation<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        let title = "External fragmentation over the trace";
        let shown = shown(self.settings);
        if shown.is_empty() {
            return no_data(root, title, "no timeline points to draw");
        }
        let top = frame(
            root,
            title,
            "1 − largest free cached block / free cached bytes: 0% = all cached memory in one block",
        )?;
        let series: Vec<Vec<(f64, f64)>> = shown
            .iter()
            .map(|(_, s)| {
                s.run
                    .timeline
                    .iter()
                    .map(|p| (p.event_index as f64, p.external_fragmentation() * 100.0))
                    .collect()
            })
            .collect();
        let dup = duplicates(&shown, &series);
        let items: Vec<LegendItem> = shown
            .iter()
            .zip(&series)
            .zip(&dup)
            .map(|((&(i, s), f), d)| {
                let mean = f.iter().map(|p| p.1).sum::<f64>() / f.len() as f64;
                let max = f.iter().map(|p| p.1).fold(0.0, f64::max);
                let what = match d {
                    Some((_, (_, first))) => format!("same as {}", first.label),
                    None => format!("mean {mean:.0}%, max {max:.0}%"),
                };
                LegendItem::new(
                    swatch_of(i, d.map(|(_, &(j, _))| j), 4),
                    format!("{} ({what})", s.label),
                )
            })
            .collect();
        let (w, h) = root.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let lh = legend_height(root, &items, w - 48)?;
        let area = root.clone().shrink((0, top), (w, h - top - lh - 4));
        let mut chart = line_chart(&area, 0f64..x_max(&shown), 105f64)?;
        draw_trace_axes(root, &mut chart, "external fragmentation (%)")?;
        for ((&(i, _), p), d) in shown.iter().zip(&series).zip(&dup) {
            if d.is_some() {
                continue;
            }
            let look = series_look(i);
            if p.len() == 1 {
                chart.draw_series(p.iter().map(|&q| Circle::new(q, 4, fill(look.color))))?;
            }
            draw_polyline(root, &chart, &steps(p), stroke(look.color, 2), look.dash)?;
        }
        for (k, ((&(i, _), p), d)) in shown.iter().zip(&series).zip(&dup).enumerate() {
            if let Some((first, _)) = d {
                let (nth, n) = copy_rank(&dup, k, *first);
                draw_polyline_phased(
                    root,
                    &chart,
                    &steps(p),
                    stroke(series_color(i), 2),
                    Some((COPY_DASH, COPY_DASH * n)),
                    COPY_DASH * nth,
                )?;
            }
        }
        draw_legend(root, &items, 24, h - lh - 4, w - 48)
    }
}
