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

/// One colour per setting: ten colours that stay apart from each other
/// and from the reds of capacities and OOMs, the black of the live bytes
/// and the white background (Tableau 10 without its red and grey, plus a
/// navy and a plum; ordered so neighbours differ).
pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(20, 40, 120),
    RGBColor(170, 170, 20),
    RGBColor(120, 20, 90),
];

/// Dash patterns (dash, gap in pixels) of the series past the palette's
/// length: the 11th to 20th setting get the palette's colours dashed, the
/// next ten dotted, and so on.
const SERIES_DASHES: [Option<(i32, i32)>; 3] = [None, Some((16, 7)), Some((4, 5))];

/// How the `i`-th setting's line looks: its colour and, once the palette
/// has been used up, a dash pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SeriesLook {
    /// Line colour.
    pub color: RGBColor,
    /// `Some((dash, gap))`: a dashed line.
    pub dash: Option<(i32, i32)>,
}

/// The colour of the `i`-th setting.
pub(crate) fn series_color(i: usize) -> RGBColor {
    series_look(i).color
}

/// The look of the `i`-th setting's line.
pub(crate) fn series_look(i: usize) -> SeriesLook {
    let color = PALETTE
        .get(i % PALETTE.len())
        .copied()
        .unwrap_or(RGBColor(31, 119, 180));
    let dash = SERIES_DASHES
        .get((i / PALETTE.len()) % SERIES_DASHES.len())
        .copied()
        .flatten();
    SeriesLook { color, dash }
}

/// The legend swatch of a series drawn `width` wide in `look`.
pub(crate) fn series_swatch(look: SeriesLook, width: u32) -> Swatch {
    match look.dash {
        None => Swatch::Line(look.color, width),
        Some((d, g)) => Swatch::Pattern(look.color, width, d, g),
    }
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
    _area: &Area<DB>,
    text: &str,
    style: &TextStyle,
) -> Result<(i32, i32)> {
    Ok(measure(text, style))
}

/// Width and height of `text` in `style`, measured on the embedded font
/// the way plotters lays text out (advances and kerning at the style's
/// pixel size; height: size / 1.24). Needs no drawing backend, so a figure
/// can size itself before it is drawn.
pub(crate) fn measure(text: &str, style: &TextStyle) -> (i32, i32) {
    if text.is_empty() {
        return (0, 0);
    }
    let size = style.font.get_size();
    let h = (size / 1.24) as i32;
    let Some((regular, bold)) = faces() else {
        // Never the case with the embedded font; a generous estimate.
        return ((text.chars().count() as f64 * size * 0.62) as i32, h);
    };
    let face = if matches!(style.font.get_style(), FontStyle::Bold) {
        bold
    } else {
        regular
    };
    let scaled = face.as_scaled(PxScale::from(size as f32));
    let mut w = 0f32;
    let mut prev = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        w += scaled.h_advance(id);
        if let Some(p) = prev {
            w += scaled.kern(p, id);
        }
        prev = Some(id);
    }
    (w as i32, h)
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

/// A box in pixels: left, top, right, bottom.
pub(crate) type PxRect = (i32, i32, i32, i32);

/// Horizontal padding of the white box behind a boxed label.
const PAD_X: i32 = 4;
/// Vertical padding of the white box behind a boxed label.
const PAD_Y: i32 = 3;

/// Distance between the tops of two lines of a multi-line label.
pub(crate) fn line_step(style: &TextStyle) -> i32 {
    (style.font.get_size() * 1.22).round() as i32
}

/// The box (padding included) a block of `lines` takes when anchored at
/// `pos`: `h` places the block's left edge, centre or right edge at
/// `pos.0`, `v` its top, middle or bottom at `pos.1`.
pub(crate) fn block_box(
    lines: &[String],
    style: &TextStyle,
    pos: (i32, i32),
    h: HPos,
    v: VPos,
) -> PxRect {
    let w = lines.iter().map(|l| measure(l, style).0).max().unwrap_or(0);
    let th = measure("Xg", style).1;
    let total = th + line_step(style) * (lines.len().max(1) as i32 - 1);
    let x0 = match h {
        HPos::Left => pos.0,
        HPos::Center => pos.0 - w / 2,
        HPos::Right => pos.0 - w,
    };
    let y0 = match v {
        VPos::Top => pos.1,
        VPos::Center => pos.1 - total / 2,
        VPos::Bottom => pos.1 - total,
    };
    (x0 - PAD_X, y0 - PAD_Y, x0 + w + PAD_X, y0 + total + PAD_Y)
}

