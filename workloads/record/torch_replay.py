"""Replay a vramlab trace through PyTorch's own CUDA caching allocator.

This is the ground truth vramlab's native policy is checked against on a
GPU: every allocation of the trace goes through
``torch.cuda.caching_allocator_alloc(size, device, stream)`` and every free
through ``torch.cuda.caching_allocator_delete(ptr)``, under a given
``PYTORCH_CUDA_ALLOC_CONF`` and optional memory fraction, with memory
history on. The snapshot PyTorch writes is then compared with vramlab's
replay by ``vramlab fidelity OUT/snapshot.pickle``, which replays the
snapshot under its recorded ``allocator_settings``.

    python workloads/record/torch_replay.py workloads/data/gpt-small-train.csv \\
        --conf expandable_segments:True --out /tmp/run1

Inputs:

* a vramlab native CSV trace (v1, ``traces/src/csv/``): ``# key: value``
  header comments, the header row ``action,id,size,stream``, then
  ``alloc,ID,SIZE[,STREAM]``, ``free,ID``, ``free_requested,ID``,
  ``free_completed,ID`` and ``empty_cache`` rows;
* a PyTorch memory snapshot pickle (``torch.cuda.memory._dump_snapshot``),
  read as ``vramlab convert SNAPSHOT OUT.csv --start fresh`` writes it (one
  device: ``--trace-device N``, else the first with allocations; the
  ``vramlab`` command is ``--vramlab``, else the one next to this Python,
  else the one on ``PATH``). A recording that starts mid-run begins with
  the blocks in use at its first entry allocated, exactly as ``vramlab
  replay --start fresh`` starts it, so the two can be compared.

A ``free_requested`` is replayed as the ``caching_allocator_delete``;
``free_completed`` has no counterpart (the replay makes no cross-stream
uses, so PyTorch completes the free at once). Streams: stream 0 is the
device's default stream; every other distinct stream value gets its own
``torch.cuda.Stream``. Zero-byte allocations are null pointers, as in
PyTorch, and are neither allocated nor freed.

Outputs in ``--out DIR``:

* ``snapshot.pickle``: ``torch.cuda.memory._dump_snapshot`` at the end of
  the trace (before anything still live is freed), unless ``--no-history``;
* ``memory_stats.json``: ``torch.cuda.memory_stats()`` at the same moment;
* ``timing.csv``: ``index,action,id,size,stream,ns`` for every alloc and
  free call (``time.perf_counter_ns`` around the call; the Python call
  overhead, measured on a no-op with the same arguments, is in
  ``summary.json`` as ``python_call_overhead_ns``);
* ``summary.json``: versions, device, settings, counts, peak memory, the
  first OOM (event index and message), latency percentiles, and a leak check
  (``memory_reserved()`` is 0 after freeing what is left and
  ``empty_cache``).

Memory history costs time on every call: for latency comparisons run with
``--no-history``. The allocator settings must be in the environment before
PyTorch initialises CUDA; the script sets ``PYTORCH_CUDA_ALLOC_CONF``
(removing ``PYTORCH_ALLOC_CONF``) and re-executes itself when the
environment it was started with says otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from engine_pool import DeviceFull, EngineMemory, KvRule

ENV_KEY = "PYTORCH_CUDA_ALLOC_CONF"
OTHER_ENV_KEY = "PYTORCH_ALLOC_CONF"
REEXEC_MARK = "VRAMLAB_TORCH_REPLAY_REEXEC"

# Event kinds of the in-memory trace.
ALLOC, FREE, EMPTY_CACHE = 0, 1, 2
# Private pools (trace format v2): the id column names a declared pool.
POOL_CREATE, CAPTURE_BEGIN, CAPTURE_END, POOL_ENTER, POOL_EXIT, POOL_RELEASE = 3, 4, 5, 6, 7, 8
POOL_ACTIONS = {
    "pool_create": POOL_CREATE,
    "capture_begin": CAPTURE_BEGIN,
    "capture_end": CAPTURE_END,
    "pool_enter": POOL_ENTER,
    "pool_exit": POOL_EXIT,
    "pool_release": POOL_RELEASE,
}
# Pinned host rows (trace format v3).
HOST_ALLOC, HOST_FREE, HOST_FREE_REQUESTED, HOST_FREE_COMPLETED, HOST_EMPTY_CACHE = 9, 10, 11, 12, 13
HOST_ACTIONS = {
    "host_free": HOST_FREE,
    "host_free_requested": HOST_FREE_REQUESTED,
    "host_free_completed": HOST_FREE_COMPLETED,
}
# Engine pools and memory outside PyTorch (trace format v4).
POOL_SLEEP, POOL_WAKE, RAW_ALLOC, RAW_FREE = 14, 15, 16, 17
POOL_ACTIONS |= {"pool_sleep": POOL_SLEEP, "pool_wake": POOL_WAKE}
KIND_NAMES = {ALLOC: "alloc", FREE: "free", EMPTY_CACHE: "empty_cache"} | {
    v: k for k, v in POOL_ACTIONS.items()
} | {v: k for k, v in HOST_ACTIONS.items()} | {HOST_ALLOC: "host_alloc", HOST_EMPTY_CACHE: "host_empty_cache"} | {
    RAW_ALLOC: "raw_alloc", RAW_FREE: "raw_free"}


class TraceFormatError(Exception):
    """A malformed trace; the message names the file and line or entry."""


# ---------------------------------------------------------------- readers
def _parse_u64(text: str, what: str, where: str) -> int:
    if not text.isdigit():
        raise TraceFormatError(f"{where}: {what} '{text}' is not a non-negative whole number")
    return int(text)


def _parse_stream(text: str, where: str) -> int:
    try:
        if text.startswith("0x"):
            v = int(text[2:], 16)
        else:
            v = int(text)
    except ValueError:
        raise TraceFormatError(f"{where}: stream '{text}' is not a stream handle") from None
    return v & 0xFFFFFFFFFFFFFFFF  # two's complement of negative int64 values


def _parse_pool(name: str, text: str, where: str) -> dict:
    """A ``# pool.NAME: KIND A,B [use_on_oom] [no_split]`` declaration."""
    words = text.split()
    if len(words) < 2 or words[0] not in ("graph", "mempool", "engine"):
        raise TraceFormatError(
            f"{where}: pool '{name}': expected 'graph A,B', 'mempool A,B [options]' or 'engine A,B'"
        )
    opts = set(words[2:])
    unknown = opts - {"use_on_oom", "no_split"}
    if unknown:
        raise TraceFormatError(f"{where}: pool '{name}': unknown option '{sorted(unknown)[0]}'")
    return {"kind": words[0], "id": words[1], "use_on_oom": "use_on_oom" in opts, "no_split": "no_split" in opts}


