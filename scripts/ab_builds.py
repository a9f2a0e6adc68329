#!/usr/bin/env python3
"""Two (or more) vramlab builds timed on one command, run after run in
turn, so that all see the same machine: best, first-quartile and median
wall time of each. For a change whose gain is a few percent, on a shared
machine whose speed drifts by more than that over a minute.

    python3 scripts/ab_builds.py OLD_BIN NEW_BIN [MORE_BINS...] [--runs 40] -- replay /tmp/1m.csv --json

The command's output is discarded; a failing run stops the comparison.
"""

import argparse
import statistics
import subprocess
import sys
import time


def timed(cmd):
    """Wall seconds of one run of `cmd`; exits when it fails."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.decode()[-400:]}")
    return wall


def main():
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", help="the build before the change")
    ap.add_argument("new", nargs="+", help="the build with it (or several variants)")
    ap.add_argument("--runs", type=int, default=40, help="runs of each build (default 40)")
    a = ap.parse_args(argv[:cut])
    args = argv[cut + 1 :]
    if not args:
        ap.error("give the command after --, e.g. -- replay /tmp/1m.csv --json")
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    builds = [("old", a.old)] + [("new", b) for b in a.new]
    times = {binary: [] for _, binary in builds}
    for _ in range(a.runs):
        for _, binary in builds:
            times[binary].append(timed([binary] + args))
    for label, binary in builds:
        t = sorted(times[binary])
        print(
            f"{label} {binary}: best {t[0] * 1000:.1f} ms, "
            f"p25 {t[len(t) // 4] * 1000:.1f} ms, median {statistics.median(t) * 1000:.1f} ms"
        )


if __name__ == "__main__":
    main()
