"""Records a small snapshot with pinned host memory history (2.14+) and
prints torch.cuda.host_memory_stats() after it: the input and the judge of
tests/releases/host.torch2.15.pickle.

    bash scripts/oracle_experiments/run.sh 2.15 host_snapshot.py driver \
        tests/releases/host.torch2.15.pickle > tests/releases/host.torch2.15.stats.json
"""

import json
import sys

import torch

out = sys.argv[1]
torch.cuda.memory._record_memory_history(max_entries=100000, record_pinned_host_memory=True)
x = torch.empty(1000, device="cuda")
a = torch.empty(40960, dtype=torch.uint8).pin_memory()  # 64 KiB block
b = torch.empty(1500000, dtype=torch.uint8).pin_memory()  # 2 MiB block
g = b.to("cuda", non_blocking=True)  # an event recorded at its free
del b
c = torch.empty(3000000, dtype=torch.uint8).pin_memory()  # 4 MiB block
d = torch.empty(100, dtype=torch.uint8).pin_memory()  # 128 B block
del a
e = torch.empty(40000, dtype=torch.uint8).pin_memory()  # reuses a's block
h = torch.empty(1400000, dtype=torch.uint8).pin_memory()  # reuses b's block
del c, d, e, h
torch._C._host_emptyCache()
f = torch.empty(5000, dtype=torch.uint8).pin_memory()
torch.cuda.memory._dump_snapshot(out)
stats = torch.cuda.host_memory_stats()
print(json.dumps({"torch": torch.__version__, "host_memory_stats": dict(stats)}, indent=1, sort_keys=True))
