//! The frame of every picture: background, title and subtitle, and the
//! "no data" placeholder.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::Area;
use super::font::{SUBTITLE_SIZE, TITLE_SIZE, bold, font};
use super::palette::{INK, MUTED};
use super::shapes::{dashed, fill, rect, stroke};
use super::text::text;
use super::wrap::wrap_lines;
use crate::Result;

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
