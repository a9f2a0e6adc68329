"""Recording a block of PyTorch code's memory history as a snapshot that
vramlab reads. torch is the user's own, imported only when recording
starts: the package does not depend on it."""

from __future__ import annotations

import os
from typing import Any, Optional, Union

__all__ = ["record", "record_script"]


class record:
    """Records the CUDA memory history of the code in a ``with`` block and
    writes it to ``path`` (a snapshot ``.pickle``) when the block ends::

        with vramlab.record("step.pickle"):
            loss = model(batch).loss
            loss.backward()
            optimizer.step()
        vramlab.replay("step.pickle", conf=["default", "expandable_segments:True"])

    It calls ``torch.cuda.memory._record_memory_history(enabled="all",
    context=context, stacks=stacks, max_entries=max_entries)`` on entry,
    ``torch.cuda.memory._dump_snapshot(path)`` and
    ``_record_memory_history(enabled=None)`` on exit — also when the block
    raises (an out-of-memory error included: the snapshot then holds the
    ``oom`` entry), and the exception goes on.

    What is missed: the history starts at the ``with``. Memory allocated
    before it (a model loaded earlier) is in the snapshot as the allocator's
    state — its segments and the blocks in use — but not as events, so
    vramlab starts its replays from that recorded state (``start=
    "recorded"``, the default) and cannot say how the earlier allocations
    were made. To measure loading too, enter the block before the model is
    built. ``max_entries`` bounds the history: a longer block keeps only its
    last ``max_entries`` events, and vramlab says so.
    """

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        *,
        max_entries: int = 1_000_000,
        context: Optional[str] = "all",
        stacks: str = "python",
        device: Any = None,
    ):
        self.path = os.fspath(path)
        self.max_entries = max_entries
        self.context = context
        self.stacks = stacks
        self.device = device
        self._torch: Any = None

    def __enter__(self) -> "record":
        try:
            import torch
        except ImportError as e:
            raise ImportError(
                "vramlab.record needs PyTorch (your own install; vramlab does not pin it)"
            ) from e
        if not torch.cuda.is_available():
            raise RuntimeError(
                "vramlab.record records the CUDA caching allocator, but torch.cuda.is_available() is False"
            )
        self._torch = torch
        torch.cuda.memory._record_memory_history(
            enabled="all",
            context=self.context,
            stacks=self.stacks,
            max_entries=self.max_entries,
            device=self.device,
        )
        return self

    def __exit__(self, *exc: Any) -> None:
        torch = self._torch
        try:
            torch.cuda.memory._dump_snapshot(self.path)
        finally:
            torch.cuda.memory._record_memory_history(enabled=None, device=self.device)
        # An exception in the block goes on (returning None).


def record_script(
    script: Union[str, "os.PathLike[str]"],
    *args: str,
    out: Union[str, "os.PathLike[str]"],
    gpu: str = "h200",
    torch: str = "2.11",
    python: Optional[Union[str, "os.PathLike[str]"]] = None,
    values: str = "track",
    max_entries: Optional[int] = None,
    stacks: Optional[str] = None,
    work: Optional[Union[str, "os.PathLike[str]"]] = None,
    world_size: Optional[int] = None,
    ranks: Optional[str] = None,
    gpus_per_node: Optional[int] = None,
) -> "os.PathLike[str]":
    """``vramlab record``: runs ``script`` (with ``args``) unchanged on
    vramlab's fake GPU — PyTorch's allocator and NVIDIA's own libraries
    (cuBLAS, cuDNN, Triton) deciding every allocation, no GPU needed — and
    writes PyTorch's memory snapshot of it to ``out``, which it returns::

        snap = vramlab.record_script("train.py", "--steps", "2", out="train.pickle", gpu="h100-80gb")
        vramlab.recommend(snap, gpu="h100-80gb")

    The script runs in another process: the cached environment of torch
    ``torch`` (installed from PyPI on first use, as for
    :func:`vramlab.oracle`), or ``python``. Its output is this process's.
    ``values``: how reads of device values are answered (``"track"``:
    known values and typical data, so that ``generate`` runs to
    ``max_new_tokens``; ``"device"``: what was copied there, else zero).
    ``world_size`` (with ``ranks``, e.g. ``"0,7"`` or ``"all"``, and
    ``gpus_per_node``) records a script written for ``torchrun`` as ranks of
    that world; ``out`` is then a job folder (``job.json``, one snapshot per
    recorded rank) that every function reads.
    A script that fails raises :class:`vramlab.VramlabError` (the snapshot
    up to the failure is still written when there is one).
    """
    from pathlib import Path

    from . import _api

    argv = ["record", "-o", os.fspath(out), "--gpu", gpu, "--torch", torch, "--values", values]
    if python is not None:
        argv += ["--python", os.fspath(python)]
    if max_entries is not None:
        argv += ["--max-entries", str(max_entries)]
    if stacks is not None:
        argv += ["--stacks", stacks]
    if work is not None:
        argv += ["--work", os.fspath(work)]
    if world_size is not None:
        argv += ["--world-size", str(world_size)]
    if ranks is not None:
        argv += ["--ranks", ranks]
    if gpus_per_node is not None:
        argv += ["--gpus-per-node", str(gpus_per_node)]
    argv += ["--", os.fspath(script), *[os.fspath(a) for a in args]]
    _api.run(argv)
    return Path(out)
