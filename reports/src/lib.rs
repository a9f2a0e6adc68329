//! vramlab-reports: plots and a self-contained HTML report of replay results.
//!
//! The public surface is the crate root alone: the plot functions, the
//! report writer and builders, and the types they take and give, all
//! re-exported from private modules.
//!
//! The crate turns what the replay engine and its analyses produce
//! ([`vramlab_replay::Run`] with its summary, timeline, first OOM and
//! segments; [`OomPoint`](vramlab_replay::OomPoint),
//! [`FitResult`](vramlab_replay::FitResult),
//! [`Recommendation`](vramlab_replay::Recommendation),
//! [`Matrix`](vramlab_replay::Matrix)) into pictures a
//! person can read at a glance, and into one HTML page that needs nothing
//! but a browser. It keeps no copies of those types: a [`SettingRun`] is a
//! replay's [`Run`](vramlab_replay::Run) under the name the report shows,
//! a [`FitChart`] the fit searches with the axis they are drawn on.
//!
//! * [`plot_memory_timeline`]: allocated vs reserved bytes over the trace,
//!   one colour per setting, with the live (requested) bytes;
//! * [`plot_peak_reserved`]: peak reserved per setting, split into what was
//!   allocated and the waste at the peak, against the live-bytes lower bound;
//! * [`plot_oom_points`]: the smallest card each setting fits on, against
//!   the usable memory of named cards ([`vramlab_replay::gpus`]);
//! * [`plot_fit`]: peak reserved as a workload dimension (batch, sequence,
//!   resolution) grows, against the capacity;
//! * [`plot_segment_map`]: every segment as a bar, its blocks coloured by
//!   state;
//! * [`plot_matrix`]: a workload's variants × allocator settings as a
//!   heatmap of what each saves against the baseline;
//! * [`plot_external_fragmentation`]: 1 − largest free block / free cached
//!   bytes over the trace;
//! * [`plot_colocation`]: several tenants sharing one GPU over the steps of
//!   a colocated replay, what each holds stacked per step, with the
//!   device's peak during each step, the capacity and the OOMs.
//!
//! Every plot is written twice, as `BASE.png` and `BASE.svg`, at 1200 × 700
//! pixels (the segment map grows taller with the number of segments, the
//! bar charts with the lines their setting names wrap over). The font
//! (DejaVu Sans) is compiled in, so nothing is read from the system.
//! Output is deterministic: the same input gives the same bytes. Empty input
//! gives a "no data" placeholder, never a panic.
//!
//! Text is never cut: long titles, setting names and legend entries wrap
//! over lines; value labels sit where no line or other label runs through
//! them. Each setting keeps one colour in every plot of a report (its index
//! in [`ReportInput::settings`]; past ten settings the colours repeat with
//! dashed lines), and a setting whose line is identical to an earlier one's
//! is drawn dashed in its own colour over it.
//!
//! [`write_report`] renders all the plots that the [`ReportInput`] has data
//! for into a folder and writes `index.html` next to them. The page is
//! self-contained: every plot inlined (the PNG shown, the SVG as a download
//! link, both as `data:` URIs), tables of the per-setting results, the
//! recommendation (Markdown-style `` `code` `` in its reason and in the
//! notes shown as code) and the raw data as an embedded JSON block.
//!
//! [`build_report`] does the whole job for one trace, as `vramlab report`
//! does: it sweeps a grid of settings, ranks them, replays the defaults and
//! the best ones in detail, finds their OOM points and writes the report
//! ([`ReportRequest`] in, [`BuiltReport`] out); a snapshot that holds only
//! the allocator state gets the report of that state ([`state_report`]).
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![forbid(unsafe_code)]

mod base64;
mod build;
mod explore;
mod group;
mod html;
mod input;
mod plots;
mod png;
mod style;
mod units;

use std::path::PathBuf;

pub use build::explorer_left_out;
pub use build::{BuildError, BuiltReport, ReportRequest, build_report, state_report};
pub use explore::{EXPLORER_MAX_ALLOCATIONS, ExploreTrace};
pub use html::write_report;
pub use input::{FitChart, ReportInput, ReportPool, SettingRun};
pub use plots::{
    ColocationChart, ColocationStep, PlotFiles, plot_colocation, plot_external_fragmentation,
    plot_fit, plot_matrix, plot_memory_timeline, plot_oom_points, plot_peak_reserved,
    plot_segment_map,
};
pub use units::format_bytes;

/// Why a plot or report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file or folder could not be created or written.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The drawing library failed.
    #[error("drawing failed: {0}")]
    Draw(String),
    /// The embedded font could not be registered.
    #[error("font: {0}")]
    Font(String),
    /// The data could not be serialised to JSON.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl<E: std::error::Error + Send + Sync> From<plotters::drawing::DrawingAreaErrorKind<E>>
    for ReportError
{
    fn from(e: plotters::drawing::DrawingAreaErrorKind<E>) -> Self {
        ReportError::Draw(e.to_string())
    }
}

/// `Result` with [`ReportError`].
pub type Result<T, E = ReportError> = std::result::Result<T, E>;
