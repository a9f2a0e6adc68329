"""Llama-shaped workloads (Hugging Face ``LlamaForCausalLM``, random init).

The configurations are the published ``config.json`` files, written out here
(no download): Meta-Llama-3-8B by default, and with ``size`` Llama-3.2-1B,
Llama-3.2-3B, Llama-2-13B or Meta-Llama-3-70B. ``layers`` shrinks the model
for quick tests (default: the model's own layer count).
"""

from __future__ import annotations

import torch

from .quant import build_quantized

#: meta-llama/Meta-Llama-3-8B config.json (the fields that shape memory).
LLAMA_3_8B = dict(
    vocab_size=128256,
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=8192,
    rope_theta=500000.0,
    rms_norm_eps=1e-5,
    hidden_act="silu",
    tie_word_embeddings=False,
    attention_bias=False,
    mlp_bias=False,
    bos_token_id=128000,
    eos_token_id=128001,
)

#: Llama 3.2's rope scaling (meta-llama/Llama-3.2-1B and -3B config.json).
_LLAMA_32_ROPE = dict(rope_scaling={"rope_type": "llama3", "factor": 32.0, "high_freq_factor": 4.0,
                                    "low_freq_factor": 1.0, "original_max_position_embeddings": 8192},
                      max_position_embeddings=131072, tie_word_embeddings=True)

#: ``size`` -> config.json fields that differ from Meta-Llama-3-8B's.
SIZES = {
    # meta-llama/Llama-3.2-1B
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, head_dim=64, **_LLAMA_32_ROPE),
    # meta-llama/Llama-3.2-3B
    "3b": dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28, num_attention_heads=24,
               num_key_value_heads=8, head_dim=128, **_LLAMA_32_ROPE),
    "8b": {},
    # meta-llama/Llama-2-13b-hf (no grouped-query attention, 32k vocabulary)
    "13b": dict(vocab_size=32000, hidden_size=5120, intermediate_size=13824, num_hidden_layers=40,
                num_attention_heads=40, num_key_value_heads=40, head_dim=128, max_position_embeddings=4096,
                rope_theta=10000.0, bos_token_id=1, eos_token_id=2),
    # meta-llama/Meta-Llama-3-70B
    "70b": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                num_key_value_heads=8, head_dim=128),
}

_ATTN = {"flash": "sdpa", "eager": "eager"}


def shape(size: str) -> dict:
    """The config.json fields of a model size."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, not '{size}'")
    return {**LLAMA_3_8B, **SIZES[size]}


def resolve_params(params: dict, given: set) -> dict:
    """``layers`` defaults to the model size's own layer count."""
    out = dict(params)
    if "layers" not in given:
        out["layers"] = shape(out.get("size", "8b"))["num_hidden_layers"]
    return out


def config(layers: int, attention: str, size: str = "8b", **kw):
    from transformers import LlamaConfig

    if attention not in _ATTN:
        raise ValueError(f"attention must be one of {sorted(_ATTN)}, not '{attention}'")
    # "flash": HF's sdpa path, which on CUDA (and under vramlab_record.fake)
    # runs FlashAttention-2 with native GQA; "eager": HF's matmul+softmax.
    return LlamaConfig(**{**shape(size), "num_hidden_layers": layers}, attn_implementation=_ATTN[attention], **kw)


