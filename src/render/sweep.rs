//! Sweep rows for people: per trace, every setting best first; or, when the
//! rows went to a file, one summary line per trace.

use vramlab_replay::SweepRow;

use crate::render::table::{Table, bytes, count, percent};

/// The traces of `rows`, in the order they first appear.
fn trace_names(rows: &[SweepRow]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if names.last() != Some(&r.trace.as_str()) && !names.contains(&r.trace.as_str()) {
            names.push(&r.trace);
        }
    }
    names
}

/// One line per trace (the rows went to a file): the best setting, the
/// defaults, how many fit.
pub fn summary(rows: &[SweepRow]) -> String {
    let mut tab = Table::new(vec![
        "trace".into(),
        "settings".into(),
        "fit".into(),
        "defaults".into(),
        "best".into(),
        "best setting".into(),
    ])
    .left(1);
    for t in trace_names(rows) {
        let mine: Vec<&SweepRow> = rows.iter().filter(|r| r.trace == t).collect();
        let fit = mine.iter().filter(|r| r.fits()).count();
        let defaults = mine.iter().find(|r| r.grid_line == "default");
        let best = mine
            .iter()
            .filter(|r| r.fits())
            .min_by_key(|r| (r.peak_reserved_bytes, r.index));
        tab.row(vec![
            t.to_string(),
            count(mine.len() as u64),
            count(fit as u64),
            defaults.map_or("-".into(), |d| {
                if d.fits() {
                    bytes(d.peak_reserved_bytes)
                } else {
                    format!("OOM {}", oom_cell(d))
                }
            }),
            best.map_or("-".into(), |b| bytes(b.peak_reserved_bytes)),
            best.map_or("none fits".into(), |b| b.setting.clone()),
        ]);
    }
    tab.render()
}

/// Every row, per trace: best first (those that fit, by peak reserved).
pub fn print_sweep(rows: &[SweepRow]) {
    let mut traces: Vec<&str> = rows.iter().map(|r| r.trace.as_str()).collect();
    traces.dedup();
    for t in traces {
        let mut mine: Vec<&SweepRow> = rows.iter().filter(|r| r.trace == t).collect();
        mine.sort_by_key(|r| (!r.fits(), r.peak_reserved_bytes, r.index));
        let Some(first) = mine.first() else { continue };
        outln!(
            "{t}: {} events, peak live {}{}",
            count(first.events),
            bytes(first.peak_requested_bytes),
            if first.capacity > 0 {
                format!(", capacity {}", bytes(first.capacity))
            } else {
                String::new()
            }
        );
        let mut tab = Table::new(vec![
            "setting".into(),
            "peak reserved".into(),
            "waste at peak".into(),
            "utilization".into(),
            "device calls".into(),
            "flushes".into(),
            "OOM".into(),
        ]);
        for r in mine {
            tab.row(vec![
                r.setting.clone(),
                bytes(r.peak_reserved_bytes),
                bytes(r.waste_at_peak_bytes),
                percent(r.utilization),
                count(r.num_device_alloc + r.num_device_free),
                count(r.num_sync_all_streams),
                oom_cell(r),
            ]);
        }
        out!("{}", tab.render());
        outln!();
    }
}

/// Where a row's first OOM happened, for tables.
pub fn oom_cell(r: &SweepRow) -> String {
    if r.fits() {
        "-".into()
    } else if r.oom_at_start {
        "at the start".into()
    } else {
        format!("event {}", count(r.oom_event as u64))
    }
}
