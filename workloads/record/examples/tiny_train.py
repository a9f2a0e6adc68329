"""A user training script as vramlab_record runs it: nothing vramlab-specific.

    python -m vramlab_record.gpu -o tiny.pickle -- examples/tiny_train.py --steps 2
    python -m vramlab_record.cpu -o tiny.csv -- examples/tiny_train.py --steps 2

The only habit it needs for CPU recording: pick the device as below, so that
it runs on the (fake) CPU when no GPU is present.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=2)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--width", type=int, default=1024)
a = p.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(a.width, 4 * a.width), nn.GELU(), nn.Linear(4 * a.width, a.width)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(a.steps):
    x = torch.randn(a.batch, 128, a.width, device=device)
    loss = F.mse_loss(model(x), x)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("done", device)
