//! Peak reserved per setting: bars split into what was allocated at the
//! peak and the waste, against the live-bytes lower bound and the
//! capacity.

use plotters::prelude::*;

use super::{
    Categories, MARGIN_LEFT, MARGIN_RIGHT, Stack, Wordings, Y_LABEL_AREA, axis_top, bar_chart,
    draw_stack, draw_value_axis, slot_width, stack_bottom, stack_height, stack_lines,
};
use crate::Result;
use crate::input::SettingRun;
use crate::plots::{Chart2d, Figure, WIDTH};
use crate::style::*;
use crate::units::{Unit, fmt_int, format_bytes, unit_for};

/// Peak reserved per setting.
pub(crate) struct PeakReserved<'a> {
    pub settings: &'a [SettingRun],
    pub capacity: Option<u64>,
}

/// The lines across the bars and the top of the data.
struct ReferenceLines {
    /// The live-bytes lower bound.
    lower: u64,
    /// Its legend entry.
    lower_label: String,
    /// The largest peak reserved or the lower bound, whichever is larger.
    data_max: u64,
    /// The capacity, when it is on the scale.
    cap: Option<u64>,
}

impl PeakReserved<'_> {
    fn categories(&self) -> Categories {
        let labels: Vec<&str> = self.settings.iter().map(|r| r.label.as_str()).collect();
        Categories::new(
            &labels,
            WIDTH as i32 - MARGIN_LEFT - Y_LABEL_AREA - MARGIN_RIGHT,
        )
    }

    /// The lower bound, the top of the data and the capacity when it does
    /// not squash the bars.
    fn reference_lines(&self) -> ReferenceLines {
        let s = self.settings;
        // A replay that ended at an OOM saw only part of the trace: the
        // lower bound comes from the complete ones when there are any.
        let complete = s.iter().any(|r| r.run.oom.is_none());
        let lower = s
            .iter()
            .filter(|r| r.run.oom.is_none() || !complete)
            .map(|r| r.run.summary.peak_requested_bytes)
            .max()
            .unwrap_or(0);
        let lower_label = if complete {
            format!("live-bytes lower bound ({})", format_bytes(lower))
        } else {
            format!("peak live bytes before the OOMs ({})", format_bytes(lower))
        };
        let data_max = s
            .iter()
            .map(|r| r.run.summary.peak_reserved_bytes)
            .max()
            .unwrap_or(0)
            .max(lower);
        let cap = self
            .capacity
            .filter(|&c| (c as f64) <= (data_max as f64) * 1.6);
        ReferenceLines {
            lower,
            lower_label,
            data_max,
            cap,
        }
    }

    /// The subtitle: what the bars are made of, and the capacity when it
    /// is off the scale.
    fn subtitle(&self, cap: Option<u64>) -> String {
        let mut subtitle =
            "Peak reserved = allocated at the peak + waste at the peak (reserved but unallocated)"
                .to_string();
        if let Some(c) = self.capacity.filter(|_| cap.is_none()) {
            subtitle = format!("{subtitle}; capacity {} (off the scale)", format_bytes(c));
        }
        subtitle
    }

    /// The top of the value axis: room for every bar's value labels above
    /// it and above the lines across the plot.
    fn axis_top(&self, refs: &ReferenceLines, unit: Unit, stacks: &[Stack], plot_h: i32) -> f64 {
        let mut across = vec![unit.of(refs.lower)];
        across.extend(refs.cap.map(|c| unit.of(c)));
        let bars: Vec<(f64, i32, Vec<f64>)> = self
            .settings
            .iter()
            .zip(stacks)
            .map(|(r, st)| {
                (
                    unit.of(r.run.summary.peak_reserved_bytes),
                    stack_height(st.len()),
                    Vec::new(),
                )
            })
            .collect();
        axis_top(
            &bars,
            &across,
            plot_h,
            unit.of(refs.lower.max(refs.cap.unwrap_or(0))),
        )
    }

    /// Draws each setting's bar: the allocated part filled, the waste
    /// hatched above it; returns the top centre of each bar in pixels.
    fn draw_bars<DB: DrawingBackend>(
        &self,
        root: &Area<DB>,
        chart: &Chart2d<'_, DB>,
        unit: Unit,
    ) -> Result<Vec<(i32, i32)>> {
        let mut tops = Vec::with_capacity(self.settings.len());
        for (i, r) in self.settings.iter().enumerate() {
            let sm = &r.run.summary;
            let reserved = sm.peak_reserved_bytes;
            let waste = sm.waste_at_peak_bytes.min(reserved);
            let used = reserved - waste;
            let x = i as f64;
            let a = chart.backend_coord(&(x + 0.2, 0.0));
            let b = chart.backend_coord(&(x + 0.8, unit.of(used)));
            let c = chart.backend_coord(&(x + 0.8, unit.of(reserved)));
            rect(root, a, b, fill(ALLOCATED))?;
            if c.1 < b.1 {
                rect(root, (a.0, b.1), c, fill(WASTE_FILL))?;
                hatch(root, (a.0, b.1), c, WASTE, 7)?;
            }
            rect(root, a, c, stroke(INK, 1))?;
            tops.push(((a.0 + c.0) / 2, c.1));
        }
        Ok(tops)
    }
}

