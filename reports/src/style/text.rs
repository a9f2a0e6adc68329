//! Drawing text: through plotters for SVG, glyph by glyph for bitmaps.

use std::cell::Cell;

use ab_glyph::{Font, PxScale, ScaleFont, point};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::Area;
use super::font::{faces, text_size};
use crate::Result;

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
    pub(crate) fn start() -> Self {
        RASTER.with(|r| r.set(true));
        RasterGuard(())
    }
}

impl Drop for RasterGuard {
    fn drop(&mut self) {
        RASTER.with(|r| r.set(false));
    }
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
