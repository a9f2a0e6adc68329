//! Bar charts per setting: peak reserved and OOM points.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use vramlab_replay::target::gpus::{GPUS, Gpu, smallest_gpu_for};

use super::{Axes, Chart2d, Figure, HEIGHT, WIDTH, mesh};
use crate::Result;
use crate::input::{OomPointResult, SettingResult};
use crate::style::*;
use crate::units::{fmt_int, fmt_tick, format_bytes, unit_for};

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

/// The lines of a value label stack (top first) for a slot `max_w` pixels
/// wide: the longest wording of each line that fits, else the shortest
/// wrapped over lines (never cut).
fn stack_lines(lines: &[Wordings], max_w: i32) -> Vec<(String, TextStyle<'static>)> {
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

/// Peak reserved per setting.
pub(crate) struct PeakReserved<'a> {
    pub settings: &'a [SettingResult],
    pub capacity: Option<u64>,
}

impl PeakReserved<'_> {
    fn categories(&self) -> Categories {
        let labels: Vec<&str> = self.settings.iter().map(|r| r.label.as_str()).collect();
        Categories::new(
            &labels,
            WIDTH as i32 - MARGIN_LEFT - Y_LABEL_AREA - MARGIN_RIGHT,
        )
    }
}

impl Figure for PeakReserved<'_> {
    fn size(&self) -> (u32, u32) {
        self.categories().picture_size()
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        let title = "Peak reserved memory per setting";
        let s = self.settings;
        if s.is_empty() {
            return no_data(root, title, "no settings to compare");
        }
        // A replay that ended at an OOM saw only part of the trace: the
        // lower bound comes from the complete ones when there are any.
        let complete = s.iter().any(|r| r.oom.is_none());
        let lower = s
            .iter()
            .filter(|r| r.oom.is_none() || !complete)
            .map(|r| r.summary.peak_requested_bytes)
            .max()
            .unwrap_or(0);
        let lower_label = if complete {
            format!("live-bytes lower bound ({})", format_bytes(lower))
        } else {
            format!("peak live bytes before the OOMs ({})", format_bytes(lower))
        };
        let data_max = s
            .iter()
            .map(|r| r.summary.peak_reserved_bytes)
            .max()
            .unwrap_or(0)
            .max(lower);
        let cap = self
            .capacity
            .filter(|&c| (c as f64) <= (data_max as f64) * 1.6);
        let mut subtitle =
            "Peak reserved = allocated at the peak + waste at the peak (reserved but unallocated)"
                .to_string();
        if let Some(c) = self.capacity.filter(|_| cap.is_none()) {
            subtitle = format!("{subtitle}; capacity {} (off the scale)", format_bytes(c));
        }
        let top = frame(root, title, &subtitle)?;

        let mut items = vec![
            LegendItem::new(Swatch::Box(ALLOCATED), "allocated at peak"),
            LegendItem::new(Swatch::Hatch(WASTE_FILL, WASTE), "waste at peak"),
            LegendItem::new(Swatch::Dashed(INK, 2), lower_label),
        ];
        if let Some(c) = cap {
            items.push(LegendItem::new(
                Swatch::Dashed(ALERT, 2),
                format!("capacity ({})", format_bytes(c)),
            ));
        }
        let (w, h) = root.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let lh = legend_height(root, &items, w - 48)?;
        let plot_w = w - MARGIN_LEFT - Y_LABEL_AREA - MARGIN_RIGHT;
        let cats = self.categories();
        let label_h = cats.band();

        let area = root.clone().shrink((0, top), (w, h - top - lh - 4));
        let unit = unit_for(data_max);
        let plot_h = h - top - lh - 4 - 8 - label_h;
        let slot = slot_width(plot_w, s.len());
        let stacks: Vec<Vec<(String, TextStyle<'static>)>> = s
            .iter()
            .map(|r| stack_lines(&value_lines(r), slot))
            .collect();
        let mut across = vec![unit.of(lower)];
        across.extend(cap.map(|c| unit.of(c)));
        let bars: Vec<(f64, i32, Vec<f64>)> = s
            .iter()
            .zip(&stacks)
            .map(|(r, st)| {
                (
                    unit.of(r.summary.peak_reserved_bytes),
                    stack_height(st.len()),
                    Vec::new(),
                )
            })
            .collect();
        let y_top = axis_top(&bars, &across, plot_h, unit.of(lower.max(cap.unwrap_or(0))));
        let n = s.len() as f64;
        let mut chart = ChartBuilder::on(&area)
            .margin_left(MARGIN_LEFT)
            .margin_right(MARGIN_RIGHT)
            .margin_top(8)
            .x_label_area_size(label_h)
            .y_label_area_size(Y_LABEL_AREA)
            .build_cartesian_2d(0f64..n, 0f64..y_top)?;
        let y_desc = format!("peak reserved ({})", unit.name);
        mesh(
            root,
            &mut chart,
            &Axes {
                x_desc: "",
                y_desc: &y_desc,
                x_fmt: None,
                y_fmt: &|v| fmt_tick(*v),
                x_grid: false,
                x_ticks: true,
            },
        )?;

        let (xr, _) = chart.plotting_area().get_pixel_range();
        let mut tops = Vec::with_capacity(s.len());
        for (i, r) in s.iter().enumerate() {
            let sm = &r.summary;
            let reserved = sm.peak_reserved_bytes;
            let waste = sm.waste_at_peak_bytes.min(reserved);
            let used = reserved - waste;
            let x = i as f64;
            let a = chart.backend_coord(&(x + 0.2, 0.0));
            let b = chart.backend_coord(&(x + 0.8, unit.of(used)));
            let c = chart.backend_coord(&(x + 0.8, unit.of(reserved)));
            rect(root, a, b, fill(ALLOCATED))?;
            if c.1 < b.1 {
                rect(root, (a.0, b.1), c, fill(WASTE_FILL))?;
                hatch(root, (a.0, b.1), c, WASTE, 7)?;
            }
            rect(root, a, c, stroke(INK, 1))?;
            tops.push(((a.0 + c.0) / 2, c.1));
        }
        // Reference lines over the bars, value labels over everything,
        // lifted above any line that would run through them.
        let mut line_px = Vec::new();
        let (_, ly) = chart.backend_coord(&(0.0, unit.of(lower)));
        dashed(root, (xr.start, ly), (xr.end, ly), stroke(INK, 2), 10, 6)?;
        line_px.push(ly);
        if let Some(c) = cap {
            let (_, y) = chart.backend_coord(&(0.0, unit.of(c)));
            dashed(root, (xr.start, y), (xr.end, y), stroke(ALERT, 2), 10, 6)?;
            line_px.push(y);
        }
        for (&(cx, bar_top), lines) in tops.iter().zip(&stacks) {
            let bottom = stack_bottom(bar_top, stack_height(lines.len()), &line_px);
            draw_stack(root, cx, bar_top, bottom, lines)?;
        }
        cats.draw(root, &chart)?;
        draw_legend(root, &items, 24, h - lh - 4, w - 48)
    }
}

