//! Several tenants on one GPU over the steps of a colocated replay: a bar
//! per step of what every tenant holds after it, stacked, with the
//! device's peak during the step, the capacity and the OOMs.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::{Axes, Chart2d, ColocationChart, ColocationStep, Figure, mesh};
use crate::Result;
use crate::style::*;
use crate::units::{Unit, fmt_tick, format_bytes, unit_for};

/// The colocation chart.
pub(crate) struct Colocation<'a> {
    pub chart: &'a ColocationChart,
}

const MARGIN_LEFT: i32 = 16;
const Y_LABEL_AREA: i32 = 100;
const MARGIN_RIGHT: i32 = 40;
/// Room under the step labels for the x axis description.
const DESC_H: i32 = 34;
/// Most lines a step label may wrap over.
const MAX_LABEL_LINES: usize = 3;
/// Font sizes of the step labels, largest first.
const LABEL_SIZES: [f64; 3] = [TICK_SIZE, 16.0, 14.0];
/// Least pixel gap between two step labels.
const LABEL_GAP: i32 = 10;
/// A bar's share of its step's slot.
const BAR_SHARE: f64 = 0.64;
/// Most pixels a bar is wide (a few steps would make slabs of them).
const BAR_MAX_W: f64 = 120.0;
/// How far a peak tick reaches past its bar on each side, at most.
const TICK_OVER: f64 = 12.0;
/// Pale red behind a step that ran out of memory.
const OOM_SHADE: f64 = 0.09;

/// The labels under the bars: the step number (from 1) and what ran,
/// wrapped, for every `every`-th step from the first.
struct StepLabels {
    every: usize,
    size: f64,
    /// The labelled steps: index and the label's lines.
    shown: Vec<(usize, Vec<String>)>,
}

impl StepLabels {
    /// Labels for `labels` under a plot `plot_w` pixels wide: each step's
    /// when they fit (in up to [`MAX_LABEL_LINES`] lines, no word broken,
    /// at the largest of [`LABEL_SIZES`] that fits), else every second,
    /// third, … step's.
    fn new(labels: &[&str], plot_w: i32) -> Self {
        let n = labels.len().max(1);
        let slot = plot_w as f64 / n as f64;
        let smallest = LABEL_SIZES.last().copied().unwrap_or(TICK_SIZE);
        // No label is narrower than its step number.
        let number_w = measure(&n.to_string(), &bold(smallest, INK)).0 + LABEL_GAP;
        let first = ((number_w as f64 / slot).ceil() as usize).clamp(1, n);
        for every in first..=n {
            let rooms: Vec<(usize, i32)> = (0..labels.len())
                .step_by(every)
                .map(|i| (i, room(i, every, slot, plot_w)))
                .collect();
            for size in LABEL_SIZES {
                if let Some(shown) = fit_labels(labels, &rooms, size) {
                    return StepLabels { every, size, shown };
                }
            }
        }
        // Only the first step labelled, wrapped however it takes.
        let style = font(smallest, INK);
        let shown = labels
            .first()
            .map(|l| (0, wrap_lines(l, &style, room(0, n, slot, plot_w))))
            .into_iter()
            .collect();
        StepLabels {
            every: n,
            size: smallest,
            shown,
        }
    }

    fn style(&self) -> TextStyle<'static> {
        font(self.size, INK)
    }

    /// Height of the label band under the x axis: the numbers and the
    /// label lines.
    fn band(&self) -> i32 {
        let lines = self.shown.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
        12 + (1 + lines as i32) * line_step(&self.style())
    }

    /// Draws a tick and the label under each labelled step, a short tick
    /// under the others.
    fn draw<DB: DrawingBackend>(
        &self,
        root: &Area<DB>,
        chart: &Chart2d<'_, DB>,
        n: usize,
    ) -> Result<()> {
        let (xr, yr) = chart.plotting_area().get_pixel_range();
        let slot = (xr.end - xr.start) as f64 / n.max(1) as f64;
        if self.every > 1 && slot >= 3.0 {
            for i in 0..n {
                let (x, _) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
                line(root, (x, yr.end), (x, yr.end + 3), stroke(MUTED, 1))?;
            }
        }
        let (style, number) = (self.style(), bold(self.size, INK));
        let step = line_step(&style);
        for (i, lines) in &self.shown {
            let (x, _) = chart.backend_coord(&(*i as f64 + 0.5, 0.0));
            line(root, (x, yr.end), (x, yr.end + 6), stroke(MUTED, 1))?;
            let y = yr.end + 10;
            let label = (i + 1).to_string();
            text(root, &label, (x, y), &number, HPos::Center, VPos::Top)?;
            for (k, l) in lines.iter().enumerate() {
                let at = (x, y + (k as i32 + 1) * step);
                text(root, l, at, &style, HPos::Center, VPos::Top)?;
            }
        }
        Ok(())
    }
}

