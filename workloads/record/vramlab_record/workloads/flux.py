"""FLUX.1-dev-shaped text-to-image (diffusers ``FluxTransformer2DModel``, random
init from black-forest-labs/FLUX.1-dev's published config.json files; no
weights, no download).

The pipeline is written out as ``FluxPipeline.__call__`` runs it in bf16
(``torch_dtype=torch.bfloat16``, everything on the GPU, no offload):

* prompt encoding: CLIP-L's pooled output (77 tokens) and T5-v1.1-XXL's
  hidden states (``max_sequence_length`` 512), ``text_ids`` of zeros;
* latents ``(batch, 16, H/8, W/8)`` packed into ``(batch, H/16 · W/16, 64)``
  tokens, ``latent_image_ids`` on the device, the distilled guidance
  (3.5) as a tensor;
* ``steps`` transformer steps (no classifier-free guidance: FLUX.1-dev is
  guidance-distilled), each followed by FlowMatchEulerDiscreteScheduler's
  step (fp32 upcast of the sample, result cast back);
* unpacking, ``latents / scaling_factor + shift_factor``, the VAE decode
  (16 latent channels, no quant convs; FluxPipeline does not upcast the
  VAE) and the image denormalisation on the device.

What differs from the real pipeline: the tokenizers are not run (the ids are
made on the device, as the real ids are copied there) and the scheduler's
sigmas are Python numbers (diffusers keeps them on the host).
``layers`` / ``single_layers`` shrink the transformer for quick tests.
"""

from __future__ import annotations

import torch

from .diffusion import CLIP_L, _built

#: black-forest-labs/FLUX.1-dev transformer/config.json
FLUX_DEV_TRANSFORMER = {
    "attention_head_dim": 128,
    "axes_dims_rope": [16, 56, 56],
    "guidance_embeds": True,
    "in_channels": 64,
    "joint_attention_dim": 4096,
    "num_attention_heads": 24,
    "num_layers": 19,
    "num_single_layers": 38,
    "patch_size": 1,
    "pooled_projection_dim": 768,
}

#: black-forest-labs/FLUX.1-dev vae/config.json
FLUX_VAE = {
    "act_fn": "silu",
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "force_upcast": True,
    "in_channels": 3,
    "latent_channels": 16,
    "latents_mean": None,
    "latents_std": None,
    "layers_per_block": 2,
    "mid_block_add_attention": True,
    "norm_num_groups": 32,
    "out_channels": 3,
    "sample_size": 1024,
    "scaling_factor": 0.3611,
    "shift_factor": 0.1159,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "use_post_quant_conv": False,
    "use_quant_conv": False,
}

#: google/t5-v1_1-xxl (FLUX.1-dev text_encoder_2/config.json)
T5_XXL = dict(vocab_size=32128, d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64,
              relative_attention_num_buckets=32, relative_attention_max_distance=128,
              feed_forward_proj="gated-gelu", dense_act_fn="gelu_new", is_gated_act=True,
              layer_norm_epsilon=1e-6, tie_word_embeddings=False, use_cache=False)

T5_MAX_SEQUENCE_LENGTH = 512


def _sigmas(steps):
    # Decreasing noise levels (the shifted schedule's values do not change
    # the allocations).
    return [1.0 - i / steps for i in range(steps + 1)]


def flux(ctx, batch=1, resolution=1024, steps=2, layers=19, single_layers=38):
    """FLUX.1-dev-shaped text-to-image: CLIP-L + T5-XXL, ``steps`` transformer
    steps, VAE decode, all bf16."""
    from diffusers import AutoencoderKL, FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    if resolution % 16:
        raise ValueError(f"resolution must be a multiple of 16 (8x VAE, 2x2 packing), not {resolution}")
    dtype = torch.bfloat16
    ctx.mark("build")
    text_encoder = _built(ctx, dtype, lambda: CLIPTextModel(CLIPTextConfig(**CLIP_L)))
    text_encoder_2 = _built(ctx, dtype, lambda: T5EncoderModel(T5Config(**T5_XXL)))
    transformer = _built(ctx, dtype, lambda: FluxTransformer2DModel(
        **{**FLUX_DEV_TRANSFORMER, "num_layers": layers, "num_single_layers": single_layers}))
    vae = _built(ctx, dtype, lambda: AutoencoderKL(**FLUX_VAE))
    for m in (text_encoder, text_encoder_2, transformer, vae):
        m.eval()
    with torch.no_grad():
        ctx.mark("encode prompt")
        ids = torch.zeros((1, 77), dtype=torch.long, device=ctx.device)
        pooled = text_encoder(ids, output_hidden_states=False).pooler_output
        del ids
        pooled = pooled.to(dtype=dtype)
        pooled = pooled.repeat(1, batch).view(batch, -1)
        ids = torch.zeros((1, T5_MAX_SEQUENCE_LENGTH), dtype=torch.long, device=ctx.device)
        embeds = text_encoder_2(ids, output_hidden_states=False)[0]
        del ids
        embeds = embeds.to(dtype=dtype)
        embeds = embeds.repeat(1, batch, 1).view(batch, T5_MAX_SEQUENCE_LENGTH, -1)
        text_ids = torch.zeros((T5_MAX_SEQUENCE_LENGTH, 3), dtype=dtype, device=ctx.device)

        h, w = 2 * (resolution // 16), 2 * (resolution // 16)
        latents = torch.randn((batch, 16, h, w), dtype=dtype, device=ctx.device)
        latents = latents.view(batch, 16, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5)
        latents = latents.reshape(batch, (h // 2) * (w // 2), 64)
        image_ids = torch.zeros(((h // 2) * (w // 2), 3), dtype=dtype, device=ctx.device)
        timesteps = torch.tensor([1000.0 * s for s in _sigmas(steps)[:-1]], device=ctx.device)
        guidance = torch.full([1], 3.5, device=ctx.device, dtype=torch.float32).expand(batch)
        sig = _sigmas(steps)
        for i in range(steps):
            ctx.mark(f"transformer step {i}")
            timestep = timesteps[i].expand(batch).to(latents.dtype)
            t = timestep / 1000
            del timestep
            noise = transformer(hidden_states=latents, timestep=t, guidance=guidance, pooled_projections=pooled,
                                encoder_hidden_states=embeds, txt_ids=text_ids, img_ids=image_ids,
                                return_dict=False)[0]
            del t
            # FlowMatchEulerDiscreteScheduler.step
            sample = latents.to(torch.float32)
            prev = sample + (sig[i + 1] - sig[i]) * noise
            del sample, noise
            latents = prev.to(dtype)
            del prev
        del pooled, embeds, text_ids, image_ids, timesteps, guidance

        ctx.mark("vae decode")
        latents = latents.view(batch, h // 2, w // 2, 16, 2, 2).permute(0, 3, 1, 4, 2, 5)
        latents = latents.reshape(batch, 16, h, w)
        latents = latents / FLUX_VAE["scaling_factor"] + FLUX_VAE["shift_factor"]
        image = vae.decode(latents, return_dict=False)[0]
        del latents
        ctx.mark("postprocess")
        image = (image / 2 + 0.5).clamp(0, 1)  # VaeImageProcessor.denormalize
        del image
    ctx.mark("teardown")
    del text_encoder, text_encoder_2, transformer, vae
