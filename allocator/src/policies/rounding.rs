//! Rounding shared by the policies other than `native` (whose own rules,
//! PyTorch's `round_size` and `get_allocation_size`, are in
//! [`native::rounding`](super::native::rounding)).

/// Rounds `n` up to a multiple of `m` (a power of two or any positive
/// number), saturating.
#[inline]
pub(crate) fn round_up(n: u64, m: u64) -> u64 {
    n.div_ceil(m).saturating_mul(m)
}
