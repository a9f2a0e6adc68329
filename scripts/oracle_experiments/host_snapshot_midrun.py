"""A snapshot recorded mid-run with pinned host memory: weights pinned at
load time, before the history starts (so only host_segments knows them),
and a cached block from before it reused after; then offload traffic.
Prints host_memory_stats() (peaks reset where the history starts): the
input and the judge of tests/releases/host-midrun.torch2.15.pickle.

    bash scripts/oracle_experiments/run.sh 2.15 host_snapshot_midrun.py driver \
        tests/releases/host-midrun.torch2.15.pickle > tests/releases/host-midrun.torch2.15.stats.json
"""

import json
import sys

import torch

out = sys.argv[1]
x = torch.empty(1000, device="cuda")
weights = [torch.empty(1500000, dtype=torch.uint8).pin_memory() for _ in range(4)]  # 2 MiB blocks
spare = torch.empty(3000000, dtype=torch.uint8).pin_memory()  # 4 MiB block
del spare  # cached before the history
torch.cuda.reset_peak_host_memory_stats()
torch.cuda.memory._record_memory_history(max_entries=100000, record_pinned_host_memory=True)
staging = torch.empty(2500000, dtype=torch.uint8).pin_memory()  # reuses the cached 4 MiB block
g = [w.to("cuda", non_blocking=True) for w in weights]
kv = torch.empty(5000000, dtype=torch.uint8).pin_memory()  # 8 MiB block
del staging
small = torch.empty(100000, dtype=torch.uint8).pin_memory()  # 128 KiB block
torch.cuda.memory._dump_snapshot(out)
stats = torch.cuda.host_memory_stats()
print(json.dumps({"torch": torch.__version__, "host_memory_stats": dict(stats)}, indent=1, sort_keys=True))