/// The width the label of step `i` may take when every `every`-th step is
/// labelled in slots `slot` pixels wide: up to halfway to the next labelled
/// steps, and no further out than the y axis labels on the left or the
/// picture's edge on the right (the label is centred on its bar).
fn room(i: usize, every: usize, slot: f64, plot_w: i32) -> i32 {
    let centre = (i as f64 + 0.5) * slot;
    let left = centre + (MARGIN_LEFT + Y_LABEL_AREA - 8) as f64;
    let right = (plot_w + MARGIN_RIGHT - 8) as f64 - centre;
    let w = (every as f64 * slot - LABEL_GAP as f64)
        .min(2.0 * left)
        .min(2.0 * right);
    w.max(0.0) as i32
}

/// The labelled steps' lines at font `size`, or `None` when a step number
/// or a word is wider than its room or a label takes more than
/// [`MAX_LABEL_LINES`] lines.
fn fit_labels(
    labels: &[&str],
    rooms: &[(usize, i32)],
    size: f64,
) -> Option<Vec<(usize, Vec<String>)>> {
    let (style, number) = (font(size, INK), bold(size, INK));
    rooms
        .iter()
        .map(|&(i, w)| {
            let label = labels.get(i).copied().unwrap_or("");
            if measure(&(i + 1).to_string(), &number).0 > w || widest_word(label, &style) > w {
                return None;
            }
            let lines = wrap_lines(label, &style, w);
            (lines.len() <= MAX_LABEL_LINES).then_some((i, lines))
        })
        .collect()
}

/// The number of stacked series: the tenants, or more when a step holds
/// more values than there are names.
fn series_count(c: &ColocationChart) -> usize {
    c.steps
        .iter()
        .map(|s| s.held.len())
        .max()
        .unwrap_or(0)
        .max(c.tenants.len())
}

/// The name of the `i`-th tenant.
fn tenant_name(c: &ColocationChart, i: usize) -> String {
    c.tenants
        .get(i)
        .cloned()
        .unwrap_or_else(|| format!("tenant {}", i + 1))
}

/// What a step holds in all.
fn stacked(s: &ColocationStep) -> u64 {
    s.held.iter().fold(0u64, |a, &b| a.saturating_add(b))
}

/// The top of the data: the capacity, the highest stack or device peak.
fn data_max(c: &ColocationChart) -> u64 {
    c.steps
        .iter()
        .map(|s| stacked(s).max(s.device_peak))
        .max()
        .unwrap_or(0)
        .max(c.capacity)
}

/// The top of the value axis: `max` with `need` pixels free above it in a
/// plot `plot_h` pixels high.
fn axis_top(max: f64, plot_h: i32, need: i32) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let plot_h = plot_h.max(need + 60) as f64;
    max * plot_h / (plot_h - need as f64)
}

/// The legend: each tenant with the most it holds, the peak tick, the
/// capacity line and the OOM marker when there is one.
fn legend_items(c: &ColocationChart) -> Vec<LegendItem> {
    let mut items: Vec<LegendItem> = (0..series_count(c))
        .map(|i| {
            let most = c
                .steps
                .iter()
                .filter_map(|s| s.held.get(i).copied())
                .max()
                .unwrap_or(0);
            let label = format!("{} (up to {})", tenant_name(c, i), format_bytes(most));
            LegendItem::new(swatch(i), label)
        })
        .collect();
    items.push(LegendItem::new(Swatch::Line(INK, 3), "peak during step"));
    if c.capacity > 0 {
        items.push(LegendItem::new(Swatch::Dashed(ALERT, 2), "capacity"));
    }
    if c.steps.iter().any(|s| s.oom.is_some()) {
        items.push(LegendItem::new(Swatch::Cross(ALERT), "out of memory"));
    }
    items
}

/// The legend swatch of the `i`-th tenant: its colour, hatched once the
/// palette is used up.
fn swatch(i: usize) -> Swatch {
    let look = series_look(i);
    match look.dash {
        None => Swatch::Box(look.color),
        Some(_) => Swatch::Hatch(look.color, WHITE),
    }
}

/// The subtitle: what the bars and ticks are, and which steps are
/// labelled when not all are.
fn subtitle(every: usize) -> String {
    let mut s = "Bars: what each tenant holds on the device after the step, stacked \
                 (sleeping engine pools not counted); black tick: the device's peak use \
                 during the step"
        .to_string();
    if every > 1 {
        s.push_str(&format!("; one step in {every} labelled"));
    }
    s
}

