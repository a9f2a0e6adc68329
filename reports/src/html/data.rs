//! The raw data embedded in the page: the report's input as JSON, in the
//! shape the report has always embedded (each setting with its label,
//! summary, minimum capacity, OOM, segments and timeline; the OOM points,
//! the fit probes, the recommendation, notes and phases).

use serde::Serialize;
use vramlab_allocator::SegmentView;
use vramlab_replay::OomPoint;
use vramlab_replay::{OomEvent, Summary, TimelinePoint};
use vramlab_traces::PhaseSummary;

use super::Advice;
use crate::input::{FitChart, ReportInput, SettingRun};

/// The whole block.
#[derive(Serialize)]
pub(super) struct ReportData<'a> {
    title: &'a str,
    trace: &'a str,
    capacity: Option<u64>,
    settings: Vec<SettingData<'a>>,
    oom_points: Vec<OomPointData<'a>>,
    fit: Option<FitData<'a>>,
    recommendation: Option<Advice<'a>>,
    notes: &'a [String],
    phases: &'a [PhaseSummary],
}

impl<'a> ReportData<'a> {
    /// The data of `report`.
    pub(super) fn of(report: &'a ReportInput) -> Self {
        ReportData {
            title: &report.title,
            trace: &report.trace,
            capacity: report.capacity,
            settings: report
                .settings
                .iter()
                .map(|s| SettingData::of(s, report.min_capacity(&s.label)))
                .collect(),
            oom_points: report.oom_points.iter().map(OomPointData::of).collect(),
            fit: report.fit.as_ref().map(FitData::of),
            recommendation: report.recommendation.as_ref().and_then(Advice::of),
            notes: &report.notes,
            phases: &report.phases,
        }
    }
}

/// One setting's replay.
#[derive(Serialize)]
struct SettingData<'a> {
    label: &'a str,
    summary: &'a Summary,
    min_capacity: Option<u64>,
    oom: Option<&'a OomEvent>,
    oom_segments: Vec<SegmentData>,
    segments_at_peak: Vec<SegmentData>,
    timeline: &'a [TimelinePoint],
}

impl<'a> SettingData<'a> {
    fn of(s: &'a SettingRun, min_capacity: Option<u64>) -> Self {
        let run = &s.run;
        SettingData {
            label: &s.label,
            summary: &run.summary,
            min_capacity,
            oom: run.oom.as_ref(),
            oom_segments: segments(run.oom.as_ref().map_or(&[][..], |o| &o.segments)),
            segments_at_peak: segments(&run.segments_at_peak),
            timeline: &run.timeline,
        }
    }
}

/// A segment.
#[derive(Serialize)]
struct SegmentData {
    ptr: u64,
    size: u64,
    stream: u64,
    pool: &'static str,
    expandable: bool,
    /// `[ptr, size, requested, state]` per block.
    blocks: Vec<(u64, u64, u64, &'static str)>,
}

fn segments(segments: &[SegmentView]) -> Vec<SegmentData> {
    segments
        .iter()
        .map(|s| SegmentData {
            ptr: s.ptr,
            size: s.size,
            stream: s.stream,
            pool: s.pool.name(),
            expandable: s.is_expandable,
            blocks: s
                .blocks
                .iter()
                .map(|b| (b.ptr, b.size, b.requested, b.state.snapshot_name()))
                .collect(),
        })
        .collect()
}

/// A setting's OOM point.
#[derive(Serialize)]
struct OomPointData<'a> {
    label: &'a str,
    min_capacity: u64,
    lower_bound: u64,
}

impl<'a> OomPointData<'a> {
    fn of(p: &'a OomPoint) -> Self {
        OomPointData {
            label: &p.setting,
            min_capacity: p.min_capacity,
            lower_bound: p.lower_bound,
        }
    }
}

/// The fit searches: every probe, its size in the dimension's units.
#[derive(Serialize)]
struct FitData<'a> {
    dimension: &'a str,
    capacity: Option<u64>,
    points: Vec<FitPointData<'a>>,
}

/// One probe of a fit search.
#[derive(Serialize)]
struct FitPointData<'a> {
    setting: &'a str,
    size: u64,
    fits: bool,
    peak_reserved: u64,
}

impl<'a> FitData<'a> {
    fn of(fit: &'a FitChart) -> Self {
        FitData {
            dimension: &fit.dimension,
            capacity: fit.capacity,
            points: fit
                .probes()
                .map(|(setting, p)| FitPointData {
                    setting,
                    size: p.size,
                    fits: p.fits,
                    peak_reserved: p.peak_reserved,
                })
                .collect(),
        }
    }
}
