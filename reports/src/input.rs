//! What the plots and the report are drawn from: replay's own results
//! ([`Run`], [`OomPoint`], [`FitResult`], [`Recommendation`]), with only
//! what a picture needs besides them (a setting's name, the axis a fit
//! search is drawn on).

use vramlab_replay::FitResult;
use vramlab_replay::OomPoint;
use vramlab_replay::Recommendation;
use vramlab_replay::Run;

/// One allocator setting's replay of the trace: replay's [`Run`] under the
/// name the report gives the setting.
#[derive(Debug, Clone)]
pub struct SettingRun {
    /// The setting's name as shown in legends and tables (e.g. the
    /// `PYTORCH_ALLOC_CONF` string, or `default`).
    pub label: String,
    /// The replay: its summary, timeline and first OOM are drawn, and the
    /// segments at the OOM or, without one, at peak reserved (replay with
    /// `ReplayOptions { segments_at_peak: true, .. }` to get a segment map).
    pub run: Run,
    /// Other settings whose replays came out exactly the same, shown with
    /// this one (the page groups them; empty as built).
    pub same_as: Vec<String>,
}

impl SettingRun {
    /// `run` under the name `label`.
    pub fn new(label: impl Into<String>, run: Run) -> Self {
        SettingRun {
            label: label.into(),
            run,
            same_as: Vec::new(),
        }
    }
}

/// What the fit chart draws: replay's max-scale searches
/// ([`vramlab_replay::max_fitting_size`]), one per setting,
/// against the dimension they varied.
#[derive(Debug, Clone, PartialEq)]
pub struct FitChart {
    /// Name of the varied dimension for the axis (`batch size`,
    /// `sequence length`, `resolution`).
    pub dimension: String,
    /// The device capacity the searches ran against (`None` = unlimited).
    pub capacity: Option<u64>,
    /// A searched size times this is the size drawn (64 when resolutions
    /// were searched in steps of 64 pixels, else 1).
    pub size_step: u64,
    /// The searches, one per setting ([`FitResult::setting`] names it).
    pub searches: Vec<FitResult>,
}

impl Default for FitChart {
    fn default() -> Self {
        FitChart {
            dimension: String::new(),
            capacity: None,
            size_step: 1,
            searches: Vec::new(),
        }
    }
}

/// A probe of a fit search as the chart draws it: its size on the axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChartProbe {
    /// The size tried, in the dimension's own units.
    pub size: u64,
    /// It replayed without OOM.
    pub fits: bool,
    /// Peak reserved bytes (up to the OOM when it did not fit).
    pub peak_reserved: u64,
}

impl FitChart {
    /// Every probe with its setting, in the order of the searches.
    pub(crate) fn probes(&self) -> impl Iterator<Item = (&str, ChartProbe)> {
        self.searches.iter().flat_map(move |r| {
            r.probes.iter().map(move |p| {
                (
                    r.setting.as_str(),
                    ChartProbe {
                        size: p.size * self.size_step,
                        fits: p.fits,
                        peak_reserved: p.peak_reserved_bytes,
                    },
                )
            })
        })
    }

    /// The settings in order of first appearance, each with its probes
    /// sorted by size.
    pub(crate) fn by_setting(&self) -> Vec<(&str, Vec<ChartProbe>)> {
        let mut out: Vec<(&str, Vec<ChartProbe>)> = Vec::new();
        for (setting, p) in self.probes() {
            match out.iter_mut().find(|(s, _)| *s == setting) {
                Some((_, v)) => v.push(p),
                None => out.push((setting, vec![p])),
            }
        }
        for (_, v) in &mut out {
            v.sort_by_key(|p| (p.size, p.peak_reserved, !p.fits));
        }
        out
    }

    /// The largest size that fits under `setting` (`None` when none does).
    pub(crate) fn largest_fitting(&self, setting: &str) -> Option<u64> {
        self.probes()
            .filter(|(s, p)| *s == setting && p.fits)
            .map(|(_, p)| p.size)
            .max()
    }
}

