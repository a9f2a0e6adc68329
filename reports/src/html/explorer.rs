//! The interactive part of the page: a zoomable timeline and a segment map
//! at any event, for two settings side by side. The Rust side packs what
//! the page needs (per allocation id: requested size, when it was
//! allocated and freed, stream, stack; per setting: where each block went,
//! its size and the device calls) into typed arrays, base64 in the page;
//! `explorer.js` rebuilds every moment from them, exactly.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::Serialize;
use vramlab_allocator::DeviceCallKind;

use super::escape::script_json;
use super::packed::{Column, Packer};
use crate::Result;
use crate::explore::ExploreTrace;
use crate::input::SettingRun;

/// The page's script (it reads the two blocks this module writes).
const SCRIPT: &str = include_str!("explorer.js");

/// The style of the explorer's controls, maps and tooltip.
pub(super) const STYLE: &str = r#"
#explorer .controls { display: flex; flex-wrap: wrap; gap: 8px 18px; align-items: center; margin: 8px 0; font-size: 15px; }
#explorer select, #explorer input[type=number] { font: inherit; font-size: 14px; }
#explorer select { max-width: min(40em, calc(100vw - 110px)); }
#explorer input[type=number] { width: 9em; }
#explorer .timeline { position: relative; height: 280px; border: 1px solid var(--line); cursor: crosshair; user-select: none; touch-action: none; }
#explorer .timeline canvas { width: 100%; height: 100%; display: block; }
#explorer .cursor { position: absolute; top: 0; bottom: 0; width: 0; border-left: 1px solid #212529; pointer-events: none; }
#explorer .hover { position: absolute; top: 0; bottom: 0; width: 0; border-left: 1px dashed #909aa3; pointer-events: none; }
#explorer .selection { position: absolute; top: 0; bottom: 0; background: rgba(78,121,167,0.18); pointer-events: none; }
#explorer .legend { display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 14px; color: var(--muted); margin: 4px 0; }
#explorer .legend i { display: inline-block; width: 22px; height: 0; border-top: 3px solid; vertical-align: middle; margin-right: 5px; }
#explorer .readout { font-size: 14px; min-height: 3em; white-space: normal; overflow-wrap: break-word; }
#explorer .scrub { display: flex; gap: 10px; align-items: center; margin: 10px 0; }
#explorer .scrub input[type=range] { flex: 1; min-width: 0; }
#explorer .maps { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
#explorer .map h3 { font-size: 16px; margin: 6px 0; overflow-wrap: break-word; }
#explorer .map .rows { max-height: 640px; overflow-y: auto; border: 1px solid var(--line); }
#explorer .map svg { display: block; width: 100%; }
#explorer .map p { font-size: 14px; color: var(--muted); margin: 4px 0; }
#explorer .swatches { font-size: 14px; color: var(--muted); }
#explorer .swatches b { display: inline-block; width: 12px; height: 12px; vertical-align: middle; margin: 0 4px 0 10px; border: 1px solid #0003; }
#explorer [role=tooltip] { position: fixed; z-index: 10; max-width: min(560px, 92vw); background: #1f2328; color: #f0f3f6; padding: 8px 10px; border-radius: 4px; font-size: 13px; line-height: 1.4; pointer-events: none; white-space: normal; overflow-wrap: anywhere; }
#explorer [role=tooltip] code { background: none; color: inherit; padding: 0; }
@media (max-width: 900px) { #explorer .maps { grid-template-columns: 1fr; } #explorer .timeline { height: 220px; } }
"#;

/// Everything the script reads besides the blob.
#[derive(Serialize)]
struct Index<'a> {
    /// Events in the trace.
    events: u64,
    /// Allocation ids.
    ids: usize,
    /// The trace has frees that waited for other streams
    /// (`free_done` is a column).
    deferred: bool,
    /// The trace's columns, one value per id: `requested`, `alloc_at`,
    /// `free_at`, (`free_done`), `stream`, `stack`.
    columns: BTreeMap<String, Column>,
    /// The streams, as hexadecimal handles.
    streams: Vec<String>,
    /// Every distinct frame line.
    lines: Vec<&'a str>,
    /// Each stack as indices into `lines`.
    stacks: Vec<Vec<u32>>,
    /// (first event, label) per phase.
    phases: &'a [(u64, String)],
    /// The settings, as the page's tables group them.
    settings: Vec<SettingIndex>,
}

