//! What users ask of replays: sweeps over settings, recommendations,
//! OOM points, how much a prediction depends on the driver's address
//! order, the largest workload that fits, the regression gate,
//! pathological traces, the fidelity proof against a recording, and what
//! a PyTorch upgrade does.

pub(crate) mod bench;
pub(crate) mod culprits;
pub(crate) mod diff;
pub(crate) mod explain;
pub(crate) mod fidelity;
pub(crate) mod fit;
pub mod gate;
pub(crate) mod grid;
pub(crate) mod growth;
pub(crate) mod host_advice;
pub(crate) mod job;
pub(crate) mod job_recommend;
pub(crate) mod matrix;
pub(crate) mod oom_point;
pub(crate) mod oom_search;
pub(crate) mod peak_state;
pub(crate) mod placement;
pub(crate) mod plan;
pub(crate) mod recommend;
pub(crate) mod recommend_trace;
pub(crate) mod serve_budget;
pub mod stress;
pub(crate) mod sweep;
pub(crate) mod sweep_cases;
pub(crate) mod sweep_trace;
pub(crate) mod upgrade;
