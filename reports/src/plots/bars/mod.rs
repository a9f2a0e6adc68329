//! Bar charts per setting: peak reserved and OOM points, and what they
//! share: the setting names under the bars, the value labels stacked over
//! them (lifted over the lines they would cross), and the value axis.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::{Axes, Chart2d, HEIGHT, WIDTH, mesh};
use crate::Result;
use crate::style::*;
use crate::units::fmt_tick;

mod oom_points;
mod peak_reserved;

pub(crate) use oom_points::OomPoints;
pub(crate) use peak_reserved::PeakReserved;

const LINE_H: i32 = 22;
const MARGIN_LEFT: i32 = 16;
const Y_LABEL_AREA: i32 = 100;
const MARGIN_RIGHT: i32 = 24;
/// Category label lines the default picture height has room for; more
/// make the picture taller.
const CATEGORY_LINES: usize = 3;

/// The setting names under the bars: wrapped to their slots (every
/// character kept), in a smaller font when a slot is narrower than a word.
struct Categories {
    lines: Vec<Vec<String>>,
    size: f64,
}

/// Smallest font size of the category labels.
const CATEGORY_MIN_SIZE: f64 = 14.0;

impl Categories {
    fn new(labels: &[&str], plot_w: i32) -> Self {
        let n = labels.len().max(1) as i32;
        let slot = (plot_w / n - 12).max(40);
        let widest = labels
            .iter()
            .map(|l| widest_word(l, &font(TICK_SIZE, INK)))
            .max()
            .unwrap_or(0);
        let size = if widest > slot {
            (TICK_SIZE * slot as f64 / widest as f64)
                .floor()
                .max(CATEGORY_MIN_SIZE)
        } else {
            TICK_SIZE
        };
        let style = font(size, INK);
        let lines = labels.iter().map(|l| wrap_lines(l, &style, slot)).collect();
        Categories { lines, size }
    }

    fn style(&self) -> TextStyle<'static> {
        font(self.size, INK)
    }

    fn line_h(&self) -> i32 {
        line_step(&self.style())
    }

    /// The most lines of any label (at least one).
    fn most_lines(&self) -> i32 {
        self.lines.iter().map(Vec::len).max().unwrap_or(1).max(1) as i32
    }

    /// Height of the label band under the x axis.
    fn band(&self) -> i32 {
        14 + self.most_lines() * self.line_h()
    }

    /// Picture size of a bar chart with these labels: taller than the
    /// default when they need more room than [`CATEGORY_LINES`] lines.
    fn picture_size(&self) -> (u32, u32) {
        let extra = (self.band() - 14 - CATEGORY_LINES as i32 * LINE_H).max(0);
        (WIDTH, HEIGHT + extra as u32)
    }

    /// Draws the labels under each bar.
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, chart: &Chart2d<'_, DB>) -> Result<()> {
        let style = self.style();
        let step = self.line_h();
        let (_, yr) = chart.plotting_area().get_pixel_range();
        for (i, lines) in self.lines.iter().enumerate() {
            let (x, _) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
            for (k, l) in lines.iter().enumerate() {
                text(
                    root,
                    l,
                    (x, yr.end + 12 + k as i32 * step),
                    &style,
                    HPos::Center,
                    VPos::Top,
                )?;
            }
        }
        Ok(())
    }
}

