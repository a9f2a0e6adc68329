//! The smallest card each setting fits on: minimum capacity per setting
//! against the usable memory of named cards.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use vramlab_replay::OomPoint;
use vramlab_replay::gpus::{GPUS, Gpu, smallest_gpu_for};
use vramlab_traces::advice::Cmd;

use super::{
    Categories, LINE_H, MARGIN_LEFT, MARGIN_RIGHT, Stack, Wordings, Y_LABEL_AREA, axis_top,
    bar_chart, draw_stack, draw_value_axis, slot_width, stack_bottom, stack_height, stack_lines,
};
use crate::Result;
use crate::plots::{Chart2d, Figure, WIDTH};
use crate::style::*;
use crate::units::{Unit, format_bytes, unit_for};

/// Minimum capacity per setting against the usable memory of named cards.
pub(crate) struct OomPoints<'a> {
    pub points: &'a [OomPoint],
}

/// `name · usable` of a card (or of several with about the same memory).
fn card_label(names: &[&str], usable: u64) -> String {
    format!("{} · {}", names.join(" / "), format_bytes(usable))
}

/// Cards with about the same usable memory (within 1.5% of the smallest
/// of them) as one line: its memory (the smallest) and the names. `cards`
/// are sorted by usable memory.
fn merge_cards(cards: &[&'static Gpu]) -> Vec<(u64, Vec<&'static str>)> {
    let mut out: Vec<(u64, Vec<&str>)> = Vec::new();
    for g in cards {
        let usable = g.usable_bytes();
        match out.last_mut() {
            Some((first, names)) if (usable as f64) <= (*first as f64) * 1.015 => {
                names.push(g.name)
            }
            _ => out.push((usable, vec![g.name])),
        }
    }
    out
}

/// The named cards around the bars: the largest one below the smallest
/// bar, every one between, and the smallest that holds the largest bar
/// (`smallest_gpu_for`), by usable memory.
fn bracketing_cards(min_bar: u64, max_bar: u64) -> Vec<&'static Gpu> {
    let below = GPUS
        .iter()
        .filter(|g| g.usable_bytes() < min_bar)
        .map(Gpu::usable_bytes)
        .max()
        .unwrap_or(0);
    let above = smallest_gpu_for(max_bar).map_or(u64::MAX, Gpu::usable_bytes);
    let mut cards: Vec<&Gpu> = GPUS
        .iter()
        .filter(|g| g.usable_bytes() >= below.max(1) && g.usable_bytes() <= above)
        .collect();
    cards.sort_by_key(|g| (g.usable_bytes(), g.name));
    cards
}

