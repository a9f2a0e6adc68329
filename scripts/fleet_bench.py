#!/usr/bin/env python3
"""Cases per second of `vramlab.run_case` on 1 and 2 worker processes
(concurrent.futures.ProcessPoolExecutor), next to the command line's
`vramlab sweep --threads 1/2` on the same cases, and what 10k/100k cases
cost on N cores by arithmetic from those figures. Prints the table that
docs/results/fleet.md quotes; with --csv, also writes every timed run (the
raw data behind it: docs/results/fleet-bench.csv).

    pip install .        # the vramlab module and command
    python3 scripts/fleet_bench.py [--repeat 3] [--csv docs/results/fleet-bench.csv]
"""

import argparse
import concurrent.futures
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import vramlab

ROOT = Path(__file__).resolve().parents[1]
GRID = ["default", "expandable_segments:True", "max_split_size_mb:128", "garbage_collection_threshold:0.8"]


def timed(f):
    t0 = time.perf_counter()
    out = f()
    return time.perf_counter() - t0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--csv", type=Path, help="write every timed run here")
    args = ap.parse_args()
    traces = sorted(str(p) for p in (ROOT / "workloads" / "data").glob("*.csv*"))
    cases = vramlab.cases(traces, GRID, gpu="h100-80gb")
    events = {}
    for c in cases:
        events.setdefault(c.path, None)
    print(f"{len(traces)} traces x {len(GRID)} settings = {len(cases)} cases (bundled corpus, h100-80gb), cores: {os.cpu_count()}")
    exe = Path(sys.executable).with_name("vramlab")
    exe = str(exe) if exe.exists() else shutil.which("vramlab")
    rows_ref = None
    results = []
    raw = []  # every timed run: (path, cores, run, seconds)
    for workers in (1, 2):
        best = float("inf")
        for _ in range(args.repeat):
            with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
                # Start the workers before the clock: a pool's start-up is not a case.
                list(pool.map(int, range(workers)))
                t, rows = timed(lambda: vramlab.sweep(traces, GRID, gpu="h100-80gb", executor=pool))
            raw.append(("run_case, ProcessPoolExecutor", workers, len(raw), t))
            best = min(best, t)
            rows_ref = rows_ref or rows
            assert rows == rows_ref
        results.append(("run_case, ProcessPoolExecutor", workers, best))
    grid_file = Path(tempfile.mkdtemp()) / "grid.txt"
    grid_file.write_text("".join(f"{g}\n" for g in GRID))
    for threads in (1, 2):
        best = float("inf")
        for _ in range(args.repeat):
            t, _ = timed(lambda: subprocess.run(
                [exe, "sweep", *traces, "--grid", str(grid_file), "--gpu", "h100-80gb", "--threads", str(threads),
                 "--json", os.devnull, "--quiet"], check=True, capture_output=True))
            raw.append(("vramlab sweep (one process)", threads, len(raw), t))
            best = min(best, t)
        results.append(("vramlab sweep (one process)", threads, best))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["path", "cores", "run", "seconds", "cases", "traces", "settings", "cpu_count", "vramlab_version"])
            for name, n, k, t in raw:
                w.writerow([name, n, k, f"{t:.4f}", len(cases), len(traces), len(GRID), os.cpu_count(),
                            getattr(vramlab, "__version__", "")])
    print("| path | cores | seconds | cases/s | cases/s per core |")
    print("|---|---:|---:|---:|---:|")
    for name, n, t in results:
        print(f"| {name} | {n} | {t:.2f} | {len(cases) / t:.0f} | {len(cases) / t / n:.0f} |")
    one = next(t for name, n, t in results if n == 1 and name.startswith("run_case"))
    two = next(t for name, n, t in results if n == 2 and name.startswith("run_case"))
    per_core = len(cases) / one
    print(f"scaling 1 -> 2 workers: {one / two:.2f}x")
    for total in (10_000, 100_000):
        for cores in (2, 64, 512):
            print(f"{total:,} cases on {cores} cores: ~{total / (per_core * cores):.0f} s at {per_core:.0f} cases/s per core (these traces' mix)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
