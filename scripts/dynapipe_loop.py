#!/usr/bin/env python3
"""Replays a native vramlab CSV trace through DynaPipe's Python model of
PyTorch's caching allocator (TorchCachingAllocatorSimulator in
dynapipe/memory_opt/allocation_simulator.py of
github.com/awslabs/optimizing-multitask-training-through-dynamic-pipelines),
as a user of that model would: read the file, call malloc/free per row.
It is the reference loop of BENCHMARKS.md's whole-process ratios
(scripts/bench_vs_dynapipe.py runs it).

    python3 scripts/dynapipe_loop.py PATH/allocation_simulator.py TRACE.csv

DynaPipe's small-pool threshold is set to PyTorch's (1 MiB; its default
is 0) and its memory to unlimited. A deferred free (free_requested …
free_completed) frees at the completion. Prints the peak reserved bytes
it predicts and the events replayed.
"""
import csv
import importlib.util
import sys


def load(path):
    spec = importlib.util.spec_from_file_location("allocation_simulator", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sim_mod = load(sys.argv[1])
    config = sim_mod.TorchCachingAllocatorConfig(kSmallSize=1 << 20)
    sim = sim_mod.TorchCachingAllocatorSimulator(1e12, config)
    blocks = {}
    events = 0
    with open(sys.argv[2], newline="") as f:
        rows = (r for r in f if not r.startswith("#"))
        reader = csv.reader(rows)
        next(reader)  # action,id,size,stream
        for row in reader:
            action = row[0]
            events += 1
            if action == "alloc":
                stream = int(row[3]) if len(row) > 3 and row[3] else 0
                blocks[row[1]] = sim.malloc(int(row[2]), stream)
            elif action in ("free", "free_completed"):
                sim.free(blocks.pop(row[1]))
            elif action == "empty_cache":
                sim.clear_cache()
    print(f"events {events} peak_reserved {sim.peak_backend_allocated_bytes}")


if __name__ == "__main__":
    main()
