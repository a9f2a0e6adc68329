//! `vramlab oom-point --capacity SIZE`: the first failing allocation and the
//! allocator's state there.

use anyhow::Result;
use vramlab_allocator::BlockState;
use vramlab_replay::{ReplayOptions, Scenario, Start};
use vramlab_traces::Trace;

use crate::table::{Table, bytes, count};

/// Replays each scenario on `capacity` and shows where it fails.
pub fn show_oom_state(
    trace: &Trace,
    scenarios: &[Scenario],
    capacity: u64,
    start: Start,
    json: bool,
) -> Result<()> {
    let opts = ReplayOptions {
        check_invariants: false,
        start,
        ..Default::default()
    };
    let mut out_json = Vec::new();
    for s in scenarios {
        let run = s.clone().with_capacity(Some(capacity)).run(trace, &opts)?;
        let Some(o) = &run.oom else {
            if json {
                out_json.push(
                    serde_json::json!({"setting": run.conf, "capacity": capacity, "oom": null,
                    "peak_reserved_bytes": run.summary.peak_reserved_bytes}),
                );
            } else {
                outln!(
                    "{}: fits {} (peak reserved {}, headroom {})",
                    run.conf,
                    bytes(capacity),
                    bytes(run.summary.peak_reserved_bytes),
                    bytes(capacity.saturating_sub(run.summary.peak_reserved_bytes))
                );
            }
            continue;
        };
        let free_total: u64 = o
            .segments
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| b.state == BlockState::Free)
            .map(|b| b.size)
            .sum();
        if json {
            out_json.push(serde_json::json!({
                "setting": run.conf, "capacity": capacity, "oom": o,
                "failing_stack": o.alloc_id.map(|id| crate::oom_code::stack_json(trace, id)),
                "largest_live": o.largest_live.iter().map(|&(id, size)| serde_json::json!({
                    "id": id, "requested_bytes": size, "stack": crate::oom_code::stack_json(trace, id),
                })).collect::<Vec<_>>(),
                "cached_free_bytes": free_total,
                "segments": o.segments.iter().map(|s| serde_json::json!({
                    "address": s.ptr, "size": s.size, "pool": s.pool.name(), "expandable": s.is_expandable,
                    "blocks": s.blocks.iter().map(|b| serde_json::json!({
                        "address": b.ptr, "size": b.size, "requested": b.requested, "state": b.state.snapshot_name()
                    })).collect::<Vec<_>>()
                })).collect::<Vec<_>>()
            }));
            continue;
        }
        if o.at_start {
            outln!(
                "{}: out of memory before the first event on {}: the state the recording began with does not fit ({} in use, {} {})",
                run.conf,
                bytes(capacity),
                bytes(o.live_requested_bytes),
                bytes(o.requested_bytes),
                if start == Start::Recorded {
                    "of recorded segments did not fit"
                } else {
                    "requested by the block that did not fit"
                }
            );
        } else {
            outln!(
                "{}: out of memory at event {} of {} on {}",
                run.conf,
                count(o.event_index),
                count(trace.events.len() as u64),
                bytes(capacity)
            );
        }
        outln!(
            "  request            {} (rounded {}, asked the device for {})",
            bytes(o.requested_bytes),
            bytes(o.rounded_bytes),
            bytes(o.device_request_bytes)
        );
        outln!("  live tensors       {}", bytes(o.live_requested_bytes));
        outln!("  allocated          {}", bytes(o.allocated_bytes));
        outln!("  reserved           {}", bytes(o.reserved_bytes));
        outln!(
            "  cached, free       {} (reserved but unallocated: {})",
            bytes(free_total),
            bytes(o.reserved_bytes.saturating_sub(o.allocated_bytes))
        );
        outln!("  largest free block {}", bytes(o.largest_free_block));
        outln!("  PyTorch would say: {}", o.message);
        outln!();
        crate::oom_code::print_code(trace, o, "  ");
        let mut tab = Table::new(vec![
            "segment".into(),
            "pool".into(),
            "size".into(),
            "allocated".into(),
            "free".into(),
            "largest free".into(),
            "blocks".into(),
        ]);
        let mut segs = o.segments.clone();
        segs.sort_by_key(|s| {
            std::cmp::Reverse(
                s.blocks
                    .iter()
                    .filter(|b| b.state == BlockState::Free)
                    .map(|b| b.size)
                    .sum::<u64>(),
            )
        });
        for s in segs.iter().take(15) {
            let free: u64 = s
                .blocks
                .iter()
                .filter(|b| b.state == BlockState::Free)
                .map(|b| b.size)
                .sum();
            let largest = s
                .blocks
                .iter()
                .filter(|b| b.state == BlockState::Free)
                .map(|b| b.size)
                .max()
                .unwrap_or(0);
            tab.row(vec![
                format!("{:#x}", s.ptr),
                s.pool.name().to_string(),
                bytes(s.size),
                bytes(s.size - free),
                bytes(free),
                bytes(largest),
                s.blocks.len().to_string(),
            ]);
        }
        outln!(
            "  segments with the most free memory ({} segments in all):",
            o.segments.len()
        );
        for line in tab.render().lines() {
            outln!("  {line}");
        }
        outln!();
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&out_json)?);
    }
    Ok(())
}
