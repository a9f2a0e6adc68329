//! Legends: entries (a swatch and a label, wrapped), laid out in centred
//! rows.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::Area;
use super::font::{LABEL_SIZE, font, measure};
use super::palette::{INK, SeriesLook};
use super::shapes::{dash_path, dashed, fill, hatch, line, rect, stroke};
use super::text::text;
use super::wrap::wrap_lines;
use crate::Result;

/// What a legend entry shows next to its label.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Swatch {
    /// A solid line of this width.
    Line(RGBColor, u32),
    /// A dashed line of this width.
    Dashed(RGBColor, u32),
    /// A line of this width dashed (dash, gap).
    Pattern(RGBColor, u32, i32, i32),
    /// A line of the first colour with dashes of the second on top (a
    /// series drawn over an identical one).
    Over(RGBColor, RGBColor, u32),
    /// A filled box.
    Box(RGBColor),
    /// A hatched box (fill, hatch colour).
    Hatch(RGBColor, RGBColor),
    /// A filled circle.
    Dot(RGBColor),
    /// A ring.
    Ring(RGBColor),
    /// A cross.
    Cross(RGBColor),
}

/// One legend entry.
#[derive(Debug, Clone)]
pub(crate) struct LegendItem {
    /// What it shows.
    pub swatch: Swatch,
    /// Its text.
    pub label: String,
}

impl LegendItem {
    /// A legend entry.
    pub(crate) fn new(swatch: Swatch, label: impl Into<String>) -> Self {
        LegendItem {
            swatch,
            label: label.into(),
        }
    }
}

const SWATCH_W: i32 = 34;
const LEGEND_ROW_H: i32 = 28;
const LEGEND_LINE_H: i32 = 22;
const LEGEND_GAP: i32 = 28;

/// A legend entry laid out: its label's lines and its width.
struct LegendCell<'a> {
    item: &'a LegendItem,
    lines: Vec<String>,
    w: i32,
}

/// Rows of entries that fit in `max_w`, each with its height; a label
/// wider than the band is wrapped over several lines.
fn legend_rows(items: &[LegendItem], max_w: i32) -> Vec<(Vec<LegendCell<'_>>, i32)> {
    let style = font(LABEL_SIZE, INK);
    let mut rows: Vec<(Vec<LegendCell>, i32)> = Vec::new();
    let mut row: Vec<LegendCell> = Vec::new();
    let mut used = 0;
    let mut row_h = 0;
    for item in items {
        let lines = wrap_lines(&item.label, &style, max_w - SWATCH_W - 8);
        let text_w = lines
            .iter()
            .map(|l| measure(l, &style).0)
            .max()
            .unwrap_or(0);
        let w = SWATCH_W + 8 + text_w;
        let h = LEGEND_ROW_H + LEGEND_LINE_H * (lines.len().max(1) as i32 - 1);
        if !row.is_empty() && used + LEGEND_GAP + w > max_w {
            rows.push((std::mem::take(&mut row), row_h));
            used = 0;
            row_h = 0;
        }
        used += if row.is_empty() { w } else { LEGEND_GAP + w };
        row_h = row_h.max(h);
        row.push(LegendCell { item, lines, w });
    }
    if !row.is_empty() {
        rows.push((row, row_h));
    }
    rows
}

/// Height a legend of `items` takes in a band `max_w` wide.
pub(crate) fn legend_height<DB: DrawingBackend>(
    _area: &Area<DB>,
    items: &[LegendItem],
    max_w: i32,
) -> Result<i32> {
    Ok(legend_height_for(items, max_w))
}

/// [`legend_height`] without a drawing area.
pub(crate) fn legend_height_for(items: &[LegendItem], max_w: i32) -> i32 {
    let rows = legend_rows(items, max_w);
    if rows.is_empty() {
        0
    } else {
        rows.iter().map(|(_, h)| h).sum::<i32>() + 12
    }
}

