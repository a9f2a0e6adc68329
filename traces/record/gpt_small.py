"""A GPT-style language model training step, recorded on the CPU.

The default trace bundled with vramlab: a 6-layer, d=384 decoder-only LM
(about 19M parameters at vocab 8192), batch 8 x 256 tokens, fp32, AdamW
(foreach, like the CUDA default), three optimizer steps with zero_grad(set_to_none).

    python traces/record/gpt_small.py -o traces/data/gpt-small-train.csv
"""

from __future__ import annotations

import argparse
import math
import platform

import torch
import torch.nn as nn
import torch.nn.functional as F

from vramlab_record import AllocationRecorder, finish


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
        mask = torch.ones(t, t, dtype=torch.bool).tril()
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
        x = self.tok(idx) + self.pos(torch.arange(t))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", required=True, help="output .csv (or .pickle for a snapshot-shaped file)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args()

    torch.manual_seed(0)
    rec = AllocationRecorder()
    with rec:
        model = GPT(a.vocab, a.d_model, a.layers, a.heads, a.seq)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
        for _ in range(a.steps):
            idx = torch.randint(0, a.vocab, (a.batch, a.seq))
            tgt = torch.randint(0, a.vocab, (a.batch, a.seq))
            logits = model(idx)
            loss = F.cross_entropy(logits.view(-1, a.vocab), tgt.view(-1))
            del logits
            loss.backward()
            del loss
            opt.step()
            opt.zero_grad(set_to_none=True)
            del idx, tgt
        del model, opt
        finish(rec)
    r = rec.rec
    r.header.update({
        "source": "traces/record/gpt_small.py: GPT-style LM training step recorded on CPU by vramlab_record",
        "framework": f"torch {torch.__version__} (python {platform.python_version()})",
        "workload": "gpt-small-train",
        "params": f"batch={a.batch} seq={a.seq} layers={a.layers} d_model={a.d_model} heads={a.heads} vocab={a.vocab} steps={a.steps} dtype=fp32 optimizer=AdamW(foreach)",
        "allocs": r.allocs,
        "peak_live_bytes": r.peak_live_bytes,
    })
    if a.output.endswith(".pickle"):
        r.write_snapshot(a.output)
    else:
        r.write_csv(a.output)
    print(f"{a.output}: {r.allocs} allocations, {len([e for e in r.events if e[0] != 'mark'])} events, "
          f"peak live {r.peak_live_bytes / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
