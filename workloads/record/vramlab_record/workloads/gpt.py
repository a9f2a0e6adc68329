"""The GPT-style LM of ``gpt_small.py`` (6 layers, d=384, vocab 8192, fp32,
AdamW foreach), the trace bundled as ``workloads/data/gpt-small-train.csv``."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        h = self.heads
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int, heads: int, ctx: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def train(ctx, batch=8, seq=256, layers=6, d_model=384, heads=6, vocab=8192, steps=3, leak=False,
          empty_cache=False):
    """``steps`` training steps (fp32, AdamW foreach, zero_grad(set_to_none)).

    ``leak``: the classic leak, each step's logits kept in a list (as for
    metrics, without ``.detach().cpu()``); the list goes at the end.
    ``empty_cache``: ``torch.cuda.empty_cache()`` after every step (an
    ``empty_cache`` event in the recording), the usual attempt at a fix.
    """
    torch.manual_seed(0)
    kept = []
    ctx.mark("build")
    with torch.device(ctx.device):
        model = GPT(vocab, d_model, layers, heads, seq)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    for i in range(steps):
        ctx.mark(f"step {i}")
        idx = torch.randint(0, vocab, (batch, seq), device=ctx.device)
        tgt = torch.randint(0, vocab, (batch, seq), device=ctx.device)
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, vocab), tgt.view(-1))
        if leak:
            kept.append(logits)
        del logits
        loss.backward()
        del loss
        opt.step()
        opt.zero_grad(set_to_none=True)
        del idx, tgt
        if empty_cache:
            ctx.empty_cache()
    ctx.mark("teardown")
    del kept
    del model, opt
