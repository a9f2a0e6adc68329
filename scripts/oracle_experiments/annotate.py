"""Which release writes `annotate` trace entries (`torch.cuda.memory._annotate_tensor`),
and a snapshot holding them for vramlab to read (docs/torch-release-signals.md):

    bash scripts/oracle_experiments/run.sh 2.14 annotate.py driver OUT.pickle
"""
import pickle
import sys

import torch

out = sys.argv[1] if len(sys.argv) > 1 else None
torch.cuda.memory._record_memory_history(max_entries=1000)
a = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
b = torch.empty(30 << 20, dtype=torch.uint8, device="cuda")
has = hasattr(torch.cuda.memory, "_annotate_tensor")
if has:
    torch.cuda.memory._annotate_tensor(b[1024:], "packed for backward")
del a
c = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
s = torch.cuda.memory._snapshot()
entries = s["device_traces"][0]
print(torch.__version__, "_annotate_tensor:", has)
print("actions", [e["action"] for e in entries])
for e in entries:
    if e["action"] == "annotate":
        print("annotate entry", {k: v for k, v in e.items() if k != "frames"})
if out:
    with open(out, "wb") as f:
        pickle.dump(s, f)
