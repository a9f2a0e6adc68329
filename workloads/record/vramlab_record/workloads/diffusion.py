"""Stable Diffusion 1.5 and SDXL text-to-image (diffusers + transformers
models from their published config.json files, random init, no download).

The pipeline is written out as ``StableDiffusionPipeline.__call__`` /
``StableDiffusionXLPipeline.__call__`` run it (fake tensors cannot run the
schedulers' data-dependent code): prompt encoding (prompt and an empty
negative prompt), ``steps`` denoising steps with classifier-free guidance
(the UNet sees a batch of ``2 * batch``) and an Euler step (fp32 upcast of
the sample, as EulerDiscreteScheduler does), then the VAE decode and the
image denormalisation on the device. SDXL's VAE is upcast to fp32 for the
decode (``force_upcast``) and cast back afterwards, as the pipeline does.

``vae_tiling`` / ``vae_slicing``: diffusers' ``pipe.enable_vae_tiling()`` /
``pipe.enable_vae_slicing()`` (``vae.enable_tiling()`` / ``enable_slicing()``),
run by diffusers' own ``AutoencoderKL.decode``: tiling decodes latents larger
than ``sample_size / 8`` (64 for SD 1.5, 128 for SDXL) in tiles of that size
with a stride of three quarters of it, blends the overlaps and concatenates
the rows (below that size nothing changes); slicing decodes a batch one image
at a time (at batch 1 nothing changes).

``offload``: ``none``, ``model`` (``pipe.enable_model_cpu_offload()``) or
``sequential`` (``pipe.enable_sequential_cpu_offload()``), written out as
accelerate's hooks do them (see offload.py): the models are built on the
host and only their copies on the GPU are recorded.

``attention``: ``flash`` is diffusers' default AttnProcessor2_0 (SDPA, which
CUDA runs as FlashAttention-2, or the memory-efficient kernel for fp32 and
for the VAE's 512-wide head); ``eager`` is the classic AttnProcessor
(baddbmm + softmax, the full score matrix).
"""

from __future__ import annotations

import contextlib

import torch

from .offload import Offload

SD15_UNET = {
    "act_fn": "silu",
    "attention_head_dim": 8,
    "block_out_channels": [320, 640, 1280, 1280],
    "center_input_sample": False,
    "cross_attention_dim": 768,
    "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
    "downsample_padding": 1,
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "in_channels": 4,
    "layers_per_block": 2,
    "mid_block_scale_factor": 1,
    "norm_eps": 1e-05,
    "norm_num_groups": 32,
    "out_channels": 4,
    "sample_size": 64,
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
}

SDXL_UNET = {
    "act_fn": "silu",
    "addition_embed_type": "text_time",
    "addition_embed_type_num_heads": 64,
    "addition_time_embed_dim": 256,
    "attention_head_dim": [5, 10, 20],
    "block_out_channels": [320, 640, 1280],
    "center_input_sample": False,
    "cross_attention_dim": 2048,
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
    "downsample_padding": 1,
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "in_channels": 4,
    "layers_per_block": 2,
    "mid_block_scale_factor": 1,
    "norm_eps": 1e-05,
    "norm_num_groups": 32,
    "out_channels": 4,
    "projection_class_embeddings_input_dim": 2816,
    "sample_size": 128,
    "transformer_layers_per_block": [1, 2, 10],
    "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
    "use_linear_projection": True,
}

VAE = {
    "act_fn": "silu",
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "in_channels": 3,
    "latent_channels": 4,
    "layers_per_block": 2,
    "norm_num_groups": 32,
    "out_channels": 3,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
}

CLIP_L = dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
              num_attention_heads=12, max_position_embeddings=77, hidden_act="quick_gelu", projection_dim=768)
OPENCLIP_BIGG = dict(vocab_size=49408, hidden_size=1280, intermediate_size=5120, num_hidden_layers=32,
                     num_attention_heads=20, max_position_embeddings=77, hidden_act="gelu", projection_dim=1280)

_DTYPES = {"fp16": torch.float16, "fp32": torch.float32}


def _built(ctx, dtype, fn):
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(ctx.device):
            return fn()
    finally:
        torch.set_default_dtype(prev)


def _set_attention(attention, *models):
    if attention == "flash":
        return
    if attention != "eager":
        raise ValueError(f"attention must be flash or eager, not '{attention}'")
    from diffusers.models.attention_processor import AttnProcessor

    for m in models:
        m.set_attn_processor(AttnProcessor())


