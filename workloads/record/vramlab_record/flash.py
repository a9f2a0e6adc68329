"""FlashAttention-2 as PyTorch's CUDA SDPA runs it, with the allocations a
real run makes around its kernels (measured with torch 2.11 on an H200).
Used by the built-in workloads' SDPA (:mod:`vramlab_record.fake`) and by the
full CUDA routing of :mod:`vramlab_record.sdpa`; in a module of its own so
that neither imports the other for it."""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


#: Bytes of the scratch block PyTorch's flash forward takes and frees at
#: once (measured: torch 2.11 on an H200): for a single query row
#: (decode, split-KV) and otherwise.
FLASH_FWD_SCRATCH_DECODE = 66688
FLASH_FWD_SCRATCH = 256


def _scratch(nbytes: int, like: torch.Tensor) -> torch.Tensor:
    return torch.empty((nbytes,), dtype=torch.uint8, device=like.device)


class _FlashAttention(torch.autograd.Function):
    """FlashAttention-2 as PyTorch's CUDA SDPA runs it (GQA without repeat),
    with the allocations a real run makes around the kernels (measured with
    torch 2.11 on an H200): forward: philox seed and offset (8 bytes each),
    the output, the log-sum-exp when a backward will need it, and a scratch
    block freed at once; backward: dQ/dK/dV and one workspace (``2·dq_accum + softmax_d + 256``
    bytes; no expanded dK/dV for GQA)."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal, scale, dropout_p=0.0):
        # Without dropout the kernel takes two 8-byte CUDA tensors for the
        # philox seed and offset; with dropout they are host scalars
        # (at::scalar_tensor on the CPU), kept for the backward.
        if dropout_p == 0.0:
            seed = torch.empty((), dtype=torch.long, device=q.device)
            offset = torch.empty((), dtype=torch.long, device=q.device)
        else:
            seed = offset = None
        if any(ctx.needs_input_grad[:3]):
            out, lse, cum_q, cum_k, max_q, max_k, mseed, moffset, _ = aten._scaled_dot_product_flash_attention(
                q, k, v, dropout_p, is_causal, False, scale=scale
            )
        else:  # no log-sum-exp without a backward
            b, h, sq, _ = q.shape
            out = torch.empty_permuted((b, h, sq, v.shape[3]), (0, 2, 1, 3), dtype=q.dtype, device=q.device)
            lse = cum_q = cum_k = max_q = max_k = mseed = moffset = None
        scratch = _scratch(FLASH_FWD_SCRATCH_DECODE if q.shape[2] == 1 else FLASH_FWD_SCRATCH, q)
        del scratch
        if lse is not None:
            ctx.save_for_backward(q, k, v, out, lse, mseed, moffset)
            ctx.keep = (seed, offset)
        ctx.extra = (cum_q, cum_k, max_q, max_k, is_causal, scale, dropout_p)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse, seed, offset = ctx.saved_tensors
        cum_q, cum_k, max_q, max_k, is_causal, scale, dropout_p = ctx.extra
        dq, dk, dv = aten._scaled_dot_product_flash_attention_backward(
            grad_out, q, k, v, out, lse, cum_q, cum_k, max_q, max_k, dropout_p, is_causal, seed, offset,
            scale=scale,
        )
        b, h, sq, d = q.shape
        sq_r = _round_up(sq, 128)
        d_r = _round_up(d, 32) if d <= 192 else 256
        work = _scratch(2 * b * sq_r * h * d_r * 4 + b * h * sq_r * 4 + 256, q)
        del work
        ctx.keep = None
        return dq, dk, dv, None, None, None
