//! How `vramlab diff` prints: both runs at their peaks, the identity that
//! ties them, and the groups that changed.

use vramlab_replay::{GroupBy, RunDiff};

use crate::render::table::{Table, bytes, count};

/// `+1.00 MiB`, `-1.00 MiB`, `0 B`.
pub(crate) fn signed(n: i64) -> String {
    match n.signum() {
        1 => format!("+{}", bytes(n.unsigned_abs())),
        -1 => format!("-{}", bytes(n.unsigned_abs())),
        _ => "0 B".into(),
    }
}

/// Prints a diff, the `top` largest changes first.
pub fn print_diff(d: &RunDiff, top: usize) {
    let release = |v: &Option<String>| {
        v.as_ref()
            .map_or(String::new(), |v| format!(" (PyTorch {v} rules)"))
    };
    outln!(
        "A: {} under {}{}",
        d.a.trace,
        d.a.setting,
        release(&d.a.torch_version)
    );
    outln!(
        "B: {} under {}{}",
        d.b.trace,
        d.b.setting,
        release(&d.b.torch_version)
    );
    let mut t = Table::new(vec![String::new(), "A".into(), "B".into(), "B − A".into()]);
    t.row(vec![
        "peak reserved".into(),
        bytes(d.a.peak_reserved_bytes),
        bytes(d.b.peak_reserved_bytes),
        signed(d.reserved_delta_bytes),
    ]);
    t.row(vec![
        "allocated at the peak".into(),
        bytes(d.a.allocated_at_peak_bytes),
        bytes(d.b.allocated_at_peak_bytes),
        signed(d.allocated_delta_bytes),
    ]);
    t.row(vec![
        "waste at the peak".into(),
        bytes(d.a.waste_at_peak_bytes),
        bytes(d.b.waste_at_peak_bytes),
        signed(d.waste_delta_bytes),
    ]);
    let at = |e: Option<u64>, p: &Option<String>| {
        let e = e.map_or("start".into(), |e| format!("event {}", count(e)));
        p.as_ref().map_or(e.clone(), |p| format!("{e} ({p})"))
    };
    t.row(vec![
        "peak at".into(),
        at(d.a.peak_event_index, &d.a.phase_at_peak),
        at(d.b.peak_event_index, &d.b.phase_at_peak),
        String::new(),
    ]);
    out!("{}", t.render());
    for (name, side) in [("A", &d.a), ("B", &d.b)] {
        if let Some(m) = &side.oom {
            outln!("note: {name} ran out of memory; its peak is the one before: {m}");
        }
    }
    outln!(
        "reserved {} = allocated {} + waste {}",
        signed(d.reserved_delta_bytes),
        signed(d.allocated_delta_bytes),
        signed(d.waste_delta_bytes)
    );
    outln!();
    let by = match d.grouped_by {
        GroupBy::Frame => "source line (first user frame)",
        GroupBy::PhaseAndSize => {
            "phase allocated in · block size (one trace or both have no stacks)"
        }
        GroupBy::Size => "block size (the traces have no stacks and no phase marks)",
    };
    outln!("allocated at the peak by {by}:");
    let mut t = Table::new(["group", "A", "B", "B − A"].map(String::from).to_vec());
    for g in d.groups.iter().take(top) {
        t.row(vec![
            g.key.clone(),
            bytes(g.a_bytes),
            bytes(g.b_bytes),
            signed(g.delta_bytes),
        ]);
    }
    let rest = d.groups.get(top..).unwrap_or(&[]);
    if !rest.is_empty() {
        let sum = |f: fn(&vramlab_replay::DiffGroup) -> i128| rest.iter().map(f).sum::<i128>();
        let a = sum(|g| g.a_bytes as i128);
        let b = sum(|g| g.b_bytes as i128);
        t.row(vec![
            format!("({} more groups)", count(rest.len() as u64)),
            bytes(a.max(0) as u64),
            bytes(b.max(0) as u64),
            signed((b - a).clamp(i64::MIN as i128, i64::MAX as i128) as i64),
        ]);
    }
    out!("{}", t.render());
    outln!("the groups add up to each run's allocated bytes at its peak");
}
