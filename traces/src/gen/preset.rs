//! Presets named after real models, their recorded variants, generation
//! requests and accuracy checks.

use std::collections::BTreeMap;
use std::fmt;

use crate::model::Trace;

use super::GenError;
use super::corpus::{CorpusEntry, corpus};
use super::read::{Recording, read_recording_bytes};
use super::template::{Sample, Scaling, Template, peak_live_bytes};

/// Numeric format of the weights (and activations) of a recorded variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Precision {
    /// 32-bit float.
    Fp32,
    /// 16-bit float (diffusion pipelines' usual `torch_dtype`).
    Fp16,
    /// bfloat16.
    Bf16,
    /// bitsandbytes LLM.int8() weights (emulated layout, see traces/record).
    Int8,
    /// bitsandbytes 4-bit NF4 weights with double quantisation.
    Nf4,
}

impl Precision {
    /// All precisions.
    pub const ALL: [Precision; 5] = [
        Precision::Fp32,
        Precision::Fp16,
        Precision::Bf16,
        Precision::Int8,
        Precision::Nf4,
    ];

    /// The name the recorder and the CLI use.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
            Precision::Int8 => "int8",
            Precision::Nf4 => "nf4",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<Precision> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name() == s.to_ascii_lowercase())
    }
}

/// Attention implementation of a recorded variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Attention {
    /// Matmul + softmax, materialising the score matrix.
    Eager,
    /// FlashAttention-2 through PyTorch's SDPA (no score matrix).
    Flash,
}

impl Attention {
    /// The name the recorder and the CLI use.
    pub fn name(self) -> &'static str {
        match self {
            Attention::Eager => "eager",
            Attention::Flash => "flash",
        }
    }
}

/// KV cache of an inference variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KvCache {
    /// Grows by concatenation every token (Hugging Face `DynamicCache`).
    Dynamic,
    /// Preallocated for prompt + new tokens (`StaticCache`).
    Static,
}

impl KvCache {
    /// The name the recorder and the CLI use.
    pub fn name(self) -> &'static str {
        match self {
            KvCache::Dynamic => "dynamic",
            KvCache::Static => "static",
        }
    }
}

/// A workload the generator knows, named after the real model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// Name on the command line.
    pub name: &'static str,
    /// Other accepted names.
    pub aliases: &'static [&'static str],
    /// The recorder's workload name (the manifest's `workload` column).
    pub workload: &'static str,
    /// What it is.
    pub description: &'static str,
    /// The scaling parameter.
    pub scaling: Scaling,
    /// Value of the scaling parameter when none is given.
    pub default_value: u64,
    /// Precision of the recordings that do not name one.
    pub default_precision: Precision,
    /// Which variant options it has: `precision`, `attention`,
    /// `checkpointing`, `kv_cache`.
    pub options: &'static [&'static str],
}

/// The presets.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "llama-3-8b-train",
        aliases: &["llama3-8b-train"],
        workload: "llama-3-8b-train",
        description: "Llama-3-8B-shaped training steps (Hugging Face LlamaForCausalLM, bf16 weights, AdamW foreach, 2 steps)",
        scaling: Scaling::Seq,
        default_value: 1024,
        default_precision: Precision::Bf16,
        options: &["precision", "attention", "checkpointing"],
    },
    Preset {
        name: "llama-3-8b-infer",
        aliases: &["llama3-8b-infer", "llama-3-8b"],
        workload: "llama-3-8b-infer",
        description: "Llama-3-8B-shaped greedy generation: prefill of --seq prompt tokens, then 7 decode steps with a KV cache",
        scaling: Scaling::Seq,
        default_value: 1024,
        default_precision: Precision::Bf16,
        options: &["precision", "attention", "kv_cache"],
    },
    Preset {
        name: "sd15",
        aliases: &["sd-1.5", "stable-diffusion-1.5"],
        workload: "sd15",
        description: "Stable Diffusion 1.5 text-to-image: CLIP text encoder, 2 UNet steps with classifier-free guidance, VAE decode",
        scaling: Scaling::Resolution,
        default_value: 512,
        default_precision: Precision::Fp16,
        options: &["precision", "attention"],
    },
    Preset {
        name: "sdxl",
        aliases: &["sdxl-base", "stable-diffusion-xl"],
        workload: "sdxl",
        description: "SDXL base text-to-image: two text encoders, 2 UNet steps with CFG, fp32 VAE decode (force_upcast)",
        scaling: Scaling::Resolution,
        default_value: 1024,
        default_precision: Precision::Fp16,
        options: &["precision", "attention"],
    },
    Preset {
        name: "gpt-small",
        aliases: &["gpt-small-train"],
        workload: "gpt-small-train",
        description: "GPT-style LM training steps (6 layers, d=384, vocab 8192, fp32, AdamW foreach, 3 steps)",
        scaling: Scaling::Seq,
        default_value: 256,
        default_precision: Precision::Fp32,
        options: &["precision"],
    },
];

