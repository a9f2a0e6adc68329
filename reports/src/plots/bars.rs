//! Bar charts per setting: peak reserved and OOM points.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::{Axes, Chart2d, Figure, mesh};
use crate::Result;
use crate::input::{OomPointResult, SettingResult};
use crate::style::*;
use crate::units::{fmt_int, fmt_tick, format_bytes, unit_for};

/// Common card memory sizes in GB, drawn as reference lines on the OOM-point
/// chart at N × 2^30 bytes (what `nvidia-smi` shows for most of them; the
/// memory usable by PyTorch is somewhat less).
pub const CARD_SIZES_GB: [u64; 9] = [8, 12, 16, 24, 40, 48, 80, 96, 141];
/// The last (largest) of [`CARD_SIZES_GB`].
const LARGEST_CARD_GB: u64 = {
    let [.., largest] = CARD_SIZES_GB;
    largest
};

const LINE_H: i32 = 22;
const MARGIN_LEFT: i32 = 16;
const Y_LABEL_AREA: i32 = 100;
const MARGIN_RIGHT: i32 = 24;

/// Category labels wrapped to their slot: the lines and the height of the
/// label band under the x axis.
fn category_labels<DB: DrawingBackend>(
    root: &Area<DB>,
    labels: &[&str],
    plot_w: i32,
) -> Result<(Vec<Vec<String>>, i32)> {
    let n = labels.len().max(1) as i32;
    let slot = (plot_w / n - 12).max(40);
    let style = font(TICK_SIZE, INK);
    let mut out = Vec::with_capacity(labels.len());
    for l in labels {
        out.push(wrap(root, l, &style, slot, 3)?);
    }
    let lines = out.iter().map(Vec::len).max().unwrap_or(1).max(1) as i32;
    Ok((out, 14 + lines * LINE_H))
}

/// Top of a bar chart's value axis so that `lines` label lines fit above
/// the highest bar (`bar_top`, in axis units) in a plot `plot_h` pixels
/// high, and `at_least` is on the scale too.
fn axis_top(bar_top: f64, lines: usize, plot_h: i32, at_least: f64) -> f64 {
    let room = (lines as i32 * LINE_H + 18) as f64 / plot_h.max(1) as f64;
    let top = (bar_top / (1.0 - room.min(0.6))).max(at_least * 1.04);
    if top > 0.0 { top } else { 1.0 }
}

/// Draws the wrapped category labels under bar `i` of `n`.
fn draw_category_labels<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    labels: &[Vec<String>],
) -> Result<()> {
    let style = font(TICK_SIZE, INK);
    let (_, yr) = chart.plotting_area().get_pixel_range();
    for (i, lines) in labels.iter().enumerate() {
        let (x, _) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        for (k, l) in lines.iter().enumerate() {
            text(
                root,
                l,
                (x, yr.end + 12 + k as i32 * LINE_H),
                &style,
                HPos::Center,
                VPos::Top,
            )?;
        }
    }
    Ok(())
}

/// Value labels stacked upwards from just above a bar's top (`lines[0]` is
/// the top line). Each line lists its wordings from longest to shortest;
/// the longest that fits in `max_w` pixels is drawn (else the shortest,
/// ellipsized).
fn draw_above<DB: DrawingBackend>(
    root: &Area<DB>,
    x: i32,
    y_top: i32,
    max_w: i32,
    lines: &[(Vec<String>, TextStyle)],
) -> Result<()> {
    let n = lines.len() as i32;
    for (k, (wordings, st)) in lines.iter().enumerate() {
        let mut chosen = None;
        for w in wordings {
            if text_size(root, w, st)?.0 <= max_w {
                chosen = Some(w.clone());
                break;
            }
        }
        let s = match chosen {
            Some(s) => s,
            None => ellipsize(root, wordings.last().map_or("", String::as_str), st, max_w)?,
        };
        let y = y_top - 6 - (n - 1 - k as i32) * LINE_H;
        boxed_text(root, &s, (x, y), st, HPos::Center, VPos::Bottom)?;
    }
    Ok(())
}

/// Peak reserved per setting.
pub(crate) struct PeakReserved<'a> {
    pub settings: &'a [SettingResult],
    pub capacity: Option<u64>,
}

impl Figure for PeakReserved<'_> {
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
        let labels: Vec<&str> = s.iter().map(|r| r.label.as_str()).collect();
        let plot_w = w - MARGIN_LEFT - Y_LABEL_AREA - MARGIN_RIGHT;
        let (cat_lines, label_h) = category_labels(root, &labels, plot_w)?;

        let area = root.clone().shrink((0, top), (w, h - top - lh - 4));
        let unit = unit_for(data_max);
        let label_lines = if s.iter().any(|r| r.oom.is_some()) {
            3
        } else {
            2
        };
        let plot_h = h - top - lh - 4 - 8 - label_h;
        let bar_top = s
            .iter()
            .map(|r| r.summary.peak_reserved_bytes)
            .max()
            .unwrap_or(0);
        let y_top = axis_top(
            unit.of(bar_top),
            label_lines,
            plot_h,
            unit.of(lower.max(cap.unwrap_or(0))),
        );
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
            },
        )?;

        let (xr, _) = chart.plotting_area().get_pixel_range();
        let mut labels_above = Vec::with_capacity(s.len());
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
            let cx = (a.0 + c.0) / 2;
            let slot =
                chart.backend_coord(&(x + 1.0, 0.0)).0 - chart.backend_coord(&(x, 0.0)).0 - 8;
            let mut lines = vec![(vec![format_bytes(reserved)], bold(LABEL_SIZE, INK))];
            let pct = if reserved > 0 {
                waste as f64 / reserved as f64
            } else {
                0.0
            };
            lines.push((
                vec![
                    format!("waste {} ({:.1}%)", format_bytes(waste), pct * 100.0),
                    format!("waste {}", format_bytes(waste)),
                    format_bytes(waste),
                ],
                font(LABEL_SIZE, WASTE_TEXT),
            ));
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
            labels_above.push((cx, c.1, slot, lines));
        }
        // Reference lines over the bars, value labels over everything.
        let (_, ly) = chart.backend_coord(&(0.0, unit.of(lower)));
        dashed(root, (xr.start, ly), (xr.end, ly), stroke(INK, 2), 10, 6)?;
        if let Some(c) = cap {
            let (_, y) = chart.backend_coord(&(0.0, unit.of(c)));
            dashed(root, (xr.start, y), (xr.end, y), stroke(ALERT, 2), 10, 6)?;
        }
        for (cx, y, slot, lines) in &labels_above {
            draw_above(root, *cx, *y, *slot, lines)?;
        }
        draw_category_labels(root, &chart, &cat_lines)?;
        draw_legend(root, &items, 24, h - lh - 4, w - 48)
    }
}

