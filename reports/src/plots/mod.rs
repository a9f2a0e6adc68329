//! The plots. Each one is a [`Figure`] drawn twice, to PNG and to SVG.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use vramlab_allocator::SegmentView;
use vramlab_replay::OomPoint;

use crate::input::{FitChart, SettingRun};
use crate::style::{Area, ensure_fonts};
use crate::{ReportError, Result};

mod bars;
mod colocation;
mod fit;
mod matrix;
mod segments;
mod timeline;

/// Default picture size in pixels.
pub(crate) const WIDTH: u32 = 1200;
/// Default picture height in pixels.
pub(crate) const HEIGHT: u32 = 700;

/// The two files a plot was written to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlotFiles {
    /// `BASE.png`.
    pub png: PathBuf,
    /// `BASE.svg`.
    pub svg: PathBuf,
}

/// Something that can draw itself on any plotters backend.
pub(crate) trait Figure {
    /// Picture size in pixels.
    fn size(&self) -> (u32, u32) {
        (WIDTH, HEIGHT)
    }

    /// Draws the whole picture on `root`.
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()>;
}

/// `base` with `.ext` appended (`out/timeline` → `out/timeline.png`; a dot
/// already in the name is kept).
fn with_ext(base: &Path, ext: &str) -> PathBuf {
    let mut s = OsString::from(base.as_os_str());
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
    move |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Renders `fig` to SVG text.
pub(crate) fn render_svg<F: Figure>(fig: &F) -> Result<String> {
    ensure_fonts()?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, fig.size()).into_drawing_area();
        fig.draw(&root)?;
        root.present()?;
    }
    Ok(svg)
}

/// Renders `fig` to `BASE.png` and `BASE.svg`.
pub(crate) fn render<F: Figure>(base: &Path, fig: &F) -> Result<PlotFiles> {
    ensure_fonts()?;
    if let Some(parent) = base.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    let png = with_ext(base, "png");
    let svg = with_ext(base, "svg");
    let size = fig.size();
    let mut rgb = crate::png::rgb_buffer(size);
    {
        let _raster = crate::style::RasterGuard::start();
        let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
        fig.draw(&root)?;
        root.present()?;
    }
    crate::png::write_rgb(&png, &rgb, size)?;
    let text = render_svg(fig)?;
    fs::write(&svg, text).map_err(io_err(&svg))?;
    Ok(PlotFiles { png, svg })
}

/// Allocated vs reserved bytes over the trace, one colour per setting
/// (solid: reserved, dashed: allocated), the live (requested) bytes as a
/// thin black line, OOMs marked, and `capacity` as a horizontal line when it
/// is on the scale. Writes `out.png` and `out.svg`.
pub fn plot_memory_timeline(
    out: &Path,
    settings: &[SettingRun],
    capacity: Option<u64>,
) -> Result<PlotFiles> {
    render(out, &timeline::Timeline { settings, capacity })
}

/// External fragmentation (1 − largest free block / free cached bytes) over
/// the trace, one line per setting. Writes `out.png` and `out.svg`.
pub fn plot_external_fragmentation(out: &Path, settings: &[SettingRun]) -> Result<PlotFiles> {
    render(out, &timeline::Fragmentation { settings })
}

/// Peak reserved bytes per setting as bars split into the part allocated
/// at the peak and the waste at the peak (hatched), labelled with their
/// values, against the live-bytes lower bound and `capacity` (when on the
/// scale). Writes `out.png` and `out.svg`.
pub fn plot_peak_reserved(
    out: &Path,
    settings: &[SettingRun],
    capacity: Option<u64>,
) -> Result<PlotFiles> {
    render(out, &bars::PeakReserved { settings, capacity })
}

