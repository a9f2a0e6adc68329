//! The recorded knobs of the presets' variants: precision, attention, KV
//! cache, the Llama model sizes (`--size`), the KV-cache readout of the
//! generation presets, the tile grid of diffusers' VAE tiling and its CPU
//! offloading.

/// Numeric format of the weights (and activations) of a recorded variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Precision {
    /// 32-bit float.
    Fp32,
    /// 16-bit float (diffusion pipelines' usual `torch_dtype`).
    Fp16,
    /// bfloat16.
    Bf16,
    /// bitsandbytes LLM.int8() weights (emulated layout, see workloads/record).
    Int8,
    /// bitsandbytes 4-bit NF4 weights with double quantisation.
    Nf4,
}

impl Precision {
    /// All precisions.
    pub(crate) const ALL: [Precision; 5] = [
        Precision::Fp32,
        Precision::Fp16,
        Precision::Bf16,
        Precision::Int8,
        Precision::Nf4,
    ];

    /// The name the recorder and the CLI use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
            Precision::Int8 => "int8",
            Precision::Nf4 => "nf4",
        }
    }

    /// Parses a name.
    pub(crate) fn from_name(s: &str) -> Option<Precision> {
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
    pub(crate) fn name(self) -> &'static str {
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
    pub(crate) fn name(self) -> &'static str {
        match self {
            KvCache::Dynamic => "dynamic",
            KvCache::Static => "static",
        }
    }
}

/// The shape of a Llama-family model (`--size`): the published
/// configuration the recorder builds (random init, no weights).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ModelSize {
    /// meta-llama/Llama-3.2-1B (16 layers, d 2048, 8 KV heads of 64, tied
    /// embeddings).
    B1,
    /// meta-llama/Llama-3.2-3B (28 layers, d 3072, 8 KV heads of 128, tied
    /// embeddings).
    B3,
    /// meta-llama/Meta-Llama-3-8B (32 layers, d 4096, 8 KV heads of 128).
    B8,
    /// meta-llama/Llama-2-13b-hf (40 layers, d 5120, 40 KV heads of 128, no
    /// grouped-query attention, 32k vocabulary).
    B13,
    /// meta-llama/Meta-Llama-3-70B (80 layers, d 8192, 8 KV heads of 128).
    B70,
}

impl ModelSize {
    /// All sizes, smallest first.
    pub(crate) const ALL: [ModelSize; 5] = [
        ModelSize::B1,
        ModelSize::B3,
        ModelSize::B8,
        ModelSize::B13,
        ModelSize::B70,
    ];

    /// The name the recorder and the CLI use (`1b` … `70b`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            ModelSize::B1 => "1b",
            ModelSize::B3 => "3b",
            ModelSize::B8 => "8b",
            ModelSize::B13 => "13b",
            ModelSize::B70 => "70b",
        }
    }

    /// Parses a name (`70b`, `70B`, `70`).
    pub(crate) fn from_name(s: &str) -> Option<ModelSize> {
        let low = s.trim().to_ascii_lowercase();
        let low = low.strip_suffix('b').unwrap_or(&low);
        ModelSize::ALL
            .into_iter()
            .find(|m| m.name().strip_suffix('b') == Some(low))
    }

    /// (layers, key/value heads, head dimension).
    fn attention_shape(self) -> (u64, u64, u64) {
        match self {
            ModelSize::B1 => (16, 8, 64),
            ModelSize::B3 => (28, 8, 128),
            ModelSize::B8 => (32, 8, 128),
            ModelSize::B13 => (40, 40, 128),
            ModelSize::B70 => (80, 8, 128),
        }
    }

    /// Bytes of bf16 KV cache per token of one sequence: keys and values of
    /// every layer (`2 · layers · kv_heads · head_dim · 2`).
    pub(crate) fn kv_bytes_per_token(self) -> u64 {
        let (layers, heads, dim) = self.attention_shape();
        2 * layers * heads * dim * 2
    }
}

/// Bytes of KV cache at the end of a generation of `new_tokens` after a
/// prompt of `seq` tokens: a dynamic cache holds every position but the
/// last generated token's (`seq + new_tokens − 1`), a static cache is
/// allocated for `seq + new_tokens` positions. The cache is bf16 whatever
/// the weights' precision (int8 and nf4 quantise the weights only).
pub(crate) fn kv_cache_bytes(
    size: ModelSize,
    cache: KvCache,
    batch: u64,
    seq: u64,
    new_tokens: u64,
) -> u64 {
    let positions = match cache {
        KvCache::Dynamic => (seq + new_tokens).saturating_sub(1),
        KvCache::Static => seq + new_tokens,
    };
    size.kv_bytes_per_token()
        .saturating_mul(batch)
        .saturating_mul(positions)
}

/// The tile grid diffusers' VAE tiling decodes a square image of
/// `resolution` pixels in, for a diffusion preset (`None` for the others):
/// `AutoencoderKL._decode` tiles latents larger than `sample_size / 8`
/// (64 for SD 1.5, 128 for SDXL) in tiles of that size every three quarters
/// of it (`tiled_decode`), so `n = ⌈latent / stride⌉` per side; `1` when
/// tiling does not engage.
pub(crate) fn vae_tile_grid(preset: &str, resolution: u64) -> Option<u8> {
    let tile = match preset {
        "sd15" => 64,
        "sdxl" => 128,
        _ => return None,
    };
    let latent = resolution / 8;
    if latent <= tile {
        return Some(1);
    }
    let stride = tile * 3 / 4;
    u8::try_from(latent.div_ceil(stride)).ok()
}

/// diffusers' CPU offloading of a diffusion pipeline (`--offload`): what the
/// GPU holds when accelerate's hooks move the models (see workloads/record's
/// `workloads/offload.py` for what is modelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Offload {
    /// Everything on the GPU.
    #[default]
    None,
    /// `enable_model_cpu_offload()`: one whole model on the GPU at a time,
    /// `empty_cache()` after each move back.
    Model,
    /// `enable_sequential_cpu_offload()`: each module's weights on the GPU
    /// for its forward only.
    Sequential,
}

impl Offload {
    /// All modes.
    pub(crate) const ALL: [Offload; 3] = [Offload::None, Offload::Model, Offload::Sequential];

    /// The name the recorder and the CLI use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Offload::None => "none",
            Offload::Model => "model",
            Offload::Sequential => "sequential",
        }
    }

    /// Parses a name.
    pub(crate) fn from_name(s: &str) -> Option<Offload> {
        let low = s.trim().to_ascii_lowercase();
        Offload::ALL.into_iter().find(|o| o.name() == low)
    }
}
