"""A small FSDP2 training script written for torchrun (a GPU job), recorded
unchanged on a CPU as any rank of any world:

    python -m vramlab_record.cpu --world-size 8 --rank 0 -o rank0.csv -- fsdp2_mlp.py
    python -m vramlab_record.cpu --world-size 8 --ranks 0,7 -o job/ -- fsdp2_mlp.py --offload

Options: --no-reshard (reshard_after_forward=False), --offload
(CPUOffloadPolicy), --width N, --layers N, --steps N.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--no-reshard", action="store_true")
    p.add_argument("--offload", action="store_true")
    args = p.parse_args()
    dist.init_process_group("nccl")
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    mesh = init_device_mesh("cuda", (world,))
    w = args.width
    model = nn.Sequential(*[nn.Sequential(nn.Linear(w, 4 * w), nn.GELU(), nn.Linear(4 * w, w))
                            for _ in range(args.layers)]).cuda()
    kw = {"mesh": mesh, "mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
          "reshard_after_forward": not args.no_reshard}
    if args.offload:
        kw["offload_policy"] = CPUOffloadPolicy()
    for block in model:
        fully_shard(block, **kw)
    fully_shard(model, **kw)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(args.steps):
        x = torch.randn(8, 512, w, device="cuda")
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