def read_csv_trace(path: str) -> tuple[dict, list]:
    """Reads a vramlab CSV trace: (header fields, events). Events are
    ``(kind, id, size, stream)`` tuples with dense integer ids; a pool
    event's id is the pool's index in ``header["pools"]``."""
    header: dict = {"pools": []}
    pool_index: dict[str, int] = {}
    events: list = []
    live: dict[str, int] = {}
    requested: set[str] = set()
    host_live: dict[str, int] = {}
    host_requested: set[str] = set()
    raw_live: dict[str, int] = {}
    next_id = 0
    seen_header = False
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            where = f"{path}:{lineno}"
            text = line.strip()
            if not text:
                continue
            if text.startswith("#"):
                if seen_header and text[1:].strip().startswith("phase:"):
                    # Where a phase begins: a colocated replay's steps.
                    header.setdefault("phase_starts", []).append(len(events))
                    header.setdefault("phases", []).append([len(events), text[1:].strip()[len("phase:") :].strip()])
                    continue
                if not seen_header:
                    body = text[1:].strip()
                    if body.startswith("vramlab trace"):
                        version = body[len("vramlab trace") :].strip()
                        if version not in ("v1", "v2", "v3", "v4"):
                            raise TraceFormatError(f"{where}: trace format '{version}' (expected v1 to v4)")
                    elif body.startswith("pool.") and ":" in body:
                        name, decl = body[len("pool.") :].split(":", 1)
                        name = name.strip()
                        if name in pool_index:
                            raise TraceFormatError(f"{where}: pool '{name}' is declared twice")
                        pool_index[name] = len(header["pools"])
                        header["pools"].append(_parse_pool(name, decl.strip(), where))
                    elif ":" in body:
                        k, v = body.split(":", 1)
                        k = k.strip()
                        if k and not any(c.isspace() for c in k):
                            header[k] = v.strip()
                continue
            cols = [c.strip() for c in text.split(",")]
            if not seen_header:
                if cols != ["action", "id", "size", "stream"]:
                    raise TraceFormatError(
                        f"{where}: expected the header row 'action,id,size,stream', found '{text}'"
                    )
                seen_header = True
                continue
            if len(cols) > 4:
                raise TraceFormatError(f"{where}: too many columns")
            cols += [""] * (4 - len(cols))
            action, ident, size, stream = cols
            if action == "alloc":
                if not ident:
                    raise TraceFormatError(f"{where}: alloc needs an id")
                if not size:
                    raise TraceFormatError(f"{where}: alloc needs a size in bytes")
                if ident in live:
                    raise TraceFormatError(f"{where}: alloc of id '{ident}', which is still allocated")
                n = _parse_u64(size, "size", where)
                s = _parse_stream(stream, where) if stream else 0
                live[ident] = next_id
                events.append((ALLOC, next_id, n, s))
                next_id += 1
            elif action in ("free", "free_requested"):
                if not ident:
                    raise TraceFormatError(f"{where}: {action} needs an id")
                if size or stream:
                    raise TraceFormatError(f"{where}: {action} takes only an id")
                if ident not in live or ident in requested:
                    raise TraceFormatError(f"{where}: {action} of id '{ident}', which is not allocated")
                events.append((FREE, live[ident], 0, 0))
                if action == "free":
                    del live[ident]
                else:
                    requested.add(ident)
            elif action == "free_completed":
                if ident not in requested:
                    raise TraceFormatError(
                        f"{where}: free_completed of id '{ident}' without a free_requested before it"
                    )
                requested.discard(ident)
                del live[ident]
            elif action in POOL_ACTIONS:
                if ident not in pool_index:
                    raise TraceFormatError(f"{where}: {action} of pool '{ident}', which is not declared")
                s = _parse_stream(stream, where) if stream else 0
                events.append((POOL_ACTIONS[action], pool_index[ident], 0, s))
            elif action == "empty_cache":
                if ident or size or stream:
                    raise TraceFormatError(f"{where}: empty_cache takes no id, size or stream")
                events.append((EMPTY_CACHE, 0, 0, 0))
            elif action == "host_alloc":
                if not ident or not size or stream:
                    raise TraceFormatError(f"{where}: host_alloc needs an id and a size, and takes no stream")
                if ident in host_live:
                    raise TraceFormatError(f"{where}: host_alloc of id '{ident}', which is still allocated")
                host_live[ident] = next_id
                events.append((HOST_ALLOC, next_id, _parse_u64(size, "size", where), 0))
                next_id += 1
            elif action in HOST_ACTIONS:
                if ident not in host_live:
                    raise TraceFormatError(f"{where}: {action} of id '{ident}', which is not a host allocation")
                pending = ident in host_requested
                if (action == "host_free_completed") != pending:
                    raise TraceFormatError(f"{where}: {action} of id '{ident}' out of order")
                events.append((HOST_ACTIONS[action], host_live[ident], 0, 0))
                if action == "host_free_requested":
                    host_requested.add(ident)
                else:
                    host_requested.discard(ident)
                    del host_live[ident]
            elif action == "host_empty_cache":
                events.append((HOST_EMPTY_CACHE, 0, 0, 0))
            elif action == "raw_alloc":
                if not ident or not size or stream:
                    raise TraceFormatError(f"{where}: raw_alloc needs an id and a size, and takes no stream")
                if ident in raw_live:
                    raise TraceFormatError(f"{where}: raw_alloc of id '{ident}', which is still allocated")
                raw_live[ident] = next_id
                events.append((RAW_ALLOC, next_id, _parse_u64(size, "size", where), 0))
                next_id += 1
            elif action == "raw_free":
                if ident not in raw_live:
                    raise TraceFormatError(f"{where}: raw_free of id '{ident}', which is not allocated outside PyTorch")
                events.append((RAW_FREE, raw_live.pop(ident), 0, 0))
            elif not action:
                raise TraceFormatError(f"{where}: missing action")
            else:
                raise TraceFormatError(
                    f"{where}: unknown action '{action}' (expected alloc, free, "
                    "free_requested, free_completed, empty_cache, a pool action or a host_ action)"
                )
    if not seen_header:
        raise TraceFormatError(f"{path}: no header row 'action,id,size,stream'; is this a vramlab trace?")
    return header, events


