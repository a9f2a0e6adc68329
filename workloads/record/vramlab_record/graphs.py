"""CUDA graphs and MemPools under the CPU recorder.

A fake device cannot capture a graph, but what a capture does to memory is
the allocator's routing, which the trace can say: ``torch.cuda.graph``,
``torch.cuda.CUDAGraph``, ``torch.cuda.graph_pool_handle``,
``torch.cuda.MemPool`` and ``torch.cuda.use_mem_pool`` are replaced, while
recording, by stand-ins that write the trace's pool events (trace format
v2: ``capture_begin``/``capture_end`` with the pool and the capture
stream, ``pool_create``, ``pool_enter``/``pool_exit``, ``pool_release``)
and put the allocations made during a capture on the capture stream, as
PyTorch does:

* a capture (``torch.cuda.graph(g, pool=...)`` or ``g.capture_begin()``)
  holds its pool: the handle passed, else a pool of its own (``(n, 0)``);
  ``torch.cuda.graph`` first calls ``torch.cuda.empty_cache()`` and
  captures on one side stream shared by every graph, as PyTorch's does;
* ``g.reset()`` (or the graph's deletion) releases its pool; ``g.replay()``
  allocates nothing;
* ``torch.cuda.graph_pool_handle()`` names a pool ``(0, n)`` shared by the
  graphs captured into it;
* ``MemPool(use_on_oom=..., no_split=...)`` is made when constructed and
  released when deleted; ``use_mem_pool(pool)`` routes every request of
  the thread to it.

Kernels do not run (a replay of a graph launches work, it allocates
nothing), so the recording holds exactly the allocations of the captured
forward, once.
"""

from __future__ import annotations

import contextlib
import weakref

import torch

#: The raw stream the captures run on (PyTorch uses one side stream for
#: every ``torch.cuda.graph`` without ``stream=``).
CAPTURE_STREAM = 1


class _Ids:
    """PyTorch's ``MempoolId_t`` counters: ``(0, n)`` for user-made
    handles and MemPools, ``(n, 0)`` for a graph's own pool."""

    def __init__(self):
        self.user = 1
        self.graph = 1

    def user_id(self):
        i = (0, self.user)
        self.user += 1
        return i

    def graph_id(self):
        i = (self.graph, 0)
        self.graph += 1
        return i


def _release(rec, name):
    rec.pool_event("pool_release", name)


@contextlib.contextmanager
def fake_graphs(rec):
    """Replaces the graph and MemPool API while recording into ``rec``."""
    ids = _Ids()
    names: dict[tuple, str] = {}

    def pool_name(pid, kind, **opts):
        if pid not in names:
            names[pid] = rec.pool(kind, pid, **opts)
        return names[pid]

    class CUDAGraph:
        """Stand-in for ``torch.cuda.CUDAGraph``."""

        def __init__(self, keep_graph=False):
            self._pool = None
            self._finalizer = None
            self._stream = CAPTURE_STREAM

        def capture_begin(self, pool=None, capture_error_mode="global"):
            pid = tuple(pool) if pool is not None else ids.graph_id()
            name = pool_name(pid, "graph")
            rec.pool_event("capture_begin", name, self._stream)
            rec.stream = self._stream
            self._pool = pid
            if self._finalizer is None:
                self._finalizer = weakref.finalize(self, _release, rec, name)

        def capture_end(self):
            rec.stream = 0
            rec.pool_event("capture_end", names[self._pool])

        def replay(self):
            return None

        def reset(self):
            if self._finalizer is not None:
                self._finalizer()
                self._finalizer = None

        def pool(self):
            return self._pool

        def enable_debug_mode(self):
            return None

        def debug_dump(self, path):
            return None

    class graph:
        """Stand-in for the ``torch.cuda.graph`` context manager."""

        def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
            self.cuda_graph = cuda_graph
            self.pool = pool
            if stream is not None:
                cuda_graph._stream = getattr(stream, "stream_id", None) or CAPTURE_STREAM + 1

        def __enter__(self):
            torch.cuda.empty_cache()
            self.cuda_graph.capture_begin(self.pool)

        def __exit__(self, *exc):
            self.cuda_graph.capture_end()
            return False

    def graph_pool_handle():
        return ids.user_id()

    class MemPool:
        """Stand-in for ``torch.cuda.MemPool``."""

        def __init__(self, allocator=None, use_on_oom=False, no_split=False, **kw):
            self.id = ids.user_id()
            self.name = pool_name(self.id, "mempool", use_on_oom=use_on_oom, no_split=no_split)
            rec.pool_event("pool_create", self.name)
            self._finalizer = weakref.finalize(self, _release, rec, self.name)

        def snapshot(self):
            return []

        def use_count(self):
            return 1

    @contextlib.contextmanager
    def use_mem_pool(pool, device=None):
        rec.pool_event("pool_enter", pool.name)
        try:
            yield
        finally:
            rec.pool_event("pool_exit", pool.name)

    replaced = {
        "CUDAGraph": CUDAGraph,
        "graph": graph,
        "graph_pool_handle": graph_pool_handle,
        "MemPool": MemPool,
        "use_mem_pool": use_mem_pool,
    }
    saved = {k: getattr(torch.cuda, k, None) for k in replaced}
    for k, v in replaced.items():
        setattr(torch.cuda, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is not None:
                setattr(torch.cuda, k, v)