/// The minimum capacity (OOM point) per setting as bars, with each
/// setting's live-bytes lower bound, and the usable memory of the named
/// cards of [`vramlab_replay::gpus::GPUS`] around the bars (the largest one
/// below the smallest bar, those between, the smallest that holds every
/// bar) as labelled reference lines; each bar says the smallest card it
/// fits on ([`vramlab_replay::gpus::smallest_gpu_for`]). Writes `out.png`
/// and `out.svg`.
pub fn plot_oom_points(out: &Path, points: &[OomPoint]) -> Result<PlotFiles> {
    render(out, &bars::OomPoints { points })
}

/// Peak reserved bytes against the workload's varied size, one line per
/// setting (dots: fits, crosses: OOM), with the capacity as a horizontal
/// line. Writes `out.png` and `out.svg`.
pub fn plot_fit(out: &Path, fit: &FitChart) -> Result<PlotFiles> {
    render(out, &fit::Fit { fit, order: &[] })
}

/// [`plot_fit`] with the settings coloured as in the report's other plots:
/// a setting's colour is its index in `order` (the report's settings).
pub(crate) fn plot_fit_ordered(out: &Path, fit: &FitChart, order: &[String]) -> Result<PlotFiles> {
    render(out, &fit::Fit { fit, order })
}

/// A map of the allocator's segments: each segment a horizontal bar scaled
/// by its size, its blocks coloured by state (allocated, pending free,
/// free), largest first. Up to 40 segments get one labelled row each; more
/// are packed into rows of equal byte width. The picture grows taller with
/// the number of rows. Writes `out.png` and `out.svg`.
pub fn plot_segment_map(out: &Path, title: &str, segments: &[SegmentView]) -> Result<PlotFiles> {
    render(out, &segments::SegmentMap::new(title, segments))
}

/// A workload's matrix as a heatmap: a row per variant, a column per
/// allocator setting, each cell coloured by the change of peak reserved
/// against the baseline and labelled with its peak, the change and the
/// smallest card; cells that do not fit the card framed in red. Writes
/// `out.png` and `out.svg`.
pub fn plot_matrix(out: &Path, m: &vramlab_replay::Matrix) -> Result<PlotFiles> {
    render(out, &matrix::Heatmap { m })
}

/// Several tenants on one GPU over the steps of a colocated replay
/// (`vramlab colocate`): what each holds on the device after each step.
#[derive(Debug, Clone, PartialEq)]
pub struct ColocationChart {
    /// The plot's title.
    pub title: String,
    /// The device's memory in bytes (drawn as a horizontal limit line).
    pub capacity: u64,
    /// The tenants' names, in stacking order (bottom first).
    pub tenants: Vec<String>,
    /// The steps, in order.
    pub steps: Vec<ColocationStep>,
}

/// One step of a colocated replay.
#[derive(Debug, Clone, PartialEq)]
pub struct ColocationStep {
    /// What ran: `tenant: phase` (e.g. `rollout: generate`).
    pub label: String,
    /// Each tenant's bytes on the device after the step, in the order of
    /// `ColocationChart::tenants`.
    pub held: Vec<u64>,
    /// The peak of the device's used bytes during the step.
    pub device_peak: u64,
    /// The tenant that ran out of memory during this step, if one did.
    pub oom: Option<String>,
}

/// Several tenants on one GPU over the steps of a colocated replay: one
/// bar per step, each tenant's bytes after the step stacked in its colour
/// (bottom first, in the order of [`ColocationChart::tenants`]), the
/// device's peak during the step as a black tick, the capacity as a
/// dashed red line (none when it is 0), and a step where a tenant ran out
/// of memory shaded and marked `OOM: NAME`. Steps are numbered from 1 and
/// labelled with what ran (every k-th step when there are too many to
/// label each). Writes `out.png` and `out.svg`.
pub fn plot_colocation(out: &Path, chart: &ColocationChart) -> Result<PlotFiles> {
    render(out, &colocation::Colocation { chart })
}