def _cast(module, dtype):
    """``module.to(dtype)`` for floating weights, one parameter at a time
    (each new weight, then the old one freed, as ``.to`` does on a GPU;
    written out because fake tensors cannot be swapped in place)."""
    with torch.no_grad():
        for m in module.modules():
            for name, p in list(m._parameters.items()):
                if p is not None and p.is_floating_point() and p.dtype != dtype:
                    m._parameters[name] = torch.nn.Parameter(p.to(dtype), requires_grad=p.requires_grad)
                    del p
            for name, b in list(m._buffers.items()):
                if b is not None and b.is_floating_point() and b.dtype != dtype:
                    m._buffers[name] = b.to(dtype)
                    del b


def _euler_step(model_output, sample, sigma, sigma_next):
    """EulerDiscreteScheduler.step (s_churn = 0), with its fp32 upcast."""
    sample = sample.to(torch.float32)
    pred_original = sample - sigma * model_output
    derivative = (sample - pred_original) / sigma
    del pred_original
    prev = sample + derivative * (sigma_next - sigma)
    del derivative
    return prev.to(model_output.dtype)


def _sigmas(steps):
    # Decreasing noise levels; the values do not change the allocations.
    return [14.6 * (1 - i / steps) + 0.03 for i in range(steps + 1)]


def _check(resolution, precision):
    if resolution % 64:
        raise ValueError(f"resolution must be a multiple of 64 (the UNet halves the latent three times), "
                         f"not {resolution}")
    if precision not in _DTYPES:
        raise ValueError(f"precision must be fp16 or fp32, not '{precision}'")
    return _DTYPES[precision]


def _denoise(ctx, unet, latents, cond, steps, guidance=7.5, added=None):
    sig = _sigmas(steps)
    latents = latents * sig[0]
    for i in range(steps):
        ctx.mark(f"unet step {i}")
        latent_in = torch.cat([latents] * 2)
        latent_in = latent_in / ((sig[i] ** 2 + 1) ** 0.5)
        t = torch.full((), 999.0 * (1 - i / steps), device=ctx.device)
        noise = unet(latent_in, t, encoder_hidden_states=cond, added_cond_kwargs=added, return_dict=False)[0]
        del latent_in, t
        uncond, text = noise.chunk(2)
        noise = uncond + guidance * (text - uncond)
        del uncond, text
        latents = _euler_step(noise, latents, sig[i], sig[i + 1])
        del noise
    return latents


def _vae_options(vae, vae_tiling, vae_slicing):
    if vae_tiling:
        vae.enable_tiling()
    if vae_slicing:
        vae.enable_slicing()


def _decode(ctx, vae, latents, scaling):
    ctx.mark("vae decode")
    latents = latents / scaling
    image = vae.decode(latents, return_dict=False)[0]
    del latents
    ctx.mark("postprocess")
    image = (image / 2 + 0.5).clamp(0, 1)  # VaeImageProcessor.denormalize
    return image


def _host_build(ctx, offload):
    if offload == "none":
        return contextlib.nullcontext()
    if not ctx.fake:
        raise ValueError("offload is emulated for the fake-tensor recorder only; on a GPU record a script that "
                         "calls diffusers' enable_model_cpu_offload() / enable_sequential_cpu_offload()")
    return ctx.host()


