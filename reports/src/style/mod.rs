//! Look and feel shared by every plot: the embedded font, colours, titles,
//! legends, the "no data" placeholder and small drawing helpers.
//!
//! * [`palette`](mod@palette): the colours, one per setting and one per meaning;
//! * [`font`](mod@font): the embedded font, text styles and text measuring;
//! * [`text`](mod@text): drawing text (bitmaps rasterised glyph by glyph);
//! * [`labels`](mod@labels): labels on opaque white boxes;
//! * [`shapes`](mod@shapes): line and fill styles, lines, dashes, rectangles, hatching;
//! * [`wrap`](mod@wrap): breaking text into lines that fit a width;
//! * [`legend`](mod@legend): legends and their swatches;
//! * [`frame`](mod@frame): the title and subtitle, the "no data" placeholder;
//! * [`placement`](mod@placement): placing labels off lines, boxes and each other.

use plotters::coord::Shift;
use plotters::prelude::DrawingArea;

mod font;
mod frame;
mod labels;
mod legend;
mod palette;
mod placement;
mod shapes;
mod text;
mod wrap;

pub(crate) use font::{
    AXIS_DESC_SIZE, LABEL_SIZE, TICK_SIZE, bold, ensure_fonts, font, measure, text_size,
};
pub(crate) use frame::{frame, header_height, no_data};
pub(crate) use labels::{PxRect, block_box, boxed_text, line_step};
pub(crate) use legend::{
    LegendItem, Swatch, draw_legend, legend_height, legend_height_for, series_swatch,
};
pub(crate) use palette::{
    ALERT, ALLOCATED, FREE, GOOD, GRID, INK, MUTED, PENDING, SeriesLook, WASTE, series_color,
    series_look,
};
pub(crate) use placement::Placer;
pub(crate) use shapes::{dash_path, dashed, fill, hatch, line, rect, stroke};
pub(crate) use text::{RasterGuard, text};
pub(crate) use wrap::{widest_word, wrap_lines};

/// The drawing area every plot draws on.
pub(crate) type Area<DB> = DrawingArea<DB, Shift>;