/// Everything [`crate::write_report`] puts into a report.
#[derive(Debug, Clone, Default)]
pub struct ReportInput {
    /// Page title.
    pub title: String,
    /// The trace the results come from (a path or a name).
    pub trace: String,
    /// Simulated device capacity the settings were replayed on (`None` =
    /// unlimited).
    pub capacity: Option<u64>,
    /// One replay per setting, in the order to show them.
    pub settings: Vec<SettingRun>,
    /// OOM points per setting (empty = no OOM-point chart); a setting's
    /// minimum capacity in the results table is the point whose
    /// [`OomPoint::setting`] is its label.
    pub oom_points: Vec<OomPoint>,
    /// Searches for the largest workload that fits (`None` = no fit chart).
    pub fit: Option<FitChart>,
    /// The ranking of the settings and its verdict (`None`, or a verdict
    /// that nothing fits: no recommendation is shown).
    pub recommendation: Option<Recommendation>,
    /// Remarks shown at the end of the page.
    pub notes: Vec<String>,
    /// Live memory per recorded phase of the trace (empty: no table).
    pub phases: Vec<vramlab_traces::PhaseSummary>,
    /// The default pool and each private pool (empty: the trace has no
    /// private pools, no table).
    pub pools: Vec<ReportPool>,
    /// Why the first setting reserves more than it allocates at its peak
    /// (`vramlab explain`; `None`: no such section).
    pub explanation: Option<vramlab_replay::Explanation>,
    /// The trace as the page's explorer draws it ([`ExploreTrace::of`]);
    /// with settings replayed with `record_addresses`, the page gets a
    /// zoomable timeline and a segment map at any event (`None`: no
    /// explorer).
    ///
    /// [`ExploreTrace::of`]: crate::ExploreTrace::of
    pub explore: Option<crate::ExploreTrace>,
    /// What upgrading PyTorch does to every setting (`report
    /// --torch-version A --torch-version B`; `None`: no such section).
    pub upgrade: Option<vramlab_replay::UpgradeAdvice>,
}

/// One pool of the trace in the report: what the trace routes to it and
/// what each setting's replay reserves in it at its peak.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportPool {
    /// `default`, or `graph (0,1)`, `mempool (0,2)`.
    pub name: String,
    /// Requests routed to it.
    pub allocations: u64,
    /// Peak of its live requested bytes.
    pub peak_live_bytes: u64,
    /// Per setting, in the settings' order: reserved and allocated bytes at
    /// that replay's peak (or OOM).
    pub at_peak: Vec<(u64, u64)>,
}

impl ReportPool {
    /// The pools of `trace` (`summary` is its summary) and, per setting of
    /// `settings`, each pool at the peak of its replay.
    pub fn of(
        trace: &vramlab_traces::Trace,
        summary: &vramlab_traces::TraceSummary,
        settings: &[SettingRun],
    ) -> Vec<ReportPool> {
        let uses: Vec<_> = settings
            .iter()
            .map(|s| vramlab_replay::pool_uses(trace, &s.run.segments_at_peak, &[]))
            .collect();
        summary
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| ReportPool {
                name: if p.kind == "default" {
                    "default".to_string()
                } else {
                    format!("{} ({},{})", p.kind, p.id[0], p.id[1])
                },
                allocations: p.allocations,
                peak_live_bytes: p.peak_live_bytes,
                at_peak: uses
                    .iter()
                    .map(|u| {
                        u.get(i).map_or((0, 0), |x| {
                            (x.at_peak.reserved_bytes, x.at_peak.allocated_bytes)
                        })
                    })
                    .collect(),
            })
            .collect()
    }
}

impl ReportInput {
    /// The smallest capacity found for the setting named `label`.
    pub(crate) fn min_capacity(&self, label: &str) -> Option<u64> {
        self.oom_points
            .iter()
            .find(|p| p.setting == label)
            .map(|p| p.min_capacity)
    }
}
