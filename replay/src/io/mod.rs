//! Traces in, with the allocator's knowledge (snapshots laid out under
//! their recorded settings, devices picked and named: [`inputs`]), and a
//! replay out as a PyTorch snapshot ([`snapshot_out`]).

pub mod inputs;
pub mod snapshot_out;
