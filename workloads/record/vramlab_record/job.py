"""A job folder: every rank of a sharded script, recorded on its own.

``python -m vramlab_record.cpu --world-size 8 --ranks all -o job/ -- train.py``
records each rank in its own process (a process group is set up once per
process), then keeps one trace per *distinct* rank: a rank whose events are
those of a rank already kept is noted ``same_as`` it (``basis: recorded``).
Ranks left out of ``--ranks`` are noted like the first rank recorded
(``basis: assumed``): record ``0`` and the last rank at least when shards are
uneven. The folder::

    job/job.json        the manifest vramlab reads (`vramlab replay job/`)
    job/rank0.csv.gz    one trace per distinct rank

``job.json``::

    {"vramlab_job": 1, "world_size": 8, "source": "...",
     "ranks": [{"rank": 0, "trace": "rank0.csv.gz"},
               {"rank": 1, "same_as": 0, "basis": "recorded"}, ...],
     "outside_allocator": {"bytes": N, "what": "NCCL buffers, estimate: ..."}}
"""

from __future__ import annotations

import concurrent.futures
import gzip
import json
import os
import subprocess
import sys

from . import cli


def parse_ranks(text: str, world_size: int) -> list[int]:
    """``all`` or a comma list of ranks and ``A-B`` ranges, each in the world."""
    if text.strip() == "all":
        return list(range(world_size))
    ranks: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                a, b = (int(x) for x in part.split("-", 1))
                chosen = range(a, b + 1)
            else:
                chosen = [int(part)]
        except ValueError:
            raise SystemExit(f"--ranks: '{part}' is not a rank, a range A-B or 'all'") from None
        for r in chosen:
            if not 0 <= r < world_size:
                raise SystemExit(f"--ranks: rank {r} is outside the world of {world_size} ranks (0..{world_size - 1})")
            ranks.add(r)
    if not ranks:
        raise SystemExit("--ranks: no rank given")
    return sorted(ranks)


def _own_args_for_rank(own: list[str]) -> list[str]:
    """The recorder's own options minus ``--ranks`` and ``-o``."""
    out: list[str] = []
    skip = False
    for a in own:
        if skip:
            skip = False
            continue
        if a in ("--ranks", "-o", "--output"):
            skip = True
            continue
        if a.startswith(("--ranks=", "--output=")) or (a.startswith("-o") and len(a) > 2):
            continue
        out.append(a)
    return out


def _events(path: str) -> bytes:
    """A trace's event lines (its header, which names the rank, left out),
    with the frees after its last allocation in sorted order: the order in
    which Python tears down what the script left behind can differ between
    ranks, and after the last allocation no answer depends on it."""
    with gzip.open(path, "rb") as f:
        lines = [line for line in f if not line.startswith(b"#")]
    last_alloc = max((k for k, line in enumerate(lines) if line.startswith(b"alloc,")), default=-1)
    tail = lines[last_alloc + 1:]
    if all(line.startswith(b"free") for line in tail):  # free, free_requested, free_completed
        tail = sorted(tail)
    return b"".join(lines[: last_alloc + 1] + tail)


def trace_header(path: str) -> dict:
    """A trace's `# key: value` header lines (gzip CSV), as a dict."""
    out = {}
    with gzip.open(path, "rt") as f:
        for line in f:
            if not line.startswith("#"):
                break
            key, _, value = line[1:].strip().partition(": ")
            out[key] = value
    return out


def record_job(argv: list[str], ns, script: list[str]) -> int:
    """Records the ranks of ``--ranks`` into the folder ``-o`` (see the
    module docstring); returns the exit status."""
    world = ns.world_size
    ranks = parse_ranks(ns.ranks, world)
    folder = ns.output
    if folder.endswith((".csv", ".gz", ".pickle", ".pkl")):
        raise SystemExit(f"--ranks writes a job folder: -o {folder} looks like a file (give a folder)")
    os.makedirs(folder, exist_ok=True)
    manifest_path = os.path.join(folder, "job.json")
    if os.path.exists(manifest_path):
        os.remove(manifest_path)  # never a manifest beside traces it does not describe
    own, _ = cli.split_argv(argv)
    base = [sys.executable, "-m", "vramlab_record.cpu", *_own_args_for_rank(own)]

    def one(rank: int):
        path = os.path.join(folder, f"rank{rank}.csv.gz")
        cmd = [*base, "--rank", str(rank), "-o", path, "--", *script]
        p = subprocess.run(cmd, capture_output=True, text=True)
        return rank, path, p

    workers = max(1, min(len(ranks), (os.cpu_count() or 1), 4))
    results = {}
    pool = concurrent.futures.ThreadPoolExecutor(workers)
    try:
        for rank, path, p in pool.map(one, ranks):
            if p.returncode != 0:
                sys.stderr.write(p.stdout + p.stderr)
                raise SystemExit(f"rank {rank} failed (exit {p.returncode}); its output is above; "
                                 f"no job.json was written")
            print(f"rank {rank}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else path}", file=sys.stderr)
            results[rank] = path
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        for rank in ranks:  # no partial job left behind
            part = os.path.join(folder, f"rank{rank}.csv.gz")
            if os.path.exists(part):
                os.remove(part)
        raise
    pool.shutdown()

    kept: list[tuple[int, bytes]] = []
    entries = []
    for rank in ranks:
        path = results[rank]
        events = _events(path)
        twin = next((r for r, e in kept if e == events), None)
        if twin is None:
            kept.append((rank, events))
            entries.append({"rank": rank, "trace": os.path.basename(path)})
        else:
            os.remove(path)
            entries.append({"rank": rank, "same_as": twin, "basis": "recorded"})
    first = ranks[0]
    for rank in range(world):
        if rank not in results:
            entries.append({"rank": rank, "same_as": first, "basis": "assumed"})
    entries.sort(key=lambda e: e["rank"])
    headers = [trace_header(results[r]) for r, _ in kept]
    # The rank with the most communicators (its estimate names them).
    widest = max(headers, key=lambda h: int(h.get("outside_allocator_bytes", 0)), default={})
    outside = int(widest.get("outside_allocator_bytes", 0))
    manifest = {
        "vramlab_job": 1,
        "world_size": world,
        "source": f"vramlab_record.cpu: {' '.join(script)} as ranks {ns.ranks} of {world} "
                  f"(fake process group, fake tensors)",
        "command": cli.command_line("vramlab_record.cpu"),
        "framework": cli.versions(),
        "ranks": entries,
        "outside_allocator": {"bytes": outside, "what": widest.get("outside_allocator", "")},
    }
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    distinct = ", ".join(str(r) for r, _ in kept)
    print(f"{manifest_path}: world of {world}, {len(ranks)} rank(s) recorded, distinct traces: ranks {distinct}"
          + (f"; {world - len(ranks)} rank(s) assumed like rank {first}" if world > len(ranks) else ""),
          file=sys.stderr)
    return 0
