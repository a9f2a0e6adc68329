//! What `colocate` prints for people, and its plot.

use std::path::Path;

use anyhow::Result;

use super::ColocateOut;
use crate::render::table::{Table, bytes, count};

/// The tenants, the steps, the search and the judge, as tables and lines.
pub(super) fn human(out: &ColocateOut, card: &str) {
    outln!(
        "{} tenants on one device ({card}): the device peaks at {} of {}",
        out.tenants.len(),
        bytes(out.device_peak_bytes),
        bytes(out.capacity)
    );
    match &out.first_oom {
        Some((t, e)) => {
            let row = out.tenants.iter().find(|r| &r.name == t);
            let why = row
                .and_then(|r| r.oom_message.as_deref())
                .and_then(|m| m.lines().next())
                .unwrap_or("");
            let mut at = Vec::new();
            if let Some(p) = row.and_then(|r| r.oom_phase.as_deref()) {
                at.push(format!("phase {p}"));
            }
            if let Some(l) = row.and_then(|r| r.oom_line.as_deref()) {
                at.push(l.to_string());
            }
            let at = if at.is_empty() {
                String::new()
            } else {
                format!(" ({})", at.join(", "))
            };
            outln!(
                "{t} runs out of memory first, at its event {}{at}: {why}",
                count(*e)
            );
        }
        None => outln!("every tenant runs to its end"),
    }
    outln!();
    let mut t = Table::new(vec![
        "tenant".into(),
        "settings".into(),
        "peak reserved".into(),
        "peak allocated".into(),
        "cudaMalloc".into(),
        "retries".into(),
        "OOM".into(),
    ])
    .left(1);
    for r in &out.tenants {
        let conf = match r.kv_util {
            Some(u) => format!("{}, utilization {u}", r.conf),
            None => r.conf.clone(),
        };
        t.row(vec![
            r.name.clone(),
            conf,
            bytes(r.peak_reserved_bytes),
            bytes(r.peak_allocated_bytes),
            count(r.num_device_alloc),
            count(r.num_alloc_retries),
            r.oom_event
                .map_or("none".into(), |e| format!("event {}", count(e))),
        ]);
    }
    out!("{}", t.render());
    outln!();
    let mut head = vec!["step".to_string(), "tenant".into(), "phase".into()];
    head.extend(out.tenants.iter().map(|r| format!("{} on device", r.name)));
    head.push("device used".into());
    head.push("device peak".into());
    let mut s = Table::new(head).left(1).left(2);
    for (i, step) in out.steps.iter().enumerate() {
        let mut row = vec![(i + 1).to_string(), step.tenant.clone(), step.phase.clone()];
        row.extend(step.held_bytes.iter().map(|&b| bytes(b)));
        row.push(bytes(step.device_used_bytes));
        row.push(bytes(step.device_peak_bytes));
        s.row(row);
    }
    out!("{}", s.render());
    if let Some(search) = &out.search {
        outln!();
        match (search.largest_fitting, search.smallest_with_room) {
            (Some(u), Some(low)) => outln!(
                "the largest utilization of {} with every tenant running to its end: {u:.2} (it fits from {low:.2}: below, the engine has no room for its KV cache; {} replays)",
                search.tenant,
                search.tried.len()
            ),
            (None, Some(low)) => outln!(
                "{} fits at no utilization: from {low:.2} it has room for its KV cache, and some tenant runs out of memory ({} replays)",
                search.tenant,
                search.tried.len()
            ),
            _ => outln!(
                "{} has no room for its KV cache even at 1.00 ({} replays)",
                search.tenant,
                search.tried.len()
            ),
        }
    }
    if let Some(w) = &out.what_if {
        outln!();
        let names: Vec<String> = out.tenants.iter().map(|t| t.name.clone()).collect();
        super::what_if::print(w, &names);
    }
    if let Some(j) = &out.oracle {
        outln!();
        j.print();
    }
}

/// The stacked picture of the steps (BASE.png and BASE.svg).
pub(super) fn plot(base: &Path, out: &ColocateOut) -> Result<()> {
    use vramlab_reports::{ColocationChart, ColocationStep, plot_colocation};
    let chart = ColocationChart {
        title: format!(
            "{} tenants on one device of {}",
            out.tenants.len(),
            bytes(out.capacity)
        ),
        capacity: out.capacity,
        tenants: out.tenants.iter().map(|t| t.name.clone()).collect(),
        steps: out
            .steps
            .iter()
            .map(|s| ColocationStep {
                label: if s.phase.is_empty() {
                    s.tenant.clone()
                } else {
                    format!("{}: {}", s.tenant, s.phase)
                },
                held: s.held_bytes.clone(),
                device_peak: s.device_peak_bytes,
                oom: s.oom_event.map(|_| s.tenant.clone()),
            })
            .collect(),
    };
    let files = plot_colocation(base, &chart)?;
    eprintln!("wrote {} and {}", files.png.display(), files.svg.display());
    Ok(())
}