/// One (grouped) setting.
#[derive(Serialize)]
struct SettingIndex {
    /// Its label and the settings that came out the same.
    label: String,
    /// Events it replayed (fewer after an OOM).
    replayed: u64,
    /// The event that ran out of memory.
    oom_event: Option<u64>,
    /// The event at peak reserved (`None`: the start).
    peak_event: Option<u64>,
    /// A block whose free waits for other streams keeps its place until
    /// the free completes (PyTorch's native allocator; the others free it
    /// at once).
    holds_pending: bool,
    /// Peak reserved bytes (for the page's own check).
    peak_reserved: u64,
    /// Peak allocated bytes (for the page's own check).
    peak_allocated: u64,
    /// `addr` and `bsize` per id; `log_ev`, `log_kind`, `log_ptr`,
    /// `log_size` per device call (`log_ev` −1: the initial state).
    columns: BTreeMap<String, Column>,
}

/// The device call kinds as the script numbers them.
fn kind_code(k: DeviceCallKind) -> i64 {
    match k {
        DeviceCallKind::Malloc => 0,
        DeviceCallKind::Free => 1,
        DeviceCallKind::Map => 2,
        DeviceCallKind::Unmap => 3,
        DeviceCallKind::Reserve => 4,
        DeviceCallKind::Release => 5,
        DeviceCallKind::Synchronize => 6,
    }
}

/// The explorer's section: markup, the index and blob, and the script.
/// Nothing when there is no trace view or no setting recorded where its
/// blocks went.
pub(super) fn write_explorer(
    h: &mut String,
    trace: Option<&ExploreTrace>,
    settings: &[SettingRun],
) -> Result<()> {
    let Some(t) = trace else { return Ok(()) };
    let n = t.requested.len();
    let usable: Vec<&SettingRun> = settings
        .iter()
        .filter(|s| s.run.alloc_addresses.len() == n && s.run.alloc_block_sizes.len() == n)
        .collect();
    if usable.is_empty() {
        return Ok(());
    }
    let (index, blob) = pack(t, &usable);
    h.push_str(MARKUP);
    let _ = write!(
        h,
        "<script type=\"application/json\" id=\"vramlab-explorer\">{}</script>\n<script type=\"application/octet-stream\" id=\"vramlab-packed\">{}</script>\n<script>{}</script>\n",
        script_json(&index)?,
        crate::base64::encode(&blob),
        SCRIPT
    );
    Ok(())
}

/// The section's static markup; the script fills it.
const MARKUP: &str = r#"<section id="explorer">
<h2>Explore</h2>
<p class="meta">Drag over the timeline to zoom to an event range, click it to move the cursor; the slider (arrow keys step one event) shows both settings' segments at the cursor. Hover a block for its size, request, stream, lifetime and the Python lines that allocated it.</p>
<div class="controls">
<label>Left <select id="ex-a"></select></label>
<label>Right <select id="ex-b"></select></label>
<label>From event <input id="ex-from" type="number" min="-1" step="1"></label>
<label>to <input id="ex-to" type="number" min="-1" step="1"></label>
<button id="ex-reset" type="button">Whole trace</button>
<button id="ex-peak" type="button">Left's peak</button>
<label><input id="ex-equal" type="checkbox"> every segment full width</label>
</div>
<div class="legend" id="ex-legend"></div>
<div class="timeline" id="ex-timeline"><canvas></canvas><div class="selection" hidden></div><div class="hover" hidden></div><div class="cursor"></div></div>
<div class="readout" id="ex-readout"></div>
<div class="scrub"><label for="ex-slider">Event</label><input id="ex-slider" type="range" step="1"><input id="ex-event" type="number" step="1" aria-label="event"></div>
<div class="swatches">Blocks:<b style="background:#4e79a7"></b><b style="background:#e15759"></b>allocated (left map, right map)<b style="background:#e8a33d"></b>freed, waiting for its stream<b style="background:#d5dde5"></b>free (cached)<b style="background:#f3d6d6"></b>segment with nothing allocated</div>
<div class="maps" data-segment-map><div class="map" id="ex-map-a"></div><div class="map" id="ex-map-b"></div></div>
<div role="tooltip" id="ex-tip" hidden></div>
<noscript><p>The explorer needs JavaScript; the static plots below show the same data at the peak.</p></noscript>
</section>
"#;

