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

/// The best PyTorch setting of one trace's rows: of those that fit, the
/// lowest peak reserved, then the fewest device calls and flushes (the
/// order `recommend` ranks by). Other designs are never "best": nobody can
/// export them.
pub fn best_setting<'a>(rows: &[&'a SweepRow]) -> Option<&'a SweepRow> {
    rows.iter()
        .copied()
        .filter(|r| r.is_pytorch_setting() && r.fits())
        .min_by_key(|r| rank_key(r))
}

/// How rows are ordered in tables: those that fit first, by peak
/// reserved, device calls and flushes; then those that ran out of memory,
/// the furthest first.
fn rank_key(r: &SweepRow) -> (bool, u64, u64, u64, u64) {
    if r.fits() {
        (
            false,
            r.peak_reserved_bytes,
            r.num_device_alloc + r.num_device_free,
            r.num_sync_all_streams,
            r.index,
        )
    } else {
        (
            true,
            u64::MAX - r.oom_event.max(0) as u64,
            r.peak_reserved_bytes,
            0,
            r.index,
        )
    }
}

/// One line per trace (the rows went to a file): the best PyTorch
/// setting, the defaults, how many fit.
pub fn summary(rows: &[SweepRow]) -> String {
    let mut tab = Table::new(vec![
        "trace".into(),
        "settings".into(),
        "fit".into(),
        "defaults".into(),
        "best".into(),
        "best PyTorch setting".into(),
    ])
    .left(5);
    for t in trace_names(rows) {
        let mine: Vec<&SweepRow> = rows.iter().filter(|r| r.trace == t).collect();
        let fit = mine.iter().filter(|r| r.fits()).count();
        let defaults = mine.iter().find(|r| r.grid_line == "default");
        let best = best_setting(&mine);
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

/// `items` in table order, each with the later ones whose row (`row` of
/// it: a sweep row, or a ranked setting's) is the same result folded into
/// it: one table row per group.
pub fn grouped<'a, T>(
    items: impl IntoIterator<Item = &'a T>,
    row: impl Fn(&T) -> &SweepRow,
) -> Vec<(&'a T, Vec<&'a T>)> {
    let mut out: Vec<(&T, Vec<&T>)> = Vec::new();
    for item in items {
        match out
            .iter_mut()
            .find(|(first, _)| vramlab_replay::same_result(row(first), row(item)))
        {
            Some((_, same)) => same.push(item),
            None => out.push((item, Vec::new())),
        }
    }
    out
}

/// Settings of a group named under its first in a fitted table; the rest
/// are counted (`--wide` and the JSON/CSV rows name every one).
const GROUP_NAMES_SHOWN: usize = 3;

/// A setting cell naming the settings of a group, one per line.
pub fn group_cell(first: &SweepRow, same: &[&SweepRow]) -> String {
    let mut cell = first.setting.clone();
    let shown = if crate::output::width() == usize::MAX {
        same.len()
    } else {
        GROUP_NAMES_SHOWN.min(same.len())
    };
    for r in same.iter().take(shown) {
        cell.push_str("\n= ");
        cell.push_str(&r.setting);
    }
    if same.len() > shown {
        cell.push_str(&format!(
            "\n= {} more with the same result (--wide names them)",
            same.len() - shown
        ));
    }
    cell
}

/// Every row, per trace: PyTorch settings best first (those that fit, by
/// peak reserved), identical results on one row; then the other designs,
/// apart.
pub fn print_sweep(rows: &[SweepRow]) {
    for t in trace_names(rows) {
        let mut mine: Vec<&SweepRow> = rows.iter().filter(|r| r.trace == t).collect();
        mine.sort_by_key(|r| rank_key(r));
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
        let (settings, designs): (Vec<&SweepRow>, Vec<&SweepRow>) =
            mine.iter().partition(|r| r.is_pytorch_setting());
        if !settings.is_empty() {
            out!("{}", rows_table(&settings));
        }
        if !designs.is_empty() {
            outln!(
                "other allocator designs (not PyTorch settings: for comparison; direct is a device call per request, as PYTORCH_NO_CUDA_MEMORY_CACHING=1):"
            );
            out!("{}", rows_table(&designs));
        }
        outln!();
    }
}

fn rows_table(rows: &[&SweepRow]) -> String {
    let mut tab = Table::new(vec![
        "setting".into(),
        "peak reserved".into(),
        "waste at peak".into(),
        "utilization".into(),
        "device calls".into(),
        "flushes".into(),
        "OOM".into(),
    ]);
    for (r, same) in grouped(rows.iter().copied(), |r| r) {
        tab.row(vec![
            group_cell(r, &same),
            bytes(r.peak_reserved_bytes),
            bytes(r.waste_at_peak_bytes),
            percent(r.utilization),
            count(r.num_device_alloc + r.num_device_free),
            count(r.num_sync_all_streams),
            oom_cell(r),
        ]);
    }
    tab.render()
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
