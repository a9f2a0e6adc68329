"""A torch.compile'd MLP, two training steps (inductor writes Triton kernels; Triton launches them)."""
import torch

m = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda()
opt = torch.optim.AdamW(m.parameters())
cm = torch.compile(m)
x = torch.randn(64, 256, device="cuda")
for _ in range(2):
    loss = cm(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("ok", loss.item())
