"""CPU weight offload as serving engines do it (SGLang --cpu-offload-gb,
vLLM's CPU offload): each layer's weights live in pinned host memory and
are copied to the GPU with non_blocking=True just before the layer runs,
then dropped. Per-layer weights of 1.5 MB (scaled with --scale) take 2 MiB
pinned blocks: PyTorch's host allocator rounds each request up to a power
of two."""

import argparse

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--layers", type=int, default=8)
ap.add_argument("--scale", type=float, default=1.0)
ap.add_argument("--steps", type=int, default=3)
args = ap.parse_args()

hidden = int(612 * args.scale)  # 612 x 612 fp32 = 1.43 MiB per weight
dev = torch.device("cuda")
weights = [torch.randn(hidden, hidden).pin_memory() for _ in range(args.layers)]
x = torch.randn(16, hidden, device=dev)
copy = torch.cuda.Stream()
for _ in range(args.steps):
    h = x
    for w in weights:
        with torch.cuda.stream(copy):
            w_gpu = w.to(dev, non_blocking=True)
        torch.cuda.current_stream().wait_stream(copy)
        h = torch.relu(h @ w_gpu)
        del w_gpu
    # the activations go back to pinned memory, as an offloaded KV cache would
    out = h.to("cpu", non_blocking=True)
    torch.cuda.synchronize()
    del out
