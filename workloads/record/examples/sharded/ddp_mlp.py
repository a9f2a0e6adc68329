"""A small DDP training script written for torchrun, recorded unchanged on a CPU:

    python -m vramlab_record.cpu --world-size 4 --rank 1 -o rank1.csv -- ddp_mlp.py
"""
import os, torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group(backend="nccl")
lr = int(os.environ["LOCAL_RANK"]); torch.cuda.set_device(lr)
model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
model = DDP(model, device_ids=[lr], bucket_cap_mb=25)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for _ in range(2):
    x = torch.randn(32, 1024, device="cuda")
    model(x).sum().backward(); opt.step(); opt.zero_grad(set_to_none=True)
dist.destroy_process_group()