/// Draws a legend centred in the band starting at `(x, y)`, `max_w` wide.
pub(crate) fn draw_legend<DB: DrawingBackend>(
    area: &Area<DB>,
    items: &[LegendItem],
    x: i32,
    y: i32,
    max_w: i32,
) -> Result<()> {
    let style = font(LABEL_SIZE, INK);
    let mut top = y + 6;
    for (row, row_h) in legend_rows(items, max_w) {
        let total: i32 =
            row.iter().map(|c| c.w).sum::<i32>() + LEGEND_GAP * (row.len() as i32 - 1).max(0);
        let mut cx = x + (max_w - total) / 2;
        let cy = top + LEGEND_ROW_H / 2;
        for cell in &row {
            draw_swatch(area, cell.item.swatch, cx, cy)?;
            for (k, l) in cell.lines.iter().enumerate() {
                text(
                    area,
                    l,
                    (cx + SWATCH_W + 8, cy + k as i32 * LEGEND_LINE_H),
                    &style,
                    HPos::Left,
                    VPos::Center,
                )?;
            }
            cx += cell.w + LEGEND_GAP;
        }
        top += row_h;
    }
    Ok(())
}

/// Draws a swatch whose left edge is at `x`, vertically centred on `cy`.
fn draw_swatch<DB: DrawingBackend>(area: &Area<DB>, swatch: Swatch, x: i32, cy: i32) -> Result<()> {
    let (x0, x1) = (x, x + SWATCH_W);
    match swatch {
        Swatch::Line(c, w) => line(area, (x0, cy), (x1, cy), stroke(c, w)),
        Swatch::Dashed(c, w) => dashed(area, (x0, cy), (x1, cy), stroke(c, w), 7, 5),
        Swatch::Pattern(c, w, d, g) => {
            // At least two dashes in the swatch.
            let d = d.clamp(2, SWATCH_W / 3);
            let g = g.clamp(2, SWATCH_W / 4);
            dashed(area, (x0, cy), (x1, cy), stroke(c, w), d, g)
        }
        Swatch::Over(under, over, w) => {
            line(area, (x0, cy), (x1, cy), stroke(under, w))?;
            for d in dash_path(&[(x0, cy), (x1, cy)], 6, 6, 6) {
                area.draw(&PathElement::new(d, stroke(over, w)))?;
            }
            Ok(())
        }
        Swatch::Box(c) => {
            rect(area, (x0 + 4, cy - 9), (x1 - 4, cy + 9), fill(c))?;
            rect(area, (x0 + 4, cy - 9), (x1 - 4, cy + 9), stroke(INK, 1))
        }
        Swatch::Hatch(bg, fg) => {
            rect(area, (x0 + 4, cy - 9), (x1 - 4, cy + 9), fill(bg))?;
            hatch(area, (x0 + 4, cy - 9), (x1 - 4, cy + 9), fg, 5)?;
            rect(area, (x0 + 4, cy - 9), (x1 - 4, cy + 9), stroke(INK, 1))
        }
        Swatch::Dot(c) => {
            area.draw(&Circle::new((x0 + SWATCH_W / 2, cy), 6, fill(c)))?;
            Ok(())
        }
        Swatch::Ring(c) => {
            area.draw(&Circle::new((x0 + SWATCH_W / 2, cy), 9, stroke(c, 2)))?;
            Ok(())
        }
        Swatch::Cross(c) => {
            area.draw(&Cross::new((x0 + SWATCH_W / 2, cy), 7, stroke(c, 3)))?;
            Ok(())
        }
    }
}

/// The legend swatch of a series drawn `width` wide in `look`.
pub(crate) fn series_swatch(look: SeriesLook, width: u32) -> Swatch {
    match look.dash {
        None => Swatch::Line(look.color, width),
        Some((d, g)) => Swatch::Pattern(look.color, width, d, g),
    }
}
