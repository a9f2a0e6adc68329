//! A serving engine's CUDA graph pool and KV cache budget from the library:
//! forwards recorded at a few batch sizes → the pool for a list of capture
//! sizes in two orders, and the largest KV cache on an H100 80GB.
//!
//!     cargo run --release --example serve_budget [FORWARDS.csv]

use std::path::PathBuf;

use vramlab_allocator::AllocConf;
use vramlab_replay::{ForwardRecording, KvCache, Scenario, serve_budget};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path: PathBuf = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "tests/serve/llama-1b-decode-bs1-16-128.csv".into())
        .into();
    let trace = vramlab_traces::read_traces(&path, None, &Default::default(), None)?.remove(0);
    let forwards = ForwardRecording::from_trace(&trace)?;
    println!("forwards recorded at batch {:?}", forwards.sizes());
    let scenario = Scenario::native(AllocConf::default());
    let sizes = [1, 2, 4, 8, 16, 32, 64, 128];
    let mut largest_first = sizes;
    largest_first.reverse();
    for (name, order) in [("smallest first", sizes), ("largest first", largest_first)] {
        let a = serve_budget(&forwards, &order, &scenario, None, None)?;
        println!(
            "{name}: graph pool {:.2} MiB in {} segments",
            a.graph_pool_bytes as f64 / (1 << 20) as f64,
            a.graph_pool_segments
        );
    }
    // Llama-3.2-1B in bf16: 2 (K and V) × 16 layers × 8 KV heads × 64 × 2 bytes.
    let kv = KvCache {
        bytes_per_token: 32768,
        tensors: 16,
        block_tokens: 16,
    };
    let budget = (80e9 * 0.9) as u64; // 0.9 of an 80 GB card
    let a = serve_budget(&forwards, &largest_first, &scenario, Some(budget), Some(kv))?;
    println!(
        "KV cache at gpu_memory_utilization 0.9 of 80 GB: {} tokens",
        a.kv_tokens.unwrap_or(0)
    );
    Ok(())
}
