//! Presets named after real models, their recorded variants, generation
//! requests and accuracy checks.

use std::collections::BTreeMap;
use std::fmt;

use vramlab_traces::Trace;
use vramlab_traces::advice::{OptionName, Spelling, spelling};

use crate::opt::WorkloadOpt;

use super::GenError;
use super::corpus::{CorpusEntry, corpus};
use super::knobs::{
    Attention, KvCache, ModelSize, Offload, Precision, kv_cache_bytes, vae_tile_grid,
};
use super::read::{Recording, read_recording_bytes};
use super::template::{Sample, Scaling, Template};

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
    /// `checkpointing`, `kv_cache`, `size`; and `new_tokens` (not a
    /// variant: the decode length of generation presets).
    pub options: &'static [&'static str],
}

/// The presets.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "llama-3-8b-train",
        aliases: &["llama3-8b-train"],
        workload: "llama-3-8b-train",
        description: "Llama-3-8B-shaped training steps (Hugging Face LlamaForCausalLM, bf16 weights, AdamW foreach, 2 steps); --size 1b|3b|13b|70b for the Llama-3.2-1B/3B, Llama-2-13B, Llama-3-70B shapes",
        scaling: Scaling::Seq,
        default_value: 1024,
        default_precision: Precision::Bf16,
        options: &["precision", "attention", "checkpointing", "size"],
    },
    Preset {
        name: "llama-3-8b-infer",
        aliases: &["llama3-8b-infer", "llama-3-8b"],
        workload: "llama-3-8b-infer",
        description: "Llama-3-8B-shaped greedy generation: prefill of --seq prompt tokens, then --new-tokens minus one decode steps with a KV cache (recorded: 8 new tokens; other lengths, 3 or more, extend or stop the decode, dynamic cache); --size 1b|3b|13b|70b for the other Llama shapes",
        scaling: Scaling::Seq,
        default_value: 1024,
        default_precision: Precision::Bf16,
        options: &["precision", "attention", "kv_cache", "size", "new_tokens"],
    },
    Preset {
        name: "sd15",
        aliases: &["sd-1.5", "stable-diffusion-1.5"],
        workload: "sd15",
        description: "Stable Diffusion 1.5 text-to-image: CLIP text encoder, 2 UNet steps with classifier-free guidance, VAE decode; --vae-tiling (engages above 512 px), --vae-slicing, --offload model|sequential",
        scaling: Scaling::Resolution,
        default_value: 512,
        default_precision: Precision::Fp16,
        options: &[
            "precision",
            "attention",
            "vae_tiling",
            "vae_slicing",
            "offload",
        ],
    },
    Preset {
        name: "sdxl",
        aliases: &["sdxl-base", "stable-diffusion-xl"],
        workload: "sdxl",
        description: "SDXL base text-to-image: two text encoders, 2 UNet steps with CFG, fp32 VAE decode (force_upcast); --vae-tiling (engages above 1024 px), --vae-slicing, --offload model|sequential",
        scaling: Scaling::Resolution,
        default_value: 1024,
        default_precision: Precision::Fp16,
        options: &[
            "precision",
            "attention",
            "vae_tiling",
            "vae_slicing",
            "offload",
        ],
    },
    Preset {
        name: "flux",
        aliases: &["flux-dev", "flux.1-dev", "flux1-dev"],
        workload: "flux",
        description: "FLUX.1-dev-shaped text-to-image (diffusers FluxTransformer2DModel, random init, bf16): CLIP-L + T5-XXL prompt encoding, 2 transformer steps (guidance-distilled, no CFG), VAE decode",
        scaling: Scaling::Resolution,
        default_value: 1024,
        default_precision: Precision::Bf16,
        options: &["precision"],
    },
    Preset {
        name: "gpt-small",
        aliases: &["gpt-small-train"],
        workload: "gpt-small-train",
        description: "GPT-style LM training steps (6 layers, d=384, vocab 8192, fp32, AdamW foreach, 3 steps); --leak keeps each step's logits in a list, --empty-cache calls empty_cache() after each step",
        scaling: Scaling::Seq,
        default_value: 256,
        default_precision: Precision::Fp32,
        options: &["precision", "leak", "empty_cache"],
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
    /// Model size, for presets with a `size` option (`None` for the
    /// others).
    pub size: Option<ModelSize>,
    /// diffusers' VAE tiling, as the grid of tiles it decodes in (`Some(n)`:
    /// n × n tiles; the grid depends on the resolution, and each grid is
    /// its own recorded family). `None`: not tiled (also when tiling was
    /// asked for at a resolution where it does not engage).
    pub vae_tiling: Option<u8>,
    /// diffusers' VAE slicing (one image of the batch at a time).
    pub vae_slicing: bool,
    /// diffusers' CPU offloading.
    pub offload: Offload,
    /// A leak: each training step's logits kept in a list until the end.
    pub leak: bool,
    /// `torch.cuda.empty_cache()` after every training step.
    pub empty_cache: bool,
}