/// A chart over `f64 × f64`.
pub(crate) type Chart2d<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The chart of a line plot (timeline, fragmentation, fit) on `area`:
/// `x` across, 0 to `y_top` up, with room for tick labels and axis
/// descriptions on the left and below.
pub(crate) fn line_chart<DB: DrawingBackend>(
    area: &Area<DB>,
    x: std::ops::Range<f64>,
    y_top: f64,
) -> Result<Chart2d<'_, DB>> {
    let chart = ChartBuilder::on(area)
        .margin_left(16)
        .margin_right(40)
        .margin_top(8)
        .x_label_area_size(64)
        .y_label_area_size(100)
        .build_cartesian_2d(x, 0f64..y_top)?;
    Ok(chart)
}

/// Axis descriptions and tick formatters of a chart.
pub(crate) struct Axes<'f> {
    /// X axis description.
    pub x_desc: &'f str,
    /// Y axis description.
    pub y_desc: &'f str,
    /// X tick formatter (`None`: no x tick labels).
    pub x_fmt: Option<&'f dyn Fn(&f64) -> String>,
    /// Y tick formatter.
    pub y_fmt: &'f dyn Fn(&f64) -> String,
    /// Draw vertical grid lines.
    pub x_grid: bool,
    /// Draw plotters' x tick marks (`false` when the chart draws its own).
    pub x_ticks: bool,
}

/// Draws the grid, axes, tick labels and axis descriptions in the house
/// style.
pub(crate) fn mesh<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &mut Chart2d<'_, DB>,
    axes: &Axes<'_>,
) -> Result<()> {
    use crate::style::{AXIS_DESC_SIZE, GRID, INK, MUTED, TICK_SIZE, font, stroke};
    use plotters::coord::ranged1d::{BoldPoints, Ranged};
    use plotters::style::text_anchor::{HPos, VPos};
    // Tick labels are drawn below with the report's text routine (plotters'
    // own would sit a few pixels off on bitmaps).
    let none = |_: &f64| String::new();
    let mut m = chart.configure_mesh();
    m.bold_line_style(stroke(GRID, 1))
        .light_line_style(ShapeStyle {
            color: TRANSPARENT,
            filled: false,
            stroke_width: 0,
        })
        .axis_style(stroke(MUTED, 1))
        .label_style(font(TICK_SIZE, INK))
        .axis_desc_style(font(AXIS_DESC_SIZE, INK))
        .x_desc(axes.x_desc)
        .y_desc(axes.y_desc)
        .x_label_formatter(&none)
        .y_label_formatter(&none)
        .x_labels(if axes.x_ticks { X_TICKS } else { 0 })
        .y_labels(Y_TICKS);
    if !axes.x_grid {
        m.disable_x_mesh();
    }
    m.draw()?;
    let (xr, yr) = chart.plotting_area().get_pixel_range();
    let style = font(TICK_SIZE, INK);
    let spec = chart.as_coord_spec();
    for v in spec.y_spec().key_points(BoldPoints(Y_TICKS)) {
        let (_, y) = chart.backend_coord(&(0.0, v));
        crate::style::text(
            root,
            &(axes.y_fmt)(&v),
            (xr.start - 10, y),
            &style,
            HPos::Right,
            VPos::Center,
        )?;
    }
    if let Some(f) = axes.x_fmt {
        for v in spec.x_spec().key_points(BoldPoints(X_TICKS)) {
            let (x, _) = chart.backend_coord(&(v, 0.0));
            crate::style::text(
                root,
                &f(&v),
                (x, yr.end + 10),
                &style,
                HPos::Center,
                VPos::Top,
            )?;
        }
    }
    Ok(())
}

/// Tick label counts (upper bounds) of the value axes.
const X_TICKS: usize = 10;
const Y_TICKS: usize = 8;

