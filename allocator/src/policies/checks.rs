//! Helpers of the policies' invariant checkers (`check_invariants`): the
//! `ensure!` macro and the cross-check of the running statistics against
//! the ones recomputed from the blocks.

use crate::stats::{MemoryStats, StatArray};

/// Fails with a formatted message unless the condition holds (for
/// invariant checkers).
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err(format!($($arg)*));
        }
    };
}
pub(crate) use ensure;

/// Compares every statistic an invariant checker recomputed from the blocks
/// (`want`) with the running statistics (`got`): the current values must be
/// equal, and every running statistic must satisfy
/// `current == allocated - freed` and `peak >= current`.
pub(crate) fn compare_stats(got: &MemoryStats, want: &MemoryStats) -> Result<(), String> {
    for (name, g, w) in stat_pairs(got, want) {
        for (pool, gs, ws) in [
            ("all", &g.all, &w.all),
            ("small_pool", &g.small_pool, &w.small_pool),
            ("large_pool", &g.large_pool, &w.large_pool),
        ] {
            ensure!(
                gs.current == ws.current,
                "{name}.{pool}.current is {} but the blocks say {}",
                gs.current,
                ws.current
            );
            ensure!(
                gs.current == gs.allocated.wrapping_sub(gs.freed) && gs.peak >= gs.current,
                "{name}.{pool}: current/allocated/freed/peak inconsistent"
            );
        }
    }
    Ok(())
}

/// The per-pool statistics a checker recomputes from the blocks, by name:
/// `(name, got, want)`, in PyTorch's order.
pub(crate) fn stat_pairs<'a>(
    got: &'a MemoryStats,
    want: &'a MemoryStats,
) -> [(&'static str, &'a StatArray, &'a StatArray); 9] {
    [
        ("allocation", &got.allocation, &want.allocation),
        ("segment", &got.segment, &want.segment),
        ("active", &got.active, &want.active),
        ("inactive_split", &got.inactive_split, &want.inactive_split),
        (
            "allocated_bytes",
            &got.allocated_bytes,
            &want.allocated_bytes,
        ),
        ("reserved_bytes", &got.reserved_bytes, &want.reserved_bytes),
        ("active_bytes", &got.active_bytes, &want.active_bytes),
        (
            "inactive_split_bytes",
            &got.inactive_split_bytes,
            &want.inactive_split_bytes,
        ),
        (
            "requested_bytes",
            &got.requested_bytes,
            &want.requested_bytes,
        ),
    ]
}