impl Variant {
    /// The default variant of a preset.
    pub fn default_for(p: &Preset) -> Variant {
        Variant {
            precision: p.default_precision,
            attention: Attention::Flash,
            checkpointing: false,
            kv_cache: KvCache::Dynamic,
            size: p.options.contains(&"size").then_some(ModelSize::B8),
            vae_tiling: None,
            vae_slicing: false,
            offload: Offload::None,
            leak: false,
            empty_cache: false,
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
            vae_tiling: match get("vae_tiling").as_deref() {
                Some("true" | "1") => {
                    let res = e.params.get("resolution")?.parse().ok()?;
                    Some(vae_tile_grid(p.name, res)?).filter(|&n| n > 1)
                }
                _ => None,
            },
            vae_slicing: matches!(get("vae_slicing").as_deref(), Some("true" | "1")),
            offload: match get("offload") {
                Some(v) => Offload::from_name(&v)?,
                None => Offload::None,
            },
            leak: matches!(get("leak").as_deref(), Some("true" | "1")),
            empty_cache: matches!(get("empty_cache").as_deref(), Some("true" | "1")),
            size: match get("size") {
                Some(v) => Some(ModelSize::from_name(&v)?).filter(|_| d.size.is_some()),
                None => d.size,
            },
        })
    }

    /// The options that differ from the preset's defaults, as CLI flags:
    /// the variant's label in results (a matrix's rows), the same from
    /// every front end.
    pub fn describe(&self, p: &Preset) -> String {
        self.words_in(p, Spelling::Cli)
    }

    /// The options that differ from the preset's defaults, in the words of
    /// the running front end (`--precision bf16`, `precision="bf16"`): the
    /// variant as messages name it.
    pub fn words(&self, p: &Preset) -> String {
        self.words_in(p, spelling())
    }

    /// [`Self::words`] in `spelling`'s words.
    fn words_in(&self, p: &Preset, spelling: Spelling) -> String {
        let mut out = Vec::new();
        if p.options.contains(&"precision") {
            out.push(
                WorkloadOpt::Precision
                    .with_word(self.precision.name())
                    .spelled(spelling)
                    .to_string(),
            );
        }
        if p.options.contains(&"attention") {
            out.push(
                WorkloadOpt::Attention
                    .with_word(self.attention.name())
                    .spelled(spelling)
                    .to_string(),
            );
        }
        if p.options.contains(&"checkpointing") && self.checkpointing {
            out.push(
                WorkloadOpt::Checkpointing
                    .on()
                    .spelled(spelling)
                    .to_string(),
            );
        }
        if p.options.contains(&"kv_cache") {
            out.push(
                WorkloadOpt::KvCache
                    .with_word(self.kv_cache.name())
                    .spelled(spelling)
                    .to_string(),
            );
        }
        if let Some(s) = self.size {
            out.push(
                WorkloadOpt::Size
                    .with_word(s.name())
                    .spelled(spelling)
                    .to_string(),
            );
        }
        if let Some(n) = self.vae_tiling {
            out.push(format!(
                "{} ({n}x{n} tiles)",
                WorkloadOpt::VaeTiling.on().spelled(spelling)
            ));
        }
        if self.vae_slicing {
            out.push(WorkloadOpt::VaeSlicing.on().spelled(spelling).to_string());
        }
        if self.offload != Offload::None {
            out.push(
                WorkloadOpt::Offload
                    .with_word(self.offload.name())
                    .spelled(spelling)
                    .to_string(),
            );
        }
        if self.leak {
            out.push(WorkloadOpt::Leak.on().spelled(spelling).to_string());
        }
        if self.empty_cache {
            out.push(WorkloadOpt::EmptyCache.on().spelled(spelling).to_string());
        }
        out.join(" ")
    }
}

