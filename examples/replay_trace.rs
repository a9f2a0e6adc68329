//! Replay a trace through PyTorch's native caching allocator under two
//! settings and print what each would reserve.
//!
//!     cargo run --example replay_trace [TRACE]

use std::path::PathBuf;

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{ReplayOptions, Scenario};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("workloads/data/gpt-small-train.csv")
        });
    let trace = vramlab_replay::Inputs::new([&path]).trace()?;
    let opts = ReplayOptions::default();
    for setting in ["", "expandable_segments:True"] {
        let conf = AllocConf::parse(setting, TorchVersion::NEWEST)?;
        // A 1 GiB card: does the job fit?
        let scenario = Scenario::native(conf).with_capacity(Some(1 << 30));
        let run = scenario.run(&trace, &opts)?;
        let s = &run.summary;
        println!(
            "{:<28} peak reserved {:>6.1} MiB, peak live {:>6.1} MiB, utilization {:>5.1}%, device mallocs {}, OOM: {}",
            run.conf,
            s.peak_reserved_bytes as f64 / 1048576.0,
            s.peak_requested_bytes as f64 / 1048576.0,
            s.utilization * 100.0,
            s.num_device_alloc,
            run.oom.as_ref().map_or("none".to_string(), |o| format!(
                "at event {}",
                o.event_index
            )),
        );
    }
    Ok(())
}