impl OomPoints<'_> {
    fn categories(&self, right: i32) -> Categories {
        let labels: Vec<&str> = self.points.iter().map(|q| q.setting.as_str()).collect();
        Categories::new(&labels, WIDTH as i32 - MARGIN_LEFT - Y_LABEL_AREA - right)
    }

    /// The named cards drawn (those around the bars that are on the
    /// scale) and the top of the data the scale must show.
    fn cards_on_scale(&self) -> (Vec<&'static Gpu>, u64) {
        let data_max = self.data_max();
        let (min_bar, max_bar) = self.bar_range();
        // The card that holds every setting is drawn when it does not
        // squash the bars.
        let top_bytes = match smallest_gpu_for(max_bar) {
            Some(g) if (g.usable_bytes() as f64) <= (data_max as f64) * 3.0 => {
                g.usable_bytes().max(data_max)
            }
            _ => data_max,
        };
        let cards = bracketing_cards(min_bar, max_bar)
            .into_iter()
            .filter(|g| g.usable_bytes() <= top_bytes)
            .collect();
        (cards, top_bytes)
    }

    /// Width of the right margin, where the card labels go.
    fn right_margin(&self) -> i32 {
        let style = bold(LABEL_SIZE, MUTED);
        let (cards, _) = self.cards_on_scale();
        if cards.is_empty() {
            return MARGIN_RIGHT;
        }
        merge_cards(&cards)
            .iter()
            .map(|(usable, names)| measure(&card_label(names, *usable), &style).0 + 24)
            .max()
            .unwrap_or(0)
            .clamp(90, 420)
    }

    /// The smallest and the largest minimum capacity.
    fn bar_range(&self) -> (u64, u64) {
        let min = self
            .points
            .iter()
            .map(|q| q.min_capacity)
            .min()
            .unwrap_or(0);
        let max = self
            .points
            .iter()
            .map(|q| q.min_capacity)
            .max()
            .unwrap_or(0);
        (min, max)
    }

    /// The subtitle: what the bars are, and the named card every setting
    /// fits on when it is off the scale (or that none does).
    fn subtitle(&self, top_bytes: u64) -> String {
        let (_, max_bar) = self.bar_range();
        let fits_all = smallest_gpu_for(max_bar);
        let mut subtitle =
            "Minimum device capacity at which the whole trace replays without OOM".to_string();
        let smallest = GPUS.iter().min_by_key(|g| (g.usable_bytes(), g.name));
        let largest = GPUS.iter().max_by_key(|g| (g.usable_bytes(), g.name));
        match (fits_all, smallest, largest) {
            (Some(g), Some(s), _) if g == s && g.usable_bytes() > top_bytes => {
                subtitle.push_str(&format!(
                    "; all fit on the smallest listed card, {} ({} usable)",
                    g.name,
                    format_bytes(g.usable_bytes())
                ))
            }
            (Some(g), _, _) if g.usable_bytes() > top_bytes => subtitle.push_str(&format!(
                "; all fit on {} ({} usable, off the scale)",
                g.name,
                format_bytes(g.usable_bytes())
            )),
            (None, _, Some(l)) => subtitle.push_str(&format!(
                "; more than the largest listed card, {} ({} usable)",
                l.name,
                format_bytes(l.usable_bytes())
            )),
            _ => {}
        }
        subtitle
    }

    /// The legend: the bars, the lower bound and, with `cards`, the named
    /// cards' lines.
    fn legend_items(&self, cards: bool) -> Vec<LegendItem> {
        let p = self.points;
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
        if cards {
            items.push(LegendItem::new(
                Swatch::Dashed(MUTED, 2),
                format!("usable memory of named GPUs ({})", Cmd::Gpus.alone()),
            ));
        }
        items
    }

    /// The value labels of every bar for slots `slot` pixels wide.
    fn stacks(&self, slot: i32) -> Vec<Stack> {
        // "fits CARD" under each value only says something when not every
        // setting fits on the smallest card.
        let (_, max_bar) = self.bar_range();
        let smallest = GPUS.iter().min_by_key(|g| (g.usable_bytes(), g.name));
        let show_fits = smallest.is_some_and(|s| max_bar > s.usable_bytes());
        self.points
            .iter()
            .map(|q| stack_lines(&oom_value_lines(q, show_fits), slot))
            .collect()
    }

    /// The top of the value axis: room for every bar's value labels above
    /// it, its lower bound and the named cards' lines, and the card that
    /// holds every setting on the scale.
    fn axis_top(
        &self,
        on_scale: &[&Gpu],
        top_bytes: u64,
        unit: Unit,
        stacks: &[Stack],
        plot_h: i32,
    ) -> f64 {
        let across: Vec<f64> = on_scale.iter().map(|g| unit.of(g.usable_bytes())).collect();
        let bars: Vec<(f64, i32, Vec<f64>)> = self
            .points
            .iter()
            .zip(stacks)
            .map(|(q, st)| {
                (
                    unit.of(q.min_capacity.max(q.lower_bound)),
                    stack_height(st.len()),
                    vec![unit.of(q.lower_bound)],
                )
            })
            .collect();
        axis_top(
            &bars,
            &across,
            plot_h,
            unit.of(top_bytes.max(self.data_max())),
        )
    }

    /// The top of the data: the largest minimum capacity or lower bound.
    fn data_max(&self) -> u64 {
        self.points
            .iter()
            .map(|q| q.min_capacity.max(q.lower_bound))
            .max()
            .unwrap_or(0)
    }

    /// Draws each bar (the lowest in green) with its lower-bound tick and
    /// its value labels, lifted over the lines `line_px` (pixel rows) and
    /// its own tick.
    fn draw_bars<DB: DrawingBackend>(
        &self,
        root: &Area<DB>,
        chart: &Chart2d<'_, DB>,
        unit: Unit,
        stacks: &[Stack],
        line_px: &[i32],
    ) -> Result<()> {
        let best = self.bar_range().0;
        for ((i, q), lines) in self.points.iter().enumerate().zip(stacks) {
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
            let mut near = line_px.to_vec();
            near.push(ly);
            let bar_top = b.1.min(ly);
            let bottom = stack_bottom(bar_top, stack_height(lines.len()), &near);
            draw_stack(root, (a.0 + b.0) / 2, bar_top, bottom, lines)?;
        }
        Ok(())
    }
}

