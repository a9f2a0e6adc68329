//! A run on a capacity, for people and programs: it fits (with headroom),
//! or where it ran out, the code that asked, and the allocator's state
//! there (the segments with the most free memory). Its JSON is
//! [`vramlab_replay::CapacityRun`].

use vramlab_allocator::{BlockState, SegmentView};
use vramlab_replay::free_bytes;
use vramlab_replay::{OomEvent, Run, Start};
use vramlab_traces::Trace;

use crate::render::oom_code::print_code;
use crate::render::table::{Table, bytes, count};

/// Prints whether the run fit `capacity`, or where and why it did not.
pub fn print_state(trace: &Trace, run: &Run, capacity: u64, start: Start) {
    let Some(o) = &run.oom else {
        outln!(
            "{}: fits {} (peak reserved {}, headroom {})",
            run.conf,
            bytes(capacity),
            bytes(run.summary.peak_reserved_bytes),
            bytes(capacity.saturating_sub(run.summary.peak_reserved_bytes))
        );
        return;
    };
    print_where(trace, run, o, capacity, start);
    print_request(o);
    print_code(trace, o, "  ");
    print_segments(&o.segments);
}

fn print_where(trace: &Trace, run: &Run, o: &OomEvent, capacity: u64, start: Start) {
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
}

fn print_request(o: &OomEvent) {
    let free_total: u64 = o.segments.iter().map(free_bytes).sum();
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
}

/// The 15 segments with the most free memory.
fn print_segments(segments: &[SegmentView]) {
    let mut tab = Table::new(vec![
        "segment".into(),
        "pool".into(),
        "size".into(),
        "allocated".into(),
        "free".into(),
        "largest free".into(),
        "blocks".into(),
    ]);
    let mut segs: Vec<&SegmentView> = segments.iter().collect();
    segs.sort_by_key(|s| std::cmp::Reverse(free_bytes(s)));
    for s in segs.iter().take(15) {
        let free = free_bytes(s);
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
        segments.len()
    );
    for line in tab.render().lines() {
        outln!("  {line}");
    }
    outln!();
}
