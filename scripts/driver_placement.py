#!/usr/bin/env python3
"""Where the CUDA driver places cudaMalloc results: the analysis behind docs/driver-placement.md.

Reads the raw calls recorded on an H200 (docs/results/driver-placement-h200/
driver-placement.jsonl, made by scripts/gpu/driver_place.py) and prints

  1. per experiment: calls, and how consecutive cudaMalloc addresses move (up, down);
  2. how many addresses (relative to the experiment's first) the driver model of
     allocator/src/devices/placement/driver.rs predicts exactly, and how many each
     variant of the model predicts (every rule is needed);
  3. the same for the ascending (bump) placement.

With --fixture PATH it also writes the derived test fixture
(allocator/tests/data/driver-placement-h200.txt): the offsets of the grow, mixed, reuse,
sizes and vmm experiments in MiB from their first address.

Usage: python3 scripts/driver_placement.py [JSONL] [--fixture PATH]
Needs only the Python standard library.
"""
import collections
import itertools
import json
import sys

MiB = 1 << 20
DEFAULT = "docs/results/driver-placement-h200/driver-placement.jsonl"

# The state a fresh process with CuPy had before the experiment's first call, as the model
# rebuilds it: four allocations from an empty heap. They leave a region with 24 MiB free at
# the top (the first >2 MiB request goes there), 64 MiB taken under it, a newer region with
# one 2 MiB slot free 74 MiB below the first (the first 2 MiB request goes there) and
# 384 MiB taken under that. `grow` and `sizes` show the slot and the 24 MiB; `mixed` the
# 24 MiB; below them every experiment starts on new regions.
PROLOGUE = {"grow": [8, 64, 30, 384], "grow2": [8, 64, 30, 384], "sizes": [8, 64, 30, 384],
            "mixed": [8, 64, 30, 384], "mixed2": [8, 64, 30, 384], "reuse": []}


