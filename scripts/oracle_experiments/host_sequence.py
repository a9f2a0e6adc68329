"""Runs the pinned host allocations of a sequence file (see
allocator/tests/data/host-sequence.json) with this process's torch on the
fake CUDA device and prints, as JSON, PyTorch's host_memory_stats() after
each step and which earlier block each new one reuses (same address).

    bash scripts/oracle_experiments/run.sh 2.15 host_sequence.py driver \
        allocator/tests/data/host-sequence.json > out.json
"""

import gc
import json
import sys

import torch

STATS = ("allocations", "allocated_bytes", "active_requests", "active_bytes")
FIELDS = ("current", "peak", "allocated", "freed")


def stats():
    s = torch.cuda.host_memory_stats()
    out = {k: [s.get(f"{k}.{f}", 0) for f in FIELDS] for k in STATS}
    out["num_host_alloc"] = s.get("num_host_alloc", 0)
    out["num_host_free"] = s.get("num_host_free", 0)
    out["host_alloc_calls"] = s.get("host_alloc_time.count", 0)
    out["host_free_calls"] = s.get("host_free_time.count", 0)
    return out


def main(path):
    steps = json.load(open(path))["steps"]
    torch.cuda.init()
    held = {}
    address = {}
    results = []
    for step in steps:
        op = step["op"]
        row = {"op": op, "id": step.get("id")}
        if op == "pin":
            held[step["id"]] = torch.empty(step["bytes"], dtype=torch.uint8, pin_memory=True)
            ptr = held[step["id"]].data_ptr()
            # The last earlier block at this address (none for 0 bytes).
            earlier = [k for k, p in address.items() if p == ptr != 0 and k not in held]
            row["reuses"] = earlier[-1] if earlier else None
            address[step["id"]] = ptr
        elif op == "free":
            del held[step["id"]]
            gc.collect()
        elif op == "copy":
            dst = torch.empty(held[step["id"]].numel(), dtype=torch.uint8, device="cuda")
            dst.copy_(held[step["id"]], non_blocking=True)
            del dst
        elif op == "empty_cache":
            torch._C._host_emptyCache()
        else:
            raise SystemExit(f"{path}: unknown op {op!r}")
        row["stats"] = stats()
        results.append(row)
    json.dump({"torch": torch.__version__, "steps": results}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