/// The index and the blob of `t` and `settings`.
fn pack<'a>(t: &'a ExploreTrace, settings: &[&SettingRun]) -> (Index<'a>, Vec<u8>) {
    let mut p = Packer::default();
    let ev = |v: &[i32]| v.iter().map(|&x| i64::from(x)).collect::<Vec<_>>();
    p.push("requested", t.requested.iter().map(|&x| x as i64));
    p.push("alloc_at", ev(&t.alloc_at).into_iter());
    p.push("free_at", ev(&t.free_at).into_iter());
    if !t.free_completed_at.is_empty() {
        p.push("free_done", ev(&t.free_completed_at).into_iter());
    }
    p.push("stream", t.stream.iter().map(|&x| i64::from(x)));
    p.push("stack", t.stack.iter().map(|&x| i64::from(x)));
    let trace_columns = std::mem::take(&mut p.columns);
    let mut out = Vec::new();
    for s in settings {
        let r = &s.run;
        p.push("addr", r.alloc_addresses.iter().map(|&x| x as i64));
        p.push("bsize", r.alloc_block_sizes.iter().map(|&x| x as i64));
        let log = &r.device_log;
        p.push(
            "log_ev",
            log.iter().map(|c| c.event_index.map_or(-1, i64::from)),
        );
        p.push("log_kind", log.iter().map(|c| kind_code(c.kind)));
        p.push("log_ptr", log.iter().map(|c| c.ptr as i64));
        p.push("log_size", log.iter().map(|c| c.size as i64));
        let mut label = s.label.clone();
        for o in &s.same_as {
            label.push_str(" = ");
            label.push_str(o);
        }
        out.push(SettingIndex {
            label,
            replayed: r.summary.events_replayed,
            oom_event: r
                .oom
                .as_ref()
                .filter(|o| !o.at_start)
                .map(|o| o.event_index),
            peak_event: r.peak_event_index,
            holds_pending: r.policy == "native",
            peak_reserved: r.summary.peak_reserved_bytes,
            peak_allocated: r.summary.peak_allocated_bytes,
            columns: std::mem::take(&mut p.columns),
        });
    }
    let (lines, stacks) = line_table(&t.stacks);
    let index = Index {
        events: t.events,
        ids: t.requested.len(),
        deferred: !t.free_completed_at.is_empty(),
        columns: trace_columns,
        streams: t.streams.iter().map(|s| format!("{s:#x}")).collect(),
        lines,
        stacks,
        phases: &t.phases,
        settings: out,
    };
    (index, p.blob)
}

/// Every distinct line once, and each stack as indices into them.
fn line_table(stacks: &[Vec<String>]) -> (Vec<&str>, Vec<Vec<u32>>) {
    let mut at: HashMap<&str, u32> = HashMap::new();
    let mut lines: Vec<&str> = Vec::new();
    let stacks = stacks
        .iter()
        .map(|s| {
            s.iter()
                .map(|l| {
                    *at.entry(l.as_str()).or_insert_with(|| {
                        lines.push(l.as_str());
                        (lines.len() - 1) as u32
                    })
                })
                .collect()
        })
        .collect();
    (lines, stacks)
}

#[cfg(test)]
#[path = "explorer_tests.rs"]
mod tests;