impl Preset {
    /// The recorded variants of this preset and their corpus files (for
    /// generation presets, the recordings at the variant's smallest number
    /// of new tokens: the others are [`Preset::decode_recordings`]).
    pub fn variants(&self) -> BTreeMap<Variant, Vec<&'static CorpusEntry>> {
        let mut out: BTreeMap<Variant, Vec<&'static CorpusEntry>> = BTreeMap::new();
        for (v, e) in self.entries() {
            out.entry(v).or_default().push(e);
        }
        for entries in out.values_mut() {
            let fewest = entries.iter().filter_map(|e| new_tokens(e)).min();
            entries.retain(|e| new_tokens(e) == fewest);
            let two = two_smallest_batches(entries);
            entries.retain(|e| two.contains(&batch(e)));
        }
        out
    }

    /// A variant's recordings at batch sizes beyond its two smallest (the
    /// template learns from those two), which check the per-item repetition
    /// of `--vae-slicing`.
    pub(crate) fn batch_recordings(&self, v: &Variant) -> Vec<&'static CorpusEntry> {
        let all: Vec<&'static CorpusEntry> = self
            .entries()
            .filter(|(w, _)| w == v)
            .map(|(_, e)| e)
            .collect();
        let two = two_smallest_batches(&all);
        all.into_iter()
            .filter(|e| !two.contains(&batch(e)))
            .collect()
    }

    /// A variant's recordings of longer generations (more new tokens than
    /// its series), which check the decode extension (`--new-tokens`).
    pub fn decode_recordings(&self, v: &Variant) -> Vec<&'static CorpusEntry> {
        let fewest = self
            .entries()
            .filter(|(w, _)| w == v)
            .filter_map(|(_, e)| new_tokens(e))
            .min();
        self.entries()
            .filter(|(w, e)| w == v && new_tokens(e) > fewest)
            .map(|(_, e)| e)
            .collect()
    }

    fn entries(&self) -> impl Iterator<Item = (Variant, &'static CorpusEntry)> + '_ {
        corpus()
            .iter()
            .filter(|e| e.workload == self.workload)
            .filter_map(|e| Some((Variant::of_entry(self, e)?, e)))
    }
}

/// The batch size of a recording (1 when it does not say).
fn batch(e: &CorpusEntry) -> u64 {
    e.params
        .get("batch")
        .and_then(|b| b.parse().ok())
        .unwrap_or(1)
}

/// The two smallest batch sizes among recordings.
fn two_smallest_batches(entries: &[&CorpusEntry]) -> Vec<u64> {
    let mut b: Vec<u64> = entries.iter().map(|e| batch(e)).collect();
    b.sort_unstable();
    b.dedup();
    b.truncate(2);
    b
}

/// The `new_tokens` parameter of a recording, if it has one.
fn new_tokens(e: &CorpusEntry) -> Option<u64> {
    e.params.get("new_tokens")?.parse().ok()
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
    /// Model size (presets with a `size` option; default 8B).
    pub size: Option<ModelSize>,
    /// Tokens to generate (generation presets; default: as recorded).
    pub new_tokens: Option<u64>,
    /// diffusers' `enable_vae_tiling()` (diffusion presets).
    pub vae_tiling: bool,
    /// diffusers' `enable_vae_slicing()` (diffusion presets).
    pub vae_slicing: bool,
    /// diffusers' CPU offloading (diffusion presets; default none).
    pub offload: Option<Offload>,
    /// The leak workload (gpt-small).
    pub leak: bool,
    /// `empty_cache()` after every step (gpt-small).
    pub empty_cache: bool,
}

