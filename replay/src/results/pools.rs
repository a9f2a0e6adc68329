//! Each pool's share of a replay: the default pool and every private pool
//! (CUDA graphs' pools, MemPools), at the reserved peak and at the end.

use serde::Serialize;
use vramlab_allocator::{BlockState, SegmentView};
use vramlab_traces::Trace;

/// One pool's segments, in numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PoolState {
    /// Segments (or mapped ranges of expandable segments).
    pub segments: u64,
    /// Bytes of its segments.
    pub reserved_bytes: u64,
    /// Bytes of its allocated blocks.
    pub allocated_bytes: u64,
    /// Reserved but not allocated.
    pub waste_bytes: u64,
}

/// One pool of a replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolUse {
    /// PyTorch's `MempoolId_t`: `[0, 0]` for the default pool.
    pub id: [u64; 2],
    /// `default`, `graph` or `mempool`.
    pub kind: &'static str,
    /// At the moment reserved bytes peaked.
    pub at_peak: PoolState,
    /// At the end of the replay.
    pub at_end: PoolState,
}

/// The default pool and each private pool of `trace`, from the segments at
/// the peak and at the end; empty for a trace without private pools.
pub fn pool_uses(trace: &Trace, at_peak: &[SegmentView], at_end: &[SegmentView]) -> Vec<PoolUse> {
    if trace.pools.is_empty() {
        return Vec::new();
    }
    let tally = |segs: &[SegmentView], pool: Option<u32>| {
        let mut s = PoolState::default();
        for g in segs.iter().filter(|g| g.private_pool == pool) {
            s.segments += 1;
            s.reserved_bytes += g.size;
            s.allocated_bytes += g
                .blocks
                .iter()
                .filter(|b| b.state == BlockState::Allocated)
                .map(|b| b.size)
                .sum::<u64>();
        }
        s.waste_bytes = s.reserved_bytes.saturating_sub(s.allocated_bytes);
        s
    };
    std::iter::once((None, [0, 0], "default"))
        .chain(
            trace
                .pools
                .iter()
                .enumerate()
                .map(|(i, d)| (Some(i as u32), [d.id.0, d.id.1], d.kind.name())),
        )
        .map(|(p, id, kind)| PoolUse {
            id,
            kind,
            at_peak: tally(at_peak, p),
            at_end: tally(at_end, p),
        })
        .collect()
}
