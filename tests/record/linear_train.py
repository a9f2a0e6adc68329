"""Two Linear layers, AdamW, two steps (cuBLAS/cuBLASLt decide their workspaces)."""
import torch

m = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda()
opt = torch.optim.AdamW(m.parameters())
x = torch.randn(64, 256, device="cuda")
for _ in range(2):
    loss = m(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    print("loss", loss.item())
print("round trip", torch.tensor([1, 2, 3]).cuda().tolist())