/// Draws `lines` on an opaque white box (for labels on top of data; no
/// line shows through them), anchored as in [`block_box`]; returns the
/// box.
pub(crate) fn boxed_lines<DB: DrawingBackend>(
    area: &Area<DB>,
    lines: &[String],
    style: &TextStyle,
    pos: (i32, i32),
    h: HPos,
    v: VPos,
) -> Result<PxRect> {
    let b = block_box(lines, style, pos, h, v);
    area.draw(&Rectangle::new([(b.0, b.1), (b.2, b.3)], WHITE.filled()))?;
    let x = match h {
        HPos::Left => b.0 + PAD_X,
        HPos::Center => (b.0 + b.2) / 2,
        HPos::Right => b.2 - PAD_X,
    };
    let step = line_step(style);
    for (k, l) in lines.iter().enumerate() {
        text(
            area,
            l,
            (x, b.1 + PAD_Y + k as i32 * step),
            style,
            h,
            VPos::Top,
        )?;
    }
    Ok(b)
}

/// Draws `text` on an opaque white box (for labels on top of data).
pub(crate) fn boxed_text<DB: DrawingBackend>(
    area: &Area<DB>,
    s: &str,
    pos: (i32, i32),
    style: &TextStyle,
    h: HPos,
    v: VPos,
) -> Result<()> {
    boxed_lines(area, &[s.to_string()], style, pos, h, v)?;
    Ok(())
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
    for d in dash_path(&[a, b], dash, gap, 0) {
        area.draw(&PathElement::new(d, style))?;
    }
    Ok(())
}