/// Draws the usable memory of the cards `on_scale` as dashed lines across
/// the plot, labelled in the right margin; returns their pixel rows.
///
/// Cards with about the same memory (within 1.5%) share one line, at the
/// smaller one's memory, and one label; labels closer than their height
/// are moved apart, with a tick from the line to the label. Lines on the
/// axis are left out.
fn draw_card_lines<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    unit: Unit,
    on_scale: &[&'static Gpu],
) -> Result<Vec<i32>> {
    let (xr, _) = chart.plotting_area().get_pixel_range();
    let (_, y_axis) = chart.backend_coord(&(0.0, 0.0));
    let groups: Vec<(i32, u64, Vec<&str>)> = merge_cards(on_scale)
        .into_iter()
        .map(|(usable, names)| {
            (
                chart.backend_coord(&(0.0, unit.of(usable))).1,
                usable,
                names,
            )
        })
        .filter(|(y, _, _)| y_axis - y >= 6)
        .collect();
    let label_ys = spread(
        &groups.iter().map(|(y, _, _)| *y).collect::<Vec<_>>(),
        LINE_H,
    );
    let mut line_px = Vec::new();
    for ((y, usable, names), ly) in groups.iter().zip(label_ys) {
        dashed(root, (xr.start, *y), (xr.end, *y), stroke(MUTED, 2), 8, 6)?;
        line_px.push(*y);
        if ly != *y {
            line(root, (xr.end, *y), (xr.end + 6, ly), stroke(MUTED, 1))?;
        }
        text(
            root,
            &card_label(names, *usable),
            (xr.end + 10, ly),
            &bold(LABEL_SIZE, MUTED),
            HPos::Left,
            VPos::Center,
        )?;
    }
    Ok(line_px)
}

impl Figure for OomPoints<'_> {
    fn size(&self) -> (u32, u32) {
        self.categories(self.right_margin()).picture_size()
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        let title = "Smallest card each setting fits on";
        let p = self.points;
        if p.is_empty() {
            return no_data(root, title, "no OOM points were searched");
        }
        let (on_scale, top_bytes) = self.cards_on_scale();
        let top = frame(root, title, &self.subtitle(top_bytes))?;
        let items = self.legend_items(!on_scale.is_empty());
        let unit = unit_for(self.data_max());
        let (w, h) = root.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let right = self.right_margin();
        let plot_w = w - MARGIN_LEFT - Y_LABEL_AREA - right;
        let cats = self.categories(right);
        let label_h = cats.band();
        let stacks = self.stacks(slot_width(plot_w, p.len()));
        let lh = legend_height(root, &items, w - 48)?;
        let plot_h = h - top - lh - 4 - 8 - label_h;
        let y_top = self.axis_top(&on_scale, top_bytes, unit, &stacks, plot_h);
        let area = root.clone().shrink((0, top), (w, h - top - lh - 4));
        let mut chart = bar_chart(&area, p.len(), right, label_h, y_top)?;
        draw_value_axis(
            root,
            &mut chart,
            &format!("minimum capacity ({})", unit.name),
        )?;
        let line_px = draw_card_lines(root, &chart, unit, &on_scale)?;
        self.draw_bars(root, &chart, unit, &stacks, &line_px)?;
        cats.draw(root, &chart)?;
        draw_legend(root, &items, 24, h - lh - 4, w - 48)
    }
}

/// Label rows for lines at pixel rows `ys` (lowest line first, so rows
/// decrease): each label at its line unless that is closer than `gap` to
/// the label below it, then `gap` above that label.
fn spread(ys: &[i32], gap: i32) -> Vec<i32> {
    let mut out: Vec<i32> = Vec::with_capacity(ys.len());
    for &y in ys {
        let y = match out.last() {
            Some(&below) => y.min(below - gap),
            None => y,
        };
        out.push(y);
    }
    out
}

/// The value labels of an OOM point's bar: the minimum capacity, how far
/// over the lower bound it is and, with `show_fits`, the smallest named
/// card it fits on.
fn oom_value_lines(q: &OomPoint, show_fits: bool) -> Vec<Wordings> {
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
            match smallest_gpu_for(q.min_capacity) {
                Some(g) => vec![format!("fits {}", g.name), g.name.to_string()],
                None => vec!["fits no listed card".to_string(), "too big".to_string()],
            },
            font(LABEL_SIZE, MUTED),
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_labels_keep_apart() {
        assert_eq!(spread(&[300, 290, 200, 195], 22), [300, 278, 200, 178]);
        assert_eq!(spread(&[], 22), Vec::<i32>::new());
    }

    #[test]
    fn cards_bracket_the_bars() {
        let gib = 1u64 << 30;
        let names = |c: Vec<&Gpu>| c.iter().map(|g| g.name).collect::<Vec<_>>();
        // 75.2–75.8 GiB: the L40S below, the H100 80 GB above.
        assert_eq!(
            names(bracketing_cards(75 * gib + gib / 5, 76 * gib)),
            ["l40s", "h100-80gb"]
        );
        // 20–23 GiB: from the V100 16 GB up to the RTX 4090 (A10G and L4
        // between).
        assert_eq!(
            names(bracketing_cards(20 * gib, 23 * gib)),
            ["v100-16gb", "a10g", "l4", "rtx4090"]
        );
        // 1 GiB: nothing below, the T4 above.
        assert_eq!(names(bracketing_cards(gib, gib)), ["t4"]);
        // More than any card: the largest below only.
        assert_eq!(names(bracketing_cards(500 * gib, 500 * gib)), ["h200"]);
    }
}
