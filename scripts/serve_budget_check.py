#!/usr/bin/env python3
"""The serving budget against PyTorch's own graph pool.

For each snapshot PyTorch wrote while replaying a `vramlab serve-budget
--emit-trace` start-up (`vramlab oracle ... --snapshot-out DIR`), sums the
segments of its private pools (segment_pool_id != (0, 0)) at the end, and
prints them beside vramlab's `graph_pool_bytes` from the matching
`serve-budget --json` output.

    python3 scripts/serve_budget_check.py SNAPSHOT_DIR NAME=ANSWER.json ...

NAME is the snapshot's stem before `.default.pickle`.
"""

import json
import pickle
import sys
from pathlib import Path


def pytorch_pool(path: Path) -> tuple[int, int]:
    with open(path, "rb") as f:
        snap = pickle.load(f)
    segs = [s for s in snap["segments"] if tuple(s.get("segment_pool_id", (0, 0))) != (0, 0)]
    return sum(s["total_size"] for s in segs), len(segs)


def main() -> int:
    snaps = Path(sys.argv[1])
    print("| start-up | vramlab pool | PyTorch pool (segments) | difference |")
    print("|---|---|---|---|")
    worst = 0.0
    for arg in sys.argv[2:]:
        name, answer = arg.split("=", 1)
        ours = json.load(open(answer))["graph_pool_bytes"]
        theirs, n = pytorch_pool(snaps / f"{name}.default.pickle")
        diff = 100.0 * (ours - theirs) / theirs if theirs else 0.0
        worst = max(worst, abs(diff))
        print(f"| {name} | {ours / 2**20:.2f} MiB | {theirs / 2**20:.2f} MiB ({n}) | {diff:+.2f}% |")
    print(f"\nlargest difference: {worst:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
