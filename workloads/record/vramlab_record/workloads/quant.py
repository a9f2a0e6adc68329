"""int8 / nf4 weight quantization, emulated after bitsandbytes (0.45+).

bitsandbytes has no fake-tensor kernels, so its layers are replaced by
modules that hold the same tensors (shapes, dtypes) and make the same
allocations in ``forward`` with ``torch.empty``: the memory pattern of the
real kernels, not their arithmetic (outputs are uninitialised). What is
left out: LLM.int8()'s outlier columns (data-dependent, usually a few
columns), and the allocations inside the CUDA kernels.

* ``int8`` (``Linear8bitLt``, ``load_in_8bit``, threshold 6.0, inference):
  weight ``CB`` int8 ``(out, in)`` + row scales ``SCB`` fp32. Forward: the
  input cast to fp16, an outlier mask, ``CA`` int8 + ``SCA`` fp32 (vector-
  wise quantisation), the int32 product, the fp16 dequantised output and
  its cast back to the activation dtype.
* ``nf4`` (``Linear4bit``, ``load_in_4bit``, nf4, blocksize 64, double
  quantisation, bf16 compute): packed uint8 weight ``(out*in/2, 1)``,
  uint8 absmax per 64 values, fp32 absmax per 256 of those, a 256-entry
  fp32 code. Forward: the absmax dequantised to fp32 (and offset), then
  for a single input row (decode at batch 1) the gemv kernel's output
  only; otherwise the weight dequantised to bf16 ``(out, in)`` and a
  regular ``linear``.

Like ``from_pretrained(..., quantization_config=...)``, the decoder's
linear layers are quantised and ``lm_head`` is not, and the full-precision
weights of quantised layers never exist on the device.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Int8Linear(nn.Module):
    def __init__(self, in_features: int, out_features: int, device):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.CB = nn.Parameter(torch.empty((out_features, in_features), dtype=torch.int8, device=device),
                               requires_grad=False)
        self.register_buffer("SCB", torch.empty((out_features,), dtype=torch.float32, device=device))

    def forward(self, x):
        m = x.numel() // x.shape[-1]
        dev = x.device
        a16 = x.to(torch.float16)
        outliers = torch.empty((m, self.in_features), dtype=torch.bool, device=dev)
        ca = torch.empty((m, self.in_features), dtype=torch.int8, device=dev)
        sca = torch.empty((m,), dtype=torch.float32, device=dev)
        del outliers, a16
        out32 = torch.empty((m, self.out_features), dtype=torch.int32, device=dev)
        del ca
        out16 = torch.empty((m, self.out_features), dtype=torch.float16, device=dev)
        del out32, sca
        out = out16.to(x.dtype)
        del out16
        return out.view(*x.shape[:-1], self.out_features)


class NF4Linear(nn.Module):
    BLOCK = 64

    def __init__(self, in_features: int, out_features: int, device, compute_dtype=torch.bfloat16):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.compute_dtype = compute_dtype
        n = in_features * out_features
        blocks = (n + self.BLOCK - 1) // self.BLOCK
        self.weight = nn.Parameter(torch.empty(((n + 1) // 2, 1), dtype=torch.uint8, device=device),
                                   requires_grad=False)
        self.register_buffer("absmax", torch.empty((blocks,), dtype=torch.uint8, device=device))
        self.register_buffer("absmax2", torch.empty(((blocks + 255) // 256,), dtype=torch.float32, device=device))
        self.register_buffer("code2", torch.empty((256,), dtype=torch.float32, device=device))
        self.register_buffer("code", torch.empty((16,), dtype=torch.float32, device=device))
        self.blocks = blocks

    def forward(self, x):
        dev = x.device
        m = x.numel() // x.shape[-1]
        absmax = torch.empty((self.blocks,), dtype=torch.float32, device=dev)  # dequantize_blockwise
        absmax = absmax + 0.0  # += offset makes a new tensor in bitsandbytes
        if m == 1 and not torch.is_grad_enabled():
            out = torch.empty((m, self.out_features), dtype=x.dtype, device=dev)  # gemv_4bit
            del absmax
            return out.view(*x.shape[:-1], self.out_features)
        w = torch.empty((self.out_features, self.in_features), dtype=self.compute_dtype, device=dev)
        del absmax
        out = F.linear(x, w)
        del w
        return out


_KINDS = {"int8": Int8Linear, "nf4": NF4Linear}


def build_quantized(ctx, cfg, precision: str):
    """A ``LlamaForCausalLM`` whose decoder linears are quantised, materialised
    on ``ctx.device`` module by module (no full-precision copy of them)."""
    from transformers import LlamaForCausalLM
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    if precision not in _KINDS:
        raise ValueError(f"precision must be bf16, int8 or nf4, not '{precision}'")
    kind = _KINDS[precision]
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("meta"):
            model = LlamaForCausalLM(cfg)
        for name, mod in list(model.named_modules()):
            for cname, child in list(mod.named_children()):
                full = f"{name}.{cname}" if name else cname
                if isinstance(child, nn.Linear) and full.startswith("model.layers."):
                    setattr(mod, cname, kind(child.in_features, child.out_features, ctx.device))
        with torch.device(ctx.device):
            model.model.rotary_emb = LlamaRotaryEmbedding(cfg)
        for mod in model.modules():
            for pname, p in list(mod.named_parameters(recurse=False)):
                if p.device.type == "meta":
                    setattr(mod, pname, nn.Parameter(torch.empty_like(p, device=ctx.device), requires_grad=False))
            for bname, b in list(mod.named_buffers(recurse=False)):
                if b is not None and b.device.type == "meta":
                    mod.register_buffer(bname, torch.empty_like(b, device=ctx.device))
    finally:
        torch.set_default_dtype(prev)
    return model
