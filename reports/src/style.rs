//! Look and feel shared by every plot: the embedded font, colours, titles,
//! legends, the "no data" placeholder and small drawing helpers.

use std::cell::Cell;
use std::sync::OnceLock;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::{ReportError, Result};

/// The drawing area every plot draws on.
pub(crate) type Area<DB> = DrawingArea<DB, Shift>;

/// Font family of every text. Registered under this name (which SVG viewers
/// read as "DejaVu Sans, else any sans-serif") and under plotters' default
/// `sans-serif`.
pub(crate) const FAMILY: &str = "DejaVu Sans,sans-serif";

/// Title size (pixels; plotters' size, about 0.8 em).
pub(crate) const TITLE_SIZE: f64 = 30.0;
/// Subtitle size.
pub(crate) const SUBTITLE_SIZE: f64 = 19.0;
/// Axis description size.
pub(crate) const AXIS_DESC_SIZE: f64 = 20.0;
/// Tick label size.
pub(crate) const TICK_SIZE: f64 = 18.0;
/// Legend and annotation size (≥ 14 px rendered).
pub(crate) const LABEL_SIZE: f64 = 18.0;

/// Near-black text and axes.
pub(crate) const INK: RGBColor = RGBColor(33, 37, 41);
/// Secondary text.
pub(crate) const MUTED: RGBColor = RGBColor(96, 104, 112);
/// Grid lines.
pub(crate) const GRID: RGBColor = RGBColor(226, 229, 233);
/// Warnings, capacities, OOMs.
pub(crate) const ALERT: RGBColor = RGBColor(200, 40, 40);
/// Blocks handed out to callers.
pub(crate) const ALLOCATED: RGBColor = RGBColor(78, 121, 167);
/// Blocks freed by the caller but still in use on another stream.
pub(crate) const PENDING: RGBColor = RGBColor(242, 142, 43);
/// Free cached blocks.
pub(crate) const FREE: RGBColor = RGBColor(208, 211, 216);
/// Reserved but unallocated bytes (waste).
pub(crate) const WASTE: RGBColor = RGBColor(225, 87, 89);
/// The best setting in a comparison.
pub(crate) const GOOD: RGBColor = RGBColor(89, 161, 79);

/// One colour per setting (Tableau 10, reordered so neighbours differ).
pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(78, 121, 167),
    RGBColor(242, 142, 43),
    RGBColor(89, 161, 79),
    RGBColor(176, 122, 161),
    RGBColor(225, 87, 89),
    RGBColor(118, 183, 178),
    RGBColor(156, 117, 95),
    RGBColor(237, 201, 72),
    RGBColor(255, 157, 167),
    RGBColor(110, 110, 110),
];

/// The colour of the `i`-th setting.
// Indexing: `i % PALETTE.len()` is below the length of the non-empty
// constant `PALETTE`.
#[allow(clippy::indexing_slicing)]
pub(crate) fn series_color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Registers the embedded DejaVu Sans (regular and bold) once.
pub(crate) fn ensure_fonts() -> Result<()> {
    static FONTS: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            for family in [FAMILY, "sans-serif"] {
                plotters::style::register_font(family, FontStyle::Normal, dejavu::sans::regular())
                    .map_err(|_| "DejaVu Sans regular is not a valid font".to_string())?;
                plotters::style::register_font(family, FontStyle::Bold, dejavu::sans::bold())
                    .map_err(|_| "DejaVu Sans bold is not a valid font".to_string())?;
            }
            Ok(())
        })
        .clone()
        .map_err(ReportError::Font)
}

/// A text style in the report font.
pub(crate) fn font(size: f64, color: RGBColor) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&color)
}

/// A bold text style in the report font.
pub(crate) fn bold(size: f64, color: RGBColor) -> TextStyle<'static> {
    // `FontDesc::style` keeps the regular face's glyphs: ask for bold when
    // the font is looked up.
    (FAMILY, size, FontStyle::Bold).into_font().color(&color)
}

