"""Runs the pinned host allocations of a sequence file (see
allocator/tests/data/host-sequence.json) with this process's torch on the
fake CUDA device and prints, as JSON, PyTorch's host_memory_stats() after
each step, which earlier block each pin reuses (a cache hit: no new block,
and the address of an earlier one), and the exception of a pin that fails.

The fake device must run with the settings the file's "env" names (events
that complete only when synchronized, a host capacity); they are read when
the fake starts, so they are given on the command line:

    VRAMLAB_FAKECUDA_EVENTS=sync VRAMLAB_FAKECUDA_HOST_CAPACITY=41943040 \\
        bash scripts/oracle_experiments/run.sh 2.15 host_sequence.py driver \\
        allocator/tests/data/host-sequence.json > out.json

(PYTORCH_ALLOC_CONF=... before it runs the sequence under those settings;
the output names them as "conf".)

Steps: pin {id, bytes}; free {id}; copy {id, stream}: a non_blocking copy
of the pinned block to the device on that stream ("default", or a name:
one torch.cuda.Stream per name), which makes PyTorch record an event on
that stream when the block is freed; sync {stream}: that stream's
synchronize() (cudaStreamSynchronize); synchronize: torch.cuda.synchronize()
(cudaDeviceSynchronize); empty_cache: torch._C._host_emptyCache().
"""

import gc
import json
import os
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


def check_env(path, env):
    wrong = {k: v for k, v in env.items() if os.environ.get(k) != v}
    if wrong:
        given = " ".join(f"{k}={v}" for k, v in env.items())
        raise SystemExit(f"{path} runs on a fake device with {given}: set them on the command line")


class Run:
    def __init__(self):
        self.held = {}
        self.address = {}
        self.streams = {}

    def stream(self, name):
        if name in (None, "default"):
            return torch.cuda.default_stream()
        if name not in self.streams:
            self.streams[name] = torch.cuda.Stream()
        return self.streams[name]

    def pin(self, step, row):
        before = torch.cuda.host_memory_stats().get("num_host_alloc", 0)
        try:
            t = torch.empty(step["bytes"], dtype=torch.uint8, pin_memory=True)
        except Exception as e:  # the host capacity: R7.3
            first = str(e).splitlines()[0] if str(e) else ""
            row["error"] = f"{type(e).__module__}.{type(e).__qualname__}: {first}"
            return
        self.held[step["id"]] = t
        ptr = t.data_ptr()
        # A cache hit (no new block): the last earlier block at this
        # address. A new block may get the address of one given back to
        # the heap; that is no reuse.
        hit = torch.cuda.host_memory_stats().get("num_host_alloc", 0) == before
        earlier = [k for k, p in self.address.items() if p == ptr != 0 and k not in self.held]
        row["reuses"] = earlier[-1] if hit and earlier else None
        self.address[step["id"]] = ptr

    def step(self, step, row):
        op = step["op"]
        if op == "pin":
            self.pin(step, row)
        elif op == "free":
            # (A pin that failed holds nothing.)
            self.held.pop(step["id"], None)
            gc.collect()
        elif op == "copy":
            src = self.held[step["id"]]
            with torch.cuda.stream(self.stream(step.get("stream"))):
                dst = torch.empty(src.numel(), dtype=torch.uint8, device="cuda")
                dst.copy_(src, non_blocking=True)
                del dst
        elif op == "sync":
            self.stream(step["stream"]).synchronize()
        elif op == "synchronize":
            torch.cuda.synchronize()
        elif op == "empty_cache":
            torch._C._host_emptyCache()
        else:
            return False
        return True


def main(path):
    sequence = json.load(open(path))
    env = sequence.get("env", {})
    check_env(path, env)
    torch.cuda.init()
    run = Run()
    results = []
    for step in sequence["steps"]:
        row = {"op": step["op"], "id": step.get("id")}
        if "stream" in step:
            row["stream"] = step["stream"]
        if not run.step(step, row):
            raise SystemExit(f"{path}: unknown op {step['op']!r}")
        row["stats"] = stats()
        results.append(row)
    out = {"torch": torch.__version__}
    if os.environ.get("PYTORCH_ALLOC_CONF"):
        out["conf"] = os.environ["PYTORCH_ALLOC_CONF"]
    out["env"] = env
    out["steps"] = results
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
