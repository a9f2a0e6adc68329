//! Labels on opaque white boxes (for text on top of data): the box a
//! block of lines takes, and drawing it.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::Area;
use super::font::measure;
use super::text::text;
use crate::Result;

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