/// Finds a preset by name or alias.
pub fn preset(name: &str) -> Result<&'static Preset, GenError> {
    let low = name.to_ascii_lowercase();
    PRESETS
        .iter()
        .find(|p| p.name == low || p.aliases.contains(&low.as_str()))
        .ok_or_else(|| {
            GenError::Request(format!(
                "unknown workload '{name}'; presets: {}",
                PRESETS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// The variant parameters that select a family's recordings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variant {
    /// Weight precision.
    pub precision: Precision,
    /// Attention implementation.
    pub attention: Attention,
    /// Activation checkpointing.
    pub checkpointing: bool,
    /// KV cache.
    pub kv_cache: KvCache,
}

impl Variant {
    /// The default variant of a preset.
    pub fn default_for(p: &Preset) -> Variant {
        Variant {
            precision: p.default_precision,
            attention: Attention::Flash,
            checkpointing: false,
            kv_cache: KvCache::Dynamic,
        }
    }

    fn of_entry(p: &Preset, e: &CorpusEntry) -> Option<Variant> {
        let d = Variant::default_for(p);
        let get = |k: &str| e.params.get(k).map(|v| v.to_ascii_lowercase());
        Some(Variant {
            precision: match get("precision") {
                Some(v) => Precision::from_name(&v)?,
                None => d.precision,
            },
            attention: match get("attention").as_deref() {
                Some("eager") => Attention::Eager,
                Some("flash") | None => Attention::Flash,
                Some(_) => return None,
            },
            checkpointing: matches!(get("checkpointing").as_deref(), Some("true" | "1")),
            kv_cache: match get("kv_cache").as_deref() {
                Some("static") => KvCache::Static,
                Some("dynamic") | None => KvCache::Dynamic,
                Some(_) => return None,
            },
        })
    }

    /// The options that differ from the preset's defaults, as CLI flags.
    pub fn describe(&self, p: &Preset) -> String {
        let mut out = Vec::new();
        if p.options.contains(&"precision") {
            out.push(format!("--precision {}", self.precision.name()));
        }
        if p.options.contains(&"attention") {
            out.push(format!("--attention {}", self.attention.name()));
        }
        if p.options.contains(&"checkpointing") && self.checkpointing {
            out.push("--checkpointing".into());
        }
        if p.options.contains(&"kv_cache") {
            out.push(format!("--kv-cache {}", self.kv_cache.name()));
        }
        out.join(" ")
    }
}

impl Preset {
    /// The recorded variants of this preset and their corpus files.
    pub fn variants(&self) -> BTreeMap<Variant, Vec<&'static CorpusEntry>> {
        let mut out: BTreeMap<Variant, Vec<&'static CorpusEntry>> = BTreeMap::new();
        for e in corpus() {
            if e.workload == self.workload {
                if let Some(v) = Variant::of_entry(self, e) {
                    out.entry(v).or_default().push(e);
                }
            }
        }
        out
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.description)
    }
}

/// What to generate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GenRequest {
    /// Preset name (see [`PRESETS`]).
    pub preset: String,
    /// Batch size (default 1).
    pub batch: Option<u64>,
    /// Sequence length (LLM presets).
    pub seq: Option<u64>,
    /// Square image side in pixels (diffusion presets).
    pub resolution: Option<u64>,
    /// Weight precision (default: the preset's).
    pub precision: Option<Precision>,
    /// Attention implementation (default flash).
    pub attention: Option<Attention>,
    /// Activation checkpointing.
    pub checkpointing: bool,
    /// KV cache (default dynamic).
    pub kv_cache: Option<KvCache>,
    /// Number of training / denoising steps (default: as recorded).
    pub steps: Option<u32>,
}

