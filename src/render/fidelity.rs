//! A fidelity check for people (a row per device, the first mismatch of
//! each, the verdict) and for programs ([`FidelityOutcome`] as JSON).

use anyhow::Result;
use vramlab_replay::FidelityOutcome;

use crate::render::table::{Table, count, percent};

/// Prints the outcome: JSON, or the table and the verdict.
pub fn print_fidelity(outcome: &FidelityOutcome, json: bool) -> Result<()> {
    if json {
        return crate::render::json::print_sorted(outcome);
    }
    outln!("snapshot: {}", outcome.snapshot);
    let mut t = Table::new(vec![
        "device".into(),
        "settings".into(),
        "events".into(),
        "allocs".into(),
        "addresses matched".into(),
        "segment events matched".into(),
        "final state".into(),
    ]);
    for r in &outcome.devices {
        t.row(vec![
            r.device.map_or("-".into(), |d| d.to_string()),
            r.conf.clone(),
            count(r.events),
            count(r.allocs),
            format!(
                "{} ({})",
                count(r.alloc_addresses_matched),
                ratio(r.alloc_addresses_matched, r.allocs)
            ),
            format!(
                "{} of {} ({})",
                count(r.segment_events_matched),
                count(r.segment_events_expected),
                ratio(r.segment_events_matched, r.segment_events_expected)
            ),
            match r.final_state_matched {
                Some(true) => "matches".into(),
                Some(false) => "differs".into(),
                None => "-".into(),
            },
        ]);
    }
    out!("{}", t.render());
    for r in outcome.devices.iter().filter(|r| r.host_allocs > 0) {
        outln!(
            "device {}: pinned host allocator: {} requests; blocks made or destroyed as recorded at {} of {} events ({})",
            r.device.unwrap_or(0),
            count(r.host_allocs),
            count(r.host_decisions_matched),
            count(r.host_decisions_expected),
            ratio(r.host_decisions_matched, r.host_decisions_expected)
        );
    }
    for r in &outcome.devices {
        if let Some(m) = &r.first_mismatch {
            outln!(
                "\ndevice {}: first mismatch at event {} ({}):\n  expected: {}\n  replayed: {}",
                r.device.unwrap_or(0),
                m.event_index,
                m.kind,
                m.expected,
                m.actual
            );
            let blocks: Vec<String> = m
                .free_blocks
                .iter()
                .take(20)
                .map(|b| format!("{:#x}+{}", b.address, b.size))
                .collect();
            outln!(
                "  free blocks of that stream before it ({}): {}",
                m.free_blocks.len(),
                blocks.join(", ")
            );
        }
    }
    outln!(
        "\n{}",
        if outcome.devices_exact() {
            "every allocation address and segment decision matches PyTorch"
        } else {
            "the replay differs from the recording"
        }
    );
    Ok(())
}

/// `a` of `b` as a share, `n/a` of nothing.
fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "n/a".into()
    } else {
        percent(a as f64 / b as f64)
    }
}
