//! What the plots and the report are drawn from.

use serde::Serialize;
use serde::ser::{SerializeStruct, Serializer};
use vramlab_allocator::SegmentView;
use vramlab_replay::{OomEvent, Run, Summary, TimelinePoint};

/// The replay of one trace under one allocator setting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingResult {
    /// The setting's name as shown in legends and tables (e.g. the
    /// `PYTORCH_ALLOC_CONF` string, or `default`).
    pub label: String,
    /// Headline figures of the replay.
    pub summary: Summary,
    /// Down-sampled memory timeline.
    pub timeline: Vec<TimelinePoint>,
    /// The first out-of-memory, if the replay hit one (its `segments` are
    /// drawn as the segment map).
    pub oom: Option<OomEvent>,
    /// Smallest device capacity at which the whole trace replays without an
    /// OOM under this setting, when it was searched for.
    pub min_capacity: Option<u64>,
    /// Segments at the moment reserved bytes peaked (drawn as the segment
    /// map when there was no OOM; empty = not recorded).
    pub segments_at_peak: Vec<SegmentView>,
}

/// Which allocator state a segment map shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentMapSource {
    /// The state at the first out-of-memory.
    AtOom,
    /// The state when reserved bytes peaked.
    AtPeak,
}

impl SegmentMapSource {
    /// `at the OOM` / `at peak reserved`.
    pub fn describe(self) -> &'static str {
        match self {
            SegmentMapSource::AtOom => "at the OOM",
            SegmentMapSource::AtPeak => "at peak reserved",
        }
    }
}

impl SettingResult {
    /// A result with a label and a summary, and nothing else.
    pub fn new(label: impl Into<String>, summary: Summary) -> Self {
        SettingResult {
            label: label.into(),
            summary,
            ..Default::default()
        }
    }

    /// Copies what the plots need out of a [`Run`] (its summary, timeline,
    /// first OOM and segments at peak; replay with
    /// `ReplayOptions { segments_at_peak: true, .. }` to get a segment map).
    pub fn from_run(label: impl Into<String>, run: &Run) -> Self {
        SettingResult {
            label: label.into(),
            summary: run.summary.clone(),
            timeline: run.timeline.clone(),
            oom: run.oom.clone(),
            min_capacity: None,
            segments_at_peak: run.segments_at_peak.clone(),
        }
    }

    /// The same result with a searched minimum capacity.
    pub fn with_min_capacity(mut self, min_capacity: Option<u64>) -> Self {
        self.min_capacity = min_capacity;
        self
    }

    /// The segments a segment map of this result shows: those at the OOM
    /// when there was one and they were recorded, else those at peak
    /// reserved; `None` when neither was recorded.
    pub fn segment_map(&self) -> Option<(SegmentMapSource, &[SegmentView])> {
        if let Some(oom) = self.oom.as_ref().filter(|o| !o.segments.is_empty()) {
            return Some((SegmentMapSource::AtOom, &oom.segments));
        }
        if self.segments_at_peak.is_empty() {
            None
        } else {
            Some((SegmentMapSource::AtPeak, &self.segments_at_peak))
        }
    }
}

/// A segment as the report's JSON shows it.
#[derive(Serialize)]
struct SegmentJson {
    ptr: u64,
    size: u64,
    stream: u64,
    pool: &'static str,
    expandable: bool,
    /// `[ptr, size, requested, state]` per block.
    blocks: Vec<(u64, u64, u64, &'static str)>,
}

fn segments_json(segments: &[SegmentView]) -> Vec<SegmentJson> {
    segments
        .iter()
        .map(|s| SegmentJson {
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

impl Serialize for SettingResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("SettingResult", 7)?;
        st.serialize_field("label", &self.label)?;
        st.serialize_field("summary", &self.summary)?;
        st.serialize_field("min_capacity", &self.min_capacity)?;
        st.serialize_field("oom", &self.oom)?;
        st.serialize_field(
            "oom_segments",
            &segments_json(self.oom.as_ref().map_or(&[][..], |o| &o.segments)),
        )?;
        st.serialize_field("segments_at_peak", &segments_json(&self.segments_at_peak))?;
        st.serialize_field("timeline", &self.timeline)?;
        st.end()
    }
}

/// One replay of a workload at one value of its varied dimension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FitPoint {
    /// The allocator setting.
    pub setting: String,
    /// The varied dimension's value (batch size, sequence length,
    /// resolution, …).
    pub size: u64,
    /// `true` when the whole workload replayed without an OOM.
    pub fits: bool,
    /// Peak reserved bytes (up to the OOM when it did not fit).
    pub peak_reserved: u64,
}

/// A sweep of a workload's dimension: which sizes fit, under which setting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FitSweep {
    /// Name of the varied dimension for the axis (`batch size`,
    /// `sequence length`, `resolution`).
    pub dimension: String,
    /// The device capacity the sweep ran against (`None` = unlimited).
    pub capacity: Option<u64>,
    /// The replays, in any order.
    pub points: Vec<FitPoint>,
}

impl FitSweep {
    /// The settings in order of first appearance, each with its points
    /// sorted by size.
    pub fn by_setting(&self) -> Vec<(&str, Vec<&FitPoint>)> {
        let mut out: Vec<(&str, Vec<&FitPoint>)> = Vec::new();
        for p in &self.points {
            match out.iter_mut().find(|(s, _)| *s == p.setting) {
                Some((_, v)) => v.push(p),
                None => out.push((&p.setting, vec![p])),
            }
        }
        for (_, v) in &mut out {
            v.sort_by_key(|p| (p.size, p.peak_reserved, !p.fits));
        }
        out
    }

    /// The largest size that fits under `setting` (`None` when none does).
    pub fn largest_fitting(&self, setting: &str) -> Option<u64> {
        self.points
            .iter()
            .filter(|p| p.setting == setting && p.fits)
            .map(|p| p.size)
            .max()
    }
}

/// The OOM point of one setting: the smallest card the trace fits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OomPointResult {
    /// The allocator setting.
    pub label: String,
    /// Smallest device capacity at which the whole trace replays without an
    /// OOM, in bytes.
    pub min_capacity: u64,
    /// The live-bytes lower bound (peak requested bytes): no allocator fits
    /// in less.
    pub lower_bound: u64,
}

/// The setting a report recommends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Recommendation {
    /// The recommended setting (as in [`SettingResult::label`]).
    pub setting: String,
    /// Why, in one or two sentences.
    pub reason: String,
    /// Shell lines that apply it, e.g.
    /// `export PYTORCH_ALLOC_CONF=expandable_segments:True`.
    pub export_lines: Vec<String>,
}

/// Everything [`crate::write_report`] puts into a report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReportInput {
    /// Page title.
    pub title: String,
    /// The trace the results come from (a path or a name).
    pub trace: String,
    /// Simulated device capacity the settings were replayed on (`None` =
    /// unlimited).
    pub capacity: Option<u64>,
    /// One result per setting, in the order to show them.
    pub settings: Vec<SettingResult>,
    /// OOM points per setting (empty = no OOM-point chart).
    pub oom_points: Vec<OomPointResult>,
    /// A sweep of the workload's size (`None` = no fit chart).
    pub fit: Option<FitSweep>,
    /// The recommended setting, if one was chosen.
    pub recommendation: Option<Recommendation>,
    /// Remarks shown at the end of the page.
    pub notes: Vec<String>,
    /// Live memory per recorded phase of the trace (empty: no table).
    pub phases: Vec<vramlab_traces::PhaseSummary>,
}