/// A line style.
pub(crate) fn stroke(color: RGBColor, width: u32) -> ShapeStyle {
    ShapeStyle {
        color: color.to_rgba(),
        filled: false,
        stroke_width: width,
    }
}

/// A fill style.
pub(crate) fn fill(color: RGBColor) -> ShapeStyle {
    ShapeStyle {
        color: color.to_rgba(),
        filled: true,
        stroke_width: 0,
    }
}

/// Width and height of `text` in `style`.
pub(crate) fn text_size<DB: DrawingBackend>(
    area: &Area<DB>,
    text: &str,
    style: &TextStyle,
) -> Result<(i32, i32)> {
    if text.is_empty() {
        return Ok((0, 0));
    }
    let (w, h) = area.estimate_text_size(text, style)?;
    Ok((w as i32, h as i32))
}

thread_local! {
    /// `true` while a figure is drawn on a bitmap.
    static RASTER: Cell<bool> = const { Cell::new(false) };
}

/// While alive, [`text`] rasterises glyphs itself (for bitmaps): plotters'
/// own rasterisation drops each glyph's left side bearing, which puts a
/// visible gap after narrow glyphs such as `:`.
pub(crate) struct RasterGuard(());

impl RasterGuard {
    /// Starts bitmap text drawing on this thread.
    pub fn start() -> Self {
        RASTER.with(|r| r.set(true));
        RasterGuard(())
    }
}

impl Drop for RasterGuard {
    fn drop(&mut self) {
        RASTER.with(|r| r.set(false));
    }
}

/// The embedded faces, parsed once.
fn faces() -> Option<&'static (FontRef<'static>, FontRef<'static>)> {
    static FACES: OnceLock<Option<(FontRef<'static>, FontRef<'static>)>> = OnceLock::new();
    FACES
        .get_or_init(|| {
            Some((
                FontRef::try_from_slice(dejavu::sans::regular()).ok()?,
                FontRef::try_from_slice(dejavu::sans::bold()).ok()?,
            ))
        })
        .as_ref()
}

/// Rasterises `s` with glyphs placed by their real bounds.
fn raster_text<DB: DrawingBackend>(
    area: &Area<DB>,
    s: &str,
    pos: (i32, i32),
    style: &TextStyle,
    h: HPos,
    v: VPos,
) -> Result<bool> {
    let Some((regular, bold)) = faces() else {
        return Ok(false);
    };
    let face = if matches!(style.font.get_style(), FontStyle::Bold) {
        bold
    } else {
        regular
    };
    let size = style.font.get_size();
    let scaled = face.as_scaled(PxScale::from(size as f32));
    let width = text_size(area, s, style)?.0 as f32;
    let x0 = pos.0 as f32
        - match h {
            HPos::Left => 0.0,
            HPos::Center => width / 2.0,
            HPos::Right => width,
        };
    // Baselines chosen to match what SVG renderers do with plotters'
    // anchors (top: 0.76 em below, centre: capitals centred, bottom:
    // descenders just above).
    let baseline = pos.1 as f32
        + (size as f32)
            * match v {
                VPos::Top => 0.66,
                VPos::Center => 0.30,
                VPos::Bottom => -0.22,
            };
    let c = style.color;
    let mut caret = 0.0f32;
    let mut prev = None;
    for ch in s.chars() {
        let id = scaled.glyph_id(ch);
        if let Some(p) = prev {
            caret += scaled.kern(p, id);
        }
        let glyph =
            id.with_scale_and_position(PxScale::from(size as f32), point(x0 + caret, baseline));
        if let Some(outline) = face.outline_glyph(glyph) {
            let b = outline.px_bounds();
            let mut pixels = Vec::new();
            outline.draw(|gx, gy, cov| {
                if cov > 0.0 {
                    pixels.push((b.min.x as i32 + gx as i32, b.min.y as i32 + gy as i32, cov));
                }
            });
            for (x, y, cov) in pixels {
                let color = RGBAColor(c.rgb.0, c.rgb.1, c.rgb.2, c.alpha * cov.min(1.0) as f64);
                area.draw_pixel((x, y), &color)?;
            }
        }
        caret += scaled.h_advance(id);
        prev = Some(id);
    }
    Ok(true)
}

