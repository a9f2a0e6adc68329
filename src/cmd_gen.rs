//! `vramlab gen`: generate the allocation trace of a real LLM or diffusion
//! workload at any batch size, sequence length or resolution, from
//! templates learned from the recorded corpus (see `vramlab_workloads`).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use vramlab_traces::Trace;
use vramlab_workloads::{
    Attention, CheckKind, GenRequest, KvCache, ModelSize, Offload, PRESETS, Precision, Preset,
    Scaling, Variant, check_family, generate, learn_files, peak_live_bytes,
};

use crate::render::table::{Table, bytes, count};

/// Weight precision of a recorded variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PrecisionArg {
    /// 32-bit float.
    Fp32,
    /// 16-bit float (diffusion presets).
    Fp16,
    /// bfloat16 (LLM presets).
    Bf16,
    /// bitsandbytes LLM.int8() weights (inference).
    Int8,
    /// bitsandbytes 4-bit NF4 weights (inference, batch 1).
    Nf4,
}

/// Attention implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AttentionArg {
    /// Matmul + softmax: the score matrix is materialised.
    Eager,
    /// FlashAttention-2 (PyTorch SDPA on CUDA).
    Flash,
}

/// KV cache of the inference presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KvCacheArg {
    /// Grows by concatenation every token (Hugging Face DynamicCache).
    Dynamic,
    /// Preallocated for prompt + new tokens (StaticCache).
    Static,
}

/// Llama model size (the published configuration's shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SizeArg {
    /// Llama-3.2-1B.
    #[value(name = "1b")]
    B1,
    /// Llama-3.2-3B.
    #[value(name = "3b")]
    B3,
    /// Meta-Llama-3-8B (the default).
    #[value(name = "8b")]
    B8,
    /// Llama-2-13B.
    #[value(name = "13b")]
    B13,
    /// Meta-Llama-3-70B.
    #[value(name = "70b")]
    B70,
}

/// diffusers' CPU offloading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OffloadArg {
    /// Everything on the GPU.
    None,
    /// enable_model_cpu_offload(): one whole model on the GPU at a time.
    Model,
    /// enable_sequential_cpu_offload(): each module's weights for its
    /// forward only.
    Sequential,
}

/// Arguments of `vramlab gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Workload preset: llama-3-8b-train, llama-3-8b-infer, sd15, sdxl,
    /// flux, gpt-small (see --list).
    #[arg(value_name = "WORKLOAD", required_unless_present_any = ["list", "learn"])]
    pub workload: Option<String>,
    /// Batch size (images per prompt for diffusion). Default 1.
    #[arg(long, value_name = "N")]
    pub batch: Option<u64>,
    /// Sequence length (LLM presets: tokens per sample; for inference the
    /// prompt length).
    #[arg(long, value_name = "N")]
    pub seq: Option<u64>,
    /// Image side in pixels (diffusion presets; a multiple of 64).
    #[arg(long, value_name = "N")]
    pub resolution: Option<u64>,
    /// Weight precision (where recorded).
    #[arg(long, value_enum)]
    pub precision: Option<PrecisionArg>,
    /// Attention implementation (default flash).
    #[arg(long, value_enum)]
    pub attention: Option<AttentionArg>,
    /// Activation checkpointing (training presets).
    #[arg(long)]
    pub checkpointing: bool,
    /// KV cache (inference presets; default dynamic).
    #[arg(long, value_enum)]
    pub kv_cache: Option<KvCacheArg>,
    /// Model size of the Llama presets (default 8b).
    #[arg(long, value_enum)]
    pub size: Option<SizeArg>,
    /// Tokens to generate (inference presets; recorded with 8: more extend
    /// the decode one token at a time, fewer (at least 3) stop it early;
    /// dynamic KV cache). The KV cache at the end is printed.
    #[arg(long, value_name = "N")]
    pub new_tokens: Option<u64>,
    /// diffusers' enable_vae_tiling() (sd15, sdxl): the VAE decodes in
    /// overlapping tiles above 512 px (SD 1.5) / 1024 px (SDXL).
    #[arg(long)]
    pub vae_tiling: bool,
    /// diffusers' enable_vae_slicing() (sd15, sdxl): the VAE decodes one
    /// image at a time.
    #[arg(long)]
    pub vae_slicing: bool,
    /// diffusers' CPU offloading (sd15, sdxl): only what is on the GPU is
    /// in the trace (default none).
    #[arg(long, value_enum)]
    pub offload: Option<OffloadArg>,
    /// The leak workload (gpt-small): each step's logits kept in a list
    /// until the end; with --steps the list grows by one per step.
    #[arg(long)]
    pub leak: bool,
    /// torch.cuda.empty_cache() after every training step (gpt-small;
    /// empty_cache events in the trace).
    #[arg(long)]
    pub empty_cache: bool,
    /// Training / denoising steps: repeats the last recorded step (at
    /// least the number recorded).
    #[arg(long, value_name = "N")]
    pub steps: Option<u32>,
    /// Output trace: .csv, .csv.gz, or any format `vramlab convert` writes.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// List the presets, their recorded variants and sizes.
    #[arg(long)]
    pub list: bool,
    /// Compare the template with the recordings it comes from: each
    /// recorded size regenerated, one size held back, the largest
    /// extrapolated.
    #[arg(long)]
    pub check: bool,
    /// Learn the template from your own recordings instead of a preset
    /// (repeat; two or three sizes of --seq or --resolution at one batch
    /// size, optionally one more at another batch size). Sizes come from
    /// the files' `# param.seq:` / `# param.resolution:` / `# param.batch:`
    /// header lines, or FILE@seq=512,batch=2.
    #[arg(long, value_name = "FILE[@k=v,...]")]
    pub learn: Vec<String>,
}