def sd15(ctx, batch=1, resolution=512, steps=2, attention="flash", precision="fp16", vae_tiling=False,
         vae_slicing=False, offload="none"):
    """Stable Diffusion 1.5 (runwayml/stable-diffusion-v1-5 configs)."""
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    dtype = _check(resolution, precision)
    ctx.mark("build")
    with _host_build(ctx, offload):
        text_encoder = _built(ctx, dtype, lambda: CLIPTextModel(CLIPTextConfig(**CLIP_L)))
        unet = _built(ctx, dtype, lambda: UNet2DConditionModel(**SD15_UNET))
        vae = _built(ctx, dtype, lambda: AutoencoderKL(**VAE, sample_size=512, scaling_factor=0.18215))
    _set_attention(attention, unet, vae)
    _vae_options(vae, vae_tiling, vae_slicing)
    # model_cpu_offload_seq = "text_encoder->image_encoder->unet->vae"
    off = Offload(ctx, offload, [text_encoder, unet, vae])
    for m in (text_encoder, unet, vae):
        m.eval()
    with torch.no_grad():
        ctx.mark("encode prompt")
        embeds = []
        for _ in range(2):  # prompt, then the empty negative prompt
            ids = torch.zeros((1, 77), dtype=torch.long, device=ctx.device)
            e = text_encoder(ids)[0]
            del ids
            embeds.append(e.repeat(1, batch, 1).view(batch, 77, -1))
            del e
        cond = torch.cat([embeds[1], embeds[0]])
        del embeds
        latents = torch.randn((batch, 4, resolution // 8, resolution // 8), dtype=dtype, device=ctx.device)
        latents = _denoise(ctx, unet, latents, cond, steps)
        del cond
        image = _decode(ctx, vae, latents, 0.18215)
        del latents, image
        off.free_all()
    ctx.mark("teardown")
    del text_encoder, unet, vae, off


def sdxl(ctx, batch=1, resolution=1024, steps=2, attention="flash", precision="fp16", vae_tiling=False,
         vae_slicing=False, offload="none"):
    """SDXL base 1.0 (stabilityai/stable-diffusion-xl-base-1.0 configs)."""
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    dtype = _check(resolution, precision)
    ctx.mark("build")
    with _host_build(ctx, offload):
        te1 = _built(ctx, dtype, lambda: CLIPTextModel(CLIPTextConfig(**CLIP_L)))
        te2 = _built(ctx, dtype, lambda: CLIPTextModelWithProjection(CLIPTextConfig(**OPENCLIP_BIGG)))
        unet = _built(ctx, dtype, lambda: UNet2DConditionModel(**SDXL_UNET))
        vae = _built(ctx, dtype, lambda: AutoencoderKL(**VAE, sample_size=1024, scaling_factor=0.13025,
                                                        force_upcast=True))
    _set_attention(attention, unet, vae)
    _vae_options(vae, vae_tiling, vae_slicing)
    # model_cpu_offload_seq = "text_encoder->text_encoder_2->image_encoder->unet->vae"
    off = Offload(ctx, offload, [te1, te2, unet, vae])
    for m in (te1, te2, unet, vae):
        m.eval()
    with torch.no_grad():
        ctx.mark("encode prompt")
        ids = torch.zeros((1, 77), dtype=torch.long, device=ctx.device)
        o1 = te1(ids, output_hidden_states=True)
        h1 = o1.hidden_states[-2]
        del o1
        o2 = te2(ids, output_hidden_states=True)
        pooled = o2[0]
        h2 = o2.hidden_states[-2]
        del o2, ids
        pe = torch.cat([h1, h2], dim=-1)
        del h1, h2
        neg = torch.zeros_like(pe)  # force_zeros_for_empty_prompt
        neg_pooled = torch.zeros_like(pooled)
        pe = pe.repeat(1, batch, 1).view(batch, 77, -1)
        neg = neg.repeat(1, batch, 1).view(batch, 77, -1)
        pooled = pooled.repeat(1, batch).view(batch, -1)
        neg_pooled = neg_pooled.repeat(1, batch).view(batch, -1)
        cond = torch.cat([neg, pe])
        text_embeds = torch.cat([neg_pooled, pooled])
        del pe, neg, pooled, neg_pooled
        time_ids = torch.zeros((1, 6), dtype=dtype, device=ctx.device).repeat(2 * batch, 1)
        added = {"text_embeds": text_embeds, "time_ids": time_ids}
        latents = torch.randn((batch, 4, resolution // 8, resolution // 8), dtype=dtype, device=ctx.device)
        latents = _denoise(ctx, unet, latents, cond, steps, added=added)
        del cond, added, text_embeds, time_ids
        if dtype == torch.float16:
            ctx.mark("vae upcast")
            # With offloading the VAE is on the host here (its hook moves it
            # at the decode): converted there.
            with off.host():
                _cast(vae, torch.float32)
            latents = latents.to(torch.float32)
        image = _decode(ctx, vae, latents, 0.13025)
        del latents, image
        if dtype == torch.float16:
            # On the GPU after a model-offloaded decode; on the host with
            # sequential offloading.
            with off.host() if offload == "sequential" else contextlib.nullcontext():
                _cast(vae, torch.float16)
        off.free_all()
    ctx.mark("teardown")
    del te1, te2, unet, vae, off