/// Draws `text` with its anchor at `pos`.
pub(crate) fn text<DB: DrawingBackend>(
    area: &Area<DB>,
    s: &str,
    pos: (i32, i32),
    style: &TextStyle,
    h: HPos,
    v: VPos,
) -> Result<()> {
    if s.is_empty() {
        return Ok(());
    }
    if RASTER.with(|r| r.get()) && raster_text(area, s, pos, style, h, v)? {
        return Ok(());
    }
    // Plotters centres on the layout box, which sits high for this font:
    // move centred text down so it looks centred.
    let pos = match v {
        VPos::Center => (pos.0, pos.1 + (style.font.get_size() * 0.12).round() as i32),
        _ => pos,
    };
    let style = style.pos(Pos::new(h, v));
    area.draw(&Text::new(s.to_string(), pos, style))?;
    Ok(())
}

/// Draws `text` on a white box (for labels on top of data).
pub(crate) fn boxed_text<DB: DrawingBackend>(
    area: &Area<DB>,
    s: &str,
    pos: (i32, i32),
    style: &TextStyle,
    h: HPos,
    v: VPos,
) -> Result<()> {
    let (w, th) = text_size(area, s, style)?;
    let x0 = match h {
        HPos::Left => pos.0,
        HPos::Center => pos.0 - w / 2,
        HPos::Right => pos.0 - w,
    };
    let y0 = match v {
        VPos::Top => pos.1,
        VPos::Center => pos.1 - th / 2,
        VPos::Bottom => pos.1 - th,
    };
    area.draw(&Rectangle::new(
        [(x0 - 4, y0 - 3), (x0 + w + 4, y0 + th + 3)],
        WHITE.mix(0.85).filled(),
    ))?;
    text(area, s, pos, style, h, v)
}

/// A straight line between two pixels.
pub(crate) fn line<DB: DrawingBackend>(
    area: &Area<DB>,
    a: (i32, i32),
    b: (i32, i32),
    style: ShapeStyle,
) -> Result<()> {
    area.draw(&PathElement::new(vec![a, b], style))?;
    Ok(())
}

/// A dashed straight line between two pixels.
pub(crate) fn dashed<DB: DrawingBackend>(
    area: &Area<DB>,
    a: (i32, i32),
    b: (i32, i32),
    style: ShapeStyle,
    dash: i32,
    gap: i32,
) -> Result<()> {
    area.draw(&plotters::element::DashedPathElement::new(
        vec![a, b],
        dash,
        gap,
        style,
    ))?;
    Ok(())
}

/// A filled rectangle between two corners (any order).
pub(crate) fn rect<DB: DrawingBackend>(
    area: &Area<DB>,
    a: (i32, i32),
    b: (i32, i32),
    style: ShapeStyle,
) -> Result<()> {
    area.draw(&Rectangle::new([a, b], style))?;
    Ok(())
}

/// Diagonal hatching (`/`) inside a rectangle.
pub(crate) fn hatch<DB: DrawingBackend>(
    area: &Area<DB>,
    a: (i32, i32),
    b: (i32, i32),
    color: RGBColor,
    spacing: i32,
) -> Result<()> {
    let (x0, x1) = (a.0.min(b.0), a.0.max(b.0));
    let (y0, y1) = (a.1.min(b.1), a.1.max(b.1));
    let h = y1 - y0;
    if h <= 0 || x1 <= x0 {
        return Ok(());
    }
    let mut k = x0 - h;
    while k < x1 {
        // The line (k + t, y1 - t) for t in 0..=h, clipped to x0..=x1.
        let t0 = (x0 - k).max(0);
        let t1 = (x1 - k).min(h);
        if t0 < t1 {
            line(area, (k + t0, y1 - t0), (k + t1, y1 - t1), stroke(color, 1))?;
        }
        k += spacing.max(2);
    }
    Ok(())
}

