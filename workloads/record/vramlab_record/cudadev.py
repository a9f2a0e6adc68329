"""Scripts written for a GPU (``.cuda()``, ``device="cuda"``) on the fake CPU device.

Without a GPU the recorder's fake device is a CPU (backward on fake CUDA
tensors needs a GPU). A script that says ``cuda`` runs unchanged because a
``TorchFunctionMode`` maps every CUDA device argument (``device="cuda"``,
``torch.device("cuda:0")``, ``.to("cuda")``, ``.to(0)``, ``.cuda()``) to
the fake CPU device, and keeps apart what the script keeps on the host:

* the **side** of each top-level torch call: *device* when it names a
  device (``cuda``, or ``cpu``, which stands for the GPU: ``device=x.device``
  of a device tensor, and the ``"cuda" if torch.cuda.is_available() else
  "cpu"`` idiom) or any of its tensors is on the device; *host* when it
  names no device and its tensors (if any) are all host tensors. What a
  host call allocates is not recorded (a model built on the CPU before
  ``.to("cuda")`` costs no GPU memory; tensors made from Python data).
* ``.to(DEVICE)`` / ``.cuda()`` of a host tensor copies it to the device
  (recorded); ``.cpu()`` of a device tensor copies it to the host (not
  recorded). A GPU script's ``.to("cpu")`` is therefore taken as a move to
  the device (rare in GPU scripts; use ``.cpu()``).
* ``torch.cuda``'s bookkeeping calls that need a driver
  (``synchronize``, ``set_device``, ``get_device_name``,
  ``is_bf16_supported``, ...) are answered without one;
  ``memory_allocated`` / ``max_memory_allocated`` (and ``*_reserved``) give
  the recording's live / peak requested bytes; ``empty_cache()`` is an
  ``empty_cache`` event where the recorder has them;
  ``torch.cuda.is_available()`` still says False.

Limits: a tensor on the device reports ``device == cpu`` (code that checks
``x.is_cuda`` takes its CPU branch); ``torch.set_default_device("cuda")``
and ``with torch.device("cuda")`` are not mapped.
"""

from __future__ import annotations

import contextlib

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

_CPU = torch.device("cpu")


def _is_cuda_device(d) -> bool:
    if isinstance(d, torch.device):
        return d.type == "cuda"
    if isinstance(d, str):
        return d.startswith("cuda")
    return False


def _map_device(d):
    return _CPU if _is_cuda_device(d) or (isinstance(d, int) and not isinstance(d, bool)) else d


