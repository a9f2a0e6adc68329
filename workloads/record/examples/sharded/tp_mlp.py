"""A small TP training script written for torchrun, recorded unchanged on a CPU:

    python -m vramlab_record.cpu --world-size 4 --rank 1 -o rank1.csv -- tp_mlp.py
"""
import os, torch, torch.nn as nn, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import parallelize_module, ColwiseParallel, RowwiseParallel
dist.init_process_group("nccl")
mesh = init_device_mesh("cuda", (int(os.environ["WORLD_SIZE"]),))
class MLP(nn.Module):
    def __init__(s): super().__init__(); s.up = nn.Linear(1024, 4096); s.down = nn.Linear(4096, 1024)
    def forward(s, x): return s.down(torch.relu(s.up(x)))
model = MLP().cuda()
model = parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(2):
    x = torch.randn(8, 128, 1024, device="cuda")
    model(x).sum().backward(); opt.step(); opt.zero_grad()