/// Fills the background and draws the title and subtitle; returns the
/// first free pixel row below them.
pub(crate) fn frame<DB: DrawingBackend>(
    root: &Area<DB>,
    title: &str,
    subtitle: &str,
) -> Result<i32> {
    root.fill(&WHITE)?;
    let (w, _) = root.dim_in_pixel();
    let title_style = bold(TITLE_SIZE, INK);
    let title = ellipsize(root, title, &title_style, w as i32 - 48)?;
    text(root, &title, (24, 16), &title_style, HPos::Left, VPos::Top)?;
    let mut y = 16 + TITLE_SIZE as i32 + 6;
    if !subtitle.is_empty() {
        let sub_style = font(SUBTITLE_SIZE, MUTED);
        let sub = ellipsize(root, subtitle, &sub_style, w as i32 - 48)?;
        text(root, &sub, (24, y), &sub_style, HPos::Left, VPos::Top)?;
        y += SUBTITLE_SIZE as i32 + 8;
    }
    Ok(y + 6)
}

/// Cuts `s` with an ellipsis so it is at most `max_w` pixels wide.
pub(crate) fn ellipsize<DB: DrawingBackend>(
    area: &Area<DB>,
    s: &str,
    style: &TextStyle,
    max_w: i32,
) -> Result<String> {
    if text_size(area, s, style)?.0 <= max_w {
        return Ok(s.to_string());
    }
    let chars: Vec<char> = s.chars().collect();
    let (mut lo, mut hi) = (0usize, chars.len());
    // The longest prefix that fits with the ellipsis.
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let cand: String = chars.iter().take(mid).collect::<String>() + "…";
        if text_size(area, &cand, style)?.0 <= max_w {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Ok(chars.iter().take(lo).collect::<String>() + "…")
}

/// Breaks a setting label into lines at most `max_w` pixels wide: after
/// commas first, then after `:` or `_`, then anywhere; at most `max_lines`
/// lines, the last one ellipsized.
pub(crate) fn wrap<DB: DrawingBackend>(
    area: &Area<DB>,
    s: &str,
    style: &TextStyle,
    max_w: i32,
    max_lines: usize,
) -> Result<Vec<String>> {
    // Tokens end after a break character.
    let mut tokens: Vec<String> = Vec::new();
    let mut cur = String::new();
    for c in s.chars() {
        cur.push(c);
        if matches!(c, ',' | ':' | '_' | ' ' | '/') {
            tokens.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        tokens.push(cur);
    }
    // Tokens wider than a line are cut into pieces that fit.
    let mut pieces: Vec<String> = Vec::new();
    for t in tokens {
        if text_size(area, &t, style)?.0 <= max_w {
            pieces.push(t);
            continue;
        }
        let mut piece = String::new();
        for c in t.chars() {
            let mut cand = piece.clone();
            cand.push(c);
            if !piece.is_empty() && text_size(area, &cand, style)?.0 > max_w {
                pieces.push(std::mem::take(&mut piece));
                piece.push(c);
            } else {
                piece = cand;
            }
        }
        if !piece.is_empty() {
            pieces.push(piece);
        }
    }
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for p in pieces {
        let cand = format!("{line}{p}");
        if !line.is_empty() && text_size(area, cand.trim_end(), style)?.0 > max_w {
            lines.push(line.trim_end().to_string());
            line = p;
        } else {
            line = cand;
        }
    }
    if !line.trim().is_empty() {
        lines.push(line.trim_end().to_string());
    }
    let keep = max_lines.max(1);
    if lines.len() > keep {
        let rest: String = lines.iter().skip(keep - 1).map(String::as_str).collect();
        lines.truncate(keep - 1);
        lines.push(ellipsize(area, &rest, style, max_w)?);
    }
    Ok(lines)
}

/// What a legend entry shows next to its label.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Swatch {
    /// A solid line of this width.
    Line(RGBColor, u32),
    /// A dashed line of this width.
    Dashed(RGBColor, u32),
    /// A filled box.
    Box(RGBColor),
    /// A hatched box (fill, hatch colour).
    Hatch(RGBColor, RGBColor),
    /// A filled circle.
    Dot(RGBColor),
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
    pub fn new(swatch: Swatch, label: impl Into<String>) -> Self {
        LegendItem {
            swatch,
            label: label.into(),
        }
    }
}

const SWATCH_W: i32 = 34;
const LEGEND_ROW_H: i32 = 28;
const LEGEND_GAP: i32 = 28;

/// Rows of `(item, width)` that fit in `max_w`.
fn legend_rows<'a, DB: DrawingBackend>(
    area: &Area<DB>,
    items: &'a [LegendItem],
    max_w: i32,
) -> Result<Vec<Vec<(&'a LegendItem, i32)>>> {
    let style = font(LABEL_SIZE, INK);
    let mut rows: Vec<Vec<(&LegendItem, i32)>> = Vec::new();
    let mut row: Vec<(&LegendItem, i32)> = Vec::new();
    let mut used = 0;
    for item in items {
        let label = ellipsize(area, &item.label, &style, max_w - SWATCH_W - 8)?;
        let w = SWATCH_W + 8 + text_size(area, &label, &style)?.0;
        if !row.is_empty() && used + LEGEND_GAP + w > max_w {
            rows.push(std::mem::take(&mut row));
            used = 0;
        }
        used += if row.is_empty() { w } else { LEGEND_GAP + w };
        row.push((item, w));
    }
    if !row.is_empty() {
        rows.push(row);
    }
    Ok(rows)
}