class CudaOnFakeCpu(TorchFunctionMode):
    """See the module docstring. ``recorder`` is the FakeCudaRecorder."""

    def __init__(self, recorder):
        super().__init__()
        self.rec = recorder

    def _host(self, t) -> bool:
        return self.rec.is_host(t)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        is_method = getattr(func, "__objclass__", None) is torch._C.TensorBase or getattr(
            func, "__qualname__", "").startswith("Tensor.")
        if is_method and name == "cuda":
            t = args[0]
            return self._move(t, to_device=True, dtype=None, non_blocking=kwargs.get("non_blocking", False))
        if is_method and name == "cpu":
            t = args[0]
            return self._move(t, to_device=False, dtype=None)
        if is_method and name == "to":
            return self._to(func, args, kwargs)
        explicit = None  # "device" / "host" from a device argument
        if "device" in kwargs:
            d = kwargs["device"]
            if _is_cuda_device(d) or (isinstance(d, int) and not isinstance(d, bool)):
                kwargs["device"] = _CPU
                explicit = "device"
            elif (isinstance(d, str) and d.startswith("cpu")) or (isinstance(d, torch.device) and d.type == "cpu"):
                # The fake CPU stands for the GPU: device=x.device of a device
                # tensor, and the "cuda if available else cpu" idiom.
                explicit = "device"
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if explicit is not None:
            side = explicit if not tensors else ("device" if explicit == "device" or
                                                 any(not self._host(t) for t in tensors) else "host")
        elif tensors:
            side = "host" if all(self._host(t) for t in tensors) else "device"
        else:
            side = "host"
        with self.rec.side(side):
            return func(*args, **kwargs)

    def _move(self, t, to_device: bool, dtype, non_blocking=False, copy=False):
        host = self._host(t)
        if to_device and host or (not to_device and not host):
            with self.rec.side("device" if to_device else "host"):
                return t.to(_CPU, dtype=dtype, non_blocking=non_blocking, copy=True)
        with self.rec.side("host" if host else "device"):
            if dtype is None and not copy:
                return t
            return t.to(_CPU, dtype=dtype, non_blocking=non_blocking, copy=copy)

    def _to(self, func, args, kwargs):
        t = args[0]
        rest = list(args[1:])
        target = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        for a in list(rest):
            if isinstance(a, torch.dtype):
                dtype = a
                rest.remove(a)
            elif isinstance(a, (str, torch.device)) or (isinstance(a, int) and not isinstance(a, bool)):
                target = a
                rest.remove(a)
        if rest and isinstance(rest[0], torch.Tensor):  # .to(other)
            other = rest.pop(0)
            dtype = other.dtype if dtype is None else dtype
            target = "cuda" if not self._host(other) else "cpu"
        non_blocking = kwargs.pop("non_blocking", rest.pop(0) if rest and isinstance(rest[0], bool) else False)
        copy = kwargs.pop("copy", rest.pop(0) if rest and isinstance(rest[0], bool) else False)
        if target is None:
            with self.rec.side("host" if self._host(t) else "device"):
                return func(t, dtype=dtype, non_blocking=non_blocking, copy=copy, **kwargs) if dtype is not None \
                    else func(t, non_blocking=non_blocking, copy=copy, **kwargs)
        if getattr(self.rec, "cpu_means_host", 0) and not _is_cuda_device(target) and not self._host(t):
            # Library code that names the host as "cpu" (FSDP2's gradient
            # offload, vramlab_record.distributed): a copy to the host.
            return self._move(t, False, dtype, non_blocking=non_blocking)
        # Any device named (cuda, or the fake cpu that stands for it) is the
        # device side; only .cpu() goes back to the host.
        return self._move(t, True, dtype, non_blocking=non_blocking, copy=copy)


_CUDA_STUBS = {
    "synchronize": lambda *a, **k: None,
    "empty_cache": lambda *a, **k: None,
    "set_device": lambda *a, **k: None,
    "current_device": lambda: 0,
    "device_count": lambda: 1,
    "get_device_name": lambda *a, **k: "vramlab fake device",
    "get_device_capability": lambda *a, **k: (9, 0),
    "is_bf16_supported": lambda *a, **k: True,
    "reset_peak_memory_stats": lambda *a, **k: None,
    "reset_max_memory_allocated": lambda *a, **k: None,
    "memory_allocated": lambda *a, **k: 0,
    "max_memory_allocated": lambda *a, **k: 0,
    "memory_reserved": lambda *a, **k: 0,
    "max_memory_reserved": lambda *a, **k: 0,
    "manual_seed": lambda *a, **k: None,
    "manual_seed_all": lambda *a, **k: None,
}


@contextlib.contextmanager
def cuda_on_fake_cpu(recorder):
    """The mode and the ``torch.cuda`` stubs (see the module docstring)."""
    stubs = dict(_CUDA_STUBS)
    rec = recorder.rec
    # Memory statistics from the recording (requested bytes: the caching
    # allocator's rounding and reserve are what `vramlab replay` computes).
    stubs["memory_allocated"] = stubs["memory_reserved"] = lambda *a, **k: rec.live_bytes
    stubs["max_memory_allocated"] = stubs["max_memory_reserved"] = lambda *a, **k: rec.peak_live_bytes
    if hasattr(recorder, "empty_cache"):
        # An empty_cache event in the trace, where the recorder supports it.
        stubs["empty_cache"] = lambda *a, **k: recorder.empty_cache()
    saved = {k: getattr(torch.cuda, k, None) for k in stubs}
    for k, f in stubs.items():
        setattr(torch.cuda, k, f)
    try:
        with CudaOnFakeCpu(recorder):
            yield
    finally:
        for k, f in saved.items():
            if f is not None:
                setattr(torch.cuda, k, f)


