//! PyTorch release numbers that select version-dependent behaviour: the
//! release type is `vramlab-torch`'s, where every crate takes it from.

pub use vramlab_torch::TorchVersion;

/// `true` up to 2.11, whose allocator breaks ties between free blocks of
/// one size by address; from 2.12 by allocation order (a block or segment
/// counter: `policies/native/block.rs`, `TieOrder`), so that where the
/// driver puts segments no longer changes a decision.
pub(crate) fn ties_by_address(v: TorchVersion) -> bool {
    !v.at_least(2, 12)
}
