//! What the user runs on: the PyTorch release whose rules apply, and the
//! card whose memory bounds the job.

pub mod gpus;
pub mod release;