impl GenRequest {
    /// The preset and variant it asks for, checked against what the preset
    /// exposes.
    pub fn resolve(&self) -> Result<(&'static Preset, Variant), GenError> {
        let p = preset(&self.preset)?;
        let has = |o: &str| p.options.contains(&o);
        let no = |flag: &str| {
            GenError::Request(format!(
                "{} has no {flag} option (it has: {})",
                p.name,
                p.options
                    .iter()
                    .map(|o| format!("--{}", o.replace('_', "-")))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        };
        let mut v = Variant::default_for(p);
        if let Some(x) = self.precision {
            if !has("precision") {
                return Err(no("--precision"));
            }
            v.precision = x;
        }
        if let Some(x) = self.attention {
            if !has("attention") {
                return Err(no("--attention"));
            }
            v.attention = x;
        }
        if self.checkpointing {
            if !has("checkpointing") {
                return Err(no("--checkpointing"));
            }
            v.checkpointing = true;
        }
        if let Some(x) = self.kv_cache {
            if !has("kv_cache") {
                return Err(no("--kv-cache"));
            }
            v.kv_cache = x;
        }
        match p.scaling {
            Scaling::Seq if self.resolution.is_some() => {
                return Err(GenError::Request(format!(
                    "{} scales with --seq, not --resolution",
                    p.name
                )));
            }
            Scaling::Resolution if self.seq.is_some() => {
                return Err(GenError::Request(format!(
                    "{} scales with --resolution, not --seq",
                    p.name
                )));
            }
            _ => {}
        }
        Ok((p, v))
    }

    /// The requested value of the scaling parameter (or the default).
    pub fn value(&self, p: &Preset) -> u64 {
        match p.scaling {
            Scaling::Seq => self.seq,
            Scaling::Resolution => self.resolution,
        }
        .unwrap_or(p.default_value)
    }
}

/// Reads the embedded recordings of one variant of a preset.
pub fn family_recordings(p: &Preset, v: &Variant) -> Result<Vec<Recording>, GenError> {
    let variants = p.variants();
    let Some(entries) = variants.get(v) else {
        let have: Vec<String> = variants.keys().map(|k| k.describe(p)).collect();
        return Err(GenError::Request(format!(
            "{} was not recorded with {}; recorded variants: {}",
            p.name,
            v.describe(p),
            if have.is_empty() {
                "none".into()
            } else {
                have.join("; ")
            }
        )));
    };
    entries
        .iter()
        .map(|e| read_recording_bytes(e.bytes, e.file).map_err(GenError::from))
        .collect()
}

fn samples<'a>(p: &Preset, recs: &'a [Recording]) -> Result<Vec<Sample<'a>>, GenError> {
    recs.iter()
        .map(|r| {
            let value = r.param_u64(p.scaling.param()).ok_or_else(|| {
                GenError::Request(format!(
                    "{}: no '# param.{}:' header line",
                    r.name,
                    p.scaling.param()
                ))
            })?;
            Ok(Sample {
                rec: r,
                batch: r.param_u64("batch").unwrap_or(1),
                value,
            })
        })
        .collect()
}

fn template_name(p: &Preset, v: &Variant) -> String {
    let d = Variant::default_for(p);
    let mut name = p.name.to_string();
    if v.precision != d.precision {
        name.push_str(&format!(" --precision {}", v.precision.name()));
    }
    if v.attention != d.attention {
        name.push_str(&format!(" --attention {}", v.attention.name()));
    }
    if v.checkpointing {
        name.push_str(" --checkpointing");
    }
    if v.kv_cache != d.kv_cache {
        name.push_str(&format!(" --kv-cache {}", v.kv_cache.name()));
    }
    name
}

/// Learns the template of a preset's variant from the embedded corpus.
pub fn load_template(p: &Preset, v: &Variant) -> Result<Template, GenError> {
    let recs = family_recordings(p, v)?;
    Template::learn(&template_name(p, v), p.scaling, &samples(p, &recs)?)
}