/// One value label line above a bar: its wordings from longest to
/// shortest, and its style.
type Wordings = (Vec<String>, TextStyle<'static>);

/// A stack of value labels over a bar: its lines, top first, each in
/// its style.
type Stack = Vec<(String, TextStyle<'static>)>;

/// The lines of a value label stack (top first) for a slot `max_w` pixels
/// wide: the longest wording of each line that fits, else the shortest
/// wrapped over lines (never cut).
fn stack_lines(lines: &[Wordings], max_w: i32) -> Stack {
    let mut out = Vec::new();
    for (wordings, st) in lines {
        match wordings.iter().find(|w| measure(w, st).0 <= max_w) {
            Some(w) => out.push((w.clone(), st.clone())),
            None => {
                let shortest = wordings.last().map_or("", String::as_str);
                for l in wrap_lines(shortest, st, max_w) {
                    out.push((l, st.clone()));
                }
            }
        }
    }
    out
}

/// Height of a stack of `n` label lines.
fn stack_height(n: usize) -> i32 {
    n as i32 * LINE_H
}

/// The bottom (pixel row) of a label stack `h` pixels high that sits on a
/// bar whose top is at `bar_top`: just above the bar, or above every
/// horizontal line in `lines` that would run through it.
fn stack_bottom(bar_top: i32, h: i32, lines: &[i32]) -> i32 {
    let mut bottom = bar_top - 6;
    for _ in 0..=lines.len() {
        let top = bottom - h;
        match lines
            .iter()
            .copied()
            .filter(|&y| y >= top - 6 && y <= bottom + 5)
            .min()
        {
            Some(y) => bottom = y - 7,
            None => break,
        }
    }
    bottom
}

/// The top of the value axis such that every bar's label stack, lifted
/// over the lines it would cross, fits in a plot `plot_h` pixels high,
/// and `at_least` is on the scale: `bars` are (bar top, stack height,
/// lines near this bar only), `lines` the values of lines across the plot.
fn axis_top(bars: &[(f64, i32, Vec<f64>)], lines: &[f64], plot_h: i32, at_least: f64) -> f64 {
    let bar_max = bars.iter().map(|b| b.0).fold(0.0, f64::max);
    let mut top = bar_max.max(at_least * 1.04);
    if top <= 0.0 {
        top = 1.0;
    }
    let plot_h = plot_h.max(40);
    for _ in 0..60 {
        let to_px = |v: f64| (plot_h as f64 * (1.0 - v / top)).round() as i32;
        let mut over = 0;
        for (v, h, own) in bars {
            let px: Vec<i32> = lines.iter().chain(own).map(|&l| to_px(l)).collect();
            let stack_top = stack_bottom(to_px(*v), *h, &px) - h - 6;
            over = over.max(-stack_top);
        }
        if over <= 0 {
            break;
        }
        top *= 1.0 + (over as f64 + 2.0) / plot_h as f64;
    }
    top
}

/// Draws a label stack (top line first) boxed on white, its bottom at
/// `bottom`, centred on `x`; a stack lifted off its bar's top `bar_top`
/// gets a thin line down to the bar.
fn draw_stack<DB: DrawingBackend>(
    root: &Area<DB>,
    x: i32,
    bar_top: i32,
    bottom: i32,
    lines: &[(String, TextStyle<'static>)],
) -> Result<()> {
    if bar_top - bottom > 16 {
        line(root, (x, bottom + 4), (x, bar_top - 2), stroke(MUTED, 1))?;
    }
    let n = lines.len() as i32;
    for (k, (s, st)) in lines.iter().enumerate() {
        let y = bottom - (n - 1 - k as i32) * LINE_H;
        boxed_text(root, s, (x, y), st, HPos::Center, VPos::Bottom)?;
    }
    Ok(())
}

/// Width of a bar's slot for its labels, in pixels, in a plot `plot_w`
/// wide with `n` bars.
fn slot_width(plot_w: i32, n: usize) -> i32 {
    plot_w / n.max(1) as i32 - 8
}

/// The chart of `n` bars on a value axis from 0 to `y_top`, with `right`
/// pixels of margin on the right and `label_h` under the axis for the
/// setting names.
fn bar_chart<'a, DB: DrawingBackend>(
    area: &'a Area<DB>,
    n: usize,
    right: i32,
    label_h: i32,
    y_top: f64,
) -> Result<Chart2d<'a, DB>> {
    let n = n as f64;
    let chart = ChartBuilder::on(area)
        .margin_left(MARGIN_LEFT)
        .margin_right(right)
        .margin_top(8)
        .x_label_area_size(label_h)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(0f64..n, 0f64..y_top)?;
    Ok(chart)
}

/// Draws the grid and the value axis of a bar chart (no x tick labels:
/// the setting names go under the bars).
fn draw_value_axis<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &mut Chart2d<'_, DB>,
    y_desc: &str,
) -> Result<()> {
    mesh(
        root,
        chart,
        &Axes {
            x_desc: "",
            y_desc,
            x_fmt: None,
            y_fmt: &|v| fmt_tick(*v),
            x_grid: false,
            x_ticks: true,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_climb_over_lines_that_would_cross_them() {
        // A bar top at 200, a stack of two lines (44 px): free above.
        assert_eq!(stack_bottom(200, 44, &[]), 194);
        // A line at 180 runs through it: the stack goes above the line.
        assert_eq!(stack_bottom(200, 44, &[180]), 173);
        // Then a second line at 150 runs through that: above both.
        assert_eq!(stack_bottom(200, 44, &[180, 150]), 143);
        // Lines below the bar top or far above it do not matter.
        assert_eq!(stack_bottom(200, 44, &[230, 60]), 194);
    }

    #[test]
    fn the_axis_leaves_room_for_lifted_labels() {
        // Bars at 75 with a capacity line at 79 just above them: the labels
        // go above 79 and the axis must reach high enough for them.
        let bars = vec![(75.0, 44, Vec::new()), (78.0, 44, Vec::new())];
        let top = axis_top(&bars, &[79.0], 400, 79.0);
        let to_px = |v: f64| (400.0 * (1.0 - v / top)).round() as i32;
        for (v, h, _) in &bars {
            let b = stack_bottom(to_px(*v), *h, &[to_px(79.0)]);
            assert!(b - h - 6 >= 0, "top {top}: stack at {b}");
            assert!(b < to_px(79.0));
        }
    }
}
