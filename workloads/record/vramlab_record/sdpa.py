"""``F.scaled_dot_product_attention`` and ``F.dropout`` as CUDA runs them.

SDPA is routed as CUDA's dispatcher (``sdp::select_sdp_backend``, priority
flash > memory-efficient > math) routes it on an sm80+ GPU, for every mode a
GPU script uses:

* **FlashAttention-2** (``_FlashAttention`` in :mod:`vramlab_record.flash`):
  fp16/bf16, no ``attn_mask``, head dim <= 256 and a multiple of 8, 4-D
  inputs, causal only with equal query/key lengths; dropout and grouped-query
  attention (``enable_gqa``, no K/V repeat) natively. Without dropout the
  kernel takes two 8-byte CUDA tensors for the philox seed and offset; with
  dropout it reads the generator's seed/offset into two *host* scalars
  (``at::scalar_tensor`` on the CPU: no GPU allocation) and keeps them for
  the backward, which regenerates the same dropout mask (nothing else is
  stored).
* **memory-efficient** (``_scaled_dot_product_efficient_attention``): a mask,
  fp32, or what flash refuses; dropout natively (philox seed/offset on the
  host as well), a boolean mask converted to an additive one of the query
  dtype, a mask whose last dimension is not a multiple of 16 padded to one
  (``pad_bias``: a materialised, expanded copy) as ``preprocess_mask`` does.
  No GQA: CUDA then falls back to the math path.
* **math** (``_scaled_dot_product_attention_math``) for what neither takes
  (masked GQA, head dim > 256, ...); with dropout the L x L probabilities
  go through the fused dropout kernel (output + a boolean mask), as
  ``at::dropout`` does on CUDA, written out here because on the CPU the same
  C++ takes the unfused path (a noise tensor of the input dtype).

The backends a script switches off (``torch.nn.attention.sdpa_kernel``,
``torch.backends.cuda.enable_flash_sdp(False)``, ...) are not picked.

Inside ``torch.autocast("cuda")`` (see :mod:`vramlab_record.autocast`) SDPA
is a lower-precision op: floating inputs are cast to the autocast dtype first.

``F.dropout`` in training mode becomes ``torch.native_dropout`` (output +
1-byte mask saved for the backward), the kernel ``at::dropout`` picks for a
CUDA tensor (``is_fused_kernel_acceptable``); the CPU path would allocate a
noise tensor of the input dtype instead.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .flash import _FlashAttention

aten = torch.ops.aten

_LOW_PRECISION = (torch.float16, torch.bfloat16)
_MEM_EFF_ALIGNMENT = 16


def _autocast_inputs(*ts):
    from .autocast import EMULATION

    dt = None
    if EMULATION.depth > 0 and torch.is_autocast_enabled("cpu"):
        dt = torch.get_autocast_dtype("cpu")
    elif ts[0].device.type == "cuda" and torch.is_autocast_enabled("cuda"):  # fake CUDA device
        dt = torch.get_autocast_dtype("cuda")
    if dt is not None:
        return tuple(t.to(dt) if isinstance(t, torch.Tensor) and t.is_floating_point()
                     and t.dtype != torch.float64 and t.dtype != dt else t for t in ts)
    return ts


def backend(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa) -> str:
    """The backend CUDA's SDPA picks: ``flash``, ``efficient`` or ``math``."""
    d = query.shape[-1]
    gqa = query.shape[-3] != key.shape[-3]
    b = torch.backends.cuda  # torch.nn.attention.sdpa_kernel(...) sets these flags
    if (b.flash_sdp_enabled() and attn_mask is None and query.dtype in _LOW_PRECISION and d <= 256 and d % 8 == 0
            and query.dim() == 4 and not (is_causal and query.shape[-2] != key.shape[-2])):
        return "flash"
    if (b.mem_efficient_sdp_enabled() and not gqa and query.dtype in _LOW_PRECISION + (torch.float32,)
            and d % 8 == 0 and d <= 512 and query.dim() in (3, 4)):
        return "efficient"
    if not b.math_sdp_enabled():
        raise RuntimeError("vramlab_record: no SDPA backend enabled for these inputs (CUDA would fail as well)")
    return "math"


