"""ResNet-50 training (torchvision, random init), fp32, SGD, 3 steps of batch 32.

    python resnet50_train.py                   # on a GPU
"""

import torch
import torch.nn.functional as F
import torchvision

torch.manual_seed(0)
model = torchvision.models.resnet50(num_classes=1000).cuda()
model.train()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

batch = 32
for step in range(3):
    images = torch.randn(batch, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (batch,), device="cuda")
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("done")
