"""What shares the device with PyTorch's allocator in one process, driven for
torch_replay.py (trace format v4): engine pools, MemPools whose allocator is
``sleep_pool.c`` (a CUDAPluggableAllocator that can release and restore the
pool's physical memory, as vLLM's CuMemAllocator and torch_memory_saver do),
and device memory taken outside PyTorch (``cuMemAlloc`` through the driver,
as NCCL's buffers are).

A sleep, a wake or a raw allocation that finds the device full raises
``DeviceFull``: the process's out-of-memory at that event."""
import ctypes
import hashlib
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


class DeviceFull(Exception):
    """The device had no room for a wake or for memory outside PyTorch."""


def build_sleep_pool() -> str:
    """Compiles sleep_pool.c (beside this file) once per source text; the
    path of the shared library."""
    src = os.path.join(HERE, "sleep_pool.c")
    with open(src, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    out_dir = os.path.join(tempfile.gettempdir(), f"vramlab-sleep-pool-{os.getuid()}")
    os.makedirs(out_dir, exist_ok=True)
    so = os.path.join(out_dir, f"sleep_pool-{digest}.so")
    if not os.path.exists(so):
        cc = os.environ.get("CC", "cc")
        tmp = f"{so}.{os.getpid()}.tmp"
        try:
            subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", tmp, src, "-ldl"], check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            raise SystemExit(f"error: cannot build {src} with '{cc}' (engine pools need a C compiler): {e}") from None
        os.replace(tmp, so)
    return so


class EngineMemory:
    """The engine pools' allocator and the memory outside PyTorch of one
    process."""

    def __init__(self, torch):
        self.torch = torch
        self._lib = None
        self._alloc = None
        self._cuda = None
        self.raw: dict[int, int] = {}
        self.raw_bytes: dict[int, int] = {}
        # The engine pools whose use_mem_pool contexts are open, in the
        # order they were entered: PyTorch routes to the first.
        self.open_tags: list[int] = []

    def lib(self):
        if self._lib is None:
            so = build_sleep_pool()
            lib = ctypes.CDLL(so)
            lib.vl_sleep.restype = ctypes.c_ulonglong
            lib.vl_mapped_bytes.restype = ctypes.c_ulonglong
            self._alloc = self.torch.cuda.memory.CUDAPluggableAllocator(so, "vl_malloc", "vl_free")
            self._lib = lib
        return self._lib

    def mem_pool(self):
        """A new MemPool whose segments come from sleep_pool.c."""
        self.lib()
        return self.torch.cuda.MemPool(self._alloc.allocator())

    def enter(self, tag: int) -> None:
        """A context of pool `tag` opens: new segments go to the first
        pool still open (PyTorch's routing), and are tagged so."""
        self.open_tags.append(tag)
        self.lib().vl_set_tag(self.open_tags[0])

    def exit(self, tag: int) -> None:
        """The context of pool `tag` closes."""
        if tag in self.open_tags:
            self.open_tags.remove(tag)
        self.lib().vl_set_tag(self.open_tags[0] if self.open_tags else 0)

    def sleep(self, tag: int) -> int:
        return int(self.lib().vl_sleep(tag))

    def wake(self, tag: int) -> None:
        if self.lib().vl_wake(tag) != 0:
            free, _ = self.torch.cuda.mem_get_info()
            raise DeviceFull(f"out of memory: waking engine pool {tag} does not fit, {free} bytes free")

    def _driver(self):
        if self._cuda is None:
            cuda = ctypes.CDLL("libcuda.so.1")
            cuda.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
            cuda.cuMemFree_v2.argtypes = [ctypes.c_uint64]
            self._cuda = cuda
        return self._cuda

    def raw_alloc(self, ident: int, size: int) -> None:
        ptr = ctypes.c_uint64(0)
        err = self._driver().cuMemAlloc_v2(ctypes.byref(ptr), size)
        if err != 0:
            free, _ = self.torch.cuda.mem_get_info()
            raise DeviceFull(f"out of memory: {size} bytes outside PyTorch do not fit, {free} bytes free (CUDA error {err})")
        self.raw[ident] = ptr.value
        self.raw_bytes[ident] = size

    def raw_free(self, ident: int) -> None:
        self.raw_bytes.pop(ident, None)
        ptr = self.raw.pop(ident, None)
        if ptr is not None:
            self._driver().cuMemFree_v2(ptr)

    def free_all(self) -> None:
        for ident in list(self.raw):
            self.raw_free(ident)


KV_PHASE = "kv_cache"
KV_ROUND = 2 << 20
ALLOC = 0


class KvRule:
    """An inference engine sized by vLLM's rule (V1 engine,
    ``gpu_memory_utilization``): it may use ``total * util`` bytes, refuses
    to start when less than that is free, and its KV cache gets what is left
    of that share after the peak PyTorch allocated before it and the memory
    it holds outside PyTorch; each allocation of a ``kv_cache`` phase gets an
    equal part, rounded down to 2 MiB. The same rule as vramlab's
    (replay/src/engine/kv_rule.rs)."""

    def __init__(self, torch, dev: int, util, phases: list, events: list, engine: EngineMemory):
        self.torch, self.dev, self.util, self.engine = torch, dev, util, engine
        self.starts = {i: label for i, label in phases}
        self.cuts = sorted({i for i, _ in phases})
        self.events = events
        self.each = None

    def _requested(self) -> tuple[int, int, int]:
        free, total = self.torch.cuda.mem_get_info(self.dev)
        return int(total * self.util), free, total

    def size(self, idx: int, kind: int, size: int) -> int:
        """The size event `idx` asks for."""
        if self.util is None:
            return size
        if idx == 0:
            requested, free, total = self._requested()
            if free < requested:
                raise DeviceFull(
                    f"the engine refuses to start: free memory on the device ({free} of {total} bytes) "
                    f"is less than the desired GPU memory utilization ({self.util}, {requested} bytes)"
                )
        if idx in self.starts or idx == 0:
            self.each = None
            if self.starts.get(idx) == KV_PHASE:
                end = next((c for c in self.cuts if c > idx), len(self.events))
                n = sum(1 for e in self.events[idx:end] if e[0] == ALLOC)
                requested, _, _ = self._requested()
                peak = self.torch.cuda.max_memory_allocated(self.dev)
                non_kv = peak + sum(self.engine.raw_bytes.values())
                budget = max(requested - non_kv, 0)
                each = (budget // max(n, 1)) // KV_ROUND * KV_ROUND
                if each == 0 and n > 0:
                    raise DeviceFull(
                        f"no memory left for the KV cache: utilization {self.util} gives the engine "
                        f"{requested} bytes, and its weights and activations took {non_kv}"
                    )
                self.each = each
        return self.each if (self.each is not None and kind == ALLOC) else size


class EnginePool:
    """An engine's pool for a script: a MemPool over sleep_pool.c whose
    memory sleeps and wakes, as vLLM's sleep mode and torch_memory_saver
    keep weights and KV cache. Under ``vramlab record`` its sleeps and wakes
    are ``vramlab.pool_sleep A,B`` / ``vramlab.pool_wake A,B`` scopes of
    ``torch.profiler.record_function``, which vramlab reads back from the
    snapshot as the trace's ``pool_sleep`` and ``pool_wake``.

        pool = EnginePool(torch)
        with pool.use():
            weights = torch.empty(...)
        pool.sleep()
        ...
        pool.wake()
    """

    _memory = None
    _tags = 0

    def __init__(self, torch):
        self.torch = torch
        if EnginePool._memory is None:
            EnginePool._memory = EngineMemory(torch)
        EnginePool._tags += 1
        self.tag = EnginePool._tags
        self.pool = EnginePool._memory.mem_pool()

    def _id(self) -> str:
        a, b = self.pool.id
        return f"{a},{b}"

    def use(self):
        """``torch.cuda.use_mem_pool`` of this pool, its segments tagged."""
        import contextlib  # noqa: PLC0415

        @contextlib.contextmanager
        def ctx():
            EnginePool._memory.enter(self.tag)
            try:
                with self.torch.cuda.use_mem_pool(self.pool):
                    yield
            finally:
                EnginePool._memory.exit(self.tag)

        return ctx()

    def sleep(self) -> int:
        """Releases the pool's physical memory; the bytes released."""
        with self.torch.profiler.record_function(f"vramlab.pool_sleep {self._id()}"):
            return EnginePool._memory.sleep(self.tag)

    def wake(self) -> None:
        """Maps it back (DeviceFull when the device has no room)."""
        with self.torch.profiler.record_function(f"vramlab.pool_wake {self._id()}"):
            EnginePool._memory.wake(self.tag)
