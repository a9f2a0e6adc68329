//! Which block pool a block belongs to ([`PoolRef`]).

use crate::stats::PoolKind;

/// Which of the allocator's block pools a block belongs to: the default
/// small and large pools, or the small or large pool of a private pool
/// (a CUDA graph's or a MemPool's, each with its own pair). An index into
/// `NativeAllocator::pools`: `2 × (private pool + 1) + large`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct PoolRef(pub(super) u32);

impl PoolRef {
    /// The default small pool (`small_blocks`).
    pub(super) const SMALL: PoolRef = PoolRef(0);
    /// The default large pool (`large_blocks`).
    pub(super) const LARGE: PoolRef = PoolRef(1);

    /// The small or large pool of private pool `private` (`None`: the
    /// default pools).
    #[inline]
    pub(super) fn of(private: Option<u32>, small: bool) -> PoolRef {
        let base = private.map_or(0, |p| 2 * (p + 1));
        PoolRef(base + u32::from(!small))
    }

    /// Small or large.
    #[inline]
    pub(super) fn kind(self) -> PoolKind {
        if self.0 & 1 == 0 {
            PoolKind::Small
        } else {
            PoolKind::Large
        }
    }

    /// The private pool it belongs to (`None`: a default pool).
    #[inline]
    pub(super) fn private(self) -> Option<u32> {
        (self.0 / 2).checked_sub(1)
    }

    /// Index into the allocator's pools.
    #[inline]
    pub(super) fn index(self) -> usize {
        self.0 as usize
    }
}

impl From<PoolRef> for PoolKind {
    fn from(r: PoolRef) -> PoolKind {
        r.kind()
    }
}
