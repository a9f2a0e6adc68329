//! `vramlab serve-budget`: a serving engine's CUDA graph pool for a list of
//! capture sizes, and the largest KV cache left on a card.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use vramlab_replay::{ForwardRecording, KvCache, ServeBudget, serve_budget, start_up_trace};

use crate::args::{ConfArgs, DeviceArgs, TraceArgs, scenarios};
use crate::render::table::{Table, bytes, count};

/// The order the sizes are captured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CaptureOrder {
    /// Largest first (vLLM, SGLang).
    Desc,
    /// Smallest first.
    Asc,
    /// As listed.
    Given,
}

/// Arguments of `vramlab serve-budget`.
#[derive(Debug, Args)]
pub struct ServeBudgetArgs {
    /// A recording of the model's forward at a few batch sizes, one phase
    /// per forward whose label names its size ("forward bs=8"; a phase that
    /// captures a graph counts as the forward it captures); the events
    /// before the first forward are the engine's state (weights, buffers).
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    conf: ConfArgs,
    /// The batch sizes captured as CUDA graphs, e.g. 1,2,4,8,16,32,64,128
    /// (a size not recorded is interpolated between the nearest recorded
    /// ones).
    #[arg(
        long = "capture-sizes",
        value_name = "LIST",
        value_delimiter = ',',
        required = true
    )]
    capture_sizes: Vec<u64>,
    /// Capture order.
    #[arg(long, value_enum, default_value = "desc")]
    order: CaptureOrder,
    #[command(flatten)]
    device: DeviceArgs,
    /// The share of the card the engine may use (vLLM's
    /// gpu_memory_utilization).
    #[arg(
        long = "gpu-memory-utilization",
        value_name = "F",
        default_value = "0.9"
    )]
    utilization: f64,
    /// Bytes of KV cache per token, all layers together (e.g. Llama-3-8B in
    /// bf16: 2 × 32 layers × 8 heads × 128 × 2 bytes = 131072).
    #[arg(long = "kv-bytes-per-token", value_name = "BYTES")]
    kv_bytes_per_token: Option<u64>,
    /// Tensors the KV cache is allocated as (one per layer in vLLM).
    #[arg(long = "kv-tensors", value_name = "N", default_value = "1")]
    kv_tensors: u64,
    /// Tokens per KV-cache block: the cache grows in whole blocks.
    #[arg(long = "block-tokens", value_name = "N", default_value = "16")]
    block_tokens: u64,
    /// Also write the start-up (with the largest KV cache found) as a trace
    /// here, e.g. for `vramlab oracle` to judge.
    #[arg(long = "emit-trace", value_name = "FILE")]
    emit_trace: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `serve-budget`.
pub fn run(args: ServeBudgetArgs) -> Result<()> {
    args.conf.one_release("serve-budget")?;
    if !(args.utilization > 0.0 && args.utilization <= 1.0) {
        bail!(
            "--gpu-memory-utilization {} is not in (0, 1]",
            args.utilization
        );
    }
    if args.capture_sizes.contains(&0) {
        bail!("--capture-sizes: a capture size is at least 1");
    }
    let trace = args.trace.load(args.conf.torch_version())?.trace;
    let rec = ForwardRecording::from_trace(&trace)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.trace.trace.display()))?;
    let mut order = args.capture_sizes.clone();
    order.dedup();
    match args.order {
        CaptureOrder::Desc => order.sort_unstable_by(|a, b| b.cmp(a)),
        CaptureOrder::Asc => order.sort_unstable(),
        CaptureOrder::Given => {}
    }
    let all = scenarios(&args.conf, &args.device, &trace)?;
    let [scenario] = all.as_slice() else {
        bail!("serve-budget takes one setting (--conf once)");
    };
    let budget = budget_bytes(&args.device, args.utilization);
    let kv = args.kv_bytes_per_token.map(|b| KvCache {
        bytes_per_token: b,
        tensors: args.kv_tensors.max(1),
        block_tokens: args.block_tokens.max(1),
    });
    if kv.is_some() && budget.is_none() {
        bail!("--kv-bytes-per-token needs the card: --gpu NAME or --capacity SIZE");
    }
    let answer = serve_budget(&rec, &order, scenario, budget, kv).map_err(anyhow::Error::msg)?;
    if let Some(path) = &args.emit_trace {
        let kv_tokens = kv.zip(answer.kv_tokens);
        let t = start_up_trace(&rec, &order, kv_tokens).map_err(anyhow::Error::msg)?;
        vramlab_traces::write_trace(&t, path, None)?;
        errln!(
            "wrote {} ({} events)",
            path.display(),
            count(t.events.len() as u64)
        );
    }
    if args.json {
        return crate::render::json::print(&answer);
    }
    print_budget(&answer, &args);
    Ok(())
}

