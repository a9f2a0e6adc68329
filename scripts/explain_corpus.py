#!/usr/bin/env python3
"""`vramlab explain` over the bundled corpus and the real snapshots:
writes docs/results/explain-corpus.csv (one row per trace) and prints the
summary that docs/results/explain.md quotes.

    cargo build --release
    python3 scripts/explain_corpus.py [--real ../shared/traces/real] [--out docs/results/explain-corpus.csv]

Each row: the waste at the reserved peak by cause, how many candidates
(live blocks beside free space) were replayed away, how many of them (and
of their source lines) lower the peak — the culprits — the top culprit (the
largest replayed saving), the best line, and the best setting aimed at the
waste with its saving. Traces that start mid-run are explained from a
fresh start (as `vramlab explain` does).
"""

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VRAMLAB = ROOT / "target" / "release" / "vramlab"
MIB = 1 << 20

FIELDS = [
    "trace", "events", "peak_reserved_mib", "waste_mib", "pinned_mib", "releasable_mib",
    "pool_cached_mib", "rounding_mib", "candidates", "culprits_found", "lines_replayed",
    "line_culprits_found", "top_id", "top_frame", "top_pinned_mib", "top_saving_mib",
    "best_line", "best_line_saving_mib", "best_fix", "best_fix_saving_mib",
]


def explain(path: Path) -> dict:
    out = subprocess.run(
        [str(VRAMLAB), "explain", str(path), "--json", "--top", "5"],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def row(name: str, e: dict) -> dict:
    w = e["waste"]
    top = e["culprits"][0] if e["culprits"] else None
    line = e["line_culprits"][0] if e["line_culprits"] else None
    fix = e["fixes"][0] if e["fixes"] else None
    mib = lambda b: f"{b / MIB:.2f}"
    return {
        "trace": name,
        "events": e["events"],
        "peak_reserved_mib": mib(e["peak_reserved_bytes"]),
        "waste_mib": mib(e["waste_at_peak_bytes"]),
        "pinned_mib": mib(w["pinned_bytes"]),
        "releasable_mib": mib(w["releasable_bytes"]),
        "pool_cached_mib": mib(w["pool_cached_bytes"]),
        "rounding_mib": mib(w["rounding_bytes"]),
        "candidates": e["candidates"],
        "culprits_found": e["culprits_found"],
        "lines_replayed": e["lines_replayed"],
        "line_culprits_found": e["line_culprits_found"],
        "top_id": top["id"] if top else "",
        "top_frame": (top["frame"] or "") if top else "",
        "top_pinned_mib": mib(top["pinned_bytes"]) if top else "",
        "top_saving_mib": mib(top["saving_bytes"]) if top else "",
        "best_line": line["frame"] if line else "",
        "best_line_saving_mib": mib(line["saving_bytes"]) if line else "",
        "best_fix": fix["setting"] if fix else "",
        "best_fix_saving_mib": mib(fix["saving_bytes"]) if fix else "",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--real", type=Path, default=ROOT.parent / "shared" / "traces" / "real")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "explain-corpus.csv")
    args = ap.parse_args()
    corpus = sorted((ROOT / "workloads" / "data").glob("*.csv*"))
    real = sorted(args.real.glob("*.pickle")) if args.real.is_dir() else []
    rows = []
    for i, p in enumerate(corpus + real, 1):
        name = f"real/{p.name}" if p in real else p.name
        print(f"[{i}/{len(corpus) + len(real)}] {name}", file=sys.stderr)
        rows.append(row(name, explain(p)))
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    for label, group in (("corpus", [r for r in rows if not r["trace"].startswith("real/")]),
                         ("real", [r for r in rows if r["trace"].startswith("real/")])):
        if not group:
            continue
        named = [r for r in group if r["culprits_found"] or r["line_culprits_found"]]
        cands = sum(int(r["candidates"]) for r in group)
        found = sum(int(r["culprits_found"]) for r in group)
        lines = [r for r in group if r["line_culprits_found"]]
        fixed = [r for r in group if r["best_fix"] and float(r["best_fix_saving_mib"]) > 0]
        waste = sum(float(r["waste_mib"]) for r in group)
        pinned = sum(float(r["pinned_mib"]) for r in group)
        print(f"{label}: {len(group)} traces; waste at the peak {waste:.0f} MiB in all, {pinned:.0f} MiB of it pinned "
              f"({100 * pinned / waste if waste else 0:.0f}%); {cands} candidates replayed away, {found} lower the peak; "
              f"culprits (allocations or lines) in {len(named)} traces, a culprit line in {len(lines)}; "
              f"best single saving {max((float(r['top_saving_mib'] or 0) for r in group), default=0):.0f} MiB; "
              f"a setting aimed at the waste saves in {len(fixed)}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