/// The value labels of a setting's bar: its peak reserved, the waste,
/// and the OOM when there was one.
fn value_lines(r: &SettingResult) -> Vec<Wordings> {
    let reserved = r.summary.peak_reserved_bytes;
    let waste = r.summary.waste_at_peak_bytes.min(reserved);
    let pct = if reserved > 0 {
        waste as f64 / reserved as f64
    } else {
        0.0
    };
    let mut lines = vec![
        (vec![format_bytes(reserved)], bold(LABEL_SIZE, INK)),
        (
            vec![
                format!("waste {} ({:.1}%)", format_bytes(waste), pct * 100.0),
                format!("waste {}", format_bytes(waste)),
                format_bytes(waste),
            ],
            font(LABEL_SIZE, WASTE_TEXT),
        ),
    ];
    if let Some(o) = &r.oom {
        lines.insert(
            0,
            (
                vec![
                    format!("OOM at event {}", fmt_int(o.event_index)),
                    format!("OOM at {}", fmt_int(o.event_index)),
                    "OOM".to_string(),
                ],
                bold(LABEL_SIZE, ALERT),
            ),
        );
    }
    lines
}

/// Light fill behind the waste hatching.
const WASTE_FILL: RGBColor = RGBColor(250, 214, 214);
/// Dark red for waste labels.
const WASTE_TEXT: RGBColor = RGBColor(170, 45, 48);

/// Minimum capacity per setting against the usable memory of named cards.
pub(crate) struct OomPoints<'a> {
    pub points: &'a [OomPointResult],
}

/// `name · usable` of a card (or of several with about the same memory).
fn card_label(names: &[&str], usable: u64) -> String {
    format!("{} · {}", names.join(" / "), format_bytes(usable))
}

