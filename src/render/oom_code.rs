//! The code behind an out-of-memory: the Python frames of the allocation
//! that failed and of the largest allocations live at that moment, from the
//! stacks a snapshot recorded.

use vramlab_replay::OomEvent;
use vramlab_traces::Trace;

use crate::render::table::bytes;

/// Up to four frames of a stack: the code, then its callers.
pub fn frames_line(trace: &Trace, id: u32) -> Option<String> {
    let frames = vramlab_traces::code_frames(trace.stack_of(id));
    let first = frames.first()?;
    let mut s = first.short();
    let callers: Vec<String> = frames.iter().skip(1).take(3).map(|f| f.short()).collect();
    if !callers.is_empty() {
        s.push_str(&format!("  (called from {})", callers.join(" ← ")));
    }
    Some(s)
}

/// Prints the code of the failing allocation and of the largest live ones
/// (each line indented by `indent`), when the trace carries stacks.
pub fn print_code(trace: &Trace, o: &OomEvent, indent: &str) {
    if trace.frames.is_empty() {
        outln!(
            "{indent}(no Python stacks in this trace: record with torch.cuda.memory._record_memory_history(stacks=\"python\") to see the code)"
        );
        outln!();
        return;
    }
    if let Some(line) = o.alloc_id.and_then(|id| frames_line(trace, id)) {
        outln!("{indent}the allocation that failed: {line}");
    }
    if !o.largest_live.is_empty() {
        outln!("{indent}largest live allocations at that moment:");
        for &(id, size) in &o.largest_live {
            outln!(
                "{indent}  {:>11}  {}",
                bytes(size),
                frames_line(trace, id).unwrap_or_else(|| "(no stack recorded)".into())
            );
        }
    }
    outln!();
}