/// Runs the command.
pub fn run(args: GenArgs) -> Result<()> {
    if args.list {
        print!("{}", list());
        return Ok(());
    }
    if !args.learn.is_empty() {
        return run_learned(&args);
    }
    let req = request(&args)?;
    if args.check {
        let (p, v) = req.resolve()?;
        print!("{}", check_table(p, &v)?);
        if args.output.is_none() {
            return Ok(());
        }
    }
    let Some(out) = &args.output else {
        bail!("give an output file with -o FILE (or --list / --check)");
    };
    let t0 = Instant::now();
    let (trace, template) = generate(&req)?;
    let took = t0.elapsed();
    write(&trace, out)?;
    errln!("template: {template}");
    summary(&trace, out, took);
    if let Some(kv) = trace
        .header
        .extra
        .get("param.kv_cache_bytes")
        .and_then(|v| v.parse::<u64>().ok())
    {
        errln!(
            "KV cache at the end: {} ({} tokens of prompt + {} generated)",
            bytes(kv),
            req.value(req.resolve()?.0),
            trace
                .header
                .extra
                .get("param.new_tokens")
                .map_or("?", String::as_str)
        );
    }
    if let Some(tiles) = trace.header.extra.get("vae_tiles") {
        errln!(
            "VAE tiling: {tiles} tiles{}",
            if tiles == "1x1" {
                " (tiling does not engage at this resolution: the decode is the plain one)"
            } else {
                ""
            }
        );
    }
    Ok(())
}

pub(crate) fn request(a: &GenArgs) -> Result<GenRequest> {
    let workload = a
        .workload
        .clone()
        .context("name a workload preset (see --list)")?;
    Ok(GenRequest {
        preset: workload,
        batch: a.batch,
        seq: a.seq,
        resolution: a.resolution,
        precision: a.precision.map(|p| match p {
            PrecisionArg::Fp32 => Precision::Fp32,
            PrecisionArg::Fp16 => Precision::Fp16,
            PrecisionArg::Bf16 => Precision::Bf16,
            PrecisionArg::Int8 => Precision::Int8,
            PrecisionArg::Nf4 => Precision::Nf4,
        }),
        attention: a.attention.map(|x| match x {
            AttentionArg::Eager => Attention::Eager,
            AttentionArg::Flash => Attention::Flash,
        }),
        checkpointing: a.checkpointing,
        kv_cache: a.kv_cache.map(|x| match x {
            KvCacheArg::Dynamic => KvCache::Dynamic,
            KvCacheArg::Static => KvCache::Static,
        }),
        steps: a.steps,
        size: a.size.map(|s| match s {
            SizeArg::B1 => ModelSize::B1,
            SizeArg::B3 => ModelSize::B3,
            SizeArg::B8 => ModelSize::B8,
            SizeArg::B13 => ModelSize::B13,
            SizeArg::B70 => ModelSize::B70,
        }),
        new_tokens: a.new_tokens,
        vae_tiling: a.vae_tiling,
        vae_slicing: a.vae_slicing,
        offload: a.offload.map(|o| match o {
            OffloadArg::None => Offload::None,
            OffloadArg::Model => Offload::Model,
            OffloadArg::Sequential => Offload::Sequential,
        }),
        leak: a.leak,
        empty_cache: a.empty_cache,
    })
}

fn list() -> String {
    let mut out = String::new();
    for p in PRESETS {
        out.push_str(&format!("{}\n    {}\n", p.name, p.description));
        for (v, entries) in p.variants() {
            let mut sizes: Vec<String> = entries
                .iter()
                .map(|e| {
                    let b = e.params.get("batch").map_or("1", String::as_str);
                    let s = e.params.get(p.scaling.param()).map_or("?", String::as_str);
                    if b == "1" {
                        s.to_string()
                    } else {
                        format!("{s}@b{b}")
                    }
                })
                .collect();
            sizes.sort_by_key(|s| {
                let n: u64 = s
                    .split('@')
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(0);
                (s.contains('@'), n)
            });
            let mut decode = p.decode_recordings(&v);
            decode.sort_by_key(|e| {
                e.params
                    .get("new_tokens")
                    .and_then(|n| n.parse::<u64>().ok())
            });
            let longer: Vec<String> = decode
                .iter()
                .map(|e| {
                    let n = e.params.get("new_tokens").map_or("?", String::as_str);
                    let s = e.params.get(p.scaling.param()).map_or("?", String::as_str);
                    format!("{n}@{s}")
                })
                .collect();
            let longer = if longer.is_empty() {
                String::new()
            } else {
                format!("; new tokens {}", longer.join(", "))
            };
            out.push_str(&format!(
                "    {:<60} --{} recorded at {}{longer}\n",
                v.describe(p),
                p.scaling.param(),
                sizes.join(", ")
            ));
        }
    }
    out
}