impl ReferenceLines {
    /// The legend: the parts of a bar, the lower bound and the capacity.
    fn legend_items(&self) -> Vec<LegendItem> {
        let mut items = vec![
            LegendItem::new(Swatch::Box(ALLOCATED), "allocated at peak"),
            LegendItem::new(Swatch::Hatch(WASTE_FILL, WASTE), "waste at peak"),
            LegendItem::new(Swatch::Dashed(INK, 2), self.lower_label.clone()),
        ];
        if let Some(c) = self.cap {
            items.push(LegendItem::new(
                Swatch::Dashed(ALERT, 2),
                format!("capacity ({})", format_bytes(c)),
            ));
        }
        items
    }

    /// Draws the lower bound and the capacity across the plot; returns
    /// their pixel rows.
    fn draw_reference_lines<DB: DrawingBackend>(
        &self,
        root: &Area<DB>,
        chart: &Chart2d<'_, DB>,
        unit: Unit,
    ) -> Result<Vec<i32>> {
        let (xr, _) = chart.plotting_area().get_pixel_range();
        let mut line_px = Vec::new();
        let (_, ly) = chart.backend_coord(&(0.0, unit.of(self.lower)));
        dashed(root, (xr.start, ly), (xr.end, ly), stroke(INK, 2), 10, 6)?;
        line_px.push(ly);
        if let Some(c) = self.cap {
            let (_, y) = chart.backend_coord(&(0.0, unit.of(c)));
            dashed(root, (xr.start, y), (xr.end, y), stroke(ALERT, 2), 10, 6)?;
            line_px.push(y);
        }
        Ok(line_px)
    }
}

impl Figure for PeakReserved<'_> {
    fn size(&self) -> (u32, u32) {
        self.categories().picture_size()
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        let title = "Peak reserved memory per setting";
        let s = self.settings;
        if s.is_empty() {
            return no_data(root, title, "no settings to compare");
        }
        let refs = self.reference_lines();
        let top = frame(root, title, &self.subtitle(refs.cap))?;
        let items = refs.legend_items();
        let (w, h) = root.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let lh = legend_height(root, &items, w - 48)?;
        let plot_w = w - MARGIN_LEFT - Y_LABEL_AREA - MARGIN_RIGHT;
        let cats = self.categories();
        let label_h = cats.band();

        let area = root.clone().shrink((0, top), (w, h - top - lh - 4));
        let unit = unit_for(refs.data_max);
        let plot_h = h - top - lh - 4 - 8 - label_h;
        let slot = slot_width(plot_w, s.len());
        let stacks: Vec<Stack> = s
            .iter()
            .map(|r| stack_lines(&value_lines(r), slot))
            .collect();
        let y_top = self.axis_top(&refs, unit, &stacks, plot_h);
        let mut chart = bar_chart(&area, s.len(), MARGIN_RIGHT, label_h, y_top)?;
        draw_value_axis(root, &mut chart, &format!("peak reserved ({})", unit.name))?;

        let tops = self.draw_bars(root, &chart, unit)?;
        // Reference lines over the bars, value labels over everything,
        // lifted above any line that would run through them.
        let line_px = refs.draw_reference_lines(root, &chart, unit)?;
        for (&(cx, bar_top), lines) in tops.iter().zip(&stacks) {
            let bottom = stack_bottom(bar_top, stack_height(lines.len()), &line_px);
            draw_stack(root, cx, bar_top, bottom, lines)?;
        }
        cats.draw(root, &chart)?;
        draw_legend(root, &items, 24, h - lh - 4, w - 48)
    }
}

/// The value labels of a setting's bar: its peak reserved, the waste,
/// and the OOM when there was one.
fn value_lines(r: &SettingRun) -> Vec<Wordings> {
    let reserved = r.run.summary.peak_reserved_bytes;
    let waste = r.run.summary.waste_at_peak_bytes.min(reserved);
    let pct = if reserved > 0 {
        waste as f64 / reserved as f64
    } else {
        0.0
    };
    let mut lines = vec![
        (vec![format_bytes(reserved)], bold(LABEL_SIZE, INK)),
        (
            vec![
                format!("waste {} ({:.1}%)", format_bytes(waste), pct * 100.0),
                format!("waste {}", format_bytes(waste)),
                format_bytes(waste),
            ],
            font(LABEL_SIZE, WASTE_TEXT),
        ),
    ];
    if let Some(o) = &r.run.oom {
        lines.insert(
            0,
            (
                vec![
                    format!("OOM at event {}", fmt_int(o.event_index)),
                    format!("OOM at {}", fmt_int(o.event_index)),
                    "OOM".to_string(),
                ],
                bold(LABEL_SIZE, ALERT),
            ),
        );
    }
    lines
}

/// Light fill behind the waste hatching.
const WASTE_FILL: RGBColor = RGBColor(250, 214, 214);
/// Dark red for waste labels.
const WASTE_TEXT: RGBColor = RGBColor(170, 45, 48);