/// Cards with about the same usable memory (within 1.5% of the smallest
/// of them) as one line: its memory (the smallest) and the names. `cards`
/// are sorted by usable memory.
fn merge_cards(cards: &[&'static Gpu]) -> Vec<(u64, Vec<&'static str>)> {
    let mut out: Vec<(u64, Vec<&str>)> = Vec::new();
    for g in cards {
        let usable = g.usable_bytes();
        match out.last_mut() {
            Some((first, names)) if (usable as f64) <= (*first as f64) * 1.015 => {
                names.push(g.name)
            }
            _ => out.push((usable, vec![g.name])),
        }
    }
    out
}

/// The named cards around the bars: the largest one below the smallest
/// bar, every one between, and the smallest that holds the largest bar
/// (`smallest_gpu_for`), by usable memory.
fn bracketing_cards(min_bar: u64, max_bar: u64) -> Vec<&'static Gpu> {
    let below = GPUS
        .iter()
        .filter(|g| g.usable_bytes() < min_bar)
        .map(Gpu::usable_bytes)
        .max()
        .unwrap_or(0);
    let above = smallest_gpu_for(max_bar).map_or(u64::MAX, Gpu::usable_bytes);
    let mut cards: Vec<&Gpu> = GPUS
        .iter()
        .filter(|g| g.usable_bytes() >= below.max(1) && g.usable_bytes() <= above)
        .collect();
    cards.sort_by_key(|g| (g.usable_bytes(), g.name));
    cards
}

impl OomPoints<'_> {
    fn categories(&self, right: i32) -> Categories {
        let labels: Vec<&str> = self.points.iter().map(|q| q.label.as_str()).collect();
        Categories::new(&labels, WIDTH as i32 - MARGIN_LEFT - Y_LABEL_AREA - right)
    }

    /// The named cards drawn (those around the bars that are on the
    /// scale) and the top of the data the scale must show.
    fn cards_on_scale(&self) -> (Vec<&'static Gpu>, u64) {
        let data_max = self
            .points
            .iter()
            .map(|q| q.min_capacity.max(q.lower_bound))
            .max()
            .unwrap_or(0);
        let (min_bar, max_bar) = self.bar_range();
        // The card that holds every setting is drawn when it does not
        // squash the bars.
        let top_bytes = match smallest_gpu_for(max_bar) {
            Some(g) if (g.usable_bytes() as f64) <= (data_max as f64) * 3.0 => {
                g.usable_bytes().max(data_max)
            }
            _ => data_max,
        };
        let cards = bracketing_cards(min_bar, max_bar)
            .into_iter()
            .filter(|g| g.usable_bytes() <= top_bytes)
            .collect();
        (cards, top_bytes)
    }

    /// Width of the right margin, where the card labels go.
    fn right_margin(&self) -> i32 {
        let style = bold(LABEL_SIZE, MUTED);
        let (cards, _) = self.cards_on_scale();
        if cards.is_empty() {
            return MARGIN_RIGHT;
        }
        merge_cards(&cards)
            .iter()
            .map(|(usable, names)| measure(&card_label(names, *usable), &style).0 + 24)
            .max()
            .unwrap_or(0)
            .clamp(90, 420)
    }

    /// The smallest and the largest minimum capacity.
    fn bar_range(&self) -> (u64, u64) {
        let min = self
            .points
            .iter()
            .map(|q| q.min_capacity)
            .min()
            .unwrap_or(0);
        let max = self
            .points
            .iter()
            .map(|q| q.min_capacity)
            .max()
            .unwrap_or(0);
        (min, max)
    }
}