/// `gpu_memory_utilization` × the card's memory (its total for a named
/// card, as vLLM counts it, never above what PyTorch can use).
fn budget_bytes(dev: &DeviceArgs, utilization: f64) -> Option<u64> {
    let whole = match (dev.gpu, dev.capacity) {
        (Some(g), _) => g.total_bytes(),
        (None, Some(c)) => c,
        (None, None) => return None,
    };
    let b = (whole as f64 * utilization).floor() as u64;
    Some(b.min(dev.bytes().unwrap_or(u64::MAX)))
}

fn print_budget(a: &ServeBudget, args: &ServeBudgetArgs) {
    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    outln!(
        "{}: forwards recorded at batch {}",
        args.trace.trace.display(),
        list(&a.recorded_sizes)
    );
    outln!(
        "captures ({} sizes, in this order): {}",
        a.capture_sizes.len(),
        list(&a.capture_sizes)
    );
    let mut t = Table::new(vec![
        "batch".into(),
        "forward".into(),
        "pool after".into(),
        "added".into(),
    ]);
    for c in &a.captures {
        t.row(vec![
            c.batch.to_string(),
            if c.interpolated {
                "interpolated"
            } else {
                "recorded"
            }
            .into(),
            bytes(c.pool_bytes_after),
            bytes(c.growth_bytes),
        ]);
    }
    outln!();
    for line in t.render().lines() {
        outln!("  {line}");
    }
    outln!();
    outln!(
        "graph pool: {} in {} segments (one pool shared by every capture, replayed)",
        bytes(a.graph_pool_bytes),
        a.graph_pool_segments
    );
    outln!(
        "vLLM's two-graph extrapolation (the first capture + (N-1) x the second's growth, vllm#45178): {} ({:+.1}% vs the pool)",
        bytes(a.linear_estimate_bytes),
        100.0 * (a.linear_estimate_bytes as f64 / a.graph_pool_bytes.max(1) as f64 - 1.0)
    );
    outln!(
        "start-up peak reserved without a KV cache: {}",
        bytes(a.peak_reserved_without_kv_bytes)
    );
    if let Some(b) = a.budget_bytes {
        outln!(
            "budget: {} ({} × {})",
            bytes(b),
            args.utilization,
            args.device.describe().unwrap_or_default()
        );
        match (a.kv_tokens, a.kv_bytes) {
            (Some(tokens), Some(kvb)) => outln!(
                "largest KV cache that fits: {} tokens ({}), start-up peak reserved {}",
                count(tokens),
                bytes(kvb),
                bytes(a.peak_reserved_bytes.unwrap_or(0))
            ),
            _ if a.kv_bytes_per_token.is_some() => {
                outln!(
                    "largest KV cache that fits: none (the start-up does not fit the budget without one)"
                )
            }
            _ => outln!(
                "left for the KV cache: at most {} (give --kv-bytes-per-token for the tokens)",
                bytes(b.saturating_sub(a.peak_reserved_without_kv_bytes))
            ),
        }
    }
}