/// The chart of `n` steps on a value axis from 0 to `y_top`, with
/// `label_h` pixels under the axis for the step labels.
fn step_chart<DB: DrawingBackend>(
    area: &Area<DB>,
    n: usize,
    label_h: i32,
    y_top: f64,
) -> Result<Chart2d<'_, DB>> {
    let chart = ChartBuilder::on(area)
        .margin_left(MARGIN_LEFT)
        .margin_right(MARGIN_RIGHT)
        .margin_top(8)
        .x_label_area_size(label_h)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(0f64..n.max(1) as f64, 0f64..y_top)?;
    Ok(chart)
}

/// Pixel column of position `f` (0..1) across step `i`'s slot.
fn px_x<DB: DrawingBackend>(chart: &Chart2d<'_, DB>, i: usize, f: f64) -> i32 {
    chart.backend_coord(&(i as f64 + f, 0.0)).0
}

/// Pixel columns of step `i`'s bar and of its peak tick, centred on the
/// step: `((x0, x1), (t0, t1))`, each at least a pixel wide.
fn columns<DB: DrawingBackend>(chart: &Chart2d<'_, DB>, i: usize) -> ((i32, i32), (i32, i32)) {
    let slot = f64::from(px_x(chart, i, 1.0) - px_x(chart, i, 0.0));
    let c = f64::from(px_x(chart, i, 0.5));
    let half = (slot * BAR_SHARE / 2.0).min(BAR_MAX_W / 2.0);
    let over = half + (slot * (1.0 - BAR_SHARE) / 3.0).min(TICK_OVER);
    let span = |h: f64| {
        let a = (c - h).round() as i32;
        (a, ((c + h).round() as i32).max(a + 1))
    };
    (span(half), span(over))
}

/// Pixel row of `bytes`.
fn px_y<DB: DrawingBackend>(chart: &Chart2d<'_, DB>, unit: Unit, bytes: u64) -> i32 {
    chart.backend_coord(&(0.0, unit.of(bytes))).1
}

/// Draws the steps: the OOM steps shaded, and each step's bar of stacked
/// tenants, kept free of labels.
fn draw_steps<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    unit: Unit,
    steps: &[ColocationStep],
    placer: &mut Placer,
) -> Result<()> {
    let (_, yr) = chart.plotting_area().get_pixel_range();
    let shade = ShapeStyle {
        color: ALERT.mix(OOM_SHADE),
        filled: true,
        stroke_width: 0,
    };
    for (i, _) in steps.iter().enumerate().filter(|(_, s)| s.oom.is_some()) {
        // At least a few pixels wide, to be seen among many steps.
        let (c, half) = (
            px_x(chart, i, 0.5),
            (px_x(chart, i, 1.0) - px_x(chart, i, 0.0)) / 2,
        );
        let (x0, x1) = (c - half.max(3), c + half.max(3));
        root.draw(&Rectangle::new([(x0, yr.start), (x1, yr.end)], shade))?;
    }
    let base = px_y(chart, unit, 0);
    for (i, s) in steps.iter().enumerate() {
        let ((x0, x1), _) = columns(chart, i);
        let mut below = 0u64;
        for (t, &b) in s.held.iter().enumerate().filter(|(_, b)| **b > 0) {
            let above = below.saturating_add(b);
            let (y0, y1) = (px_y(chart, unit, below), px_y(chart, unit, above));
            let look = series_look(t);
            rect(root, (x0, y0), (x1, y1), fill(look.color))?;
            if look.dash.is_some() {
                hatch(root, (x0, y0), (x1, y1), WHITE, 6)?;
            }
            below = above;
        }
        let top = px_y(chart, unit, below);
        if below > 0 {
            if x1 - x0 >= 4 {
                rect(root, (x0, base), (x1, top), stroke(INK, 1))?;
            }
            placer.avoid((x0, top, x1, base));
        }
    }
    Ok(())
}

/// Draws each step's peak tick, kept free of labels.
fn draw_peaks<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    unit: Unit,
    steps: &[ColocationStep],
    placer: &mut Placer,
) -> Result<()> {
    for (i, s) in steps.iter().enumerate() {
        if s.device_peak > 0 {
            let y = px_y(chart, unit, s.device_peak);
            let (_, (t0, t1)) = columns(chart, i);
            line(root, (t0, y), (t1, y), stroke(INK, 3))?;
            placer.avoid((t0, y - 2, t1, y + 2));
        }
    }
    Ok(())
}