impl Figure for OomPoints<'_> {
    fn size(&self) -> (u32, u32) {
        self.categories(self.right_margin()).picture_size()
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        let title = "Smallest card each setting fits on";
        let p = self.points;
        if p.is_empty() {
            return no_data(root, title, "no OOM points were searched");
        }
        let data_max = p
            .iter()
            .map(|q| q.min_capacity.max(q.lower_bound))
            .max()
            .unwrap_or(0);
        let (_, max_bar) = self.bar_range();
        let fits_all = smallest_gpu_for(max_bar);
        let (on_scale, top_bytes) = self.cards_on_scale();
        let mut subtitle =
            "Minimum device capacity at which the whole trace replays without OOM".to_string();
        let smallest = GPUS.iter().min_by_key(|g| (g.usable_bytes(), g.name));
        let largest = GPUS.iter().max_by_key(|g| (g.usable_bytes(), g.name));
        match (fits_all, smallest, largest) {
            (Some(g), Some(s), _) if g == s && g.usable_bytes() > top_bytes => {
                subtitle.push_str(&format!(
                    "; all fit on the smallest listed card, {} ({} usable)",
                    g.name,
                    format_bytes(g.usable_bytes())
                ))
            }
            (Some(g), _, _) if g.usable_bytes() > top_bytes => subtitle.push_str(&format!(
                "; all fit on {} ({} usable, off the scale)",
                g.name,
                format_bytes(g.usable_bytes())
            )),
            (None, _, Some(l)) => subtitle.push_str(&format!(
                "; more than the largest listed card, {} ({} usable)",
                l.name,
                format_bytes(l.usable_bytes())
            )),
            _ => {}
        }
        let top = frame(root, title, &subtitle)?;
        let best = p.iter().map(|q| q.min_capacity).min().unwrap_or(0);
        let bound = match p.first() {
            Some(first) if p.iter().all(|q| q.lower_bound == first.lower_bound) => format!(
                "live-bytes lower bound ({})",
                format_bytes(first.lower_bound)
            ),
            _ => "live-bytes lower bound".to_string(),
        };
        let mut items = vec![
            LegendItem::new(Swatch::Box(ALLOCATED), "minimum capacity"),
            LegendItem::new(Swatch::Box(GOOD), "lowest minimum capacity"),
            LegendItem::new(Swatch::Line(INK, 3), bound),
        ];
        // "fits CARD" under each value only says something when not every
        // setting fits on the smallest card.
        let show_fits = smallest.is_some_and(|s| max_bar > s.usable_bytes());
        let unit = unit_for(data_max);
        let (w, h) = root.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let right = self.right_margin();
        let plot_w = w - MARGIN_LEFT - Y_LABEL_AREA - right;
        let cats = self.categories(right);
        let label_h = cats.band();
        let slot = slot_width(plot_w, p.len());
        let stacks: Vec<Vec<(String, TextStyle<'static>)>> = p
            .iter()
            .map(|q| stack_lines(&oom_value_lines(q, show_fits), slot))
            .collect();
        if !on_scale.is_empty() {
            items.push(LegendItem::new(
                Swatch::Dashed(MUTED, 2),
                "usable memory of named GPUs (vramlab gpus)",
            ));
        }
        let lh = legend_height(root, &items, w - 48)?;
        let plot_h = h - top - lh - 4 - 8 - label_h;
        let across: Vec<f64> = on_scale.iter().map(|g| unit.of(g.usable_bytes())).collect();
        let bars: Vec<(f64, i32, Vec<f64>)> = p
            .iter()
            .zip(&stacks)
            .map(|(q, st)| {
                (
                    unit.of(q.min_capacity.max(q.lower_bound)),
                    stack_height(st.len()),
                    vec![unit.of(q.lower_bound)],
                )
            })
            .collect();
        let y_top = axis_top(&bars, &across, plot_h, unit.of(top_bytes.max(data_max)));
        let area = root.clone().shrink((0, top), (w, h - top - lh - 4));
        let n = p.len() as f64;
        let mut chart = ChartBuilder::on(&area)
            .margin_left(MARGIN_LEFT)
            .margin_right(right)
            .margin_top(8)
            .x_label_area_size(label_h)
            .y_label_area_size(Y_LABEL_AREA)
            .build_cartesian_2d(0f64..n, 0f64..y_top)?;
        let y_desc = format!("minimum capacity ({})", unit.name);
        mesh(
            root,
            &mut chart,
            &Axes {
                x_desc: "",
                y_desc: &y_desc,
                x_fmt: None,
                y_fmt: &|v| fmt_tick(*v),
                x_grid: false,
                x_ticks: true,
            },
        )?;
        let (xr, _) = chart.plotting_area().get_pixel_range();
        // Cards with about the same memory (within 1.5%) share one line,
        // at the smaller one's memory, and one label; labels closer than their height are moved apart, with a
        // tick from the line to the label. Lines on the axis are left out.
        let (_, y_axis) = chart.backend_coord(&(0.0, 0.0));
        let groups: Vec<(i32, u64, Vec<&str>)> = merge_cards(&on_scale)
            .into_iter()
            .map(|(usable, names)| {
                (
                    chart.backend_coord(&(0.0, unit.of(usable))).1,
                    usable,
                    names,
                )
            })
            .filter(|(y, _, _)| y_axis - y >= 6)
            .collect();
        let label_ys = spread(
            &groups.iter().map(|(y, _, _)| *y).collect::<Vec<_>>(),
            LINE_H,
        );
        let mut line_px = Vec::new();
        for ((y, usable, names), ly) in groups.iter().zip(label_ys) {
            dashed(root, (xr.start, *y), (xr.end, *y), stroke(MUTED, 2), 8, 6)?;
            line_px.push(*y);
            if ly != *y {
                line(root, (xr.end, *y), (xr.end + 6, ly), stroke(MUTED, 1))?;
            }
            text(
                root,
                &card_label(names, *usable),
                (xr.end + 10, ly),
                &bold(LABEL_SIZE, MUTED),
                HPos::Left,
                VPos::Center,
            )?;
        }
        for ((i, q), lines) in p.iter().enumerate().zip(&stacks) {
            let x = i as f64;
            let a = chart.backend_coord(&(x + 0.2, 0.0));
            let b = chart.backend_coord(&(x + 0.8, unit.of(q.min_capacity)));
            let color = if q.min_capacity == best {
                GOOD
            } else {
                ALLOCATED
            };
            rect(root, a, b, fill(color))?;
            rect(root, a, b, stroke(INK, 1))?;
            let (_, ly) = chart.backend_coord(&(0.0, unit.of(q.lower_bound)));
            line(root, (a.0 - 8, ly), (b.0 + 8, ly), stroke(INK, 3))?;
            let mut near = line_px.clone();
            near.push(ly);
            let bar_top = b.1.min(ly);
            let bottom = stack_bottom(bar_top, stack_height(lines.len()), &near);
            draw_stack(root, (a.0 + b.0) / 2, bar_top, bottom, lines)?;
        }
        cats.draw(root, &chart)?;
        draw_legend(root, &items, 24, h - lh - 4, w - 48)
    }
}