def vramlab_command() -> str:
    """The ``vramlab`` command: the one installed next to this Python
    interpreter, else the one on ``PATH``."""
    beside = os.path.join(os.path.dirname(sys.executable), "vramlab")
    return beside if os.path.exists(beside) else (shutil.which("vramlab") or "vramlab")


def convert_snapshot(path: str, device: int | None, vramlab: str, out_dir: str) -> str:
    """Writes the snapshot's trace as native CSV with ``vramlab convert
    --start fresh`` (a recording that starts mid-run begins with the blocks
    in use at its first entry allocated, as ``vramlab replay --start
    fresh`` replays it) and returns the CSV's path: device ``device``, or
    else the first device with allocations."""
    target = os.path.join(out_dir, "device{device}.csv")
    cmd = [vramlab, "convert", path, target, "--start", "fresh"]
    if device is not None:
        cmd += ["--trace-device", str(device)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot run {vramlab} to read the snapshot: {e}") from None
    if done.returncode != 0:
        raise TraceFormatError(done.stderr.strip().removeprefix("error: ") or f"{' '.join(cmd)} failed")
    written = sorted(
        (f for f in os.listdir(out_dir) if f.startswith("device") and f.endswith(".csv")),
        key=lambda f: int(f[len("device") : -len(".csv")]),
    )
    for name in written:
        csv_path = os.path.join(out_dir, name)
        with open(csv_path, encoding="utf-8") as f:
            if any(line.startswith("alloc,") for line in f):
                return csv_path
    raise TraceFormatError(f"{path}: no device has alloc entries")


def read_trace(path: str, device: int | None, vramlab: str | None = None) -> tuple[dict, list]:
    """Reads a CSV or snapshot trace (by content: a pickle starts with
    0x80, a gzip-compressed one with 0x1f 0x8b): a snapshot through
    ``vramlab convert --start fresh`` (see :func:`convert_snapshot`)."""
    with open(path, "rb") as f:
        first = f.read(2)
    if first[:1] == b"\x80" or first == b"\x1f\x8b":
        with tempfile.TemporaryDirectory(prefix="torch-replay-") as tmp:
            return read_csv_trace(convert_snapshot(path, device, vramlab or vramlab_command(), tmp))
    return read_csv_trace(path)


# ---------------------------------------------------------------- helpers
def percentiles(values: list[int]) -> dict:
    """count, p50, p99, max and mean of nanosecond samples, in microseconds."""
    if not values:
        return {"count": 0, "p50_us": 0.0, "p99_us": 0.0, "max_us": 0.0, "mean_us": 0.0, "total_us": 0.0}
    v = sorted(values)
    n = len(v)

    def q(p: float) -> float:  # nearest rank
        return v[min(n - 1, max(0, math.ceil(p * n) - 1))] / 1e3

    return {
        "count": n,
        "p50_us": q(0.5),
        "p99_us": q(0.99),
        "max_us": v[-1] / 1e3,
        "mean_us": sum(v) / n / 1e3,
        "total_us": sum(v) / 1e3,
    }


def ensure_alloc_conf(conf: str) -> None:
    """Puts ``conf`` in PYTORCH_CUDA_ALLOC_CONF (and removes
    PYTORCH_ALLOC_CONF, which newer releases prefer) before PyTorch starts;
    re-executes the script if PyTorch was already imported with other
    settings."""
    want = conf.strip() or None
    if os.environ.get(ENV_KEY) == want and OTHER_ENV_KEY not in os.environ:
        return
    os.environ.pop(OTHER_ENV_KEY, None)
    if want:
        os.environ[ENV_KEY] = want
    else:
        os.environ.pop(ENV_KEY, None)
    if "torch" in sys.modules:
        if os.environ.get(REEXEC_MARK):
            raise SystemExit("error: PyTorch was imported before the allocator settings could be set")
        os.environ[REEXEC_MARK] = "1"
        os.execv(sys.executable, [sys.executable] + sys.argv)


# ---------------------------------------------------------------- replay
# The event number the fake device logs for the clean-up after the trace.
END_MARK = 2**64 - 1


def fake_device_mark():
    """``vramlab_fakecuda_mark`` when the process runs on vramlab's fake CUDA
    device (``vramlab oracle``), else ``None``. Called with each event's
    index before the event, so that the fake's device-call log ties every
    cudaMalloc, cudaFree, map and unmap to the event that caused it."""
    try:
        import ctypes  # noqa: PLC0415

        f = ctypes.CDLL(None).vramlab_fakecuda_mark
    except (OSError, AttributeError):
        return None
    f.argtypes = [ctypes.c_uint64]
    f.restype = None
    return f


class PrivatePools:
    """The trace's private pools, driven through PyTorch's own pool calls.

    A graph pool is a ``torch.cuda.graph_pool_handle()``; a capture into it
    is a ``torch.cuda.CUDAGraph`` capture on the capturing stream from
    PyTorch 2.14, and ``pool_release`` the reset of the pool's oldest
    graph. Before 2.14 ``CUDAGraph.capture_begin`` makes small allocations
    of its own (the RNG seed and offset tensors, which a recording of a
    real capture already holds as allocations), so there a capture is the
    allocator's side of it alone: a stream capture
    (``cudaStreamBeginCapture``) with the stream's requests routed to the
    pool (``_cuda_beginAllocateCurrentStreamToPool``,
    ``_cuda_endAllocateToPool``), and ``pool_release`` its ``releasePool``. A
    MemPool is a ``torch.cuda.MemPool`` entered with
    ``torch.cuda.use_mem_pool``; ``pool_release`` deletes it."""

    def __init__(self, torch, dev: int, decls: list, engine):
        self.torch = torch
        self.engine = engine
        # From 2.14 CUDAGraph makes no allocations of its own: capture with
        # it. 2.13's capture_begin still allocates its RNG seed and offset
        # (4 blocks of 512 B, seen by the oracle: peak allocated +2,048 B and
        # a small-pool segment inside the capture), so up to 2.13 a capture is
        # the allocator's routing inside a stream capture.
        release = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
        self.real_graphs = release >= (2, 14)
        self.graphs: dict[int, list] = {}
        self.dev = dev
        self.decls = decls
        self.handles: dict[int, object] = {}
        self.contexts: dict[int, object] = {}
        self.captures: dict[int, object] = {}
        self._rt = None

    def _runtime(self):
        if self._rt is None:
            import ctypes  # noqa: PLC0415

            rt = ctypes.CDLL(None)
            for name in ("cudaStreamBeginCapture", "cudaStreamEndCapture"):
                if not hasattr(rt, name):
                    raise SystemExit(f"error: {name} is not loaded in this process (needed to capture)")
            self._rt = (ctypes, rt)
        return self._rt

    def _handle(self, i: int):
        if i not in self.handles:
            d = self.decls[i]
            if d["kind"] == "engine":
                self.handles[i] = self.engine.mem_pool()
            elif d["kind"] == "mempool":
                self.handles[i] = self.torch.cuda.MemPool(use_on_oom=d["use_on_oom"], no_split=d["no_split"])
            else:
                self.handles[i] = self.torch.cuda.graph_pool_handle()
        return self.handles[i]

    def _id(self, i: int):
        h = self._handle(i)
        return h.id if hasattr(h, "id") else h

    def event(self, kind: int, i: int, stream) -> None:
        torch = self.torch
        if kind == POOL_CREATE:
            self._handle(i)
        elif kind == CAPTURE_BEGIN and self.real_graphs:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.stream(stream):
                g.capture_begin(pool=self._id(i))
            self.captures[i] = (stream, g)
        elif kind == CAPTURE_END and self.real_graphs:
            stream, g = self.captures.pop(i)
            import warnings  # noqa: PLC0415

            with warnings.catch_warnings(), torch.cuda.stream(stream):
                warnings.simplefilter("ignore")  # "The CUDA Graph is empty"
                g.capture_end()
            self.graphs.setdefault(i, []).append(g)
        elif kind == CAPTURE_BEGIN:
            ctypes, rt = self._runtime()
            err = rt.cudaStreamBeginCapture(ctypes.c_void_p(stream.cuda_stream), 2)  # relaxed mode
            if err != 0:
                raise SystemExit(f"error: cudaStreamBeginCapture failed ({err})")
            with torch.cuda.stream(stream):
                torch._C._cuda_beginAllocateCurrentStreamToPool(self.dev, self._id(i))
            self.captures[i] = stream
        elif kind == CAPTURE_END:
            ctypes, rt = self._runtime()
            torch._C._cuda_endAllocateToPool(self.dev, self._id(i))
            stream = self.captures.pop(i)
            graph = ctypes.c_void_p()
            err = rt.cudaStreamEndCapture(ctypes.c_void_p(stream.cuda_stream), ctypes.byref(graph))
            if err != 0:
                raise SystemExit(f"error: cudaStreamEndCapture failed ({err})")
        elif kind == POOL_SLEEP:
            self.engine.sleep(i)
        elif kind == POOL_WAKE:
            self.engine.wake(i)
        elif kind == POOL_ENTER:
            if self.decls[i]["kind"] == "engine":
                self.engine.enter(i)
            ctx = torch.cuda.use_mem_pool(self._handle(i))
            ctx.__enter__()
            self.contexts[i] = ctx
        elif kind == POOL_EXIT:
            self.contexts.pop(i).__exit__(None, None, None)
            if self.decls[i]["kind"] == "engine":
                self.engine.exit(i)
        elif kind == POOL_RELEASE:
            if self.decls[i]["kind"] in ("mempool", "engine"):
                import gc  # noqa: PLC0415

                self.handles.pop(i, None)
                gc.collect()
            elif self.real_graphs and self.graphs.get(i):
                self.graphs[i].pop(0).reset()  # the oldest graph of the pool
            else:
                torch._C._cuda_releasePool(self.dev, self._id(i))


class HostReplay:
    """The trace's pinned host rows, through PyTorch's own host allocator:
    ``host_alloc`` is ``torch.empty(size, dtype=uint8, pin_memory=True)``,
    ``host_free`` drops the tensor. ``host_free_requested`` first copies
    one byte into the block with ``non_blocking=True`` on a stream of the
    block's own (from a view of device memory that allocates nothing), so
    that the free records an event there; ``host_free_completed``
    synchronizes that stream. Run on the fake device with
    ``VRAMLAB_FAKECUDA_EVENTS=sync`` an event completes only then, so the
    allocator reuses the block where the trace says, not at once."""

    def __init__(self, torch, device):
        self.torch = torch
        self.device = device
        self.tensors = {}
        self.streams = {}
        self.spare = []
        self.view = None

    def _source(self):
        if self.view is None:
            class Cai:  # one byte of device memory, named, not allocated
                __cuda_array_interface__ = {
                    "shape": (1,), "typestr": "|u1", "data": (0x10000, False), "version": 3, "strides": None,
                }
            self.view = self.torch.as_tensor(Cai(), device=self.device)
        return self.view

    def event(self, kind: int, ident: int, size: int) -> None:
        torch = self.torch
        if kind == HOST_ALLOC:
            self.tensors[ident] = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        elif kind == HOST_FREE:
            del self.tensors[ident]
        elif kind == HOST_FREE_REQUESTED:
            t = self.tensors.pop(ident)
            if t.numel():
                s = self.spare.pop() if self.spare else torch.cuda.Stream(self.device)
                with torch.cuda.stream(s):
                    t[:1].copy_(self._source(), non_blocking=True)
                self.streams[ident] = s
            del t
        elif kind == HOST_FREE_COMPLETED:
            s = self.streams.pop(ident, None)
            if s is not None:
                s.synchronize()
                self.spare.append(s)
        elif kind == HOST_EMPTY_CACHE:
            torch._C._host_emptyCache()


class Gate:
    """Several processes on one shared fake device run their traces in a
    schedule's order (``vramlab colocate --oracle``): before each phase with
    events this process writes its number to ``DIR/at`` and waits for the
    coordinator's ``DIR/go-K``; at the end it writes ``done``. Each word is
    followed by the device's used bytes at that moment (``cudaMemGetInfo``:
    what every process on it holds)."""

    def __init__(self, folder, n_events: int, starts: list, used=None):
        self.folder = folder
        self.used = used
        cuts = sorted({0, *[s for s in starts if s < n_events]})
        # The phases' first events, empty phases left out.
        self.starts = [c for i, c in enumerate(cuts) if (cuts[i + 1] if i + 1 < len(cuts) else n_events) > c]
        self.next = 0

    def _say(self, what: str) -> None:
        tmp = os.path.join(self.folder, "at.tmp")
        with open(tmp, "w") as f:
            f.write(f"{what} {self.used() if self.used else 0}")
        os.replace(tmp, os.path.join(self.folder, "at"))

    def before(self, idx: int) -> None:
        if self.folder is None or self.next >= len(self.starts) or self.starts[self.next] != idx:
            return
        k = self.next
        self.next += 1
        self._say(str(k))
        go = os.path.join(self.folder, f"go-{k}")
        while not os.path.exists(go):
            time.sleep(0.001)

    def done(self) -> None:
        if self.folder is not None:
            self._say("done")

    def wait_end(self) -> None:
        if self.folder is None:
            return
        end = os.path.join(self.folder, "go-end")
        while not os.path.exists(end):
            time.sleep(0.001)


def host_summary(torch, events: list):
    """PyTorch's pinned host figures, for a trace with host rows."""
    n = sum(1 for e in events if e[0] == HOST_ALLOC)
    if not n:
        return None
    stats = torch.cuda.host_memory_stats()
    return {
        "allocs": n,
        "num_host_alloc": stats.get("num_host_alloc", stats.get("allocations.allocated", 0)),
        "peak_bytes": stats.get("allocated_bytes.peak", 0),
        "current_bytes": stats.get("allocated_bytes.current", 0),
    }


def replay(args: argparse.Namespace) -> int:
    header, events = read_trace(args.trace, args.trace_device, args.vramlab)
    ensure_alloc_conf(args.conf)

    import torch  # noqa: PLC0415  (after the environment is set)

    if not torch.cuda.is_available():
        print("error: no CUDA driver/device found: torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    dev = args.device
    torch.cuda.set_device(dev)
    device = torch.device("cuda", dev)
    if args.fraction is not None:
        torch.cuda.set_per_process_memory_fraction(args.fraction, dev)

    stream_ids = sorted({e[3] for e in events if e[0] in (ALLOC, CAPTURE_BEGIN)})
    streams = {}
    for s in stream_ids:
        streams[s] = torch.cuda.default_stream(device) if s == 0 else torch.cuda.Stream(device)
    default = torch.cuda.default_stream(device)

    alloc = torch.cuda.caching_allocator_alloc
    delete = torch.cuda.caching_allocator_delete
    perf = time.perf_counter_ns
    oom_type = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError

    # Overhead of a Python call with the same arguments, for reference.
    def _noop(size, device, stream=None):
        return 0

    calib = []
    for _ in range(20000):
        t0 = perf()
        _noop(4096, dev, default)
        calib.append(perf() - t0)
    calib.sort()
    call_overhead_ns = calib[len(calib) // 2]

    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    history = not args.no_history
    if history:
        max_entries = args.max_entries or max(100_000, 8 * len(events))
        try:
            torch.cuda.memory._record_memory_history(
                enabled="all", context=None, stacks="python", max_entries=max_entries, device=dev
            )
        except TypeError:
            torch.cuda.memory._record_memory_history(max_entries=max_entries)

    mark = fake_device_mark()
    engine = EngineMemory(torch)
    pools = PrivatePools(torch, dev, header.get("pools", []), engine)
    host = HostReplay(torch, device)
    def device_used() -> int:
        free, total = torch.cuda.mem_get_info(dev)
        return total - free

    gate = Gate(args.gate, len(events), header.get("phase_starts", []), device_used)
    kv = KvRule(torch, dev, args.kv_util, header.get("phases", []), events, engine)
    ptrs: dict[int, int] = {}
    failed: set[int] = set()
    timing: list = []
    alloc_ns: list[int] = []
    free_ns: list[int] = []
    oom = None
    replayed = 0
    t_start = perf()
    for idx, (kind, ident, size, stream) in enumerate(events):
        gate.before(idx)
        if mark is not None:
            mark(idx)
        try:
            size = kv.size(idx, kind, size)
        except DeviceFull as e:
            # The engine cannot start, or has no room for its KV cache: the
            # process ends here.
            if oom is None:
                oom = {"event_index": idx, "requested_bytes": size, "message": str(e)}
            break
        if kind == ALLOC:
            if size == 0:
                ptrs[ident] = 0
                replayed += 1
                continue
            st = streams[stream]
            t0 = perf()
            try:
                p = alloc(size, dev, st)
            except oom_type as e:
                dt = perf() - t0
                failed.add(ident)
                if oom is None:
                    oom = {
                        "event_index": idx,
                        "requested_bytes": size,
                        "reserved_bytes": torch.cuda.memory_reserved(dev),
                        "allocated_bytes": torch.cuda.memory_allocated(dev),
                        "message": str(e).splitlines()[0] if str(e) else "out of memory",
                    }
                timing.append((idx, "alloc_oom", ident, size, stream, dt))
                if not args.continue_on_oom:
                    break
                replayed += 1
                continue
            dt = perf() - t0
            ptrs[ident] = p
            alloc_ns.append(dt)
            timing.append((idx, "alloc", ident, size, stream, dt))
        elif kind == FREE:
            if ident in failed:
                replayed += 1
                continue
            p = ptrs.pop(ident)
            if p:
                t0 = perf()
                delete(p)
                dt = perf() - t0
                free_ns.append(dt)
                timing.append((idx, "free", ident, 0, 0, dt))
        elif kind == EMPTY_CACHE:
            torch.cuda.empty_cache()
        elif kind in (POOL_SLEEP, POOL_WAKE, RAW_ALLOC, RAW_FREE):
            try:
                if kind == RAW_ALLOC:
                    engine.raw_alloc(ident, size)
                elif kind == RAW_FREE:
                    engine.raw_free(ident)
                else:
                    pools.event(kind, ident, None)
            except DeviceFull as e:
                if oom is None:
                    oom = {
                        "event_index": idx,
                        "requested_bytes": size,
                        "reserved_bytes": torch.cuda.memory_reserved(dev),
                        "allocated_bytes": torch.cuda.memory_allocated(dev),
                        "message": str(e),
                    }
                if not args.continue_on_oom:
                    break
        elif kind >= HOST_ALLOC:
            host.event(kind, ident, size)
        else:
            pools.event(kind, ident, streams.get(stream))
        replayed += 1
    torch.cuda.synchronize(dev)
    wall_ns = perf() - t_start

    os.makedirs(args.out, exist_ok=True)
    stats = torch.cuda.memory_stats(dev)
    host_figures = host_summary(torch, events)
    if history:
        torch.cuda.memory._dump_snapshot(os.path.join(args.out, "snapshot.pickle"))
        torch.cuda.memory._record_memory_history(enabled=None)
    with open(os.path.join(args.out, "memory_stats.json"), "w") as f:
        json.dump(stats, f, indent=1, sort_keys=True)

    # The others may still run: what this process holds stays until the
    # coordinator says every process is done.
    gate.done()
    gate.wait_end()
    # Give everything back and check that it all came back.
    if mark is not None:
        mark(END_MARK)
    live_at_end = sum(1 for p in ptrs.values() if p)
    for p in ptrs.values():
        if p:
            delete(p)
    engine.free_all()
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()
    reserved_after = torch.cuda.memory_reserved(dev)

    with open(os.path.join(args.out, "timing.csv"), "w") as f:
        f.write("index,action,id,size,stream,ns\n")
        for row in timing:
            f.write(",".join(str(x) for x in row) + "\n")

    props = torch.cuda.get_device_properties(dev)
    mem_total = torch.cuda.mem_get_info(dev)[1]
    summary = {
        "trace": args.trace,
        "trace_header": header,
        "events": len(events),
        "events_replayed": replayed,
        "allocs": sum(1 for e in events if e[0] == ALLOC),
        "streams": len(stream_ids),
        "alloc_conf": args.conf,
        "env": {k: os.environ.get(k) for k in (ENV_KEY, OTHER_ENV_KEY)},
        "memory_fraction": args.fraction,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "python": platform.python_version(),
        "gpu": {
            "index": dev,
            "name": props.name,
            # cudaMemGetInfo's total: what set_per_process_memory_fraction
            # multiplies (the device's total memory as the allocator sees it).
            "total_bytes": mem_total,
            "total_global_mem": props.total_memory,
        },
        "history": history,
        "peak_reserved_bytes": stats.get("reserved_bytes.all.peak", 0),
        "peak_allocated_bytes": stats.get("allocated_bytes.all.peak", 0),
        "num_alloc_retries": stats.get("num_alloc_retries", 0),
        "num_ooms": stats.get("num_ooms", 0),
        # None where the release does not count them (added in PyTorch 2.3).
        "num_device_alloc": stats.get("num_device_alloc"),
        "num_device_free": stats.get("num_device_free"),
        "oom": oom,
        "host": host_figures,
        "wall_ms": wall_ns / 1e6,
        "python_call_overhead_ns": call_overhead_ns,
        "latency": {
            "unit": "microseconds",
            "note": "caller-level caching_allocator_alloc / caching_allocator_delete, Python call overhead included",
            "malloc": percentiles(alloc_ns),
            "free": percentiles(free_ns),
        },
        "leak_check": {
            "live_at_end": live_at_end,
            "reserved_after_free_and_empty_cache": reserved_after,
            "ok": reserved_after == 0,
        },
    }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    if not args.quiet:
        lat = summary["latency"]
        print(
            f"{args.trace} [{args.conf or 'default'}"
            + (f", fraction {args.fraction}" if args.fraction is not None else "")
            + f"]: {replayed}/{len(events)} events, peak reserved {summary['peak_reserved_bytes']} B, "
            f"malloc p50/p99 {lat['malloc']['p50_us']:.2f}/{lat['malloc']['p99_us']:.2f} us, "
            f"free p50/p99 {lat['free']['p50_us']:.2f}/{lat['free']['p99_us']:.2f} us, "
            f"OOM {'at event ' + str(oom['event_index']) if oom else 'none'}, "
            f"leak check {'ok' if reserved_after == 0 else 'FAILED'} -> {args.out}"
        )
    return 0 if reserved_after == 0 else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="vramlab CSV trace or PyTorch snapshot pickle")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--conf", default="", help="PYTORCH_CUDA_ALLOC_CONF value ('' or 'default': none)")
    ap.add_argument("--fraction", type=float, help="torch.cuda.set_per_process_memory_fraction")
    ap.add_argument("--device", type=int, default=0, help="CUDA device index")
    ap.add_argument("--trace-device", type=int, help="for snapshots: which device's trace")
    ap.add_argument(
        "--vramlab",
        help="for snapshots: the vramlab command that converts them (default: next to this Python, else on PATH)",
    )
    ap.add_argument("--no-history", action="store_true", help="no memory history (clean latencies)")
    ap.add_argument("--max-entries", type=int, help="memory history ring size (default: 8 x events)")
    ap.add_argument("--continue-on-oom", action="store_true", help="skip failed allocations instead of stopping")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument(
        "--kv-util",
        type=float,
        help="an inference engine sized by vLLM's rule: its share of the device (gpu_memory_utilization); "
        "the allocations of its '# phase: kv_cache' phases get what is left of it",
    )
    ap.add_argument("--gate", help="a folder: wait for a coordinator's go before each phase (colocated replays)")
    args = ap.parse_args(argv)
    if args.conf == "default":
        args.conf = ""
    if args.fraction is not None and not 0.0 <= args.fraction <= 1.0:
        ap.error("--fraction must be between 0 and 1")
    try:
        return replay(args)
    except TraceFormatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
