//! What users ask of replays: sweeps over settings, recommendations,
//! OOM points, how much a prediction depends on the driver's address
//! order, the largest workload that fits, the regression gate,
//! pathological traces, and the fidelity proof against a recording.

pub mod bench;
pub mod fidelity;
pub mod fit;
pub mod gate;
pub mod grid;
pub mod matrix;
pub mod oom_point;
pub mod placement;
pub mod recommend;
pub mod stress;
pub mod sweep;
