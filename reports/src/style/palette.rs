//! Colours: one per meaning (ink, grid, alerts, block states) and one per
//! setting, with dash patterns once the palette is used up.

use plotters::prelude::*;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palette_colours_differ() {
        for i in 0..30 {
            for j in 0..i {
                assert_ne!(series_look(i), series_look(j), "{i} and {j}");
            }
        }
    }
}
