"""Record the allocation stream of a PyTorch workload without a GPU.

A ``TorchDispatchMode`` sees every op; each output whose storage was not seen
before is an allocation of ``storage.nbytes()`` bytes. A weak reference on
the storage object fires exactly when the C++ storage is released (PyTorch
keeps the Python storage object alive exactly as long as the storage), which
is the free. Views and in-place ops reuse storages and record nothing, as
the CUDA caching allocator would see nothing. A storage whose size changes
(``resize_``, ``out=`` ops) is recorded as a new allocation followed by the
free of the old one, as the CUDA allocator does it.

Used together with ``FakeTensorMode`` (see :mod:`vramlab_record.fake`), the
model takes no memory at all, so full-size models record in seconds.

What this cannot see (see README.md): allocations made inside kernels
through the caching allocator (cuBLAS/cuBLASLt workspaces, cuDNN workspaces,
flash-attention backward accumulators, reduction scratch), NCCL buffers,
streams (everything is stream 0 but a capture's allocations) and deferred
frees. CUDA graph captures and MemPools are recorded as pool events
(:mod:`vramlab_record.graphs`).

Outputs: the vramlab native CSV trace, and a PyTorch-snapshot-shaped pickle
(``device_traces`` with alloc/free_requested/free_completed entries and
synthetic addresses) that ``vramlab`` reads like a real snapshot.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import pickle
import time
import weakref
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


@dataclass
class Recording:
    """The events of one recording, in order.

    ``events`` holds ``("alloc", id, size)``, ``("free", id, size)`` and
    ``("mark", label, 0)`` tuples. ``header`` becomes ``# key: value`` lines
    of the CSV (and ``vramlab_recording`` in the pickle); ``params`` become
    ``# param.NAME: value`` lines, which ``vramlab gen --learn`` reads.
    """

    events: list = field(default_factory=list)
    header: dict = field(default_factory=dict)
    #: Private pools: (name, kind, (a, b) id, use_on_oom, no_split).
    pools: list = field(default_factory=list)
    #: The raw stream new allocations are made on (a capture's stream while
    #: one runs, else 0).
    stream: int = 0
    #: The stream of each allocation not made on stream 0.
    alloc_streams: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    next_id: int = 0
    live_bytes: int = 0
    peak_live_bytes: int = 0
    allocs: int = 0

    def alloc(self, size: int) -> int:
        i = self.next_id
        self.next_id += 1
        self.allocs += 1
        self.events.append(("alloc", i, size))
        if self.stream:
            self.alloc_streams[i] = self.stream
        self.live_bytes += size
        if self.live_bytes > self.peak_live_bytes:
            self.peak_live_bytes = self.live_bytes
        return i

    def free(self, i: int, size: int) -> None:
        self.events.append(("free", i, size))
        self.live_bytes -= size

    def free_requested(self, i: int, size: int) -> None:
        """A free whose block another stream still uses (``record_stream``):
        the allocator counts the bytes freed now and reuses the block only
        after :meth:`free_completed`."""
        self.events.append(("free_requested", i, size))
        self.live_bytes -= size

    def free_completed(self, i: int, size: int) -> None:
        """The deferred free of :meth:`free_requested` completes."""
        self.events.append(("free_completed", i, size))

    def mark(self, label: str) -> None:
        """A phase mark (``# phase: label`` in the CSV)."""
        self.events.append(("mark", label, 0))

    def empty_cache(self) -> None:
        """A ``torch.cuda.empty_cache()`` call (``empty_cache`` in the CSV)."""
        self.events.append(("empty_cache", 0, 0))

    def pool(self, kind: str, pool_id: tuple, use_on_oom: bool = False, no_split: bool = False) -> str:
        """Declares a private pool (``graph`` or ``mempool``); returns its name."""
        name = f"p{len(self.pools)}"
        self.pools.append((name, kind, tuple(pool_id), use_on_oom, no_split))
        return name

    def pool_event(self, action: str, name: str, stream: int = 0) -> None:
        """A pool event: capture_begin (with its stream), capture_end,
        pool_create, pool_enter, pool_exit or pool_release."""
        self.events.append((action, name, stream))

    @property
    def num_events(self) -> int:
        """Allocator events (allocs, frees and empty_cache calls; marks do
        not count)."""
        return sum(1 for e in self.events if e[0] != "mark")

    def summary(self) -> dict:
        return {
            "events": self.num_events,
            "allocs": self.allocs,
            "peak_live_bytes": self.peak_live_bytes,
        }

    # ---- writers -------------------------------------------------------
    def write(self, path: str) -> None:
        """Writes by extension: ``.csv``, ``.csv.gz``, ``.pickle``/``.pkl``."""
        if path.endswith((".pickle", ".pkl")):
            self.write_snapshot(path)
        else:
            self.write_csv(path)

    def write_csv(self, path: str) -> None:
        """The vramlab native CSV trace v1 (gzip-compressed for ``.gz``)."""
        opener = gzip.open if path.endswith(".gz") else open
        one = lambda v: str(v).replace("\n", " ").replace("\r", " ")  # noqa: E731
        with opener(path, "wt", newline="\n") as f:
            # Version 2 only where there are private pools (v1 readers stay served).
            f.write(f"# vramlab trace v{2 if self.pools else 1}\n")
            for k, v in self.header.items():
                f.write(f"# {k}: {one(v)}\n")
            for k, v in self.params.items():
                f.write(f"# param.{k}: {one(v)}\n")
            for name, kind, (a, b), use_on_oom, no_split in self.pools:
                opts = (" use_on_oom" if use_on_oom else "") + (" no_split" if no_split else "")
                f.write(f"# pool.{name}: {kind} {a},{b}{opts}\n")
            f.write("action,id,size,stream\n")
            w = f.write
            streams = self.alloc_streams
            for action, i, size in self.events:
                if action == "alloc":
                    w(f"alloc,{i},{size},{streams.get(i, 0)}\n")
                elif action in ("free", "free_requested", "free_completed"):
                    w(f"{action},{i},,\n")
                elif action == "empty_cache":
                    w("empty_cache,,,\n")
                elif action == "capture_begin":
                    w(f"capture_begin,{i},,{size}\n")
                elif action in ("capture_end", "pool_create", "pool_enter", "pool_exit", "pool_release"):
                    w(f"{action},{i},,\n")
                else:
                    w(f"# phase: {one(i)}\n")

    def write_snapshot(self, path: str) -> None:
        """A PyTorch-snapshot-shaped pickle (protocol 4, like ``_dump_snapshot``).

        Addresses are synthetic (one 512-byte slot per id), there are no
        segments (the recording starts from an empty allocator), every free
        is a ``free_requested`` directly followed by ``free_completed`` (unless a
        recorded ``record_stream`` deferred it), and
        phase marks are ``external_annotations``.
        """
        base = 0x7F0000000000
        trace = []
        notes = []
        addr_of = {}
        t0 = int(time.time() * 1e6)
        # With private pools every entry names its pool (as PyTorch 2.12+
        # writes them), routed as the allocator routes: a capture takes its
        # stream's requests, a use_mem_pool context every request.
        ids = {name: pid for name, _, pid, _, _ in self.pools}
        routes: list = []  # (pool id, stream or None)
        pool_of: dict = {}

        def entry(action, i, size, n):
            e = {"action": action, "addr": addr_of[i], "size": size,
                 "stream": self.alloc_streams.get(i, 0), "time_us": t0 + n, "frames": []}
            if self.pools:
                e["pool_id"] = pool_of.get(i, (0, 0))
            return e

        for n, (action, i, size) in enumerate(self.events):
            if action == "alloc":
                addr_of[i] = base + i * 512
                stream = self.alloc_streams.get(i, 0)
                to = next((p for p, s in routes if s is None or s == stream), None)
                if to is not None:
                    pool_of[i] = to
                trace.append(entry("alloc", i, size, n))
            elif action == "free":
                for a in ("free_requested", "free_completed"):
                    trace.append(entry(a, i, size, n))
            elif action in ("free_requested", "free_completed"):
                trace.append(entry(action, i, size, n))
            elif action == "empty_cache":
                # A snapshot shows empty_cache() only as the segment_free
                # entries of what it released, which depend on the
                # allocator: the call is kept as an annotation.
                notes.append({"device": 0, "stage": "START", "name": "empty_cache", "time_us": t0 + n})
            elif action in ("capture_begin", "pool_enter"):
                routes.append((ids[i], size if action == "capture_begin" else None))
            elif action in ("capture_end", "pool_exit"):
                k = next((k for k, (p, _) in enumerate(routes) if p == ids[i]), None)
                if k is not None:
                    routes.pop(k)
            elif action in ("pool_create", "pool_release"):
                pass  # not an entry of a snapshot
            else:
                notes.append({"device": 0, "stage": "START", "name": str(i), "time_us": t0 + n})
        snap = {
            "segments": [],
            "device_traces": [trace],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""},
            "external_annotations": notes,
            "vramlab_recording": {**self.header, **{f"param.{k}": v for k, v in self.params.items()}},
        }
        with open(path, "wb") as f:
            pickle.dump(snap, f, protocol=4)