impl GenRequest {
    /// The preset and variant it asks for, checked against what the preset
    /// exposes.
    pub fn resolve(&self) -> Result<(&'static Preset, Variant), GenError> {
        let p = preset(&self.preset)?;
        let has = |o: &str| p.options.contains(&o);
        let option = |name: &str| WorkloadOpt::of_param(name).map(WorkloadOpt::bare);
        let no = |name: &str| {
            GenError::Request(format!(
                "{} has no {} option (it has: {})",
                p.name,
                option(name).map_or_else(|| name.to_string(), |o| o.to_string()),
                p.options
                    .iter()
                    .map(|o| option(o).map_or_else(|| o.to_string(), |o| o.to_string()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        };
        // Every option given must be one the preset has.
        let given = [
            (self.precision.is_some(), "precision"),
            (self.attention.is_some(), "attention"),
            (self.checkpointing, "checkpointing"),
            (self.kv_cache.is_some(), "kv_cache"),
            (self.size.is_some(), "size"),
            (self.new_tokens.is_some(), "new_tokens"),
            (self.vae_tiling, "vae_tiling"),
            (self.vae_slicing, "vae_slicing"),
            (self.offload.is_some(), "offload"),
            (self.leak, "leak"),
            (self.empty_cache, "empty_cache"),
        ];
        if let Some((_, o)) = given.iter().find(|&&(g, o)| g && !has(o)) {
            return Err(no(o));
        }
        let d = Variant::default_for(p);
        let v = Variant {
            precision: self.precision.unwrap_or(d.precision),
            attention: self.attention.unwrap_or(d.attention),
            checkpointing: self.checkpointing,
            kv_cache: self.kv_cache.unwrap_or(d.kv_cache),
            size: self.size.or(d.size),
            vae_tiling: if self.vae_tiling {
                vae_tile_grid(p.name, self.value(p)).filter(|&n| n > 1)
            } else {
                d.vae_tiling
            },
            vae_slicing: self.vae_slicing,
            offload: self.offload.unwrap_or(d.offload),
            leak: self.leak,
            empty_cache: self.empty_cache,
        };
        if p.name == "flux" && self.value(p) % 16 != 0 {
            return Err(GenError::Request(format!(
                "flux: {} must be a multiple of 16 (8x VAE, 2x2 latent packing), not {}",
                WorkloadOpt::Resolution.bare(),
                self.value(p)
            )));
        }
        match p.scaling {
            Scaling::Seq if self.resolution.is_some() => {
                return Err(GenError::Request(format!(
                    "{} scales with {}, not {}",
                    p.name,
                    WorkloadOpt::Seq.bare(),
                    WorkloadOpt::Resolution.bare()
                )));
            }
            Scaling::Resolution if self.seq.is_some() => {
                return Err(GenError::Request(format!(
                    "{} scales with {}, not {}",
                    p.name,
                    WorkloadOpt::Resolution.bare(),
                    WorkloadOpt::Seq.bare()
                )));
            }
            _ => {}
        }
        Ok((p, v))
    }

    /// This request for another variant of its preset (the variant's
    /// options replace the request's; sizes, batch and steps are kept).
    /// Only the options the preset has are set, so that the request
    /// resolves.
    pub fn for_variant(&self, v: &Variant) -> GenRequest {
        let opts = preset(&self.preset).map_or(&[][..], |p| p.options);
        let has = |o: &str| opts.contains(&o);
        GenRequest {
            precision: has("precision").then_some(v.precision),
            attention: has("attention").then_some(v.attention),
            checkpointing: has("checkpointing") && v.checkpointing,
            kv_cache: has("kv_cache").then_some(v.kv_cache),
            size: v.size.filter(|_| has("size")),
            vae_tiling: has("vae_tiling") && v.vae_tiling.is_some(),
            vae_slicing: has("vae_slicing") && v.vae_slicing,
            offload: has("offload").then_some(v.offload),
            leak: has("leak") && v.leak,
            empty_cache: has("empty_cache") && v.empty_cache,
            ..self.clone()
        }
    }

    /// Bytes of KV cache at the end of the generation, for generation
    /// presets (see [`kv_cache_bytes`]); `recorded` is the number of new
    /// tokens the template was recorded with.
    pub(crate) fn kv_cache_bytes(&self, recorded: u64) -> Option<u64> {
        let (p, v) = self.resolve().ok()?;
        if !p.options.contains(&"new_tokens") {
            return None;
        }
        Some(kv_cache_bytes(
            v.size.unwrap_or(ModelSize::B8),
            v.kv_cache,
            self.batch.unwrap_or(1),
            self.value(p),
            self.new_tokens.unwrap_or(recorded),
        ))
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
pub(crate) fn family_recordings(p: &Preset, v: &Variant) -> Result<Vec<Recording>, GenError> {
    let variants = p.variants();
    let Some(entries) = variants.get(v) else {
        let have: Vec<String> = variants.keys().map(|k| k.words(p)).collect();
        return Err(GenError::Request(format!(
            "{} was not recorded with {}; recorded variants: {}",
            p.name,
            v.words(p),
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

pub(super) fn samples<'a>(p: &Preset, recs: &'a [Recording]) -> Result<Vec<Sample<'a>>, GenError> {
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

pub(super) fn template_name(p: &Preset, v: &Variant) -> String {
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
    if let Some(s) = v.size.filter(|_| v.size != d.size) {
        name.push_str(&format!(" --size {}", s.name()));
    }
    if let Some(n) = v.vae_tiling {
        name.push_str(&format!(" --vae-tiling ({n}x{n} tiles)"));
    }
    if v.vae_slicing {
        name.push_str(" --vae-slicing");
    }
    if v.offload != Offload::None {
        name.push_str(&format!(" --offload {}", v.offload.name()));
    }
    if v.leak {
        name.push_str(" --leak");
    }
    if v.empty_cache {
        name.push_str(" --empty-cache");
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
    if v.kv_cache == KvCache::Static
        && req
            .new_tokens
            .is_some_and(|n| Some(n) != t.recorded_new_tokens())
    {
        return Err(GenError::Request(format!(
            "{}: {}: the static cache is preallocated for prompt + new tokens, so its decode steps are recorded at {} new tokens only; use {} for other lengths",
            t.name,
            WorkloadOpt::NewTokens.bare(),
            t.recorded_new_tokens().unwrap_or(0),
            WorkloadOpt::KvCache.with_word("dynamic")
        )));
    }
    let batch = req.batch.unwrap_or(1);
    let mut trace = if v.vae_slicing && batch > 2 {
        if req.steps.is_some() {
            return Err(GenError::Request(format!(
                "{}: {} with {} beyond batch 2",
                t.name,
                WorkloadOpt::Steps.bare(),
                WorkloadOpt::VaeSlicing.bare()
            )));
        }
        // One image at a time: the second image's decode, repeated.
        t.instantiate_per_item(batch, req.value(p), "vae decode")?
    } else {
        t.instantiate_with(batch, req.value(p), req.steps, req.new_tokens)?
    };
    if let Some(kv) = t.recorded_new_tokens().and_then(|n| req.kv_cache_bytes(n)) {
        trace
            .header
            .extra
            .insert("param.kv_cache_bytes".into(), kv.to_string());
    }
    if req.vae_tiling {
        let n = v.vae_tiling.unwrap_or(1);
        trace
            .header
            .extra
            .insert("param.vae_tiling".into(), "true".into());
        trace
            .header
            .extra
            .insert("vae_tiles".into(), format!("{n}x{n}"));
    }
    Ok((trace, t))
}
