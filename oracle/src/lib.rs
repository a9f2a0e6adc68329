//! PyTorch's own allocator as the judge, on any machine.
//!
//! The official torch wheel of a release is installed from PyPI into a
//! cached virtual environment ([`Installer`]), and runs
//! `workloads/record/torch_replay.py` — every allocation of a trace through
//! `torch.cuda.caching_allocator_alloc`, every free through
//! `caching_allocator_delete` — on vramlab's fake CUDA device
//! (`vramlab-fakecuda`, prepared per wheel by [`fake`]). The fake answers
//! with vramlab's own simulated device, so PyTorch's decisions and
//! vramlab's replay ([`judge_trace`]) meet on the same addresses and capacity:
//! the judge compares peak reserved and allocated memory, cudaMalloc and
//! cudaFree counts, retries, the OOM, and every device call in order,
//! naming the first one that differs.
//!
//! The same wheel on the same fake device also records a user's script
//! unchanged ([`record_script`]): memory history on, PyTorch's allocator
//! and NVIDIA's own libraries (cuBLAS, cuDNN, Triton's launcher) deciding
//! every allocation, PyTorch's snapshot written at the end.
//!
//! The public surface is the root's re-exports — the wheel's environment
//! ([`Installer`], [`Interpreter`], [`WheelInfo`], [`cache_dir`]), the
//! judge ([`oracle_trace`], [`judge_trace`], [`JudgeOptions`],
//! [`OracleRow`]), the recorder ([`record_script`], [`RecordOptions`],
//! [`FakeCard`], [`Recording`], [`RecordSummary`], [`keep_snapshot`]) and [`OracleError`] — and one namespace, [`fake`]
//! (finding the fake CUDA library and preparing it for a wheel); every
//! other module is private.

#![warn(unreachable_pub)]

mod colocate;
mod device_log;
mod elf;
mod error;
pub mod fake;
mod install;
mod judge;
mod record;
mod torch_side;
mod wheel;

pub use colocate::{
    ColocatedJudge, ColocatedJudged, ColocatedProcess, ColocatedTorch, judge_colocated,
};
pub use error::OracleError;
pub use install::{Installer, Interpreter, cache_dir};
pub use judge::{JudgeOptions, OracleRow, judge_trace, oracle_trace};
pub use record::{
    FakeCard, RecordOptions, RecordSummary, Recording, ValueReads, keep_snapshot, record_script,
};
pub use wheel::WheelInfo;
