//! Peak reserved as a workload dimension grows.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::timeline::{duplicates, layered_width};
use super::{Axes, Figure, draw_polyline, mesh};
use crate::Result;
use crate::input::FitSweep;
use crate::style::*;
use crate::units::{fmt_count_tick, fmt_int, fmt_tick, format_bytes, unit_for};

/// The fit chart.
pub(crate) struct Fit<'a> {
    pub fit: &'a FitSweep,
}

/// At most `max` of `sizes`, evenly spread, always keeping the first and
/// the last.
fn thin(sizes: &[u64], max: usize) -> Vec<u64> {
    if sizes.len() <= max {
        return sizes.to_vec();
    }
    let step = sizes.len().div_ceil(max);
    let mut out: Vec<u64> = sizes.iter().copied().step_by(step).collect();
    let Some(&last) = sizes.last() else {
        return out;
    };
    if out.last() != Some(&last) {
        if out.len() >= max {
            out.pop();
        }
        out.push(last);
    }
    out
}

impl Figure for Fit<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        let dim = if self.fit.dimension.trim().is_empty() {
            "size"
        } else {
            self.fit.dimension.trim()
        };
        let title = format!("Peak reserved memory vs {dim}");
        if self.fit.points.is_empty() {
            return no_data(root, &title, "no sizes were replayed");
        }
        let groups = self.fit.by_setting();
        let mut sizes: Vec<u64> = self.fit.points.iter().map(|p| p.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let (Some(&lo), Some(&hi)) = (sizes.first(), sizes.last()) else {
            return no_data(root, &title, "no sizes were replayed");
        };
        let log = lo > 0 && hi / lo >= 8;
        let xmap = |s: u64| {
            if log { (s as f64).log2() } else { s as f64 }
        };
        let (x0, x1) = (xmap(lo), xmap(hi));
        let pad = if x1 > x0 { (x1 - x0) * 0.05 } else { 0.5 };
        let data_max = self
            .fit
            .points
            .iter()
            .map(|p| p.peak_reserved)
            .max()
            .unwrap_or(0);
        let cap = self
            .fit
            .capacity
            .filter(|&c| (c as f64) <= (data_max as f64) * 4.0);

        let mut subtitle = "Dots: the workload fits; crosses: out of memory".to_string();
        if log {
            subtitle.push_str(&format!("; {dim} on a log scale"));
        }
        if let Some(c) = self.fit.capacity.filter(|_| cap.is_none()) {
            subtitle.push_str(&format!("; capacity {} (off the scale)", format_bytes(c)));
        }
        let top = frame(root, &title, &subtitle)?;
        let keys: Vec<Vec<(u64, u64, bool)>> = groups
            .iter()
            .map(|(_, pts)| {
                pts.iter()
                    .map(|p| (p.size, p.peak_reserved, p.fits))
                    .collect()
            })
            .collect();
        let dup = duplicates(&groups, &keys);
        let mut items: Vec<LegendItem> = groups
            .iter()
            .zip(&dup)
            .enumerate()
            .map(|(i, ((s, _), d))| {
                let what = match (d, self.fit.largest_fitting(s)) {
                    (Some((_, (first, _))), _) => format!("same as {first}"),
                    (None, Some(v)) => format!("largest that fits: {}", fmt_int(v)),
                    (None, None) => "none fits".to_string(),
                };
                let color = series_color(d.map_or(i, |(j, _)| j));
                LegendItem::new(Swatch::Line(color, 4), format!("{s} ({what})"))
            })
            .collect();
        items.push(LegendItem::new(Swatch::Dot(INK), "fits"));
        items.push(LegendItem::new(Swatch::Cross(INK), "out of memory"));
        if let Some(c) = cap {
            items.push(LegendItem::new(
                Swatch::Dashed(ALERT, 2),
                format!("capacity ({})", format_bytes(c)),
            ));
        }

        let (w, h) = root.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let lh = legend_height(root, &items, w - 48)?;
        let area = root.clone().shrink((0, top), (w, h - top - lh - 4));
        let top_bytes = data_max.max(cap.unwrap_or(0));
        let unit = unit_for(data_max);
        let y_top = unit.of(top_bytes) * 1.1;
        let y_top = if y_top > 0.0 { y_top } else { 1.0 };
        let mut chart = ChartBuilder::on(&area)
            .margin_left(16)
            .margin_right(40)
            .margin_top(8)
            .x_label_area_size(64)
            .y_label_area_size(100)
            .build_cartesian_2d((x0 - pad)..(x1 + pad), 0f64..y_top)?;
        let y_desc = format!("peak reserved ({})", unit.name);
        mesh(
            root,
            &mut chart,
            &Axes {
                x_desc: dim,
                y_desc: &y_desc,
                x_fmt: None,
                y_fmt: &|v| fmt_tick(*v),
                x_grid: false,
            },
        )?;

        // Ticks and grid lines at the replayed sizes.
        let (_, yr) = chart.plotting_area().get_pixel_range();
        let tick_style = font(TICK_SIZE, INK);
        for s in thin(&sizes, 14) {
            let (x, _) = chart.backend_coord(&(xmap(s), 0.0));
            line(root, (x, yr.start), (x, yr.end - 1), stroke(GRID, 1))?;
            line(root, (x, yr.end), (x, yr.end + 5), stroke(MUTED, 1))?;
            text(
                root,
                &fmt_count_tick(s as f64),
                (x, yr.end + 10),
                &tick_style,
                HPos::Center,
                VPos::Top,
            )?;
        }
        if let Some(c) = cap {
            let (xr, _) = chart.plotting_area().get_pixel_range();
            let (_, y) = chart.backend_coord(&(0.0, unit.of(c)));
            dashed(root, (xr.start, y), (xr.end, y), stroke(ALERT, 2), 10, 6)?;
            // Small sizes sit low: the label goes on the left.
            boxed_text(
                root,
                &format!("capacity {}", format_bytes(c)),
                (xr.start + 10, y - 6),
                &font(LABEL_SIZE, ALERT),
                HPos::Left,
                VPos::Bottom,
            )?;
        }
        let n_drawn = dup.iter().filter(|d| d.is_none()).count();
        let mut rank = 0;
        for (i, ((_, pts), d)) in groups.iter().zip(&dup).enumerate() {
            if d.is_some() {
                continue;
            }
            let c = series_color(i);
            let xy: Vec<(f64, f64)> = pts
                .iter()
                .map(|p| (xmap(p.size), unit.of(p.peak_reserved)))
                .collect();
            let width = layered_width(3, rank, n_drawn);
            rank += 1;
            draw_polyline(root, &chart, &xy, stroke(c, width), None)?;
            for (p, q) in pts.iter().zip(&xy) {
                let px = chart.backend_coord(q);
                if p.fits {
                    root.draw(&Circle::new(px, 7, fill(WHITE)))?;
                    root.draw(&Circle::new(px, 5, fill(c)))?;
                } else {
                    root.draw(&Cross::new(px, 8, stroke(WHITE, 6)))?;
                    root.draw(&Cross::new(px, 7, stroke(c, 3)))?;
                }
            }
        }
        draw_legend(root, &items, 24, h - lh - 4, w - 48)
    }
}

#[cfg(test)]
mod tests {
    use super::thin;

    #[test]
    fn thinning_keeps_ends() {
        let v: Vec<u64> = (1..=30).collect();
        let t = thin(&v, 14);
        assert!(t.len() <= 14);
        assert_eq!(t[0], 1);
        assert_eq!(*t.last().unwrap(), 30);
        assert_eq!(thin(&[1, 2, 3], 14), vec![1, 2, 3]);
    }
}
