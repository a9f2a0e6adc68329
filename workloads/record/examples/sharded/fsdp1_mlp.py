"""A small FSDP1 training script written for torchrun, recorded unchanged on a CPU:

    python -m vramlab_record.cpu --world-size 4 --rank 1 -o rank1.csv -- fsdp1_mlp.py
"""
import os, torch, torch.nn as nn, torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import ModuleWrapPolicy
dist.init_process_group("nccl")
lr = int(os.environ["LOCAL_RANK"]); torch.cuda.set_device(lr)
class Block(nn.Module):
    def __init__(s): super().__init__(); s.a = nn.Linear(1024, 4096); s.b = nn.Linear(4096, 1024)
    def forward(s, x): return s.b(torch.relu(s.a(x)))
model = nn.Sequential(*[Block() for _ in range(3)])
model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}), device_id=torch.cuda.current_device())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(2):
    x = torch.randn(16, 256, 1024, device="cuda")
    model(x).sum().backward(); opt.step(); opt.zero_grad()