fn check_table(p: &Preset, v: &Variant) -> Result<String> {
    let checks = check_family(p, v)?;
    let mut t = Table::new(vec![
        "recording".into(),
        "kind".into(),
        "batch".into(),
        p.scaling.param().into(),
        "allocs rec".into(),
        "allocs gen".into(),
        "exact sizes".into(),
        "peak rec".into(),
        "peak gen".into(),
        "peak error".into(),
    ])
    .left(1);
    for c in &checks {
        t.row(vec![
            c.file.clone(),
            c.kind.to_string(),
            c.batch.to_string(),
            c.value.to_string(),
            count(c.recorded_allocs as u64),
            count(c.generated_allocs as u64),
            count(c.exact_sizes as u64),
            bytes(c.recorded_peak),
            bytes(c.generated_peak),
            format!("{:+.3}%", 100.0 * c.peak_error()),
        ]);
    }
    let worst = |k: CheckKind| {
        checks
            .iter()
            .filter(|c| c.kind == k)
            .map(|c| c.peak_error().abs())
            .fold(0.0f64, f64::max)
    };
    let mut decode = String::new();
    for (k, what) in [
        (CheckKind::NewTokens, "new tokens"),
        (CheckKind::LargerBatch, "larger batch"),
    ] {
        if checks.iter().any(|c| c.kind == k) {
            decode.push_str(&format!(", {what} {:.3}%", 100.0 * worst(k)));
        }
    }
    Ok(format!(
        "{} {}\n{}worst peak error: recorded {:.3}%, held back {:.3}%, extrapolated {:.3}%{decode}\n",
        p.name,
        v.describe(p),
        t.render(),
        100.0 * worst(CheckKind::Recorded),
        100.0 * worst(CheckKind::HeldBack),
        100.0 * worst(CheckKind::Extrapolated)
    ))
}

fn run_learned(a: &GenArgs) -> Result<()> {
    let mut paths = Vec::new();
    let mut overrides = Vec::new();
    for (i, spec) in a.learn.iter().enumerate() {
        let (file, kv) = match spec.rsplit_once('@') {
            Some((f, kv)) if kv.contains('=') => (f, Some(kv)),
            _ => (spec.as_str(), None),
        };
        paths.push(PathBuf::from(file));
        for pair in kv.into_iter().flat_map(|kv| kv.split(',')) {
            let (k, v) = pair
                .split_once('=')
                .with_context(|| format!("--learn {spec}: '{pair}' is not key=value"))?;
            let v: u64 = v
                .trim()
                .parse()
                .with_context(|| format!("--learn {spec}: '{v}' is not a whole number"))?;
            let k = k.trim();
            if !matches!(k, "seq" | "resolution" | "batch") {
                bail!("--learn {spec}: unknown key '{k}' (seq, resolution or batch)");
            }
            overrides.push((i, k.to_string(), v));
        }
    }
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let name = a.workload.clone().unwrap_or_else(|| "learned".into());
    let template = learn_files(&name, &refs, &overrides)?;
    let value = match template.scaling {
        Scaling::Seq => a.seq,
        Scaling::Resolution => a.resolution,
    }
    .with_context(|| {
        format!(
            "give the size to generate with --{}",
            template.scaling.param()
        )
    })?;
    let Some(out) = &a.output else {
        bail!("give an output file with -o FILE");
    };
    let t0 = Instant::now();
    let trace = template.instantiate(a.batch.unwrap_or(template.base_batch), value, a.steps)?;
    let took = t0.elapsed();
    write(&trace, out)?;
    errln!("template: {template}");
    summary(&trace, out, took);
    Ok(())
}

fn write(trace: &Trace, out: &Path) -> Result<()> {
    let name = out.display().to_string();
    if name.to_ascii_lowercase().ends_with(".csv") {
        let f = File::create(out).with_context(|| format!("cannot create {name}"))?;
        vramlab_traces::write_csv(trace, BufWriter::new(f), &name)?;
    } else {
        vramlab_traces::write_trace(trace, out, None)?;
    }
    Ok(())
}

fn summary(trace: &Trace, out: &Path, took: std::time::Duration) {
    errln!(
        "{}: {} events, {} allocations, peak live {} (generated in {:.1} ms)",
        out.display(),
        count(trace.events.len() as u64),
        count(trace.num_allocs() as u64),
        bytes(peak_live_bytes(trace)),
        took.as_secs_f64() * 1e3
    );
}
