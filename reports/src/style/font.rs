//! The embedded font (DejaVu Sans), text sizes and styles, and measuring
//! text the way plotters lays it out.

use std::sync::OnceLock;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont};
use plotters::prelude::*;

use super::Area;
use crate::{ReportError, Result};

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

/// The embedded faces, parsed once.
pub(super) fn faces() -> Option<&'static (FontRef<'static>, FontRef<'static>)> {
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
