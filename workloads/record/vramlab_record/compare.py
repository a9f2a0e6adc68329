"""Compare allocation recordings: a fake-tensor recording against a real GPU
snapshot (or any two of: snapshot pickle, vramlab CSV / CSV.gz).

    python -m vramlab_record.compare real.pickle fake.csv.gz [--json out.json]

Reports, for each: allocations, events, peak live requested bytes (the sum
of requested sizes of live allocations; PyTorch's alloc trace entries carry
the caller's request), and the allocation sizes that one has more often than
the other (where the recorder misses kernel scratch, or the code differs).
Snapshots are read with plain ``pickle``; a snapshot that starts mid-run
counts only what it saw allocated (frees of earlier blocks are skipped).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import pickle
import sys


def load_events(path: str, device: int = 0) -> list[tuple[str, int, int]]:
    """``[(kind, id, size)]`` with kind ``alloc``/``free``/``mark``."""
    if path.endswith((".pickle", ".pkl")):
        with open(path, "rb") as f:
            snap = pickle.load(f)
        traces = snap.get("device_traces", [])
        if device >= len(traces):
            raise SystemExit(f"{path}: no trace for device {device}")
        out, live, n = [], {}, 0
        for e in traces[device]:
            a = e["action"]
            if a == "alloc":
                live[e["addr"]] = n
                out.append(("alloc", n, e["size"]))
                n += 1
            elif a == "free_completed" and e["addr"] in live:
                out.append(("free", live.pop(e["addr"]), e["size"]))
        return out
    opener = gzip.open if path.endswith(".gz") else open
    out, ids, sizes, count = [], {}, {}, 0
    with opener(path, "rt") as f:
        started = False
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                if started and line.startswith("# phase:"):
                    out.append(("mark", line[len("# phase:"):].strip(), 0))
                continue
            if not started:
                started = True
                continue
            cols = line.split(",")
            if cols[0] == "alloc":
                n = count
                count += 1
                ids[cols[1]] = n
                sizes[n] = int(cols[2])
                out.append(("alloc", n, int(cols[2])))
            elif cols[0] in ("free", "free_completed"):
                n = ids.pop(cols[1])
                out.append(("free", n, sizes[n]))
    return out


def export_snapshot(path: str, out_csv: str, device: int = 0) -> None:
    """Writes a snapshot's requests as a vramlab CSV (``.gz`` compresses), each
    alloc line followed by a comment with its innermost Python frame."""
    with open(path, "rb") as f:
        snap = pickle.load(f)
    opener = gzip.open if out_csv.endswith(".gz") else open
    live, n = {}, 0
    with opener(out_csv, "wt") as w:
        w.write(f"# vramlab trace v1\n# source: {path}\naction,id,size,stream\n")
        for e in snap["device_traces"][device]:
            a = e["action"]
            if a == "alloc":
                live[e["addr"]] = n
                fr = [x for x in e.get("frames", []) if x.get("filename", "").endswith(".py")]
                where = f"{fr[0]['filename'].split('/')[-1]}:{fr[0]['line']}:{fr[0]['name']}" if fr else "C++"
                w.write(f"alloc,{n},{e['size']},{e.get('stream', 0)}\n# at: {where}\n")
                n += 1
            elif a == "free_completed" and e["addr"] in live:
                w.write(f"free,{live.pop(e['addr'])},,\n")


def stats(events) -> dict:
    live = peak = allocs = n = 0
    hist = collections.Counter()
    phases = collections.OrderedDict()
    phase = None
    for kind, i, size in events:
        if kind == "mark":
            phase = i
            phases.setdefault(phase, 0)
            continue
        n += 1
        if kind == "alloc":
            allocs += 1
            live += size
            peak = max(peak, live)
            hist[size] += 1
            if phase is not None:
                phases[phase] += 1
        else:
            live -= size
    return {"events": n, "allocs": allocs, "peak_live_bytes": peak, "sizes": hist, "phase_allocs": dict(phases)}


def compare(a_path: str, b_path: str, top: int = 12) -> dict:
    a, b = stats(load_events(a_path)), stats(load_events(b_path))
    more_a = (a["sizes"] - b["sizes"]).most_common(top)
    more_b = (b["sizes"] - a["sizes"]).most_common(top)
    rel = lambda x, y: (y - x) / x if x else float("nan")  # noqa: E731
    return {
        "a": a_path,
        "b": b_path,
        "allocs": [a["allocs"], b["allocs"], rel(a["allocs"], b["allocs"])],
        "events": [a["events"], b["events"]],
        "peak_live_bytes": [a["peak_live_bytes"], b["peak_live_bytes"],
                            rel(a["peak_live_bytes"], b["peak_live_bytes"])],
        "sizes_more_in_a": more_a,
        "sizes_more_in_b": more_b,
        "phase_allocs_b": b["phase_allocs"],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m vramlab_record.compare", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a")
    p.add_argument("b", help="the second recording, or with --export the CSV to write")
    p.add_argument("--json", help="also write the comparison as JSON")
    p.add_argument("--export", action="store_true", help="convert snapshot A to the vramlab CSV B (with frames)")
    ns = p.parse_args(argv)
    if ns.export:
        export_snapshot(ns.a, ns.b)
        return 0
    r = compare(ns.a, ns.b)
    print(f"A: {r['a']}\nB: {r['b']}")
    print(f"allocations  A {r['allocs'][0]:>10}  B {r['allocs'][1]:>10}  B-A {r['allocs'][2]:+.2%}")
    print(f"events       A {r['events'][0]:>10}  B {r['events'][1]:>10}")
    pa, pb, pr = r["peak_live_bytes"]
    print(f"peak live    A {pa / 2**30:>9.3f}G  B {pb / 2**30:>9.3f}G  B-A {pr:+.2%}")
    print("sizes A has more often (size x count):", ", ".join(f"{s}x{c}" for s, c in r["sizes_more_in_a"]))
    print("sizes B has more often (size x count):", ", ".join(f"{s}x{c}" for s, c in r["sizes_more_in_b"]))
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(r, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
