#!/usr/bin/env python3
"""Checks `vramlab explain`'s promise on every trace given (files or
folders): each culprit it lists, and each culprit line, has a replayed peak
without it below the explained peak. Exits 1 naming every trace that breaks
it.

    python3 scripts/check_explain_culprits.py --vramlab target/release/vramlab \\
        workloads/data ../shared/traces/real
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

SUFFIXES = (".csv", ".csv.gz", ".vlt", ".pickle", ".pickle.gz", ".json")


def traces(paths):
    for p in map(Path, paths):
        if p.is_dir():
            yield from sorted(f for f in p.iterdir() if f.name.endswith(SUFFIXES))
        elif p.exists():
            yield p


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vramlab", default="target/release/vramlab")
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    bad, n, listed = [], 0, 0
    for t in traces(args.paths):
        out = subprocess.run([args.vramlab, "explain", str(t), "--json"], capture_output=True, text=True)
        if out.returncode != 0:
            bad.append(f"{t}: explain failed: {out.stderr.strip()}")
            continue
        e = json.loads(out.stdout)
        n += 1
        peak = e["peak_reserved_bytes"]
        for c in e["culprits"]:
            listed += 1
            if c["peak_reserved_without_bytes"] >= peak:
                bad.append(f"{t}: culprit {c['id']} does not lower the peak")
        for line in e["line_culprits"]:
            listed += 1
            if line["peak_reserved_without_bytes"] >= peak:
                bad.append(f"{t}: line {line['frame']} does not lower the peak")
    for b in bad:
        print(b)
    print(f"{n} traces explained, {listed} culprits and lines listed, {len(bad)} break the promise")
    return 1 if bad or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