/// Light fill behind the waste hatching.
const WASTE_FILL: RGBColor = RGBColor(250, 214, 214);
/// Dark red for waste labels.
const WASTE_TEXT: RGBColor = RGBColor(170, 45, 48);

/// Minimum capacity per setting against card sizes.
pub(crate) struct OomPoints<'a> {
    pub points: &'a [OomPointResult],
}

impl Figure for OomPoints<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        let title = "Smallest card each setting fits on";
        let p = self.points;
        if p.is_empty() {
            return no_data(root, title, "no OOM points were searched");
        }
        let gib = |gb: u64| gb.saturating_mul(1 << 30);
        let data_max = p
            .iter()
            .map(|q| q.min_capacity.max(q.lower_bound))
            .max()
            .unwrap_or(0);
        let next_card = CARD_SIZES_GB
            .iter()
            .copied()
            .find(|&gb| gib(gb) >= data_max);
        let top_bytes = match next_card {
            Some(gb) if (gib(gb) as f64) <= (data_max as f64) * 3.0 => gib(gb),
            _ => data_max,
        };
        let mut subtitle =
            "Minimum device capacity at which the whole trace replays without OOM".to_string();
        match next_card {
            Some(gb) if gib(gb) > top_bytes => {
                subtitle.push_str(&format!("; all fit on the smallest listed card ({gb} GB)"))
            }
            None => subtitle.push_str(&format!(
                "; more than the largest listed card ({LARGEST_CARD_GB} GB)"
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
        // "fits N GB" under each value only says something when not every
        // setting fits on the smallest card.
        let show_fits = data_max > gib(CARD_SIZES_GB[0]);
        let card_on_scale = |unit: crate::units::Unit, y_top: f64| -> Vec<u64> {
            CARD_SIZES_GB
                .iter()
                .copied()
                .filter(|&gb| unit.of(gib(gb)) <= y_top)
                .collect()
        };
        let unit = unit_for(data_max);
        let (w, h) = root.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        // The legend depends on whether cards are on the scale, the scale on
        // the legend's height: assume one legend row, the usual case.
        let right = 90;
        let labels: Vec<&str> = p.iter().map(|q| q.label.as_str()).collect();
        let plot_w = w - MARGIN_LEFT - Y_LABEL_AREA - right;
        let (cat_lines, label_h) = category_labels(root, &labels, plot_w)?;
        let lh0 = legend_height(root, &items, w - 48)?;
        let bar_top = p.iter().map(|q| q.min_capacity).max().unwrap_or(0);
        let lines = 2 + usize::from(show_fits);
        let y_top = axis_top(
            unit.of(bar_top),
            lines,
            h - top - lh0 - 4 - 8 - label_h,
            unit.of(top_bytes.max(data_max)),
        );
        let cards = card_on_scale(unit, y_top);
        if !cards.is_empty() {
            items.push(LegendItem::new(
                Swatch::Dashed(MUTED, 2),
                "card size (N GB drawn at N GiB)",
            ));
        }
        let lh = legend_height(root, &items, w - 48)?;
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
            },
        )?;
        let (xr, _) = chart.plotting_area().get_pixel_range();
        // Card lines closer than a label's height to the axis or to the
        // previous card's line are left out.
        let (_, y_axis) = chart.backend_coord(&(0.0, 0.0));
        let mut last_y = y_axis;
        for &gb in &cards {
            let (_, y) = chart.backend_coord(&(0.0, unit.of(gib(gb))));
            if last_y - y < LINE_H {
                continue;
            }
            last_y = y;
            dashed(root, (xr.start, y), (xr.end, y), stroke(MUTED, 2), 8, 6)?;
            text(
                root,
                &format!("{gb} GB"),
                (xr.end + 8, y),
                &bold(LABEL_SIZE, MUTED),
                HPos::Left,
                VPos::Center,
            )?;
        }
        for (i, q) in p.iter().enumerate() {
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
                    match CARD_SIZES_GB
                        .iter()
                        .copied()
                        .find(|&gb| gib(gb) >= q.min_capacity)
                    {
                        Some(gb) => vec![format!("fits {gb} GB"), format!("{gb} GB")],
                        None => vec!["fits no listed card".to_string(), "too big".to_string()],
                    },
                    font(LABEL_SIZE, MUTED),
                ));
            }
            let slot =
                chart.backend_coord(&(x + 1.0, 0.0)).0 - chart.backend_coord(&(x, 0.0)).0 - 8;
            draw_above(root, (a.0 + b.0) / 2, b.1.min(ly), slot, &lines)?;
        }
        draw_category_labels(root, &chart, &cat_lines)?;
        draw_legend(root, &items, 24, h - lh - 4, w - 48)
    }
}
