"""A small training step for a memory gate in CI (`vramlab gate`), recorded
without a GPU:

    vramlab record --torch 2.15 -o step.pickle -- ci_step.py
    vramlab gate baseline.pickle step.pickle --max-increase 2%

--extra-mib N keeps one more buffer of N MiB alive across the step's peak
(a cache someone added): the change the gate must catch and name.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--extra-mib", type=int, default=0)
    a = p.parse_args()
    model = nn.Sequential(nn.Linear(a.width, 4 * a.width), nn.GELU(), nn.Linear(4 * a.width, a.width)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    extra = torch.empty(a.extra_mib << 20, dtype=torch.uint8, device="cuda") if a.extra_mib else None
    for _ in range(a.steps):
        x = torch.randn(a.batch, 128, a.width, device="cuda")
        loss = F.mse_loss(model(x), x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    del extra


if __name__ == "__main__":
    main()
