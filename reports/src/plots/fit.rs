//! Peak reserved as a workload dimension grows.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::timeline::{COPY_DASH, copy_rank, duplicates, layered_width};
use super::{
    Axes, Chart2d, Figure, draw_polyline, draw_polyline_phased, line_chart, mesh, pixel_polyline,
};
use crate::Result;
use crate::input::{ChartProbe, FitChart};
use crate::style::*;
use crate::units::{Unit, fmt_count_tick, fmt_int, fmt_tick, format_bytes, unit_for};

/// The fit chart.
pub(crate) struct Fit<'a> {
    pub fit: &'a FitChart,
    /// Setting labels in the order of the report's settings: a setting's
    /// colour is its index here, so it matches the other plots of the
    /// report; settings not listed come after them, in order of
    /// appearance.
    pub order: &'a [String],
}

/// The palette index of each of `settings`: its index in `order`, else
/// the next free index after `order`.
pub(crate) fn color_indices(settings: &[&str], order: &[String]) -> Vec<usize> {
    let mut extra = 0;
    settings
        .iter()
        .map(|s| match order.iter().position(|o| o == s) {
            Some(i) => i,
            None => {
                extra += 1;
                order.len() + extra - 1
            }
        })
        .collect()
}

/// Least pixel gap between two x tick labels.
const TICK_GAP: i32 = 16;

/// Whether tick labels centred at the pixel columns `xs` keep at least
/// [`TICK_GAP`] pixels between each other.
fn spaced(ticks: &[(i32, String)], style: &TextStyle) -> bool {
    ticks.windows(2).all(|w| match w {
        [(xa, a), (xb, b)] => {
            let (wa, wb) = (measure(a, style).0, measure(b, style).0);
            (xb - xa).abs() - wa / 2 - wb / 2 >= TICK_GAP
        }
        _ => true,
    })
}

/// Regular x ticks over `lo..=hi` (axis units: log2 of the size on a log
/// axis, else the size): powers of two (every one, every second, …) on a
/// log axis, 1, 2 or 5 × 10^k apart on a linear one; as many as fit
/// without their labels coming closer than [`TICK_GAP`]. `px` maps a value
/// in axis units to its pixel column.
fn x_ticks(
    lo: f64,
    hi: f64,
    log: bool,
    px: &dyn Fn(f64) -> i32,
    style: &TextStyle,
) -> Vec<(i32, String)> {
    let label = |v: f64| fmt_count_tick(v);
    if log {
        let (e0, e1) = (lo.ceil().max(0.0) as i64, hi.floor().min(63.0) as i64);
        for stride in 1..=64i64 {
            let ticks: Vec<(i32, String)> = (e0..=e1)
                .filter(|e| e % stride == 0)
                .map(|e| (px(e as f64), label((1u64 << e) as f64)))
                .collect();
            if spaced(&ticks, style) {
                return ticks;
            }
        }
        return Vec::new();
    }
    let span = (hi - lo).max(1.0);
    let mut mag = 1.0f64;
    while mag * 10.0 <= span / 12.0 {
        mag *= 10.0;
    }
    for _ in 0..40 {
        for m in [1.0, 2.0, 5.0] {
            let step = m * mag;
            if span / step > 12.0 {
                continue;
            }
            let first = (lo.max(0.0) / step).ceil() as i64;
            let last = (hi / step).floor() as i64;
            let ticks: Vec<(i32, String)> = (first..=last)
                .map(|k| k as f64 * step)
                .map(|v| (px(v), label(v)))
                .collect();
            if spaced(&ticks, style) {
                return ticks;
            }
        }
        mag *= 10.0;
    }
    Vec::new()
}

/// Candidate anchors for a label of the answer at pixel `p`: below it
/// first (the space under a curve that reaches the capacity is usually
/// free), then beside and above, further and further away.
fn answer_candidates(p: (i32, i32)) -> Vec<((i32, i32), HPos, VPos)> {
    let mut out = Vec::new();
    for r in 0..12 {
        let d = 16 + r * 22;
        let s = 14 + r * 16;
        out.push(((p.0, p.1 + d), HPos::Center, VPos::Top));
        out.push(((p.0 - s, p.1 + d), HPos::Right, VPos::Top));
        out.push(((p.0 + s, p.1 + d), HPos::Left, VPos::Top));
        out.push(((p.0 - d, p.1), HPos::Right, VPos::Center));
        out.push(((p.0 + d, p.1), HPos::Left, VPos::Center));
        out.push(((p.0 - s, p.1 - d), HPos::Right, VPos::Bottom));
        out.push(((p.0 + s, p.1 - d), HPos::Left, VPos::Bottom));
        out.push(((p.0, p.1 - d), HPos::Center, VPos::Bottom));
    }
    out
}

