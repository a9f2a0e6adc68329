"""A CS336-style Transformer LM (Stanford CS336 assignment 1/2 building
blocks, written from scratch as students write them): einsum ``Linear``,
indexing ``Embedding``, ``RMSNorm`` in plain ops, interleaved RoPE with
cached cos/sin, causal attention with an explicit mask and a hand-written
softmax, SwiGLU, a hand-written cross entropy and a per-parameter AdamW.

It exists to compare the fake-tensor recorder with the real GPU snapshots
``cs336-small-*`` in ``shared/traces/real`` (whose model is this shape:
vocab 10000, d_model 512, d_ff 1344, 4 layers, 16 heads, batch 10); the
students' exact code is not published, so op-level differences remain.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn


class Linear(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        w = torch.empty(d_out, d_in)
        nn.init.trunc_normal_(w, std=math.sqrt(2 / (d_in + d_out)))
        self.weight = nn.Parameter(w)

    def forward(self, x):
        return torch.einsum("...i,oi->...o", x, self.weight)


class Embedding(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, d).normal_())

    def forward(self, ids):
        return self.weight[ids]


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        rms = torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight


class RoPE(nn.Module):
    def __init__(self, theta, d_k, max_len):
        super().__init__()
        inv = 1.0 / theta ** (torch.arange(0, d_k, 2).float() / d_k)
        ang = torch.outer(torch.arange(max_len).float(), inv)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def forward(self, x, pos):
        cos, sin = self.cos[pos], self.sin[pos]
        xe, xo = x[..., 0::2], x[..., 1::2]
        oe = xe * cos - xo * sin
        oo = xe * sin + xo * cos
        return torch.stack([oe, oo], dim=-1).flatten(-2)


def softmax(x, dim):
    m = torch.max(x, dim=dim, keepdim=True).values
    return torch.exp(x - m) / torch.sum(torch.exp(x - m), dim=dim, keepdim=True)


def attention(q, k, v):
    s = q.shape[-2]
    mask = torch.ones(s, s, device=q.device).tril_()
    scores = torch.einsum("...qd,...kd->...qk", q, k)
    scores = scores / torch.sqrt(torch.tensor(q.shape[-1], device=q.device))
    scores.masked_fill_(~mask.bool(), float("-inf"))
    p = softmax(scores, -1)
    return torch.einsum("...qk,...kd->...qd", p, v)


class MHA(nn.Module):
    def __init__(self, d, heads, rope):
        super().__init__()
        self.q, self.k, self.v, self.o = (Linear(d, d) for _ in range(4))
        self.heads, self.rope = heads, rope

    def forward(self, x, pos):
        b, s, d = x.shape
        h = self.heads
        q = self.q(x).view(b, s, h, d // h).transpose(1, 2)
        k = self.k(x).view(b, s, h, d // h).transpose(1, 2)
        v = self.v(x).view(b, s, h, d // h).transpose(1, 2)
        q = self.rope(q, pos)
        k = self.rope(k, pos)
        y = attention(q, k, v)
        y = y.transpose(1, 2).reshape(b, s, d)
        return self.o(y)


class SwiGLU(nn.Module):
    def __init__(self, d, dff):
        super().__init__()
        self.w1, self.w2, self.w3 = Linear(d, dff), Linear(dff, d), Linear(d, dff)

    def forward(self, x):
        a = self.w1(x)
        a = a * torch.sigmoid(a)
        return self.w2(a * self.w3(x))


class Block(nn.Module):
    def __init__(self, d, heads, dff, rope):
        super().__init__()
        self.ln1, self.ln2 = RMSNorm(d), RMSNorm(d)
        self.attn, self.ffn = MHA(d, heads, rope), SwiGLU(d, dff)

    def forward(self, x, pos):
        x = x + self.attn(self.ln1(x), pos)
        return x + self.ffn(self.ln2(x))


class TransformerLM(nn.Module):
    def __init__(self, vocab, ctx_len, d, layers, heads, dff, theta=10000.0):
        super().__init__()
        self.tok = Embedding(vocab, d)
        rope = RoPE(theta, d // heads, ctx_len)
        self.blocks = nn.ModuleList(Block(d, heads, dff, rope) for _ in range(layers))
        self.ln = RMSNorm(d)
        self.head = Linear(d, vocab)

    def forward(self, ids):
        pos = torch.arange(ids.shape[-1], device=ids.device)
        x = self.tok(ids)
        for blk in self.blocks:
            x = blk(x, pos)
        return self.head(self.ln(x))


def cross_entropy(logits, targets):
    m = torch.max(logits, dim=-1, keepdim=True).values
    z = logits - m
    lse = torch.log(torch.sum(torch.exp(z), dim=-1, keepdim=True))
    picked = torch.gather(z, -1, targets.unsqueeze(-1))
    return (lse - picked).mean()


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        for g in self.param_groups:
            for p in g["params"]:
                st = self.state[p]
                st["m"] = torch.zeros_like(p)
                st["v"] = torch.zeros_like(p)
                st["t"] = 0

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            b1, b2 = g["betas"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                st["t"] += 1
                t = st["t"]
                st["m"] = b1 * st["m"] + (1 - b1) * p.grad
                st["v"] = b2 * st["v"] + (1 - b2) * p.grad ** 2
                lr_t = g["lr"] * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
                p.data = p.data - lr_t * st["m"] / (torch.sqrt(st["v"]) + g["eps"])
                p.data = p.data - g["lr"] * g["weight_decay"] * p.data


def run(ctx, batch=10, seq=200, vocab=10000, d_model=512, d_ff=1344, layers=4, heads=16, mode="fwdbwd",
        steps=3):
    """``mode``: ``fwd`` (``steps`` forwards with grad enabled, as the
    snapshot's script ran them) or ``fwdbwd`` (``steps`` x forward, loss, backward,
    AdamW step, zero_grad)."""
    ctx.mark("build")
    with torch.device(ctx.device):
        model = TransformerLM(vocab, 256, d_model, layers, heads, d_ff)
    ids = torch.randint(0, vocab, (batch, seq), device=ctx.device)
    if mode == "fwd":
        for i in range(steps):
            ctx.mark(f"forward {i}")
            logits = model(ids)
            del logits
        return
    opt = AdamW(model.parameters())
    tgt = torch.randint(0, vocab, (batch, seq), device=ctx.device)
    for i in range(steps):
        ctx.mark(f"step {i}: forward")
        logits = model(ids)
        ctx.mark(f"step {i}: loss")
        loss = cross_entropy(logits, tgt)
        del logits
        ctx.mark(f"step {i}: backward")
        loss.backward()
        del loss
        ctx.mark(f"step {i}: optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