/// Label rows for lines at pixel rows `ys` (lowest line first, so rows
/// decrease): each label at its line unless that is closer than `gap` to
/// the label below it, then `gap` above that label.
fn spread(ys: &[i32], gap: i32) -> Vec<i32> {
    let mut out: Vec<i32> = Vec::with_capacity(ys.len());
    for &y in ys {
        let y = match out.last() {
            Some(&below) => y.min(below - gap),
            None => y,
        };
        out.push(y);
    }
    out
}

/// The value labels of an OOM point's bar: the minimum capacity, how far
/// over the lower bound it is and, with `show_fits`, the smallest named
/// card it fits on.
fn oom_value_lines(q: &OomPointResult, show_fits: bool) -> Vec<Wordings> {
    let mut lines = vec![(vec![format_bytes(q.min_capacity)], bold(LABEL_SIZE, INK))];
    if q.lower_bound > 0 {
        let over = q.min_capacity as f64 / q.lower_bound as f64 - 1.0;
        lines.push((
            vec![
                format!("{:+.1}% over lower bound", over * 100.0),
                format!("{:+.1}% over bound", over * 100.0),
                format!("{:+.1}%", over * 100.0),
            ],
            font(LABEL_SIZE, MUTED),
        ));
    }
    if show_fits {
        lines.push((
            match smallest_gpu_for(q.min_capacity) {
                Some(g) => vec![format!("fits {}", g.name), g.name.to_string()],
                None => vec!["fits no listed card".to_string(), "too big".to_string()],
            },
            font(LABEL_SIZE, MUTED),
        ));
    }
    lines
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

    #[test]
    fn card_labels_keep_apart() {
        assert_eq!(spread(&[300, 290, 200, 195], 22), [300, 278, 200, 178]);
        assert_eq!(spread(&[], 22), Vec::<i32>::new());
    }

    #[test]
    fn cards_bracket_the_bars() {
        let gib = 1u64 << 30;
        let names = |c: Vec<&Gpu>| c.iter().map(|g| g.name).collect::<Vec<_>>();
        // 75.2–75.8 GiB: the L40S below, the H100 80 GB above.
        assert_eq!(
            names(bracketing_cards(75 * gib + gib / 5, 76 * gib)),
            ["l40s", "h100-80gb"]
        );
        // 20–23 GiB: from the V100 16 GB up to the RTX 4090 (A10G and L4
        // between).
        assert_eq!(
            names(bracketing_cards(20 * gib, 23 * gib)),
            ["v100-16gb", "a10g", "l4", "rtx4090"]
        );
        // 1 GiB: nothing below, the T4 above.
        assert_eq!(names(bracketing_cards(gib, gib)), ["t4"]);
        // More than any card: the largest below only.
        assert_eq!(names(bracketing_cards(500 * gib, 500 * gib)), ["h200"]);
    }
}
