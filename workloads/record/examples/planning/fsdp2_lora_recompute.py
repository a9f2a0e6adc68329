"""FSDP2 + LoRA + activation recompute (GMLake's setting: frozen sharded
weights, small trainable adapters, checkpointed blocks), one rank of a
world of N, recorded without a GPU:

    vramlab record --torch 2.15 --world-size 8 -o lora -- fsdp2_lora_recompute.py
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.checkpoint import checkpoint


class LoraLinear(nn.Module):
    def __init__(self, d_in, d_out, rank=16):
        super().__init__()
        self.base = nn.Linear(d_in, d_out, bias=False)
        self.base.weight.requires_grad_(False)
        self.a = nn.Linear(d_in, rank, bias=False)
        self.b = nn.Linear(rank, d_out, bias=False)

    def forward(self, x):
        return self.base(x) + self.b(self.a(x))


class Block(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.up = LoraLinear(w, 4 * w)
        self.down = LoraLinear(4 * w, w)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    mesh = init_device_mesh("cuda", (int(os.environ["WORLD_SIZE"]),))
    w, layers = 2048, 8
    model = nn.Sequential(*[Block(w) for _ in range(layers)]).cuda()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for blk in model:
        fully_shard(blk, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    for step in range(2):
        # Sequence lengths vary from step to step, as packed batches do.
        x = torch.randn(4, 512 + 256 * step, w, device="cuda", requires_grad=True)
        h = x
        for blk in model:
            h = checkpoint(blk, h, use_reentrant=False)
        h.float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
