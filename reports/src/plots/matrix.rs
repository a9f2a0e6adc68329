//! The heatmap of a workload's matrix: a row per variant, a column per
//! allocator setting, each cell coloured by what it saves against the
//! baseline (green: less memory, orange: more), with its peak reserved, the
//! change and the smallest card written in it; cells that do not fit the
//! card are framed in red.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use vramlab_replay::{Matrix, MatrixCell};

use super::{Figure, WIDTH};
use crate::Result;
use crate::style::*;
use crate::units::format_bytes;

/// The heatmap.
pub(crate) struct Heatmap<'a> {
    pub m: &'a Matrix,
}

const SIDE: i32 = 24;
const CELL_H: i32 = 78;
const HEAD_PAD: i32 = 10;
const ROW_LABEL_SHARE: f64 = 0.3;
const LEGEND_H: i32 = 40;

/// The colour of a change: white at 0, green towards 50% saved, orange
/// towards 50% more (red is kept for what does not fit).
fn shade(saved: f64) -> RGBColor {
    let t = (saved.abs() / 0.5).min(1.0);
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * t).round() as u8;
    let (r, g, b) = if saved >= 0.0 {
        (GOOD.0, GOOD.1, GOOD.2)
    } else {
        (PENDING.0, PENDING.1, PENDING.2)
    };
    RGBColor(mix(255, r), mix(255, g), mix(255, b))
}

impl Heatmap<'_> {
    fn title(&self) -> String {
        format!(
            "{} at {} {}, batch {}: peak reserved per variant and allocator setting",
            self.m.preset, self.m.dimension, self.m.size, self.m.batch
        )
    }

    fn subtitle(&self) -> String {
        let card = self.m.capacity.map_or(String::new(), |c| {
            format!(" Framed in red: does not fit {}.", format_bytes(c))
        });
        format!(
            "Change against {} under {}; green saves memory, orange costs more.{card}",
            self.m.baseline_variant, self.m.baseline_setting
        )
    }

    /// Wrapped column labels and their height.
    fn columns(&self, col_w: i32) -> (Vec<Vec<String>>, i32) {
        let style = font(LABEL_SIZE, INK);
        let cols: Vec<Vec<String>> = self
            .m
            .settings
            .iter()
            .map(|s| wrap_lines(s, &style, col_w - 8))
            .collect();
        let lines = cols.iter().map(Vec::len).max().unwrap_or(1) as i32;
        (cols, lines * line_step(&style) + HEAD_PAD)
    }

    fn geometry(&self) -> (i32, i32, i32, i32) {
        let w = WIDTH as i32;
        let label_w = (w as f64 * ROW_LABEL_SHARE) as i32;
        let n = self.m.settings.len().max(1) as i32;
        let col_w = (w - 2 * SIDE - label_w) / n;
        (w, label_w, col_w, self.columns(col_w).1)
    }
}

impl Figure for Heatmap<'_> {
    fn size(&self) -> (u32, u32) {
        let (w, _, _, head) = self.geometry();
        let top = header_height(&self.title(), &self.subtitle(), w);
        let rows = self.m.variants.len().max(1) as i32;
        (WIDTH, (top + head + rows * CELL_H + LEGEND_H + SIDE) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        if self.m.cells.is_empty() {
            return no_data(root, &self.title(), "the matrix has no cells");
        }
        let top = frame(root, &self.title(), &self.subtitle())?;
        let (_, label_w, col_w, head) = self.geometry();
        let (cols, _) = self.columns(col_w);
        let x0 = SIDE + label_w;
        let style = font(LABEL_SIZE, INK);
        let step = line_step(&style);
        for (j, lines) in cols.iter().enumerate() {
            let cx = x0 + j as i32 * col_w + col_w / 2;
            let y = top + head - HEAD_PAD - step * lines.len() as i32;
            for (k, l) in lines.iter().enumerate() {
                text(
                    root,
                    l,
                    (cx, y + k as i32 * step),
                    &style,
                    HPos::Center,
                    VPos::Top,
                )?;
            }
        }
        let y0 = top + head;
        for (i, v) in self.m.variants.iter().enumerate() {
            let y = y0 + i as i32 * CELL_H;
            let lines = wrap_lines(v, &style, label_w - 12);
            let ly = y + CELL_H / 2 - step * lines.len() as i32 / 2;
            for (k, l) in lines.iter().enumerate() {
                text(
                    root,
                    l,
                    (SIDE, ly + k as i32 * step),
                    &style,
                    HPos::Left,
                    VPos::Top,
                )?;
            }
            for (j, s) in self.m.settings.iter().enumerate() {
                if let Some(c) = self.m.cell(v, s) {
                    let x = x0 + j as i32 * col_w;
                    self.cell(root, c, (x, y), (x + col_w, y + CELL_H))?;
                }
            }
        }
        // The grid over the cells.
        let rows = self.m.variants.len() as i32;
        let (x1, y1) = (
            x0 + col_w * self.m.settings.len() as i32,
            y0 + rows * CELL_H,
        );
        for i in 0..=rows {
            line(
                root,
                (x0, y0 + i * CELL_H),
                (x1, y0 + i * CELL_H),
                stroke(WHITE, 2),
            )?;
        }
        for j in 0..=self.m.settings.len() as i32 {
            line(
                root,
                (x0 + j * col_w, y0),
                (x0 + j * col_w, y1),
                stroke(WHITE, 2),
            )?;
        }
        self.legend(root, (x0, y1 + 12))
    }
}