def build(ctx, cfg, dtype=torch.bfloat16):
    """Builds the model directly on the device in ``dtype`` (random init)."""
    from transformers import LlamaForCausalLM

    if cfg.tie_word_embeddings:
        return _build_tied(ctx, cfg, dtype)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(ctx.device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    return model


def _build_tied(ctx, cfg, dtype):
    """Llama 3.2 ties the output layer to the embeddings: built directly on
    the device, ``LlamaForCausalLM`` would allocate the output layer's own
    weight (525 MB for 1B) and free it when tying, a peak that loading
    weights (``from_pretrained`` materialises a meta model) never has. So:
    built on ``meta``, then every parameter made once on the device (tied
    ones shared), randomly initialised in place, and the rotary embedding
    rebuilt there."""
    from transformers import LlamaForCausalLM

    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("meta"):
            model = LlamaForCausalLM(cfg)
        made = {}
        with torch.no_grad():
            for m in model.modules():
                for name, p in list(m._parameters.items()):
                    if p is None:
                        continue
                    if id(p) not in made:
                        t = torch.empty(p.shape, dtype=p.dtype, device=ctx.device)
                        if p.dim() > 1:
                            t.normal_(0.0, cfg.initializer_range)
                        else:
                            t.fill_(1.0)
                        made[id(p)] = torch.nn.Parameter(t, requires_grad=p.requires_grad)
                    m._parameters[name] = made[id(p)]
        with torch.device(ctx.device):
            model.model.rotary_emb = type(model.model.rotary_emb)(config=cfg)
    finally:
        torch.set_default_dtype(prev)
    return model


def train(ctx, batch=1, seq=512, attention="flash", checkpointing=False, steps=2, layers=32, size="8b"):
    """Training steps: bf16 weights and AdamW states, foreach AdamW (the CUDA default).

    Each step: forward with labels (HF's loss upcasts the logits to fp32),
    backward, ``opt.step()``, ``zero_grad(set_to_none=True)``. The first step
    creates the optimizer states, the second shows the steady state.
    """
    cfg = config(layers, attention, size, use_cache=False)
    ctx.mark("build")
    model = build(ctx, cfg)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
    for step in range(steps):
        ctx.mark(f"step {step}: forward")
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=ctx.device)
        out = model(input_ids=ids, labels=ids)
        loss = out.loss
        del out
        ctx.mark(f"step {step}: backward")
        loss.backward()
        del loss
        ctx.mark(f"step {step}: optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        del ids
    ctx.mark("teardown")
    del opt, model


def infer(ctx, batch=1, seq=512, new_tokens=8, attention="flash", kv_cache="dynamic", precision="bf16",
          layers=32, size="8b"):
    """Greedy generation written out as ``generate()`` does it (fake tensors
    cannot run ``generate()``'s stopping checks).

    Prefill of ``seq`` prompt tokens, then ``new_tokens - 1`` decode steps;
    ``logits_to_keep=1`` as generate passes it; the ids and the attention
    mask grow by one column per token (torch.cat), the logits of the last
    position are copied to fp32. ``kv_cache``: ``dynamic`` (DynamicCache,
    torch.cat per layer per token) or ``static`` (StaticCache of
    ``seq + new_tokens`` positions, filled in place). ``precision``: ``bf16``,
    or ``int8`` / ``nf4`` with bitsandbytes-style weight layouts and
    temporaries (emulated, see quant.py).
    """
    from transformers import DynamicCache, StaticCache

    if kv_cache not in ("dynamic", "static"):
        raise ValueError(f"kv_cache must be dynamic or static, not '{kv_cache}'")
    cfg = config(layers, attention, size, use_cache=True)
    ctx.mark("build")
    model = build(ctx, cfg) if precision == "bf16" else build_quantized(ctx, cfg, precision)
    model.eval()
    with torch.no_grad():
        ctx.mark("prefill")
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=ctx.device)
        mask = torch.ones((batch, seq), dtype=torch.long, device=ctx.device)
        if kv_cache == "dynamic":
            cache = DynamicCache(config=cfg)
        else:
            cache = StaticCache(config=cfg, max_cache_len=seq + new_tokens)
        pos = torch.arange(seq, device=ctx.device)
        step_in = ids
        for t in range(new_tokens):
            if t == 1:
                ctx.mark("decode")
            out = model(input_ids=step_in, past_key_values=cache, cache_position=pos, use_cache=True,
                        logits_to_keep=1)
            logits = out.logits[:, -1, :].to(copy=True, dtype=torch.float32)
            del out
            nxt = logits.argmax(dim=-1)
            del logits
            ids = torch.cat([ids, nxt[:, None]], dim=-1)
            mask = torch.cat([mask, mask.new_ones((batch, 1))], dim=-1)
            step_in = nxt[:, None]
            del nxt
            pos = pos[-1:] + 1
        ctx.mark("teardown")
        del cache, ids, mask, step_in, pos
    del model