/// Height a legend of `items` takes in a band `max_w` wide.
pub(crate) fn legend_height<DB: DrawingBackend>(
    area: &Area<DB>,
    items: &[LegendItem],
    max_w: i32,
) -> Result<i32> {
    let rows = legend_rows(area, items, max_w)?.len() as i32;
    Ok(if rows == 0 {
        0
    } else {
        rows * LEGEND_ROW_H + 12
    })
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
    for (r, row) in legend_rows(area, items, max_w)?.iter().enumerate() {
        let total: i32 =
            row.iter().map(|&(_, w)| w).sum::<i32>() + LEGEND_GAP * (row.len() as i32 - 1).max(0);
        let mut cx = x + (max_w - total) / 2;
        let cy = y + 6 + r as i32 * LEGEND_ROW_H + LEGEND_ROW_H / 2;
        for &(item, w) in row {
            draw_swatch(area, item.swatch, cx, cy)?;
            let label = ellipsize(area, &item.label, &style, max_w - SWATCH_W - 8)?;
            text(
                area,
                &label,
                (cx + SWATCH_W + 8, cy),
                &style,
                HPos::Left,
                VPos::Center,
            )?;
            cx += w + LEGEND_GAP;
        }
    }
    Ok(())
}

/// Draws a swatch whose left edge is at `x`, vertically centred on `cy`.
fn draw_swatch<DB: DrawingBackend>(area: &Area<DB>, swatch: Swatch, x: i32, cy: i32) -> Result<()> {
    let (x0, x1) = (x, x + SWATCH_W);
    match swatch {
        Swatch::Line(c, w) => line(area, (x0, cy), (x1, cy), stroke(c, w)),
        Swatch::Dashed(c, w) => dashed(area, (x0, cy), (x1, cy), stroke(c, w), 7, 5),
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
        Swatch::Cross(c) => {
            area.draw(&Cross::new((x0 + SWATCH_W / 2, cy), 7, stroke(c, 3)))?;
            Ok(())
        }
    }
}