@contextlib.contextmanager
def gpu_optimizer_defaults():
    """``torch.optim`` and ``clip_grad_norm_`` choose their implementation by
    the parameters' type and device: the multi-tensor (``foreach``) kernels
    for plain tensors on CUDA, the per-parameter loop otherwise. Fake tensors
    are neither plain tensors nor (here) on CUDA, which would record the loop
    (other temporaries, a lower peak during ``step()``): this makes them
    count as CUDA tensors, so a script's ``AdamW(params, lr=...)`` records
    what it runs on a GPU (foreach; ``fused=True`` stays an explicit choice).
    """
    from torch._subclasses.fake_tensor import FakeTensor
    import torch.optim.optimizer as optimizer
    import torch.utils._foreach_utils as fu

    lists = [optimizer._foreach_supported_types, fu._foreach_supported_types]
    added = [lst for lst in lists if FakeTensor not in lst]
    for lst in added:
        lst.append(FakeTensor)
    orig = optimizer._get_foreach_kernels_supported_devices
    optimizer._get_foreach_kernels_supported_devices = lambda: list(orig()) + ["cpu"]
    try:
        yield
    finally:
        optimizer._get_foreach_kernels_supported_devices = orig
        for lst in added:
            lst.remove(FakeTensor)


@contextlib.contextmanager
def cuda_grad_scaler():
    """``torch.amp.GradScaler("cuda")`` / ``torch.cuda.amp.GradScaler()``
    disable themselves when CUDA is not available; here they run on the fake
    device instead (its scale, growth tracker and found-inf tensors, the
    unscale and update kernels are recorded as on a GPU; the found-inf read in
    ``step()`` follows :mod:`vramlab_record.datadep`: nothing found)."""
    from torch.amp import grad_scaler

    cls = grad_scaler.GradScaler
    orig = cls.__init__

    def __init__(self, device="cuda", *args, **kwargs):
        orig(self, "cpu" if device == "cuda" else device, *args, **kwargs)

    cls.__init__ = __init__
    try:
        yield
    finally:
        cls.__init__ = orig


@contextlib.contextmanager
def host_samplers():
    """Data samplers (``RandomSampler``, ``DistributedSampler``, ...) shuffle
    with ``torch.randperm(...).tolist()`` on the host, and a DataLoader's
    iterator draws a seed with ``.item()``: values a GPU run has and fake
    tensors lack. They run outside the fake and recording modes (real host
    tensors, never recorded) and give plain indices."""
    from torch.utils._python_dispatch import _disable_current_modes
    import torch.utils.data as data

    classes = [getattr(data, n) for n in ("RandomSampler", "DistributedSampler", "SubsetRandomSampler",
                                           "WeightedRandomSampler") if hasattr(data, n)]
    saved = {cls: cls.__iter__ for cls in classes}

    def wrap(orig):
        def __iter__(self):
            with _disable_current_modes():
                indices = list(orig(self))
            return iter(indices)
        return __iter__

    for cls, orig in saved.items():
        cls.__iter__ = wrap(orig)
    # The loader's iterator draws its base seed with `.random_().item()`.
    from torch.utils.data import dataloader

    base = dataloader._BaseDataLoaderIter
    orig_init = base.__init__

    def __init__(self, loader):
        with _disable_current_modes():
            orig_init(self, loader)

    base.__init__ = __init__
    try:
        yield
    finally:
        base.__init__ = orig_init
        for cls, orig in saved.items():
            cls.__iter__ = orig