/// The pixel row of the top of step `i`'s bar or peak tick, whichever is
/// higher.
fn step_top<DB: DrawingBackend>(chart: &Chart2d<'_, DB>, unit: Unit, s: &ColocationStep) -> i32 {
    px_y(chart, unit, stacked(s).max(s.device_peak))
}

/// Marks each step that ran out of memory with a cross over its bar and a
/// label naming the tenant.
fn mark_ooms<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    unit: Unit,
    steps: &[ColocationStep],
    placer: &mut Placer,
) -> Result<()> {
    let (xr, yr) = chart.plotting_area().get_pixel_range();
    let marks: Vec<((i32, i32), &str)> = steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let name = s.oom.as_deref()?;
            let x = px_x(chart, i, 0.5);
            Some(((x, step_top(chart, unit, s) - 16), name))
        })
        .collect();
    for &((x, y), _) in &marks {
        root.draw(&Cross::new((x, y), 7, stroke(ALERT, 3)))?;
        placer.avoid((x - 9, y - 9, x + 9, y + 9));
    }
    let style = bold(LABEL_SIZE, ALERT);
    for &((x, y), name) in &marks {
        let label = wrap_lines(&format!("OOM: {name}"), &style, (xr.end - xr.start) / 3);
        // Above the cross, beside it, else higher up over the other
        // steps (with a leader down to the cross).
        let mut cands = Vec::new();
        let mut above = y - 12;
        for _ in 0..64 {
            cands.push(((x, above), HPos::Center, VPos::Bottom));
            cands.push(((x + 6, above), HPos::Left, VPos::Bottom));
            cands.push(((x - 6, above), HPos::Right, VPos::Bottom));
            if cands.len() == 3 {
                cands.push(((x + 14, y), HPos::Left, VPos::Center));
                cands.push(((x - 14, y), HPos::Right, VPos::Center));
            }
            above -= 13;
            if above - 24 < yr.start {
                break;
            }
        }
        let placed = placer.place_lines(root, &label, &style, &cands)?;
        if let Some(b) = placed.filter(|b| b.3 < y - 20) {
            let leader = [(x.clamp(b.0, b.2), b.3), (x, y - 10)];
            line(root, leader[0], leader[1], stroke(ALERT, 1))?;
            placer.avoid_path(&leader);
        }
    }
    Ok(())
}

/// Draws the capacity as a dashed line across the plot, kept free of
/// labels.
fn draw_capacity<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    unit: Unit,
    capacity: u64,
    placer: &mut Placer,
) -> Result<()> {
    let (xr, _) = chart.plotting_area().get_pixel_range();
    let y = px_y(chart, unit, capacity);
    dashed(root, (xr.start, y), (xr.end, y), stroke(ALERT, 2), 10, 6)?;
    placer.avoid_path(&[(xr.start, y), (xr.end, y)]);
    Ok(())
}

/// Labels the capacity line where the label covers no bar, tick or other
/// label: at its right end, else its left end, else anywhere along it.
fn label_capacity<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    unit: Unit,
    capacity: u64,
    placer: &mut Placer,
) -> Result<()> {
    let (xr, _) = chart.plotting_area().get_pixel_range();
    let y = px_y(chart, unit, capacity);
    let label = format!("capacity {}", format_bytes(capacity));
    let style = font(LABEL_SIZE, ALERT);
    let mut cands = Vec::new();
    for (x, h) in [(xr.end - 8, HPos::Right), (xr.start + 8, HPos::Left)] {
        cands.push(((x, y - 5), h, VPos::Bottom));
        cands.push(((x, y + 5), h, VPos::Top));
    }
    for k in (1..24).rev() {
        let x = xr.start + (xr.end - xr.start) * k / 24;
        cands.push(((x, y - 5), HPos::Center, VPos::Bottom));
        cands.push(((x, y + 5), HPos::Center, VPos::Top));
    }
    placer.place(root, &label, &style, &cands)
}

