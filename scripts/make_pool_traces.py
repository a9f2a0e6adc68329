#!/usr/bin/env python3
"""Writes the private-pool scenario traces in tests/pools/ (trace format v2).

Each is a small allocation history of the kind CUDA graphs and MemPools
make, judged against PyTorch's own allocator by `vramlab oracle`
(docs/results/pools-*.csv) and pinned by replay/tests/private_pools.rs:

* graph-shared.csv: warm-up in the default pool, two captures sharing one
  pool handle (allocations and frees during capture, a request on another
  stream during capture), the graphs released, the cache emptied;
* mempool.csv: a MemPool made, entered twice, its blocks freed outside
  the context, default-pool requests beside it, the pool deleted;
* serving-warmup.csv: a serving engine's start-up: the weights and a
  KV cache in the default pool, then 8 batch sizes (largest first, as
  vLLM captures them) captured into one shared pool, each capture's
  activations freed inside it and its output kept;
* expandable-graph.csv: captures into a pool under expandable segments
  (run the oracle with --setting expandable_segments:True);
* mempool-no-split.csv: a MemPool with no_split beside the default pool;
* capture-oom.csv: on a 64 MiB device (`--capacity 64MiB`), a capture
  needs a segment that only freeing the default pool's cache would make
  room for: PyTorch frees nothing during a capture, so it fails, and the
  same request after the capture succeeds;
* empty-cache-routed.csv: `empty_cache()` inside a `use_mem_pool`
  context and inside a capture, with default-pool cache to free;
* mempool-use-on-oom.csv: on a 64 MiB device, a default-pool request
  that fails is served from a `use_on_oom` MemPool's cached block.

    python3 scripts/make_pool_traces.py tests/pools
"""

import os
import sys

MB = 1 << 20
KB = 1 << 10


class Trace:
    def __init__(self, source: str):
        self.rows: list[str] = []
        self.pools: list[str] = []
        self.source = source
        self.next = 0

    def pool(self, decl: str) -> str:
        name = f"p{len(self.pools)}"
        self.pools.append(f"# pool.{name}: {decl}")
        return name

    def alloc(self, size: int, stream: int = 0) -> str:
        i = f"a{self.next}"
        self.next += 1
        self.rows.append(f"alloc,{i},{size},{stream}")
        return i

    def free(self, i: str) -> None:
        self.rows.append(f"free,{i}")

    def row(self, text: str) -> None:
        self.rows.append(text)

    def text(self) -> str:
        head = ["# vramlab trace v2", f"# source: {self.source}", *self.pools, "action,id,size,stream"]
        return "\n".join(head + self.rows) + "\n"


S = 7  # the capture stream's raw handle


def graph_shared() -> Trace:
    t = Trace("two CUDA graph captures sharing a pool (scripts/make_pool_traces.py)")
    g = t.pool("graph 0,1")
    keep = [t.alloc(8 * MB), t.alloc(300 * KB)]
    warm = [t.alloc(n) for n in (4 * MB, 30 * MB, 1 * MB)]
    for w in warm:
        t.free(w)
    t.row(f"capture_begin,{g},,{S}")
    x = t.alloc(4 * MB, S)
    y = t.alloc(30 * MB, S)
    t.free(x)
    z = t.alloc(1 * MB, S)
    w = t.alloc(3 * MB, 0)  # another stream: the default pool
    v = t.alloc(2 * MB, S)
    t.free(v)
    t.row(f"capture_end,{g}")
    t.row(f"capture_begin,{g},,{S}")
    a = t.alloc(2 * MB, S)
    b = t.alloc(12 * MB, S)
    t.free(a)
    t.row(f"capture_end,{g}")
    d = t.alloc(6 * MB)  # after capture: the default pool again
    for i in (y, z, b, w, d):
        t.free(i)
    t.row("empty_cache")
    t.row(f"pool_release,{g}")
    t.row("empty_cache")
    t.row(f"pool_release,{g}")
    e = t.alloc(10 * MB)
    t.row("empty_cache")
    t.free(e)
    for k in keep:
        t.free(k)
    return t


def mempool() -> Trace:
    t = Trace("a torch.cuda.MemPool beside the default pool (scripts/make_pool_traces.py)")
    m = t.pool("mempool 0,1")
    a = t.alloc(10 * MB)
    t.row(f"pool_create,{m}")
    t.row(f"pool_enter,{m}")
    b = t.alloc(10 * MB)
    c = t.alloc(1 * MB)
    d = t.alloc(25 * MB)
    t.row(f"pool_exit,{m}")
    t.free(b)
    e = t.alloc(9 * MB)  # the default pool, not b's block
    t.row(f"pool_enter,{m}")
    f = t.alloc(9 * MB)  # b's block, split
    t.row(f"pool_exit,{m}")
    for i in (c, d, f):
        t.free(i)
    t.row("empty_cache")  # the pool is held: its segments stay
    t.row(f"pool_release,{m}")  # deleted: its memory goes back
    t.free(e)
    t.free(a)
    return t