/// Cuts a pixel path into dashes `on` pixels long, `off` pixels apart,
/// the pattern shifted `phase` pixels along the path (a dash starts at
/// `phase`). Phases let several dashed lines on one path take turns.
pub(crate) fn dash_path(
    path: &[(i32, i32)],
    on: i32,
    off: i32,
    phase: i32,
) -> Vec<Vec<(i32, i32)>> {
    let (on, off) = (on.max(1) as f64, off.max(0) as f64);
    let period = on + off;
    let mut out: Vec<Vec<(i32, i32)>> = Vec::new();
    let mut cur: Vec<(i32, i32)> = Vec::new();
    let mut pos = (-(phase as f64)).rem_euclid(period);
    let mut flush = |cur: &mut Vec<(i32, i32)>| {
        if cur.len() >= 2 {
            out.push(std::mem::take(cur));
        } else {
            cur.clear();
        }
    };
    for w in path.windows(2) {
        let [a, b] = w else { continue };
        let (dx, dy) = ((b.0 - a.0) as f64, (b.1 - a.1) as f64);
        let len = (dx * dx + dy * dy).sqrt();
        if len <= 0.0 {
            continue;
        }
        let at = |t: f64| {
            (
                (a.0 as f64 + dx * t / len).round() as i32,
                (a.1 as f64 + dy * t / len).round() as i32,
            )
        };
        let mut t = 0.0;
        while t < len - 1e-9 {
            let in_dash = pos < on;
            let boundary = if in_dash { on } else { period };
            let step = (boundary - pos).min(len - t).max(1e-9);
            if in_dash {
                let (p0, p1) = (at(t), at(t + step));
                if cur.last() != Some(&p0) {
                    if !cur.is_empty() {
                        flush(&mut cur);
                    }
                    cur.push(p0);
                }
                if cur.last() != Some(&p1) {
                    cur.push(p1);
                }
            }
            t += step;
            pos += step;
            if in_dash && pos >= on - 1e-9 {
                flush(&mut cur);
            }
            if pos >= period - 1e-9 {
                pos = 0.0;
            }
        }
    }
    flush(&mut cur);
    out
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

/// Left and right page margin of the title and subtitle.
const PAGE_SIDE: i32 = 24;
/// Line pitch of the title.
const TITLE_STEP: i32 = TITLE_SIZE as i32 + 6;
/// Line pitch of the subtitle.
const SUBTITLE_STEP: i32 = SUBTITLE_SIZE as i32 + 6;

/// The title and subtitle of a picture `width` pixels wide, wrapped, and
/// the first free pixel row below them.
fn header(title: &str, subtitle: &str, width: i32) -> (Vec<String>, Vec<String>, i32) {
    let max_w = width - 2 * PAGE_SIDE;
    let t = wrap_lines(title, &bold(TITLE_SIZE, INK), max_w);
    let s = wrap_lines(subtitle, &font(SUBTITLE_SIZE, MUTED), max_w);
    let mut y = 16 + TITLE_STEP * t.len().max(1) as i32;
    if !s.is_empty() {
        y += SUBTITLE_STEP * s.len() as i32 + 2;
    }
    (t, s, y + 6)
}

/// The first free pixel row under the title and subtitle of a picture
/// `width` pixels wide (what [`frame`] returns).
pub(crate) fn header_height(title: &str, subtitle: &str, width: i32) -> i32 {
    header(title, subtitle, width).2
}

/// Fills the background and draws the title and subtitle (wrapped over as
/// many lines as they need); returns the first free pixel row below them.
pub(crate) fn frame<DB: DrawingBackend>(
    root: &Area<DB>,
    title: &str,
    subtitle: &str,
) -> Result<i32> {
    root.fill(&WHITE)?;
    let (w, _) = root.dim_in_pixel();
    let (t, s, bottom) = header(title, subtitle, w as i32);
    let mut y = 16;
    let title_style = bold(TITLE_SIZE, INK);
    for l in &t {
        text(root, l, (PAGE_SIDE, y), &title_style, HPos::Left, VPos::Top)?;
        y += TITLE_STEP;
    }
    let sub_style = font(SUBTITLE_SIZE, MUTED);
    for l in &s {
        text(root, l, (PAGE_SIDE, y), &sub_style, HPos::Left, VPos::Top)?;
        y += SUBTITLE_STEP;
    }
    Ok(bottom)
}

/// `s` cut after each of `breaks` (the break character stays with the
/// part before it).
fn split_after(s: &str, breaks: &[char]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in s.chars() {
        cur.push(c);
        if breaks.contains(&c) {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Where setting labels and sentences may break: after these.
const FINE_BREAKS: [char; 8] = [',', ':', '_', ' ', '/', ';', '=', '-'];
/// Preferred breaks: between the options of a setting, between words.
const COARSE_BREAKS: [char; 3] = [',', ' ', ';'];

/// `parts` that are wider than `max_w` cut further after [`FINE_BREAKS`],
/// and anywhere when that is not enough.
fn fit_parts(parts: Vec<String>, style: &TextStyle, max_w: i32) -> Vec<String> {
    let mut out = Vec::new();
    for p in parts {
        if measure(p.trim_end(), style).0 <= max_w {
            out.push(p);
            continue;
        }
        for t in split_after(&p, &FINE_BREAKS) {
            if measure(t.trim_end(), style).0 <= max_w {
                out.push(t);
                continue;
            }
            let mut piece = String::new();
            for c in t.chars() {
                let mut cand = piece.clone();
                cand.push(c);
                if !piece.is_empty() && measure(&cand, style).0 > max_w {
                    out.push(std::mem::take(&mut piece));
                    piece.push(c);
                } else {
                    piece = cand;
                }
            }
            if !piece.is_empty() {
                out.push(piece);
            }
        }
    }
    out
}

/// Width of the widest piece [`wrap_lines`] would not break (without
/// cutting a word) in `s`.
pub(crate) fn widest_word(s: &str, style: &TextStyle) -> i32 {
    split_after(s, &FINE_BREAKS)
        .iter()
        .map(|w| measure(w.trim(), style).0)
        .max()
        .unwrap_or(0)
}

/// Fills lines greedily with `parts`.
fn fill_lines(parts: &[String], style: &TextStyle, max_w: i32) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for p in parts {
        let cand = format!("{line}{p}");
        if !line.trim().is_empty() && measure(cand.trim_end(), style).0 > max_w {
            lines.push(line.trim_end().to_string());
            line = p.trim_start().to_string();
        } else {
            line = cand;
        }
    }
    if !line.trim().is_empty() {
        lines.push(line.trim_end().to_string());
    }
    lines
}

/// Breaks `s` into lines at most `max_w` pixels wide, never dropping a
/// character: between a setting's options (after commas) and between
/// words where that takes no more lines, else also after `:`, `_`, `/`,
/// `=`, `-`, and inside a word only when a word is wider than a line.
pub(crate) fn wrap_lines(s: &str, style: &TextStyle, max_w: i32) -> Vec<String> {
    if s.trim().is_empty() {
        return Vec::new();
    }
    if measure(s, style).0 <= max_w {
        return vec![s.to_string()];
    }
    let fine = balanced(
        &fit_parts(split_after(s, &FINE_BREAKS), style, max_w),
        style,
        max_w,
    );
    let coarse = balanced(
        &fit_parts(split_after(s, &COARSE_BREAKS), style, max_w),
        style,
        max_w,
    );
    if coarse.len() <= fine.len() {
        coarse
    } else {
        fine
    }
}

/// [`fill_lines`] with the fewest lines it takes at `max_w`, made as even
/// as they can be (no short last line left dangling): the narrowest width
/// that still needs no more lines.
fn balanced(parts: &[String], style: &TextStyle, max_w: i32) -> Vec<String> {
    let lines = fill_lines(parts, style, max_w);
    let widest_part = parts
        .iter()
        .map(|p| measure(p.trim(), style).0)
        .max()
        .unwrap_or(0);
    let (mut lo, mut hi) = (widest_part.min(max_w), max_w);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fill_lines(parts, style, mid).len() <= lines.len() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    fill_lines(parts, style, hi)
}

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
    pub fn new(swatch: Swatch, label: impl Into<String>) -> Self {
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
    for (k, l) in wrap_lines(why, &why_style, x1 - x0 - 40).iter().enumerate() {
        text(
            root,
            l,
            (w / 2, cy + 24 + k as i32 * SUBTITLE_STEP),
            &why_style,
            HPos::Center,
            VPos::Center,
        )?;
    }
    Ok(())
}

/// Whether the segment `a`–`b` touches the box `r` (Liang–Barsky).
pub(crate) fn segment_hits(a: (i32, i32), b: (i32, i32), r: PxRect) -> bool {
    let (x0, y0) = (a.0 as f64, a.1 as f64);
    let (dx, dy) = ((b.0 - a.0) as f64, (b.1 - a.1) as f64);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (p, q) in [
        (-dx, x0 - r.0 as f64),
        (dx, r.2 as f64 - x0),
        (-dy, y0 - r.1 as f64),
        (dy, r.3 as f64 - y0),
    ] {
        if p.abs() < f64::EPSILON {
            if q < 0.0 {
                return false;
            }
        } else {
            let t = q / p;
            if p < 0.0 {
                if t > t1 {
                    return false;
                }
                t0 = t0.max(t);
            } else {
                if t < t0 {
                    return false;
                }
                t1 = t1.min(t);
            }
        }
    }
    t0 <= t1
}

/// Whether two boxes overlap.
pub(crate) fn overlaps(a: PxRect, b: PxRect) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// Places boxed labels so that they cover neither each other nor the
/// lines and boxes they are told to avoid: each label takes the first of
/// its candidate anchors whose box is free.
#[derive(Debug, Default)]
pub(crate) struct Placer {
    taken: Vec<PxRect>,
    labels: Vec<PxRect>,
    segments: Vec<((i32, i32), (i32, i32))>,
    bounds: Option<PxRect>,
}

impl Placer {
    /// A placer that keeps labels inside `x0..x1` × `y0..y1` where it can.
    pub fn within(x: std::ops::Range<i32>, y: std::ops::Range<i32>) -> Self {
        Placer {
            taken: Vec::new(),
            labels: Vec::new(),
            segments: Vec::new(),
            bounds: Some((x.start, y.start, x.end, y.end)),
        }
    }

    /// Keeps labels off the box `r`.
    pub fn avoid(&mut self, r: PxRect) {
        self.taken.push(r);
    }

    /// Keeps labels off the polyline through `points`.
    pub fn avoid_path(&mut self, points: &[(i32, i32)]) {
        for w in points.windows(2) {
            if let [a, b] = w {
                self.segments.push((*a, *b));
            }
        }
    }

    /// Whether `b` is inside the bounds and clear of every label, box and
    /// line taken so far.
    pub fn is_free(&self, b: PxRect) -> bool {
        let inside = self
            .bounds
            .is_none_or(|r| b.0 >= r.0 && b.1 >= r.1 && b.2 <= r.2 && b.3 <= r.3);
        inside
            && !self.taken.iter().any(|&t| overlaps(b, t))
            && !self.segments.iter().any(|&(p, q)| segment_hits(p, q, b))
    }

    /// Whether the segment `a`–`b` stays clear of every label placed so
    /// far.
    pub fn segment_is_free(&self, a: (i32, i32), b: (i32, i32)) -> bool {
        !self.labels.iter().any(|&t| segment_hits(a, b, t))
    }

    /// Draws `lines` boxed at the first free candidate `(pos, h, v)` (the
    /// first candidate when none is free); returns the box.
    pub fn place_lines<DB: DrawingBackend>(
        &mut self,
        area: &Area<DB>,
        lines: &[String],
        style: &TextStyle,
        candidates: &[((i32, i32), HPos, VPos)],
    ) -> Result<Option<PxRect>> {
        let Some(&first) = candidates.first() else {
            return Ok(None);
        };
        let chosen = candidates
            .iter()
            .copied()
            .find(|c| self.is_free(block_box(lines, style, c.0, c.1, c.2)))
            .unwrap_or(first);
        let b = boxed_lines(area, lines, style, chosen.0, chosen.1, chosen.2)?;
        self.taken.push(b);
        self.labels.push(b);
        Ok(Some(b))
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
        self.place_lines(area, &[s.to_string()], style, candidates)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_character_and_prefers_commas() {
        let style = font(LABEL_SIZE, INK);
        let s = "max_split_size_mb:512,roundup_power2_divisions:[256:1,512:2,1024:4,>:8]";
        for w in [60, 120, 200, 400, 2000] {
            let lines = wrap_lines(s, &style, w);
            assert_eq!(lines.concat(), s, "width {w}");
            for l in &lines {
                assert!(measure(l, &style).0 <= w.max(measure("W", &style).0), "{l}");
            }
        }
        let lines = wrap_lines(
            "expandable_segments:True,max_split_size_mb:128",
            &style,
            260,
        );
        assert_eq!(
            lines,
            vec!["expandable_segments:True,", "max_split_size_mb:128"]
        );
        assert!(wrap_lines("", &style, 100).is_empty());
    }

    #[test]
    fn dashes_take_turns() {
        let a = dash_path(&[(0, 0), (40, 0)], 5, 5, 0);
        assert_eq!(a[0], vec![(0, 0), (5, 0)]);
        assert_eq!(a.len(), 4);
        let b = dash_path(&[(0, 0), (40, 0)], 5, 5, 5);
        assert_eq!(b[0], vec![(5, 0), (10, 0)]);
        assert!(dash_path(&[(3, 3)], 5, 5, 0).is_empty());
    }

    #[test]
    fn segments_and_boxes() {
        assert!(segment_hits((0, 5), (20, 5), (5, 0, 10, 10)));
        assert!(!segment_hits((0, 15), (20, 15), (5, 0, 10, 10)));
        assert!(segment_hits((0, 0), (20, 20), (5, 0, 10, 10)));
        assert!(!segment_hits((0, 10), (4, 20), (5, 0, 10, 10)));
    }

    #[test]
    fn palette_colours_differ() {
        for i in 0..30 {
            for j in 0..i {
                assert_ne!(series_look(i), series_look(j), "{i} and {j}");
            }
        }
    }
}