/// Simplifies a path in pixel space for thick-line drawing: drops repeated
/// points, reduces each pixel column to its entry, extremes and exit,
/// merges straight runs, and splits the path where it turns back on itself
/// (plotters' thick-line polygons break on zero-length segments and spike
/// on reversals).
pub(crate) fn pixel_paths(points: &[(i32, i32)]) -> Vec<Vec<(i32, i32)>> {
    // Column reduction.
    let mut cols: Vec<(i32, i32)> = Vec::with_capacity(points.len());
    for run in points.chunk_by(|p, q| p.0 == q.0) {
        // `chunk_by` never yields an empty run.
        let (Some(&(x, first)), Some(&(_, last))) = (run.first(), run.last()) else {
            continue;
        };
        // The first lowest and the first highest point.
        let ((mut imin, mut min), (mut imax, mut max)) = ((0, first), (0, first));
        for (k, p) in run.iter().enumerate() {
            if p.1 < min {
                (imin, min) = (k, p.1);
            }
            if p.1 > max {
                (imax, max) = (k, p.1);
            }
        }
        let (a, b) = if imin <= imax { (min, max) } else { (max, min) };
        for y in [first, a, b, last] {
            if cols.last() != Some(&(x, y)) {
                cols.push((x, y));
            }
        }
    }
    // Straight runs merged, reversals split.
    let mut out: Vec<Vec<(i32, i32)>> = Vec::new();
    let mut cur: Vec<(i32, i32)> = Vec::new();
    for p in cols {
        if let [.., a, b] = *cur.as_slice() {
            let (ux, uy) = ((b.0 - a.0) as i64, (b.1 - a.1) as i64);
            let (vx, vy) = ((p.0 - b.0) as i64, (p.1 - b.1) as i64);
            if ux * vy - uy * vx == 0 {
                if ux * vx + uy * vy > 0 {
                    cur.pop();
                } else {
                    out.push(std::mem::replace(&mut cur, vec![b]));
                }
            }
        }
        cur.push(p);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Draws a polyline given in chart coordinates, solid or dashed
/// (`dash = Some((dash, gap))`), as simplified pixel paths on `root`.
pub(crate) fn draw_polyline<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    points: &[(f64, f64)],
    style: ShapeStyle,
    dash: Option<(i32, i32)>,
) -> Result<()> {
    draw_polyline_phased(root, chart, points, style, dash, 0)
}

/// [`draw_polyline`] with the dash pattern shifted `phase` pixels along
/// the line.
pub(crate) fn draw_polyline_phased<DB: DrawingBackend>(
    root: &Area<DB>,
    chart: &Chart2d<'_, DB>,
    points: &[(f64, f64)],
    style: ShapeStyle,
    dash: Option<(i32, i32)>,
    phase: i32,
) -> Result<()> {
    for path in pixel_polyline(chart, points) {
        match dash {
            None => root.draw(&PathElement::new(path, style))?,
            Some((d, g)) => {
                for piece in crate::style::dash_path(&path, d, g, phase) {
                    root.draw(&PathElement::new(piece, style))?;
                }
            }
        }
    }
    Ok(())
}

/// The pixel paths [`draw_polyline`] draws for `points`.
pub(crate) fn pixel_polyline<DB: DrawingBackend>(
    chart: &Chart2d<'_, DB>,
    points: &[(f64, f64)],
) -> Vec<Vec<(i32, i32)>> {
    let px: Vec<(i32, i32)> = points.iter().map(|p| chart.backend_coord(p)).collect();
    pixel_paths(&px)
        .into_iter()
        .filter(|p| p.len() >= 2)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::pixel_paths;

    #[test]
    fn pixel_paths_drop_repeats_and_split_reversals() {
        let p = [
            (0, 10),
            (0, 10),
            (5, 10),
            (10, 10),
            (10, 0),
            (10, 20),
            (12, 20),
        ];
        let paths = pixel_paths(&p);
        // (0,10) → (10,10) → (10,0), then back down: a new path.
        assert_eq!(paths[0], vec![(0, 10), (10, 10), (10, 0)]);
        assert_eq!(paths[1], vec![(10, 0), (10, 20), (12, 20)]);
        assert!(pixel_paths(&[]).is_empty());
        assert_eq!(pixel_paths(&[(3, 4)]), vec![vec![(3, 4)]]);
    }
}