/// Generates the requested trace; returns it with the template it came from.
pub fn generate(req: &GenRequest) -> Result<(Trace, Template), GenError> {
    let (p, v) = req.resolve()?;
    let t = load_template(p, &v)?;
    let trace = t.instantiate(req.batch.unwrap_or(1), req.value(p), req.steps)?;
    Ok((trace, t))
}

/// What a [`Check`] compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKind {
    /// A recording the template was learned from.
    Recorded,
    /// A recording between the others, left out when learning.
    HeldBack,
    /// The largest recording, left out when learning (extrapolation).
    Extrapolated,
}

impl fmt::Display for CheckKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CheckKind::Recorded => "recorded",
            CheckKind::HeldBack => "held back",
            CheckKind::Extrapolated => "extrapolated",
        })
    }
}

/// A generated trace compared with a recording at the same size.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// The recording's file name.
    pub file: String,
    /// What was compared.
    pub kind: CheckKind,
    /// Batch size.
    pub batch: u64,
    /// Value of the scaling parameter.
    pub value: u64,
    /// Allocations in the recording.
    pub recorded_allocs: usize,
    /// Allocations in the generated trace.
    pub generated_allocs: usize,
    /// Peak live requested bytes of the recording.
    pub recorded_peak: u64,
    /// Peak live requested bytes of the generated trace.
    pub generated_peak: u64,
    /// Allocations, in order, whose generated size equals the recorded one
    /// (of `recorded_allocs`; 0 when the counts differ).
    pub exact_sizes: usize,
}

impl Check {
    /// (generated − recorded) / recorded peak.
    pub fn peak_error(&self) -> f64 {
        if self.recorded_peak == 0 {
            return 0.0;
        }
        (self.generated_peak as f64 - self.recorded_peak as f64) / self.recorded_peak as f64
    }
}

fn compare(t: &Template, s: &Sample<'_>, kind: CheckKind) -> Result<Check, GenError> {
    let g = t.instantiate(s.batch, s.value, None)?;
    let sizes = |tr: &Trace| -> Vec<u64> {
        tr.events
            .iter()
            .filter_map(|e| match *e {
                crate::model::Event::Alloc { size, .. } => Some(size),
                _ => None,
            })
            .collect()
    };
    let (a, b) = (sizes(&s.rec.trace), sizes(&g));
    let exact_sizes = if a.len() == b.len() {
        a.iter().zip(&b).filter(|(x, y)| x == y).count()
    } else {
        0
    };
    Ok(Check {
        file: s.rec.name.clone(),
        kind,
        batch: s.batch,
        value: s.value,
        recorded_allocs: s.rec.trace.num_allocs(),
        generated_allocs: g.num_allocs(),
        recorded_peak: peak_live_bytes(&s.rec.trace),
        generated_peak: peak_live_bytes(&g),
        exact_sizes,
    })
}

/// Measures a variant's template against its recordings: every recording
/// regenerated from the template learned from all of them; the middle
/// value of the base-batch series regenerated from a template learned
/// without it (held back); and the largest value from a template learned
/// without it (extrapolation), when the batch recording is elsewhere.
pub fn check_family(p: &Preset, v: &Variant) -> Result<Vec<Check>, GenError> {
    let recs = family_recordings(p, v)?;
    let all = samples(p, &recs)?;
    let name = template_name(p, v);
    let t = Template::learn(&name, p.scaling, &all)?;
    let mut out = Vec::new();
    for s in &all {
        out.push(compare(&t, s, CheckKind::Recorded)?);
    }
    let base = all.iter().map(|s| s.batch).min().unwrap_or(1);
    let mut series: Vec<&Sample<'_>> = all.iter().filter(|s| s.batch == base).collect();
    series.sort_by_key(|s| s.value);
    if let &[_, held_back, .., largest] = series.as_slice() {
        for (left_out, kind) in [
            (held_back, CheckKind::HeldBack),
            (largest, CheckKind::Extrapolated),
        ] {
            let out_value = left_out.value;
            let rest: Vec<Sample<'_>> = all
                .iter()
                .filter(|s| s.value != out_value)
                .copied()
                .collect();
            let t = Template::learn(&name, p.scaling, &rest)?;
            out.push(compare(&t, left_out, kind)?);
        }
    }
    Ok(out)
}
