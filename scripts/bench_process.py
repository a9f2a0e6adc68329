#!/usr/bin/env python3
"""Whole-process timings: what a user waits for, best of N wall-clock runs
of the release binary, on one core (`taskset -c 0`) unless --all-cores.

    python3 scripts/bench_process.py [--bin target/release/vramlab] [--old OLD_BIN] [--runs 5]

Inputs: a 1,000,000-event native CSV (scripts/make_1m_csv.py), the same
trace as .vlt (vramlab convert), and the largest real snapshot in
../shared/traces/real when it is there. Prints a Markdown table (and the
old binary's column with --old) for BENCHMARKS.md.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def best(cmd, runs, cpus):
    pin = ["taskset", "-c", cpus] if cpus and shutil.which("taskset") else []
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        r = subprocess.run(pin + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - t)
        if r.returncode != 0:
            sys.exit(f"{' '.join(map(str, cmd))} failed: {r.stderr.decode()[-400:]}")
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/release/vramlab"))
    ap.add_argument("--old", help="a release binary built before, for a before/after column")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--all-cores", action="store_true")
    a = ap.parse_args()
    cpus = None if a.all_cores else "0"
    tmp = Path(tempfile.mkdtemp(prefix="vramlab-bench-"))
    csv = tmp / "1m.csv"
    subprocess.run([sys.executable, str(ROOT / "scripts/make_1m_csv.py"), str(csv)], check=True)
    bins = [("now", a.bin)] + ([("before", a.old)] if a.old else [])
    # Each binary reads the .vlt it writes itself (the format version may differ).
    for name, b in bins:
        vlt = tmp / f"1m-{name}.vlt"
        subprocess.run([b, "convert", str(csv), str(vlt)], check=True, stdout=subprocess.DEVNULL)
    mb = csv.stat().st_size / 1e6
    real = ROOT.parent / "shared/traces/real"
    largest = max(real.glob("*.pickle"), key=lambda p: p.stat().st_size) if real.is_dir() else None

    rows = [
        ("stats, 1M-event CSV", ["stats", str(csv)], mb),
        ("replay, 1M-event CSV", ["replay", str(csv)], None),
        ("replay, 1M-event .vlt", ["replay", "{vlt}"], None),
    ]
    if largest:
        size = largest.stat().st_size / 1e6
        rows += [
            (f"stats, {largest.name} ({size:.1f} MB)", ["stats", str(largest)], size),
            (f"recommend --gpu h100-80gb, {largest.name} (44 settings, all cores)", ["recommend", str(largest), "--gpu", "h100-80gb"], None),
            (f"oom-point, {largest.name} (2 settings, all cores)",
             ["oom-point", str(largest), "--conf", "default", "--conf", "expandable_segments:True"], None),
        ]
    where = "one core (taskset -c 0)" if cpus else f"{os.cpu_count()} cores"
    print(f"| command ({where}, best of {a.runs}) | " + " | ".join(n for n, _ in bins) + " |")
    print("|---|" + "---|" * len(bins))
    for label, args, size in rows:
        cells = []
        for name, b in bins:
            own = [x.replace("{vlt}", str(tmp / f"1m-{name}.vlt")) for x in args]
            t = best([b, *own], a.runs, None if "recommend" in args[0] or "oom-point" in args[0] else cpus)
            cells.append(f"{t:.3f} s" + (f" ({size / t:.0f} MB/s)" if size else ""))
        print(f"| `vramlab {label.split(',')[0]}` {label.split(',', 1)[1].strip()} | " + " | ".join(cells) + " |")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