def cuda_like_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                   enable_gqa=False):
    """``F.scaled_dot_product_attention`` routed like CUDA's dispatcher."""
    query, key, value, attn_mask = _autocast_inputs(query, key, value, attn_mask)
    hq, hk = query.shape[-3], key.shape[-3]
    if hq != hk and not enable_gqa:
        raise RuntimeError("SDPA: query and key head counts differ and enable_gqa is False")
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    which = backend(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
    if which == "flash":
        # Flash takes (B, H, L, D) views and returns a (B, H, L, D)-shaped
        # view of a (B, L, H, D) buffer, as on CUDA.
        return _FlashAttention.apply(query, key, value, is_causal, scale, float(dropout_p))
    if which == "math":
        if dropout_p == 0.0:
            return aten._scaled_dot_product_attention_math(
                query, key, value, attn_mask, 0.0, is_causal, None, scale=scale, enable_gqa=hq != hk
            )[0]
        return _math_with_dropout(query, key, value, attn_mask, dropout_p, is_causal, scale)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # SDPA converts a boolean mask to an additive one of the query dtype.
        attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill_(~attn_mask, float("-inf"))
    squeeze = query.dim() == 3
    if squeeze:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
        if attn_mask is not None and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
    if attn_mask is not None:
        attn_mask = attn_mask.expand(query.shape[0], hq, query.shape[-2], key.shape[-2])
        last = attn_mask.shape[-1]
        if last % _MEM_EFF_ALIGNMENT:
            pad = _MEM_EFF_ALIGNMENT - last % _MEM_EFF_ALIGNMENT
            attn_mask = F.pad(attn_mask, (0, pad))[..., :last]
    need_lse = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    out = aten._scaled_dot_product_efficient_attention(
        query, key, value, attn_mask, need_lse, float(dropout_p), is_causal, scale=scale
    )[0]
    return out.squeeze(0) if squeeze else out


def _math_with_dropout(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """``_scaled_dot_product_attention_math`` (aten/src/ATen/native/transformers/
    attention.cpp) as its C++ runs on a CUDA tensor: fp16/bf16 inputs upcast
    to fp32 (``allow_fp16_bf16_reduction_math_sdp`` is off by default), the
    causal mask made as a boolean L x S ``tril`` converted to an additive
    one, the mask added in place, ``_safe_softmax``, then the fused dropout
    (``native_dropout``: output + boolean mask), and both results cast back
    to the input dtype (the probabilities too, though SDPA drops them)."""
    origin = query.dtype
    low = origin in _LOW_PRECISION and not torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()
    q = query.to(torch.float32) if low else query
    k = key.to(torch.float32) if low else key
    v = value.to(torch.float32) if low else value

    def additive(mask):
        if mask.dtype == torch.bool:
            return torch.zeros_like(mask, dtype=q.dtype).masked_fill_(~mask, float("-inf"))
        return mask

    if attn_mask is not None:
        attn_mask = additive(attn_mask)
    if is_causal:
        attn_mask = additive(torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool,
                                        device=query.device).tril())
    hq, hk = query.shape[-3], key.shape[-3]
    if hq != hk:
        k = k.repeat_interleave(hq // hk, dim=-3)
        v = v.repeat_interleave(hq // hk, dim=-3)
    s = math.sqrt(scale)
    qs = q * s
    attn = torch.matmul(qs, k.transpose(-2, -1) * s)
    del qs
    if attn_mask is not None:
        attn.add_(attn_mask)
    attn = torch._safe_softmax(attn, -1)
    attn = torch.native_dropout(attn, dropout_p, True)[0]
    out = torch.matmul(attn, v).to(origin)
    probs = attn.to(origin)
    del probs
    return out


_orig_dropout = F.dropout


def cuda_like_dropout(input, p=0.5, training=True, inplace=False):
    """``F.dropout`` taking CUDA's fused kernel (see the module docstring)."""
    if (training and not inplace and isinstance(input, torch.Tensor) and 0.0 < p < 1.0 and input.numel() > 0
            and input.is_floating_point()):
        return torch.native_dropout(input, p, True)[0]
    return _orig_dropout(input, p, training, inplace)
