//! How an inference engine sizes itself on a shared device, by vLLM's rule
//! (`gpu_memory_utilization`, V1 engine): it may use `total × util` bytes
//! of the device, refuses to start when less than that is free, and gives
//! its KV cache what is left of that share after its own other memory (the
//! peak PyTorch allocated while it loaded and profiled, and what it holds
//! outside PyTorch). A trace marks the engine's KV cache allocations with a
//! `# phase: kv_cache` mark; each allocation of that phase gets an equal
//! part of the budget, rounded down to 2 MiB.

use vramlab_allocator::MemInfo;
use vramlab_allocator::format::format_size;
use vramlab_traces::{Event, Trace};

/// The phase label of an engine's KV cache allocations.
pub const KV_PHASE: &str = "kv_cache";

/// How an engine with no room for its KV cache says so (its OOM message
/// begins with it).
pub const KV_NO_ROOM: &str = "no memory left for the KV cache";

/// Each KV cache allocation is a multiple of this.
pub const KV_ROUND: u64 = 2 << 20;

/// The bytes an engine of utilization `util` may use on a device of
/// `total` bytes (vLLM's `requested_memory`: the product, truncated).
pub fn requested(total: u64, util: f64) -> u64 {
    (total as f64 * util) as u64
}

/// vLLM's refusal to start, in its words.
pub(super) fn start_refused(free: u64, total: u64, util: f64) -> String {
    format!(
        "the engine refuses to start: free memory on the device ({} of {}) is less than the desired GPU memory utilization ({util}, {})",
        format_size(free),
        format_size(total),
        format_size(requested(total, util))
    )
}

/// The engine's memory when its `kv_cache` phase begins.
pub(super) struct EngineNow {
    /// The peak PyTorch allocated so far (`allocated_bytes.all.peak`).
    pub peak_allocated: u64,
    /// Bytes it holds outside PyTorch.
    pub outside: u64,
    /// The device's memory (`cudaMemGetInfo`).
    pub info: MemInfo,
}

/// The bytes each allocation of the `kv_cache` phase that begins at event
/// `start` gets; `Err((bytes, free, message))` when nothing is left for
/// the KV cache.
pub(super) fn size_each(
    trace: &Trace,
    start: usize,
    util: f64,
    now: &EngineNow,
) -> Result<u64, (u64, u64, String)> {
    let end = trace
        .phases
        .iter()
        .map(|m| m.event_index as usize)
        .find(|&e| e > start)
        .unwrap_or(trace.events.len());
    let n = trace
        .events
        .get(start..end)
        .unwrap_or_default()
        .iter()
        .filter(|e| matches!(e, Event::Alloc { .. }))
        .count() as u64;
    let info = now.info;
    let requested = requested(info.total, util);
    let non_kv = now.peak_allocated.saturating_add(now.outside);
    let budget = requested.saturating_sub(non_kv);
    let each = (budget / n.max(1)) / KV_ROUND * KV_ROUND;
    if each == 0 && n > 0 {
        return Err((
            requested,
            info.free,
            format!(
                "{KV_NO_ROOM}: utilization {util} gives the engine {}, and its weights and activations took {}",
                format_size(requested),
                format_size(non_kv)
            ),
        ));
    }
    Ok(each)
}
