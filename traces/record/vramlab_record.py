"""Record the allocation stream of a PyTorch workload without a GPU.

A TorchDispatchMode sees every op; each output whose storage was not seen
before is an allocation of ``storage.nbytes()`` bytes. A weak reference on
the storage object fires exactly when the C++ storage is released (PyTorch
keeps the Python storage object alive exactly as long as the storage), which
is the free. Views and in-place ops reuse storages and record nothing, as
the CUDA caching allocator would see nothing.

What this cannot see (see README.md): allocations made inside kernels
through the caching allocator (cuBLAS/cuBLASLt workspaces, cuDNN workspaces,
reduction scratch), NCCL buffers, CUDA-graph pools, streams (everything is
stream 0) and deferred frees.

Outputs: the vramlab native CSV trace, and a PyTorch-snapshot-shaped pickle
(``device_traces`` with alloc/free_requested/free_completed entries and
synthetic addresses) that ``vramlab`` reads like a real snapshot.
"""

from __future__ import annotations

import pickle
import time
import weakref
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


@dataclass
class Recording:
    """The events of one recording: (action, id, size) tuples in order."""

    events: list = field(default_factory=list)
    header: dict = field(default_factory=dict)
    next_id: int = 0
    live_bytes: int = 0
    peak_live_bytes: int = 0
    allocs: int = 0

    def alloc(self, size: int) -> int:
        i = self.next_id
        self.next_id += 1
        self.allocs += 1
        self.events.append(("alloc", i, size))
        self.live_bytes += size
        self.peak_live_bytes = max(self.peak_live_bytes, self.live_bytes)
        return i

    def free(self, i: int, size: int) -> None:
        self.events.append(("free", i, size))
        self.live_bytes -= size

    def mark(self, label: str) -> None:
        self.events.append(("mark", label, 0))

    # ---- writers -------------------------------------------------------
    def write_csv(self, path: str) -> None:
        with open(path, "w") as f:
            f.write("# vramlab trace v1\n")
            for k, v in self.header.items():
                f.write(f"# {k}: {str(v).replace(chr(10), ' ')}\n")
            f.write("action,id,size,stream\n")
            for action, i, size in self.events:
                if action == "alloc":
                    f.write(f"alloc,{i},{size},0\n")
                elif action == "free":
                    f.write(f"free,{i},,\n")
                else:
                    f.write(f"# phase: {i}\n")

    def write_snapshot(self, path: str) -> None:
        """A PyTorch-snapshot-shaped pickle (protocol 4, like _dump_snapshot)."""
        base = 0x7F0000000000
        trace = []
        addr_of = {}
        t0 = int(time.time() * 1e6)
        for n, (action, i, size) in enumerate(self.events):
            if action == "alloc":
                addr_of[i] = base + i * 512
                trace.append({"action": "alloc", "addr": addr_of[i], "size": size,
                              "stream": 0, "time_us": t0 + n})
            elif action == "free":
                for a in ("free_requested", "free_completed"):
                    trace.append({"action": a, "addr": addr_of[i], "size": size,
                                  "stream": 0, "time_us": t0 + n})
        snap = {
            "segments": [],
            "device_traces": [trace],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""},
            "external_annotations": [],
            "vramlab_recording": dict(self.header),
        }
        with open(path, "wb") as f:
            pickle.dump(snap, f, protocol=4)


class AllocationRecorder(TorchDispatchMode):
    """Records storage allocations and releases while active."""

    def __init__(self, recording: Recording | None = None):
        super().__init__()
        self.rec = recording or Recording()
        self._live: dict[int, tuple[int, int]] = {}

    def register(self, *tensors) -> None:
        """Records tensors that exist before recording starts (weights, inputs)."""
        flat, _ = tree_flatten(tensors)
        for t in flat:
            if isinstance(t, torch.Tensor):
                self._see(t)

    def register_module(self, module: torch.nn.Module) -> None:
        """Records every parameter and buffer of a module."""
        for t in list(module.parameters()) + list(module.buffers()):
            self._see(t)

    def _see(self, t: torch.Tensor) -> None:
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        key = id(st)
        if key in self._live:
            return
        nbytes = st.nbytes()
        if nbytes == 0:
            return
        i = self.rec.alloc(nbytes)
        self._live[key] = (i, nbytes)
        weakref.finalize(st, self._released, key)

    def _released(self, key: int) -> None:
        entry = self._live.pop(key, None)
        if entry is not None:
            self.rec.free(entry[0], entry[1])

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        flat, _ = tree_flatten(out)
        for t in flat:
            if isinstance(t, torch.Tensor):
                self._see(t)
        return out


def finish(recorder: AllocationRecorder) -> None:
    """Frees everything still live at the end (the process would)."""
    import gc

    gc.collect()
