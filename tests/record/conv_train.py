"""Conv2d + BatchNorm forward and backward (cuDNN picks its algorithms and workspaces)."""
import torch

m = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
                        torch.nn.Conv2d(32, 32, 3)).cuda()
x = torch.randn(8, 3, 64, 64, device="cuda")
m(x).mean().backward()
print("ok")
