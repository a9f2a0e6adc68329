#!/usr/bin/env python3
"""Writes a 1,000,000-event native CSV trace for throughput measurements:
workloads/data/gpt-small-train.csv repeated with its ids renamed per
repetition (what `vramlab bench` does in memory), to stdout or a file.
Ids are numbers, as vramlab's writer emits them; with --text-ids they are
text (`17_3`), as other tools may write them.

    python3 scripts/make_1m_csv.py /tmp/1m.csv [--text-ids] [--events N]

--events N writes N events instead (e.g. 10000000 for the report's
scale figures).
"""
import sys
from pathlib import Path

# The bundled trace, wherever the script is run from.
SRC = Path(__file__).resolve().parent.parent / "workloads/data/gpt-small-train.csv"
TARGET = 1_000_000


def main() -> None:
    header, rows = [], []
    with open(SRC) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#") or line.startswith("action,"):
                if not rows:
                    header.append(line)
                continue
            rows.append(line.split(","))
    argv = sys.argv[1:]
    target = TARGET
    if "--events" in argv:
        at = argv.index("--events")
        target = int(argv[at + 1])
        del argv[at : at + 2]
    args = [a for a in argv if not a.startswith("--")]
    text_ids = "--text-ids" in argv
    ids = 1 + max(int(r[1]) for r in rows if r[0] != "empty_cache")
    out = open(args[0], "w") if args else sys.stdout
    for h in header:
        out.write(h + "\n")
    n, rep = 0, 0
    while n < target:
        for r in rows:
            if n == target:
                break
            r = list(r)
            if r[0] != "empty_cache":
                r[1] = f"{r[1]}_{rep}" if text_ids else str(rep * ids + int(r[1]))
            out.write(",".join(r) + "\n")
            n += 1
        rep += 1


if __name__ == "__main__":
    main()
