"""The keys of every level of a snapshot written by this torch release's own
allocator (docs/torch-release-signals.md, rows 2.12-2.15):

    bash scripts/oracle_experiments/run.sh 2.15 snapshot_keys.py
"""
import torch

torch.cuda.memory._record_memory_history(max_entries=1000)
a = torch.cuda.caching_allocator_alloc(1 << 20, 0)
b = torch.cuda.caching_allocator_alloc(30 << 20, 0)
torch.cuda.caching_allocator_delete(a)
s = torch.cuda.memory._snapshot()
entries = s["device_traces"][0]
seg = s["segments"][0]
print(torch.__version__)
print("top", sorted(s))
print("settings", sorted(s.get("allocator_settings", {})))
print("entry", sorted({k for e in entries for k in e}))
print("actions", sorted({e["action"] for e in entries}))
print("segment", sorted(seg))
print("block", sorted(seg["blocks"][0]))