/// Labels the highest device peak at its tick, where the label covers
/// nothing (the legend explains the ticks when there is no such place).
fn label_highest_peak<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    unit: Unit,
    steps: &[ColocationStep],
    placer: &mut Placer,
) -> Result<()> {
    // The first of the highest.
    let Some((i, peak)) = steps
        .iter()
        .map(|s| s.device_peak)
        .enumerate()
        .rev()
        .max_by_key(|&(_, p)| p)
        .filter(|&(_, p)| p > 0)
    else {
        return Ok(());
    };
    let y = px_y(chart, unit, peak);
    let (_, (t0, t1)) = columns(chart, i);
    let x = px_x(chart, i, 0.5);
    let lines = vec![format!("peak {}", format_bytes(peak))];
    let style = font(LABEL_SIZE, INK);
    let cands = [
        ((x, y - 6), HPos::Center, VPos::Bottom),
        ((t1 + 6, y), HPos::Left, VPos::Center),
        ((t0 - 6, y), HPos::Right, VPos::Center),
        ((t1 + 2, y - 6), HPos::Left, VPos::Bottom),
        ((t0 - 2, y - 6), HPos::Right, VPos::Bottom),
    ];
    if let Some(&c) = cands
        .iter()
        .find(|c| placer.is_free(block_box(&lines, &style, c.0, c.1, c.2)))
    {
        placer.place_lines(root, &lines, &style, &[c])?;
    }
    Ok(())
}

impl Figure for Colocation<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        let c = self.chart;
        let title = if c.title.trim().is_empty() {
            "Tenants on one GPU"
        } else {
            c.title.as_str()
        };
        if c.steps.is_empty() {
            return no_data(root, title, "no steps of a colocated replay to draw");
        }
        let (w, h) = root.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let plot_w = w - MARGIN_LEFT - Y_LABEL_AREA - MARGIN_RIGHT;
        let names: Vec<&str> = c.steps.iter().map(|s| s.label.as_str()).collect();
        let labels = StepLabels::new(&names, plot_w);
        let top = frame(root, title, &subtitle(labels.every))?;
        let items = legend_items(c);
        let lh = legend_height(root, &items, w - 48)?;
        let area = root.clone().shrink((0, top), (w, h - top - lh - 4));
        let label_h = labels.band() + DESC_H;
        let plot_h = h - top - lh - 4 - 8 - label_h;

        let max = data_max(c);
        let unit = unit_for(max);
        // Room above the highest bar for its labels.
        let need = if c.steps.iter().any(|s| s.oom.is_some()) {
            72
        } else {
            40
        };
        let y_top = axis_top(unit.of(max), plot_h, need);
        let n = c.steps.len();
        let mut chart = step_chart(&area, n, label_h, y_top)?;
        mesh(
            root,
            &mut chart,
            &Axes {
                x_desc: "step: what ran (tenant: phase)",
                y_desc: &format!("held on the device ({})", unit.name),
                x_fmt: None,
                y_fmt: &|v| fmt_tick(*v),
                x_grid: false,
                x_ticks: false,
            },
        )?;
        let (xr, yr) = chart.plotting_area().get_pixel_range();
        let mut placer = Placer::within(xr, yr);
        draw_steps(root, &chart, unit, &c.steps, &mut placer)?;
        // The capacity over the bars, the peaks over it, the labels over
        // everything.
        if c.capacity > 0 {
            draw_capacity(root, &chart, unit, c.capacity, &mut placer)?;
        }
        draw_peaks(root, &chart, unit, &c.steps, &mut placer)?;
        mark_ooms(root, &chart, unit, &c.steps, &mut placer)?;
        if c.capacity > 0 {
            label_capacity(root, &chart, unit, c.capacity, &mut placer)?;
        }
        label_highest_peak(root, &chart, unit, &c.steps, &mut placer)?;
        labels.draw(root, &chart, n)?;
        draw_legend(root, &items, 24, h - lh - 4, w - 48)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_steps_are_all_labelled_and_many_every_kth() {
        let few = ["trainer: forward", "rollout: generate", "trainer: backward"];
        let l = StepLabels::new(&few, 1000);
        assert_eq!(l.every, 1);
        assert_eq!(l.shown.len(), 3);
        for (i, lines) in &l.shown {
            assert_eq!(lines.concat().replace(' ', ""), few[*i].replace(' ', ""));
        }
        let many: Vec<String> = (0..200)
            .map(|i| format!("tenant{}: phase{i}", i % 3))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let l = StepLabels::new(&many, 1000);
        assert!(l.every > 1);
        assert_eq!(l.shown.len(), 200usize.div_ceil(l.every));
        // Neighbouring labels keep apart.
        let slot = 1000.0 / 200.0;
        for (i, lines) in &l.shown {
            let w = lines
                .iter()
                .map(|x| measure(x, &l.style()).0)
                .max()
                .unwrap_or(0);
            assert!(w as f64 <= l.every as f64 * slot, "{i}: {lines:?}");
        }
    }

    #[test]
    fn the_axis_leaves_room_above_the_data() {
        let top = axis_top(100.0, 400, 40);
        assert!((400.0 * (1.0 - 100.0 / top) - 40.0).abs() < 1e-6);
        assert_eq!(axis_top(0.0, 400, 40), 1.0);
    }
}
