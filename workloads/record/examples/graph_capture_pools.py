"""Three CUDA graph captures into one shared pool, then a no_split MemPool:
the pool events the CPU recorder writes (docs/results/pools.md).

    cd workloads/record
    python -m vramlab_record.cpu -o /tmp/out.csv -- examples/graph_capture_pools.py
    vramlab oracle /tmp/out.csv --torch 2.15 --conf default --conf expandable_segments:True
"""

import torch, torch.nn as nn
model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).cuda().half()
static_in = {b: torch.zeros(b, 1024, device="cuda", dtype=torch.half) for b in (64, 8, 1)}
pool = torch.cuda.graph_pool_handle()
graphs, outs = {}, {}
with torch.no_grad():
    for b in (64, 8, 1):
        model(static_in[b])                     # warm-up, eager
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            outs[b] = model(static_in[b])
        graphs[b] = g
    graphs[8].replay()
    mp = torch.cuda.MemPool(no_split=True)
    with torch.cuda.use_mem_pool(mp):
        buf = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
    del buf
    del mp
print("ok")
