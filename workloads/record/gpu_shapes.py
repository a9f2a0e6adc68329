"""Record PyTorch memory snapshots on a GPU in every shape users produce.

Users rarely record from an empty allocator: they start the memory history
after the model is loaded, call ``torch.cuda.empty_cache()`` around it, keep
a small ring buffer, use several streams, or run with expandable segments.
This script makes one small snapshot of each shape with PyTorch's own
allocator, so that ``vramlab fidelity`` can be pinned on them:

==========================  ==============================================
shape                       how it is recorded
==========================  ==============================================
``from-start``              history from the first allocation
``mid-run``                 history started after the "model" is loaded
``ring-buffer``             ``max_entries=300``: only the newest entries
``empty-cache-before``      ``empty_cache()`` just before the history starts
``empty-cache-after``       ``empty_cache()`` just after the history starts
``two-streams``             a side stream, tensors used on both
                            (``record_stream``: deferred frees)
``expandable-mid-run``      ``expandable_segments:True``, history mid-run
``expandable-empty-cache``  the same with ``empty_cache()`` after the start
==========================  ==============================================

The workload is synthetic and deterministic: "weights" of mixed sizes, then
training-like steps that allocate activations (small, 1–10 MiB, large),
free them in reverse order, and keep some optimizer state. Stacks are not
recorded (``stacks=None`` where supported), so the files stay small.

    python workloads/record/gpu_shapes.py --out /tmp/shapes

Each shape runs in its own process (the allocator settings are read once,
at CUDA initialisation). Needs a CUDA GPU and torch; exits 2 without one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

SHAPES = {
    "from-start": {},
    "mid-run": {"history_after_load": True},
    "ring-buffer": {"history_after_load": True, "max_entries": 300},
    "empty-cache-before": {"history_after_load": True, "empty_cache": "before"},
    "empty-cache-after": {"history_after_load": True, "empty_cache": "after"},
    "two-streams": {"history_after_load": True, "streams": 2},
    "expandable-mid-run": {"history_after_load": True, "conf": "expandable_segments:True"},
    "expandable-empty-cache": {
        "history_after_load": True,
        "conf": "expandable_segments:True",
        "empty_cache": "after",
    },
}

MIB = 1 << 20


def start_history(torch, max_entries: int) -> None:
    mem = torch.cuda.memory
    try:
        mem._record_memory_history(enabled="all", context=None, stacks="python", max_entries=max_entries)
    except TypeError:  # older signature
        mem._record_memory_history(True, trace_alloc_max_entries=max_entries, trace_alloc_record_context=False)


def workload(torch, spec: dict, out: str) -> dict:
    dev = torch.device("cuda", 0)
    streams = [torch.cuda.current_stream()]
    if spec.get("streams", 1) > 1:
        streams.append(torch.cuda.Stream())
    if not spec.get("history_after_load"):
        start_history(torch, spec.get("max_entries", 1_000_000))
    # "Weights": mixed sizes, as a model's parameters are.
    weights = []
    for i in range(60):
        n = [3 * MIB, 12 * MIB + 4096, 700_000, 40 * MIB, 5 * MIB + 1][i % 5]
        weights.append(torch.empty(n, dtype=torch.uint8, device=dev))
    # Some scratch that is freed before the history starts: a cache with
    # whole free segments (what empty_cache() releases).
    scratch = [torch.empty(s, dtype=torch.uint8, device=dev) for s in (30 * MIB, 2 * MIB, 64 * MIB, 500_000)]
    del scratch
    if spec.get("empty_cache") == "before":
        torch.cuda.empty_cache()
    if spec.get("history_after_load"):
        start_history(torch, spec.get("max_entries", 1_000_000))
    if spec.get("empty_cache") == "after":
        torch.cuda.empty_cache()
    state = []
    for step in range(4):
        acts = []
        for layer in range(24):
            s = streams[layer % len(streams)]
            with torch.cuda.stream(s):
                size = [256 * 1024, 2 * MIB + 512 * step, 9 * MIB, 18 * MIB + layer * 4096][layer % 4]
                t = torch.empty(size, dtype=torch.uint8, device=dev)
                if s is not streams[0]:
                    t.record_stream(streams[0])
                acts.append(t)
        while acts:  # freed in reverse order, as a backward pass does
            acts.pop()
        if step == 0:
            state = [torch.empty(w.numel() // 2 + 512, dtype=torch.uint8, device=dev) for w in weights[:20]]
        torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(out)
    stats = torch.cuda.memory_stats()
    del state, weights
    return {
        "reserved_bytes.all.peak": stats.get("reserved_bytes.all.peak"),
        "allocated_bytes.all.peak": stats.get("allocated_bytes.all.peak"),
        "num_alloc_retries": stats.get("num_alloc_retries"),
    }


def run_one(name: str, out_dir: str) -> None:
    import torch  # imported here: the settings must be in the environment first

    out = os.path.join(out_dir, f"{name}.pickle")
    info = workload(torch, SHAPES[name], out)
    info.update({"shape": name, "torch": torch.__version__, "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")})
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(info, f, indent=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--shape", choices=sorted(SHAPES), help="record one shape (in this process)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.shape:
        run_one(args.shape, args.out)
        return 0
    try:
        import torch

        if not torch.cuda.is_available():
            print("gpu_shapes: no CUDA GPU", file=sys.stderr)
            return 2
    except ImportError:
        print("gpu_shapes: torch is not installed", file=sys.stderr)
        return 2
    status = 0
    for name, spec in SHAPES.items():
        env = dict(os.environ)
        env.pop("PYTORCH_ALLOC_CONF", None)
        env["PYTORCH_CUDA_ALLOC_CONF"] = spec.get("conf", "")
        r = subprocess.run([sys.executable, __file__, "--out", args.out, "--shape", name], env=env)
        print(f"{name}: exit {r.returncode}")
        status |= r.returncode != 0
    return status


if __name__ == "__main__":
    sys.exit(main())