impl Heatmap<'_> {
    fn cell<DB: DrawingBackend>(
        &self,
        root: &Area<DB>,
        c: &MatrixCell,
        a: (i32, i32),
        b: (i32, i32),
    ) -> Result<()> {
        rect(root, a, b, fill(shade(c.saved_vs_baseline)))?;
        let fits = c.fits != Some(false);
        if !fits {
            // A red frame inside the cell's edge, off its text.
            let (x0, y0, x1, y1) = (a.0 + 3, a.1 + 3, b.0 - 3, b.1 - 3);
            for (p, q) in [
                ((x0, y0), (x1, y0)),
                ((x1, y0), (x1, y1)),
                ((x1, y1), (x0, y1)),
                ((x0, y1), (x0, y0)),
            ] {
                line(root, p, q, stroke(ALERT, 3))?;
            }
        }
        let baseline = c.variant == self.m.baseline_variant && c.setting == self.m.baseline_setting;
        let pct = -100.0 * c.saved_vs_baseline;
        let change = if baseline {
            "baseline".to_string()
        } else if pct.abs() < 10.0 {
            format!("{pct:+.1}%")
        } else {
            format!("{pct:+.0}%")
        };
        let lines = [
            (format_bytes(c.peak_reserved_bytes), bold(LABEL_SIZE, INK)),
            (change, font(LABEL_SIZE - 2.0, INK)),
            if fits {
                (
                    c.smallest_gpu.clone().unwrap_or_else(|| "no card".into()),
                    font(LABEL_SIZE - 4.0, MUTED),
                )
            } else {
                ("does not fit".to_string(), bold(LABEL_SIZE - 4.0, INK))
            },
        ];
        let cx = (a.0 + b.0) / 2;
        let mut y = a.1 + 6;
        let width = b.0 - a.0 - 8;
        for (s, st) in &lines {
            // A label wider than its cell is wrapped, never cut.
            for l in wrap_lines(s, st, width) {
                text(root, &l, (cx, y), st, HPos::Center, VPos::Top)?;
                y += line_step(st) - 2;
            }
        }
        Ok(())
    }

    fn legend<DB: DrawingBackend>(&self, root: &Area<DB>, at: (i32, i32)) -> Result<()> {
        let style = font(LABEL_SIZE - 2.0, MUTED);
        let mut x = at.0;
        for (saved, label) in [
            (0.5, "saves 50%"),
            (0.2, "saves 20%"),
            (0.0, "same"),
            (-0.2, "costs 20% more"),
            (-0.5, "costs 50% more"),
        ] {
            rect(root, (x, at.1), (x + 22, at.1 + 22), fill(shade(saved)))?;
            for (p, q) in [
                ((x, at.1), (x + 22, at.1)),
                ((x + 22, at.1), (x + 22, at.1 + 22)),
                ((x + 22, at.1 + 22), (x, at.1 + 22)),
                ((x, at.1 + 22), (x, at.1)),
            ] {
                line(root, p, q, stroke(MUTED, 1))?;
            }
            text(
                root,
                label,
                (x + 28, at.1 + 11),
                &style,
                HPos::Left,
                VPos::Center,
            )?;
            x += 28 + measure(label, &style).0 + 24;
        }
        Ok(())
    }
}