/// Draws the "no data" placeholder: the title and a framed message.
pub(crate) fn no_data<DB: DrawingBackend>(root: &Area<DB>, title: &str, why: &str) -> Result<()> {
    let top = frame(root, title, "")?;
    let (w, h) = root.dim_in_pixel();
    let (w, h) = (w as i32, h as i32);
    let (x0, y0, x1, y1) = (48, top + 24, w - 48, h - 48);
    rect(root, (x0, y0), (x1, y1), fill(RGBColor(247, 248, 250)))?;
    for (a, b) in [
        ((x0, y0), (x1, y0)),
        ((x1, y0), (x1, y1)),
        ((x1, y1), (x0, y1)),
        ((x0, y1), (x0, y0)),
    ] {
        dashed(root, a, b, stroke(MUTED, 2), 10, 6)?;
    }
    let cy = (y0 + y1) / 2;
    text(
        root,
        "no data",
        (w / 2, cy - 22),
        &bold(34.0, MUTED),
        HPos::Center,
        VPos::Center,
    )?;
    let why_style = font(SUBTITLE_SIZE, MUTED);
    let why = ellipsize(root, why, &why_style, x1 - x0 - 40)?;
    text(
        root,
        &why,
        (w / 2, cy + 24),
        &why_style,
        HPos::Center,
        VPos::Center,
    )?;
    Ok(())
}

/// The box `text` takes when anchored at `pos`.
pub(crate) fn text_box<DB: DrawingBackend>(
    area: &Area<DB>,
    s: &str,
    pos: (i32, i32),
    style: &TextStyle,
    h: HPos,
    v: VPos,
) -> Result<(i32, i32, i32, i32)> {
    let (w, th) = text_size(area, s, style)?;
    let x0 = match h {
        HPos::Left => pos.0,
        HPos::Center => pos.0 - w / 2,
        HPos::Right => pos.0 - w,
    };
    let y0 = match v {
        VPos::Top => pos.1,
        VPos::Center => pos.1 - th / 2,
        VPos::Bottom => pos.1 - th,
    };
    Ok((x0 - 4, y0 - 3, x0 + w + 4, y0 + th + 3))
}

/// Places boxed labels so that they do not cover each other: each label
/// takes the first of its candidate anchors whose box is free.
#[derive(Debug, Default)]
pub(crate) struct Placer {
    taken: Vec<(i32, i32, i32, i32)>,
    bounds: Option<(i32, i32, i32, i32)>,
}

impl Placer {
    /// A placer that keeps labels inside `x0..x1` × `y0..y1` where it can.
    pub fn within(x: std::ops::Range<i32>, y: std::ops::Range<i32>) -> Self {
        Placer {
            taken: Vec::new(),
            bounds: Some((x.start, y.start, x.end, y.end)),
        }
    }

    /// Draws `s` boxed at the first free candidate `(pos, h, v)` (the first
    /// candidate when none is free).
    pub fn place<DB: DrawingBackend>(
        &mut self,
        area: &Area<DB>,
        s: &str,
        style: &TextStyle,
        candidates: &[((i32, i32), HPos, VPos)],
    ) -> Result<()> {
        let Some(&first) = candidates.first() else {
            return Ok(());
        };
        let mut chosen = first;
        for &c in candidates {
            let b = text_box(area, s, c.0, style, c.1, c.2)?;
            let outside = self
                .bounds
                .is_some_and(|r| b.0 < r.0 || b.1 < r.1 || b.2 > r.2 || b.3 > r.3);
            let clash = outside
                || self
                    .taken
                    .iter()
                    .any(|t| b.0 < t.2 && t.0 < b.2 && b.1 < t.3 && t.1 < b.3);
            if !clash {
                chosen = c;
                break;
            }
        }
        let b = text_box(area, s, chosen.0, style, chosen.1, chosen.2)?;
        self.taken.push(b);
        boxed_text(area, s, chosen.0, style, chosen.1, chosen.2)
    }
}