/// The point of the box `b` nearest to `p`.
fn nearest_on_box(b: PxRect, p: (i32, i32)) -> (i32, i32) {
    (p.0.max(b.0).min(b.2), p.1.max(b.1).min(b.3))
}

/// The line from the ring around `p` to the label box `b` (both ends the
/// same when the box touches the ring).
fn leader(b: PxRect, p: (i32, i32)) -> ((i32, i32), (i32, i32)) {
    let end = nearest_on_box(b, p);
    let (dx, dy) = ((end.0 - p.0) as f64, (end.1 - p.1) as f64);
    let dist = (dx * dx + dy * dy).sqrt();
    if dist <= (RING + 3) as f64 {
        return (end, end);
    }
    let start = (
        p.0 + (dx / dist * RING as f64).round() as i32,
        p.1 + (dy / dist * RING as f64).round() as i32,
    );
    (start, end)
}

/// Radius of the ring around an answer.
const RING: i32 = 11;

/// A setting and its probes, sorted by size ([`FitChart::by_setting`]).
type Group<'a> = (&'a str, Vec<ChartProbe>);

/// The x axis: the varied size, on a log2 scale when the sizes span 8×
/// or more.
#[derive(Debug, Clone, Copy)]
struct XAxis {
    /// Log2 scale.
    log: bool,
    /// The smallest size, in axis units.
    x0: f64,
    /// The largest size, in axis units.
    x1: f64,
    /// Room left and right of the sizes, in axis units.
    pad: f64,
}

/// `size` in axis units: its log2 on a log axis, else itself.
fn scaled(log: bool, size: u64) -> f64 {
    if log {
        (size as f64).log2()
    } else {
        size as f64
    }
}

impl XAxis {
    /// The axis over the sizes of the probes in `groups` (`None` when
    /// there are none).
    fn new(groups: &[Group<'_>]) -> Option<Self> {
        let mut sizes: Vec<u64> = groups
            .iter()
            .flat_map(|(_, pts)| pts.iter().map(|p| p.size))
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        let (Some(&lo), Some(&hi)) = (sizes.first(), sizes.last()) else {
            return None;
        };
        let log = lo > 0 && hi / lo >= 8;
        let (x0, x1) = (scaled(log, lo), scaled(log, hi));
        let pad = if x1 > x0 { (x1 - x0) * 0.05 } else { 0.5 };
        Some(XAxis { log, x0, x1, pad })
    }

    /// `size` in axis units.
    fn of(self, size: u64) -> f64 {
        scaled(self.log, size)
    }

    /// The range the chart shows.
    fn range(self) -> std::ops::Range<f64> {
        (self.x0 - self.pad)..(self.x1 + self.pad)
    }
}

/// The settings' lines: each setting's points, the earlier setting it is
/// identical to (drawn dashed over it), and their colours.
struct Series<'g> {
    groups: &'g [Group<'g>],
    /// For each group, the first earlier one with the same points.
    dup: Vec<Option<(usize, &'g Group<'g>)>>,
    /// Palette index of each group.
    colors: Vec<usize>,
}

impl<'g> Series<'g> {
    fn new(groups: &'g [Group<'g>], order: &[String]) -> Self {
        let names: Vec<&str> = groups.iter().map(|(s, _)| *s).collect();
        let colors = color_indices(&names, order);
        let keys: Vec<Vec<(u64, u64, bool)>> = groups
            .iter()
            .map(|(_, pts)| {
                pts.iter()
                    .map(|p| (p.size, p.peak_reserved, p.fits))
                    .collect()
            })
            .collect();
        let dup = duplicates(groups, &keys);
        Series {
            groups,
            dup,
            colors,
        }
    }

    /// The look of the `i`-th group's line.
    fn look(&self, i: usize) -> SeriesLook {
        series_look(self.colors.get(i).copied().unwrap_or(i))
    }

    /// How many lines are drawn (copies aside).
    fn drawn(&self) -> usize {
        self.dup.iter().filter(|d| d.is_none()).count()
    }
}

