#!/usr/bin/env python3
"""Whole-process timings of `vramlab replay` against DynaPipe's Python model
of PyTorch's caching allocator on the same native CSV traces, in one run
(alternating, so that both see the same machine), with peak RSS; writes
docs/bench/dynapipe.csv and prints its Markdown table (BENCHMARKS.md shows it,
rendered from the CSV by scripts/bench_md.py).

    git clone https://github.com/awslabs/optimizing-multitask-training-through-dynamic-pipelines /tmp/dynapipe
    pip install sortedcontainers
    python3 scripts/make_1m_csv.py /tmp/1m.csv
    python3 scripts/make_1m_csv.py /tmp/10m.csv --events 10000000
    python3 scripts/bench_vs_dynapipe.py \\
        --dynapipe /tmp/dynapipe/dynapipe/memory_opt/allocation_simulator.py \\
        /tmp/1m.csv /tmp/10m.csv

Each vramlab figure is the best of --runs runs (default 10), each DynaPipe
figure the best of --dynapipe-runs (default 3; 1 for traces over 2M
events, which take a minute each). Both print the peak reserved bytes
they predict; the script checks that they agree (DynaPipe models the
default setting without the 2.12+ allocation-order ties, which this
single-stream trace does not meet).
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(cmd):
    """Wall seconds, peak RSS (KiB) and stdout of one run of `cmd`."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{err.decode()}")
    return wall, out.decode()


def rss_kib(cmd):
    """Peak RSS of one run of `cmd`, in KiB (wait4's ru_maxrss)."""
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execvp(cmd[0], cmd)
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        sys.exit(f"{' '.join(cmd)} failed")
    return usage.ru_maxrss


def markdown(rows) -> str:
    """The Markdown table of rows (as written to, or read back from, the CSV)."""
    lines = [
        "| trace | events | vramlab replay (whole process) | RSS | DynaPipe loop | RSS | ratio | events/s | same peak |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        theirs_rss = f"{r['dynapipe_rss_mib']} MiB" if str(r["dynapipe_rss_mib"]) != "" else "-"
        same = r["same_peak"] in (True, "True")
        lines.append(
            f"| {r['trace']} ({r['mb']} MB) | {int(r['events']):,} | {float(r['vramlab_s']):.3f} s | "
            f"{r['vramlab_rss_mib']} MiB | {float(r['dynapipe_s']):.2f} s | {theirs_rss} | "
            f"**{r['ratio']}×** | {int(r['events_per_s']) / 1e6:.1f} M | {'yes' if same else 'no'} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--dynapipe", required=True, type=Path, help="allocation_simulator.py")
    ap.add_argument("--vramlab", default=ROOT / "target/release/vramlab", type=Path)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--dynapipe-runs", type=int, default=3)
    ap.add_argument("--csv", default=ROOT / "docs/bench/dynapipe.csv", type=Path)
    args = ap.parse_args()
    loop = [sys.executable, str(ROOT / "scripts/dynapipe_loop.py"), str(args.dynapipe)]
    rows = []
    for trace in args.traces:
        mb = trace.stat().st_size / 1e6
        ours = [str(args.vramlab), "replay", str(trace), "--json"]
        theirs = loop + [str(trace)]
        n = json.loads(run(ours)[1])["events"]
        runs_theirs = args.dynapipe_runs if n <= 2_000_000 else 1
        best_ours, best_theirs = float("inf"), float("inf")
        peak_ours = peak_theirs = None
        for k in range(max(args.runs, runs_theirs)):
            if k < args.runs:
                wall, out = run(ours)
                best_ours = min(best_ours, wall)
                peak_ours = json.loads(out)["peak_reserved_bytes"]
            if k < runs_theirs:
                wall, out = run(theirs)
                best_theirs = min(best_theirs, wall)
                peak_theirs = int(out.split("peak_reserved ")[1])
        if peak_ours != peak_theirs:
            print(f"note: {trace}: peak reserved {peak_ours} (vramlab) vs {peak_theirs} (DynaPipe)")
        rows.append(
            {
                "trace": trace.name,
                "events": n,
                "mb": round(mb, 1),
                "vramlab_s": round(best_ours, 4),
                "vramlab_rss_mib": round(rss_kib(ours) / 1024, 1),
                "dynapipe_s": round(best_theirs, 3),
                "dynapipe_rss_mib": round(rss_kib(theirs) / 1024, 1)
                if n <= 2_000_000
                else "",
                "ratio": round(best_theirs / best_ours, 1),
                "events_per_s": round(n / best_ours),
                "peak_reserved_bytes": peak_ours,
                "same_peak": peak_ours == peak_theirs,
            }
        )
        print(rows[-1], file=sys.stderr)
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(markdown(rows))


if __name__ == "__main__":
    main()