def serving_warmup(expandable: bool = False) -> Trace:
    what = "under expandable segments " if expandable else ""
    t = Trace(f"a serving engine's CUDA graph warm-up {what}(scripts/make_pool_traces.py)")
    g = t.pool("graph 0,1")
    hidden = 4096
    weights = [t.alloc(n * MB) for n in (500, 64, 64, 220, 220, 64)]
    kv = t.alloc(2048 * MB)
    outputs = []
    for batch in (256, 128, 64, 32, 16, 8, 4, 1):
        # eager warm-up run, then the capture of the same forward
        for phase in ("warm", "capture"):
            stream = S if phase == "capture" else 0
            if phase == "capture":
                t.row(f"capture_begin,{g},,{S}")
            x = t.alloc(batch * hidden * 2, stream)
            acts = []
            for layer in range(4):
                q = t.alloc(batch * hidden * 2 * 3, stream)
                att = t.alloc(batch * hidden * 2, stream)
                t.free(q)
                up = t.alloc(batch * hidden * 2 * 4, stream)
                down = t.alloc(batch * hidden * 2, stream)
                t.free(up)
                t.free(att)
                acts.append(down)
                if len(acts) > 1:
                    t.free(acts.pop(0))
            logits = t.alloc(batch * 32000 * 2, stream)
            t.free(acts.pop())
            t.free(x)
            if phase == "capture":
                t.row(f"capture_end,{g}")
                outputs.append(logits)
            else:
                t.free(logits)
    for o in outputs:
        t.free(o)
    t.free(kv)
    for w in weights:
        t.free(w)
    return t


def mempool_no_split() -> Trace:
    t = Trace("a MemPool with no_split (scripts/make_pool_traces.py)")
    m = t.pool("mempool 0,1 no_split")
    t.row(f"pool_create,{m}")
    t.row(f"pool_enter,{m}")
    a = t.alloc(30 * MB)
    t.free(a)
    b = t.alloc(6 * MB)  # the 30 MiB block whole: never split
    c = t.alloc(200 * KB)
    t.free(c)
    d = t.alloc(100 * KB)
    t.row(f"pool_exit,{m}")
    e = t.alloc(6 * MB)
    for i in (b, d, e):
        t.free(i)
    t.row(f"pool_release,{m}")
    return t


def capture_oom() -> Trace:
    t = Trace("a capture that cannot free the cache (scripts/make_pool_traces.py; --capacity 64MiB)")
    g = t.pool("graph 0,1")
    a = t.alloc(24 * MB)
    b = t.alloc(24 * MB)
    t.free(a)  # 24 MiB cached in the default pool
    t.row(f"capture_begin,{g},,{S}")
    c = t.alloc(30 * MB, S)  # needs a new segment: 48 + 30 > 64, and no release during capture
    t.row(f"capture_end,{g}")
    return t


def mempool_use_on_oom() -> Trace:
    t = Trace("a use_on_oom MemPool lends its cache (scripts/make_pool_traces.py; --capacity 64MiB)")
    m = t.pool("mempool 0,1 use_on_oom")
    t.row(f"pool_create,{m}")
    t.row(f"pool_enter,{m}")
    a = t.alloc(30 * MB)
    t.row(f"pool_exit,{m}")
    t.free(a)  # 30 MiB cached in the MemPool
    b = t.alloc(30 * MB)  # default pool: 30 + 30 > 64 -> the MemPool's block
    c = t.alloc(2 * MB)
    t.free(b)
    t.free(c)
    return t


def empty_cache_routed() -> Trace:
    t = Trace("empty_cache inside a MemPool context and a capture (scripts/make_pool_traces.py)")
    m = t.pool("mempool 0,1")
    g = t.pool("graph 0,2")
    a = t.alloc(4 * MB)
    t.free(a)  # a 20 MiB default-pool segment cached
    t.row(f"pool_create,{m}")
    t.row(f"pool_enter,{m}")
    b = t.alloc(4 * MB)
    t.row("empty_cache")
    t.row(f"pool_exit,{m}")
    t.free(b)
    c = t.alloc(12 * MB)
    t.free(c)  # a 12 MiB default-pool segment cached
    t.row(f"capture_begin,{g},,{S}")
    d = t.alloc(2 * MB, S)
    t.row("empty_cache")
    t.row(f"capture_end,{g}")
    e = t.alloc(12 * MB)
    t.free(d)
    t.free(e)
    t.row(f"pool_release,{m}")
    t.row(f"pool_release,{g}")
    t.row("empty_cache")
    return t


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/pools"
    os.makedirs(out, exist_ok=True)
    for name, t in [
        ("graph-shared", graph_shared()),
        ("mempool", mempool()),
        ("serving-warmup", serving_warmup()),
        ("mempool-no-split", mempool_no_split()),
        ("capture-oom", capture_oom()),
        ("mempool-use-on-oom", mempool_use_on_oom()),
        ("empty-cache-routed", empty_cache_routed()),
    ]:
        with open(os.path.join(out, f"{name}.csv"), "w") as f:
            f.write(t.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
