#!/usr/bin/env python3
"""reshape_snapshot.py: a PyTorch memory snapshot pickled again in another
shape that holds the same data (or the same data plus one unknown key), for
checking that vramlab's streamed snapshot read answers as its whole read
does: other pickle protocols (no batches, no marks, no MEMOIZE), the traces
before the segments, one pool id object shared by every entry, entries
referenced again after the traces, one entry's stack list shared with the
next entry, the trace on several devices (an empty one first); and (`add-stacks`, which changes the data) stacks added to a
snapshot recorded without them, shared as PyTorch shares them: frame dicts
shared by every entry, one list per allocation shared by its alloc and
free entries and its block, one empty list for the entries without one.

    python3 scripts/reshape_snapshot.py --list
    python3 scripts/reshape_snapshot.py HOW SNAPSHOT.pickle OUT.pickle

Exits 1 (writing nothing) when HOW does not apply to the snapshot (a shape
that needs trace entries or stacks it does not have).
"""
import pickle
import sys

HOWS = [
    "proto0",
    "proto1",
    "proto2",
    "traces-first",
    "shared-pool-id",
    "entries-again",
    "shared-stack",
    "devices",
    "add-stacks",
]


def entries(snap):
    return [e for dev in snap.get("device_traces", []) for e in dev]


def reshape(how, snap):
    """(object to pickle, protocol) or None when `how` does not apply."""
    if how in ("proto0", "proto1", "proto2"):
        return snap, int(how[-1])
    if not isinstance(snap, dict) or not entries(snap):
        return None
    if how == "traces-first":
        keys = ["device_traces"] + [k for k in snap if k != "device_traces"]
        return {k: snap[k] for k in keys}, 4
    if how == "shared-pool-id":
        with_pool = [e for e in entries(snap) if "pool_id" in e]
        if not with_pool:
            return None
        shared = with_pool[0]["pool_id"]
        for e in with_pool:
            if e["pool_id"] == shared:
                e["pool_id"] = shared
        return snap, 4
    if how == "entries-again":
        # An unknown top-level key after the traces, holding entry dicts
        # read before (the same objects, through the pickle memo).
        snap["vramlab_reshaped"] = entries(snap)[:3]
        return snap, 4
    if how == "shared-stack":
        es = entries(snap)
        pairs = [
            (a, b) for a, b in zip(es, es[1:]) if a.get("frames") and b.get("frames")
        ]
        if not pairs:
            return None
        for a, b in pairs[:50]:
            b["frames"] = a["frames"]
        return snap, 4
    if how == "devices":
        # Three devices: none recorded on the first, the trace on the
        # second, a copy of it (new entry dicts and pool ids, the same stack
        # lists) on the third.
        import copy

        def again(e):
            # A new dict, a new pool id; the stack list stays shared.
            e = dict(e)
            if isinstance(e.get("pool_id"), (tuple, list)):
                e["pool_id"] = type(e["pool_id"])(list(e["pool_id"]))
            return e

        first = entries(snap)
        snap["device_traces"] = [[], first, [again(e) for e in first]]
        segs = snap.get("segments", [])
        copies = copy.deepcopy(segs)
        for seg in segs:
            seg["device"] = 1
        for seg in copies:
            seg["device"] = 2
        snap["segments"] = segs + copies
        return snap, 4
    if how == "add-stacks":
        frames = [
            {"filename": f"model_{i}.py", "line": 10 * i + 1, "name": f"layer_{i}"}
            for i in range(4)
        ]
        # One empty list for every entry without a stack, as PyTorch's
        # `_memory_snapshot` gives them.
        empty = []
        by_addr = {}
        for n, e in enumerate(entries(snap)):
            if e["action"] == "alloc":
                stack = [frames[(n + k) % 4] for k in range(1 + n % 3)]
                by_addr[e["addr"]] = stack
                e["frames"] = stack
            elif e["action"] in ("free_requested", "free_completed"):
                e["frames"] = by_addr.get(e["addr"], empty)
            else:
                e["frames"] = empty
        for seg in snap.get("segments", []):
            for b in seg.get("blocks", []):
                if b.get("state") != "inactive" and b.get("address") in by_addr:
                    b["frames"] = by_addr[b["address"]]
        return snap, 4
    raise SystemExit(f"unknown shape {how!r}: one of {', '.join(HOWS)}")


def main() -> None:
    if sys.argv[1:] == ["--list"]:
        print("\n".join(HOWS))
        return
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    how, src, dst = sys.argv[1:]
    with open(src, "rb") as f:
        snap = pickle.load(f)
    shaped = reshape(how, snap)
    if shaped is None:
        sys.exit(1)
    obj, protocol = shaped
    with open(dst, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


if __name__ == "__main__":
    main()