/// The points of a setting in chart coordinates.
fn chart_points(pts: &[ChartProbe], x: XAxis, unit: Unit) -> Vec<(f64, f64)> {
    pts.iter()
        .map(|p| (x.of(p.size), unit.of(p.peak_reserved)))
        .collect()
}

/// An answer: the largest size that fits under a setting, as the index of
/// its group, the size and the marker's pixel.
type Answer = (usize, u64, (i32, i32));

impl Fit<'_> {
    /// The varied dimension's name ("size" when it has none).
    fn dimension(&self) -> &str {
        if self.fit.dimension.trim().is_empty() {
            "size"
        } else {
            self.fit.dimension.trim()
        }
    }

    /// The capacity, unless it is far above the data.
    fn capacity_on_scale(&self, data_max: u64) -> Option<u64> {
        self.fit
            .capacity
            .filter(|&c| (c as f64) <= (data_max as f64) * 4.0)
    }

    /// The subtitle: what the markers mean, the log scale, and the capacity
    /// when it is off the scale.
    fn subtitle(&self, dim: &str, log: bool, cap: Option<u64>) -> String {
        let mut subtitle =
            "Dots: the workload fits; crosses: out of memory; rings: the largest size that fits"
                .to_string();
        if log {
            subtitle.push_str(&format!("; {dim} on a log scale"));
        }
        if let Some(c) = self.fit.capacity.filter(|_| cap.is_none()) {
            subtitle.push_str(&format!("; capacity {} (off the scale)", format_bytes(c)));
        }
        subtitle
    }

    /// The legend: each setting with its answer (or the setting it is a
    /// copy of), the markers and the capacity.
    fn legend_items(&self, series: &Series<'_>, cap: Option<u64>) -> Vec<LegendItem> {
        let groups = series.groups;
        let mut items: Vec<LegendItem> = groups
            .iter()
            .zip(&series.dup)
            .enumerate()
            .map(|(i, ((s, _), d))| {
                let what = match (d, self.fit.largest_fitting(s)) {
                    (Some((_, (first, _))), _) => format!("same as {first}"),
                    (None, Some(v)) => format!("largest that fits: {}", fmt_int(v)),
                    (None, None) => "none fits".to_string(),
                };
                let look = series.look(i);
                let swatch = match d {
                    Some((j, _)) => Swatch::Over(series.look(*j).color, look.color, 4),
                    None => series_swatch(look, 4),
                };
                LegendItem::new(swatch, format!("{s} ({what})"))
            })
            .collect();
        items.push(LegendItem::new(Swatch::Dot(INK), "fits"));
        items.push(LegendItem::new(Swatch::Cross(INK), "out of memory"));
        if groups
            .iter()
            .any(|(s, _)| self.fit.largest_fitting(s).is_some())
        {
            items.push(LegendItem::new(Swatch::Ring(INK), "largest size that fits"));
        }
        if let Some(c) = cap {
            items.push(LegendItem::new(
                Swatch::Dashed(ALERT, 2),
                format!("capacity ({})", format_bytes(c)),
            ));
        }
        items
    }

    /// Draws a dot (fits) or a cross (OOM) at every point, keeping labels
    /// off them; returns the answers.
    fn draw_markers<DB: DrawingBackend>(
        &self,
        root: &Area<DB>,
        chart: &Chart2d<'_, DB>,
        series: &Series<'_>,
        (x, unit): (XAxis, Unit),
        placer: &mut Placer,
    ) -> Result<Vec<Answer>> {
        let mut answers: Vec<Answer> = Vec::new();
        for (i, ((s, pts), d)) in series.groups.iter().zip(&series.dup).enumerate() {
            if d.is_some() {
                continue;
            }
            let c = series.look(i).color;
            let best = self.fit.largest_fitting(s);
            for (p, q) in pts.iter().zip(chart_points(pts, x, unit)) {
                let px = chart.backend_coord(&q);
                placer.avoid((px.0 - 8, px.1 - 8, px.0 + 8, px.1 + 8));
                if p.fits {
                    root.draw(&Circle::new(px, 7, fill(WHITE)))?;
                    root.draw(&Circle::new(px, 5, fill(c)))?;
                    if Some(p.size) == best && !answers.iter().any(|(_, _, a)| *a == px) {
                        answers.push((i, p.size, px));
                    }
                } else {
                    root.draw(&Cross::new(px, 8, stroke(WHITE, 6)))?;
                    root.draw(&Cross::new(px, 7, stroke(c, 3)))?;
                }
            }
        }
        Ok(answers)
    }
}