class Driver:
    """The driver model (MiB units), with switches for the variants."""

    def __init__(self, region=32, order="newest", within="best", tie="lowest", strict=True,
                 hole="highest", at="top", release=True):
        self.region, self.order, self.within, self.tie = region, order, within, tie
        self.strict, self.hole, self.at, self.release = strict, hole, at, release
        self.top = 0
        self.regions = {}  # age -> [base, end, {addr: size}]
        self.owner = {}
        self.ages = itertools.count()

    def gaps(self, reg):
        base, end, allocs = reg
        cur = base
        for a in sorted(allocs):
            if a > cur:
                yield cur, a - cur
            cur = max(cur, a + allocs[a])
        if end > cur:
            yield cur, end - cur

    def malloc(self, size):
        ages = sorted(self.regions, reverse=self.order == "newest",
                      key=(lambda a: a) if self.order == "newest" else (lambda a: self.regions[a][0]))
        for age in ages:
            fits = [(g, a) for a, g in self.gaps(self.regions[age]) if g >= size]
            if not fits:
                continue
            if self.within == "best":
                g, a = min(fits, key=lambda x: (x[0], x[1] if self.tie == "lowest" else -x[1]))
            elif self.within == "lowest":
                g, a = min(fits, key=lambda x: x[1])
            else:
                g, a = max(fits, key=lambda x: x[1])
            self.regions[age][2][a] = size
            self.owner[a] = age
            return a
        n = -(-size // self.region) * self.region
        taken = sorted((r[0], r[1]) for r in self.regions.values())
        holes, hi = [], self.top
        for lo_, hi_ in reversed(taken):
            if hi_ < hi:
                holes.append((hi_, hi))
            hi = min(hi, lo_)
        holes = [(lo, hi) for lo, hi in holes if hi - lo > n or (not self.strict and hi - lo >= n)]
        if holes:
            lo, hi = holes[0] if self.hole == "highest" else holes[-1]
            base = hi - n if self.at == "top" else lo
        else:
            base = hi - n
        age = next(self.ages)
        self.regions[age] = [base, base + n, {base: size}]
        self.owner[base] = age
        return base

    def free(self, addr):
        age = self.owner.pop(addr)
        del self.regions[age][2][addr]
        if self.release and not self.regions[age][2]:
            del self.regions[age]


class Ascending:
    """vramlab's bump placement (MiB units)."""

    def __init__(self):
        self.next = 0

    def malloc(self, size):
        a = self.next
        self.next += size
        return a

    def free(self, addr):
        pass


def experiments(rows):
    by = collections.OrderedDict()
    for r in rows:
        by.setdefault(r["exp"], []).append(r)
    return by


def offsets(rs):
    base = rs[0]["addr"]
    return [(r["i"], r["op"], r["size"] // MiB, (r["addr"] - base) // MiB) for r in rs]


def predict(model, exp, ops):
    """Exact predictions of the malloc offsets (free-running: the model never sees the truth)."""
    for s in PROLOGUE.get(exp, []):
        model.malloc(s)
    base = None
    ok = n = 0
    where = {}
    for i, op, size, off in ops:
        if op == "malloc":
            p = model.malloc(size)
            if base is None:
                base = p
            n += 1
            ok += (p - base) == off
            where[off] = p
        elif op == "free":
            model.free(where.pop(off))
    return ok, n


def main():
    args = sys.argv[1:]
    fixture = None
    if "--fixture" in args:
        k = args.index("--fixture")
        fixture = args[k + 1]
        del args[k:k + 2]
    path = args[0] if args else DEFAULT
    rows = [json.loads(line) for line in open(path)]
    by = experiments(rows)

    print(f"{path}: {len(rows)} calls\n")
    print("experiment  calls  mallocs  frees  steps up  steps down  first address")
    for exp, rs in by.items():
        m = [r for r in rs if r["op"] in ("malloc", "reserve")]
        up = sum(1 for a, b in zip(m, m[1:]) if b["addr"] > a["addr"])
        down = sum(1 for a, b in zip(m, m[1:]) if b["addr"] < a["addr"])
        frees = sum(1 for r in rs if r["op"] == "free")
        print(f"{exp:<10} {len(rs):>6} {len(m):>8} {frees:>6} {up:>9} {down:>11}  {hex(m[0]['addr'])}")
    for a, b in (("grow", "grow2"), ("mixed", "mixed2")):
        if a in by and b in by:
            same = offsets(by[a]) == offsets(by[b])
            print(f"{a} and {b}: offsets from the first address {'identical' if same else 'DIFFER'}")

    variants = [
        ("the model", {}),
        ("regions lowest address first (not newest)", {"order": "lowest"}),
        ("lowest gap in a region (not best fit)", {"within": "lowest"}),
        ("highest gap in a region", {"within": "highest"}),
        ("best fit, ties to the highest address", {"tie": "highest"}),
        ("regions of 2 MiB granularity", {"region": 2}),
        ("regions of 16 MiB", {"region": 16}),
        ("regions of 64 MiB", {"region": 64}),
        ("holes that fit exactly are used (>=)", {"strict": False}),
        ("lowest hole (not highest)", {"hole": "lowest"}),
        ("bottom of the hole (not top)", {"at": "bottom"}),
        ("empty regions kept (not released)", {"release": False}),
    ]
    names = [e for e in ("grow", "mixed", "reuse", "sizes") if e in by]
    print("\ncudaMalloc addresses predicted exactly (offset from the experiment's first address)")
    print(f"{'model':<44}" + "".join(f"{e:>10}" for e in names) + f"{'total':>10}")
    rows_out = [(name, lambda kw=kw: Driver(**kw)) for name, kw in variants]
    rows_out.append(("ascending (vramlab's bump placement)", Ascending))
    for name, make in rows_out:
        res = [predict(make(), e, offsets(by[e])) for e in names]
        ok = sum(r[0] for r in res)
        n = sum(r[1] for r in res)
        print(f"{name:<44}" + "".join(f"{f'{a}/{b}':>10}" for a, b in res) + f"{f'{ok}/{n}':>10}")

    if fixture:
        with open(fixture, "w") as f:
            f.write("# Derived from docs/results/driver-placement-h200/driver-placement.jsonl\n")
            f.write("# (NVIDIA H200, driver 580.159.04, CUDA 13, 2026-11-30) by scripts/driver_placement.py.\n")
            f.write("# Per experiment: `exp NAME` then one line per call: `malloc|free|reserve SIZE_MiB OFFSET_MiB`,\n")
            f.write("# OFFSET from the experiment's first address. grow2/mixed2 repeat grow/mixed exactly\n")
            f.write("# in another process and are left out; torchfirst starts from PyTorch's state, unknown.\n")
            for exp in ("grow", "mixed", "reuse", "sizes", "vmm"):
                if exp not in by:
                    continue
                f.write(f"exp {exp}\n")
                for _, op, size, off in offsets(by[exp]):
                    f.write(f"{op} {size} {off}\n")
        print(f"\nwrote {fixture}")


if __name__ == "__main__":
    main()
