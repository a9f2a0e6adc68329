//! Traces in, with the allocator's knowledge (snapshots laid out under
//! their recorded settings, devices picked and named: [`inputs`]), and a
//! replay out as a PyTorch snapshot ([`snapshot_out`]).

pub(crate) mod inputs;
pub(crate) mod snapshot_out;
