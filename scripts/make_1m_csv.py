#!/usr/bin/env python3
"""Writes a 1,000,000-event native CSV trace for throughput measurements:
workloads/data/gpt-small-train.csv repeated with its ids renamed per
repetition (what `vramlab bench` does in memory), to stdout or a file.
Ids are numbers, as vramlab's writer emits them; with --text-ids they are
text (`17_3`), as other tools may write them.

    python3 scripts/make_1m_csv.py /tmp/1m.csv [--text-ids] [--events N] [--source TRACE | --random SEED | --holes N]

--events N writes N events instead (e.g. 10000000 for the report's
scale figures). --source TRACE repeats another native CSV trace (plain or
.csv.gz, e.g. workloads/data/sdxl-resolution1024.csv.gz) instead of
gpt-small-train: the same measurement on another workload's shape.
Allocations the source leaves live stay live in every repetition.
--random SEED writes a random trace instead: sizes log-uniform from 512 B
to 256 MiB, about 3,000 allocations live, each free of a random live one
(a shape with hundreds of free blocks per pool, unlike the recordings).
--holes N writes a checkerboard instead: one block of N x 8 MiB freed, N
blocks of 4 MiB carved from its segment, every other one freed (N / 2
equal holes, one crowded size class of the free set), then allocations of
1-4 MiB (seeded sizes), each freed at once, until the trace is long enough.
"""
import gzip
import random
import sys
from pathlib import Path

# The bundled trace, wherever the script is run from.
SRC = Path(__file__).resolve().parent.parent / "workloads/data/gpt-small-train.csv"
TARGET = 1_000_000


def take_option(argv, name):
    """Removes `name VALUE` from argv and returns VALUE (None if absent)."""
    if name not in argv:
        return None
    at = argv.index(name)
    if at + 1 >= len(argv):
        sys.exit(f"{name} needs a value")
    value = argv[at + 1]
    del argv[at : at + 2]
    return value


def write_random(out, target, seed) -> None:
    """A random trace of `target` events (see the module's doc)."""
    rng = random.Random(seed)
    out.write("# vramlab trace v1\naction,id,size,stream\n")
    live, next_id = [], 0
    for _ in range(target):
        if live and (len(live) > 3000 or rng.random() < 0.5):
            i = rng.randrange(len(live))
            live[i], live[-1] = live[-1], live[i]
            out.write(f"free,{live.pop()},,\n")
        else:
            out.write(f"alloc,{next_id},{int(2 ** rng.uniform(9, 28))},0\n")
            live.append(next_id)
            next_id += 1


def write_holes(out, target, n) -> None:
    """A checkerboard of `n / 2` equal holes, then alloc/free pairs."""
    rng = random.Random(1)
    mib = 1 << 20
    out.write("# vramlab trace v1\naction,id,size,stream\n")
    out.write(f"alloc,0,{n * 8 * mib},0\nfree,0,,\n")
    for i in range(1, n + 1):
        out.write(f"alloc,{i},{4 * mib},0\n")
    for i in range(1, n + 1, 2):
        out.write(f"free,{i},,\n")
    written, next_id = 2 + n + (n + 1) // 2, n + 1
    while written + 2 <= target:
        out.write(f"alloc,{next_id},{rng.randrange(mib + 512, 4 * mib)},0\nfree,{next_id},,\n")
        written, next_id = written + 2, next_id + 1


def main() -> None:
    argv = sys.argv[1:]
    src = Path(take_option(argv, "--source") or SRC)
    seed = take_option(argv, "--random")
    holes = take_option(argv, "--holes")
    events = take_option(argv, "--events")
    target = int(events) if events else TARGET
    if holes is not None:
        args = [a for a in argv if not a.startswith("--")]
        with open(args[0], "w") if args else sys.stdout as out:
            write_holes(out, target, int(holes))
        return
    if seed is not None:
        args = [a for a in argv if not a.startswith("--")]
        with open(args[0], "w") if args else sys.stdout as out:
            write_random(out, target, int(seed))
        return
    header, rows = [], []
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#") or line.startswith("action,"):
                if not rows:
                    header.append(line)
                continue
            rows.append(line.split(","))
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