#: Ops that turn Python data into a tensor (``torch.tensor``, ``as_tensor``).
_HOST_OPS = (torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default)


class AllocationRecorder(TorchDispatchMode):
    """Records storage allocations and releases while active.

    ``device_type`` restricts recording to storages on that device type
    (``"cpu"`` for a fake CPU device that stands for the GPU); ``None``
    records every device except ``meta``.
    """

    def __init__(self, recording: Recording | None = None, device_type: str | None = None):
        super().__init__()
        self.rec = recording or Recording()
        self.device_type = device_type
        self._live: dict[int, tuple[int, int, int]] = {}  # storage -> (id, recorded bytes, bytes)
        self._host: set[int] = set()
        self._host_mode = 0
        self._orig_resize = None
        #: storage -> streams other than its own that used it (record_stream)
        self._stream_uses: dict[int, set] = {}
        #: deferred frees not completed yet: (id, recorded bytes)
        self._pending: list[tuple[int, int]] = []

    # ---- mode entry/exit: wrap UntypedStorage.resize_ (not dispatched) --
    def __enter__(self):
        if self._orig_resize is None:
            orig = torch.UntypedStorage.resize_
            recorder = self

            def resize_(storage, size):
                out = orig(storage, size)
                recorder._resized(storage)
                return out

            self._orig_resize = orig
            torch.UntypedStorage.resize_ = resize_
        return super().__enter__()

    def __exit__(self, *exc):
        if self._orig_resize is not None:
            torch.UntypedStorage.resize_ = self._orig_resize
            self._orig_resize = None
        return super().__exit__(*exc)

    # ---- registration of tensors made outside the mode ------------------
    def register(self, *tensors) -> None:
        """Records tensors that exist before recording starts (weights, inputs)."""
        flat, _ = tree_flatten(tensors)
        for t in flat:
            if isinstance(t, torch.Tensor):
                self._see(t)

    def register_module(self, module: torch.nn.Module) -> None:
        """Records every parameter and buffer of a module (in module order)."""
        for t in list(module.parameters()) + list(module.buffers()):
            self._see(t)

    def mark(self, label: str) -> None:
        """A phase mark in the recording."""
        self.rec.mark(label)

    def empty_cache(self) -> None:
        """Records a ``torch.cuda.empty_cache()`` call."""
        self.rec.empty_cache()

    @contextlib.contextmanager
    def host(self):
        """Inside, new storages are host memory (not recorded, nor their
        frees): the CPU side of offloading, whose copies to the device are
        then made outside (``t.clone()``) and recorded."""
        self._host_mode += 1
        try:
            yield
        finally:
            self._host_mode -= 1

    # ---- internals -------------------------------------------------------
    def _wanted(self, dev: str) -> bool:
        if dev == "meta":
            return False
        return self.device_type is None or dev == self.device_type

    def _see(self, t: torch.Tensor, scale: int = 1) -> None:
        # A DTensor (FSDP2's sharded parameters, tensor parallel) holds its
        # rank's shard in a local tensor: that is the memory.
        local = getattr(t, "_local_tensor", None)
        if isinstance(local, torch.Tensor):
            t = local
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        # A fake tensor's storage is a meta storage; its device is the tensor's.
        if not self._wanted(t.device.type):
            return
        key = id(st)
        if key in self._host:
            return
        nbytes = st.nbytes()
        entry = self._live.get(key)
        if entry is not None:
            if entry[2] != nbytes:
                self._realloc(key, nbytes)
            return
        if nbytes == 0:
            return
        i = self.rec.alloc(nbytes * scale)
        self._live[key] = (i, nbytes * scale, nbytes)
        weakref.finalize(st, self._released, key)

    def _realloc(self, key: int, nbytes: int) -> None:
        """The storage now has ``nbytes`` (scaled like its first size)."""
        old = self._live.pop(key)
        if nbytes > 0:
            scaled = nbytes * old[1] // old[2] if old[2] else nbytes
            i = self.rec.alloc(scaled)
            self._live[key] = (i, scaled, nbytes)
        self._free(key, old)

    def _resized(self, st) -> None:
        # Only storages already seen through a tensor can be told apart from
        # meta scratch; an unseen storage resized from Python is recorded
        # when its device is wanted (fake storages report "meta").
        if id(st) not in self._live and not self._wanted(st.device.type):
            return
        key = id(st)
        nbytes = st.nbytes()
        entry = self._live.get(key)
        if entry is None:
            if nbytes > 0:
                i = self.rec.alloc(nbytes)
                self._live[key] = (i, nbytes, nbytes)
                weakref.finalize(st, self._released, key)
        elif entry[2] != nbytes:
            self._realloc(key, nbytes)

    def _released(self, key: int) -> None:
        entry = self._live.pop(key, None)
        if entry is None:
            self._stream_uses.pop(key, None)
            return
        self._free(key, entry)

    def _free(self, key: int, entry: tuple) -> None:
        """The free of a recorded block: deferred when other streams used it
        (``record_stream``), as the caching allocator defers it. A storage
        freed by ``resize_(0)`` (FSDP1's unsharded parameters) and one
        released are alike."""
        if self._stream_uses.pop(key, None):
            self.rec.free_requested(entry[0], entry[1])
            self._pending.append((entry[0], entry[1]))
        else:
            self.rec.free(entry[0], entry[1])

    # ---- streams (vramlab_record.distributed) ---------------------------
    def record_stream(self, t: torch.Tensor, stream: int) -> None:
        """``t.record_stream(stream)``: when ``t``'s storage is freed, the
        allocator waits for ``stream`` before reusing it (a deferred free)."""
        try:
            key = id(t.untyped_storage())
        except (RuntimeError, NotImplementedError):
            return
        i = self._live.get(key)
        if i is not None and self.rec.alloc_streams.get(i[0], 0) != stream:
            self._stream_uses.setdefault(key, set()).add(stream)

    def complete_deferred(self) -> None:
        """The streams synchronised: every deferred free completes."""
        pending, self._pending = self._pending, []
        for i, size in pending:
            self.rec.free_completed(i, size)

    def _host_tensor(self, t: torch.Tensor) -> None:
        """Remembers a tensor made from Python data as host-side (not recorded)."""
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        key = id(st)
        if key not in self._live and key not in self._host:
            self._host.add(key)
            weakref.finalize(st, self._host.discard, key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self._host_mode:
            flat, _ = tree_flatten(out)
            for t in flat:
                if isinstance(t, torch.Tensor):
                    self._host_tensor(t)
            return out
        if func in _HOST_OPS and isinstance(out, torch.Tensor):
            # torch.tensor(data) without a device makes a CPU tensor in a GPU
            # script too (optimizer step counters, Python constants).
            self._host_tensor(out)
            return out
        flat, _ = tree_flatten(out)
        for t in flat:
            if isinstance(t, torch.Tensor):
                self._see(t)
        return out


def finish(recorder: AllocationRecorder) -> None:
    """Collects garbage so that frees of unreachable tensors are recorded."""
    del recorder
    gc.collect()
