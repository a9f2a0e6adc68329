"""torch.compile(mode="reduce-overhead"): inductor's code captured in CUDA graphs, with their private pool."""
import torch

m = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda()
opt = torch.optim.AdamW(m.parameters())
cm = torch.compile(m, mode="reduce-overhead")
for _ in range(4):
    x = torch.randn(64, 256, device="cuda")
    loss = cm(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("ok")