/// Draws regular x ticks with grid lines (the replayed sizes crowd where
/// the search for the largest fitting size bisected).
fn draw_x_ticks<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    x: XAxis,
) -> Result<()> {
    let (_, yr) = chart.plotting_area().get_pixel_range();
    let tick_style = font(TICK_SIZE, INK);
    let px = |v: f64| chart.backend_coord(&(v, 0.0)).0;
    let range = x.range();
    for (x, label) in x_ticks(range.start, range.end, x.log, &px, &tick_style) {
        line(root, (x, yr.start), (x, yr.end - 1), stroke(GRID, 1))?;
        line(root, (x, yr.end), (x, yr.end + 5), stroke(MUTED, 1))?;
        text(
            root,
            &label,
            (x, yr.end + 10),
            &tick_style,
            HPos::Center,
            VPos::Top,
        )?;
    }
    Ok(())
}

/// Draws the capacity `c` as a dashed line across the plot, labelled on
/// the left (small sizes sit low).
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
    placer.avoid_path(&[(xr.start, y), (xr.end, y)]);
    placer.place(
        root,
        &format!("capacity {}", format_bytes(c)),
        &font(LABEL_SIZE, ALERT),
        &[
            ((xr.start + 10, y - 6), HPos::Left, VPos::Bottom),
            ((xr.start + 10, y + 6), HPos::Left, VPos::Top),
        ],
    )
}

/// Draws each setting's line, earlier ones wider, keeping labels off
/// them; a setting identical to an earlier one: its colour dashed over
/// the earlier one's line, the copies of one line taking turns.
fn draw_lines<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    series: &Series<'_>,
    (x, unit): (XAxis, Unit),
    placer: &mut Placer,
) -> Result<()> {
    let n_drawn = series.drawn();
    let mut rank = 0;
    for (i, ((_, pts), d)) in series.groups.iter().zip(&series.dup).enumerate() {
        if d.is_some() {
            continue;
        }
        let look = series.look(i);
        let xy = chart_points(pts, x, unit);
        let width = layered_width(3, rank, n_drawn);
        rank += 1;
        draw_polyline(root, chart, &xy, stroke(look.color, width), look.dash)?;
        for path in pixel_polyline(chart, &xy) {
            placer.avoid_path(&path);
        }
    }
    for (i, ((_, pts), d)) in series.groups.iter().zip(&series.dup).enumerate() {
        let Some((j, _)) = d else { continue };
        let (nth, n) = copy_rank(&series.dup, i, *j);
        draw_polyline_phased(
            root,
            chart,
            &chart_points(pts, x, unit),
            stroke(series.look(i).color, layered_width(3, 0, n_drawn)),
            Some((COPY_DASH, COPY_DASH * n)),
            COPY_DASH * nth,
        )?;
    }
    Ok(())
}

/// Draws a ring around each answer, then labels each with its size where
/// the label (and the leader line to it) covers no line, marker or other
/// label.
fn label_answers<DB: DrawingBackend>(
    root: &Area<DB>,
    series: &Series<'_>,
    answers: &[Answer],
    placer: &mut Placer,
) -> Result<()> {
    for &(i, _, p) in answers {
        let c = series.look(i).color;
        root.draw(&Circle::new(p, RING, stroke(WHITE, 4)))?;
        root.draw(&Circle::new(p, RING, stroke(c, 2)))?;
        placer.avoid((
            p.0 - RING - 2,
            p.1 - RING - 2,
            p.0 + RING + 2,
            p.1 + RING + 2,
        ));
    }
    for &(i, size, p) in answers {
        let c = series.look(i).color;
        let style = bold(LABEL_SIZE, c);
        let lines = [fmt_int(size)];
        let cands = answer_candidates(p);
        let chosen = cands
            .iter()
            .copied()
            .find(|&(pos, hp, vp)| {
                let b = block_box(&lines, &style, pos, hp, vp);
                let (start, end) = leader(b, p);
                placer.is_free(b) && placer.segment_is_free(start, end)
            })
            .or_else(|| cands.first().copied());
        let Some((pos, hp, vp)) = chosen else {
            continue;
        };
        let (start, end) = leader(block_box(&lines, &style, pos, hp, vp), p);
        if start != end {
            line(root, start, end, stroke(c, 2))?;
            placer.avoid_path(&[start, end]);
        }
        placer.place_lines(root, &lines, &style, &[(pos, hp, vp)])?;
    }
    Ok(())
}

