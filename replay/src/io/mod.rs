//! Traces in, with the allocator's knowledge (snapshots laid out under
//! their recorded settings), and a replay out as a PyTorch snapshot.

pub mod load;
pub mod snapshot_out;