impl Figure for Fit<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        let dim = self.dimension();
        let title = format!("Peak reserved memory vs {dim}");
        let groups = self.fit.by_setting();
        if groups.is_empty() {
            return no_data(root, &title, "no sizes were replayed");
        }
        let series = Series::new(&groups, self.order);
        let Some(x) = XAxis::new(&groups) else {
            return no_data(root, &title, "no sizes were replayed");
        };
        let data_max = groups
            .iter()
            .flat_map(|(_, pts)| pts.iter().map(|p| p.peak_reserved))
            .max()
            .unwrap_or(0);
        let cap = self.capacity_on_scale(data_max);
        let top = frame(root, &title, &self.subtitle(dim, x.log, cap))?;
        let items = self.legend_items(&series, cap);

        let (w, h) = root.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let lh = legend_height(root, &items, w - 48)?;
        let area = root.clone().shrink((0, top), (w, h - top - lh - 4));
        let top_bytes = data_max.max(cap.unwrap_or(0));
        let unit = unit_for(data_max);
        let y_top = unit.of(top_bytes) * 1.1;
        let y_top = if y_top > 0.0 { y_top } else { 1.0 };
        let mut chart = line_chart(&area, x.range(), y_top)?;
        let y_desc = format!("peak reserved ({})", unit.name);
        mesh(
            root,
            &mut chart,
            &Axes {
                x_desc: dim,
                y_desc: &y_desc,
                x_fmt: None,
                y_fmt: &|v| fmt_tick(*v),
                x_grid: false,
                x_ticks: false,
            },
        )?;
        draw_x_ticks(root, &chart, x)?;

        let (xr, yr) = chart.plotting_area().get_pixel_range();
        let mut placer = Placer::within(xr.start + 2..xr.end - 2, yr.start + 2..yr.end - 2);
        if let Some(c) = cap {
            draw_capacity(root, &chart, unit, c, &mut placer)?;
        }
        draw_lines(root, &chart, &series, (x, unit), &mut placer)?;
        // Markers on top of the lines, then the answers.
        let answers = self.draw_markers(root, &chart, &series, (x, unit), &mut placer)?;
        label_answers(root, &series, &answers, &mut placer)?;
        draw_legend(root, &items, 24, h - lh - 4, w - 48)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_are_powers_of_two_and_keep_apart() {
        let style = font(TICK_SIZE, INK);
        // 128 … 16384 over 1000 pixels: every power of two fits.
        let px = |v: f64| ((v - 7.0) * 140.0) as i32;
        let t = x_ticks(7.0, 14.0, true, &px, &style);
        let labels: Vec<&str> = t.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(
            labels,
            [
                "128", "256", "512", "1,024", "2,048", "4,096", "8,192", "16,384"
            ]
        );
        // Squeezed into 200 pixels: every second or fourth one.
        let px = |v: f64| ((v - 7.0) * 28.0) as i32;
        let t = x_ticks(7.0, 14.0, true, &px, &style);
        assert!(t.len() >= 2 && t.len() < 8, "{t:?}");
        assert!(spaced(&t, &style));
    }

    #[test]
    fn linear_ticks_are_evenly_spaced() {
        let style = font(TICK_SIZE, INK);
        let px = |v: f64| ((v - 12000.0) * 0.25) as i32;
        let t = x_ticks(12000.0, 16400.0, false, &px, &style);
        assert!(t.len() >= 3, "{t:?}");
        let xs: Vec<i32> = t.iter().map(|(x, _)| *x).collect();
        let d = xs[1] - xs[0];
        assert!(xs.windows(2).all(|w| (w[1] - w[0] - d).abs() <= 1));
        assert!(spaced(&t, &style));
    }

    #[test]
    fn colours_follow_the_report_order() {
        let order = vec!["a".to_string(), "b".to_string()];
        assert_eq!(color_indices(&["b", "x", "a", "y"], &order), [1, 2, 0, 3]);
    }
}
