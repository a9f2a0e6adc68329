"""diffusers' CPU offloading, written out as accelerate's hooks do it, for
workloads whose models are built by hand (no pipeline object).

``model``: ``pipe.enable_model_cpu_offload()``. Every model lives on the
host; accelerate's ``CpuOffload`` hook, before a model's forward, moves the
previous model of the chain (``model_cpu_offload_seq``) back to the host if
it is on the GPU and calls ``empty_cache()`` (``clear_device_cache``), then
moves this model to the GPU if it is not there (``module.to(device)``: one
copy per parameter and buffer). The pipeline's ``maybe_free_model_hooks()``
at the end moves everything back and empties the cache again; enabling the
offload empties it once too.

``sequential``: ``pipe.enable_sequential_cpu_offload()``. accelerate's
``cpu_offload`` hooks every module that holds parameters itself: before its
forward the module's parameters are copied to the GPU, after it they are
dropped (the host copy stays). Buffers stay on the GPU for good
(``offload_buffers`` is false for every diffusers model, whose top level
holds no parameters). Parameters used outside their module's forward are
not modelled (none in these models' forwards).

Under fake tensors "the host" is the recorder's host mode: tensors made in
``ctx.host()`` are not GPU allocations, and their copies to the device
(``ctx.to_device``) are. What the recording then shows is exactly what the
GPU holds: the copies, their frees, the activations and the
``empty_cache()`` calls; nothing of the host side.
"""

from __future__ import annotations

import torch

OFFLOAD = ("none", "model", "sequential")


def _tensors(module: torch.nn.Module, recurse: bool = True, buffers: bool = True):
    """(owner module, name, is_parameter) of every parameter and buffer,
    in ``module.to()``'s order (``_apply``: children first, then own)."""
    out = []
    if recurse:
        for child in module.children():
            out += _tensors(child, True, buffers)
    for name, p in module._parameters.items():
        if p is not None:
            out.append((module, name, True))
    if buffers:
        for name, b in module._buffers.items():
            if b is not None:
                out.append((module, name, False))
    return out


def _swap(owner: torch.nn.Module, name: str, is_param: bool, value: torch.Tensor) -> None:
    if is_param:
        owner._parameters[name] = torch.nn.Parameter(value, requires_grad=False)
    else:
        owner._buffers[name] = value


class _ModelHook:
    """accelerate's ``CpuOffload`` for one model of the chain."""

    def __init__(self, ctx, model, prev):
        self.ctx, self.model, self.prev = ctx, model, prev
        self.host = {}  # (id(owner), name) -> host tensor
        self.on_device = False
        self.handle = model.register_forward_pre_hook(lambda m, args: self.pre_forward())
        if hasattr(model, "decode"):
            # diffusers' @apply_forward_hook runs the hook for a VAE's
            # decode() too.
            decode = model.decode

            def hooked(*args, **kwargs):
                self.pre_forward()
                return decode(*args, **kwargs)

            model.decode = hooked

    def to_device(self):
        if self.on_device:
            return
        for owner, name, is_param in _tensors(self.model):
            t = owner._parameters[name] if is_param else owner._buffers[name]
            self.host[(id(owner), name)] = t
            _swap(owner, name, is_param, self.ctx.to_device(t))
        self.on_device = True

    def offload(self):
        if not self.on_device:
            return
        for owner, name, is_param in _tensors(self.model):
            # The device copy is dropped; the host copy comes back.
            _swap(owner, name, is_param, self.host.pop((id(owner), name)))
        self.on_device = False

    def pre_forward(self):
        if self.prev is not None and self.prev.on_device:
            self.prev.offload()
            self.ctx.empty_cache()
        self.to_device()


class _SequentialHook:
    """accelerate's ``AlignDevicesHook(offload=True)`` on a module that holds
    parameters itself."""

    def __init__(self, ctx, module):
        self.ctx, self.module = ctx, module
        self.host = {}
        self.handles = (module.register_forward_pre_hook(lambda m, args: self.load()),
                        module.register_forward_hook(lambda m, args, out: self.drop()))

    def load(self):
        for name, p in list(self.module._parameters.items()):
            if p is not None and name not in self.host:
                self.host[name] = p
                _swap(self.module, name, True, self.ctx.to_device(p))

    def drop(self):
        for name, p in list(self.host.items()):
            _swap(self.module, name, True, p)
        self.host.clear()


class Offload:
    """The offloading of a list of models (in ``model_cpu_offload_seq``
    order), built on the host (in ``ctx.host()``) unless ``mode`` is
    ``none``."""

    def __init__(self, ctx, mode: str, models):
        if mode not in OFFLOAD:
            raise ValueError(f"offload must be one of {', '.join(OFFLOAD)}, not '{mode}'")
        self.ctx, self.mode = ctx, mode
        self.hooks = []
        if mode == "model":
            ctx.empty_cache()  # enable_model_cpu_offload: pipe.to("cpu"), empty_device_cache()
            prev = None
            for m in models:
                prev = _ModelHook(ctx, m, prev)
                self.hooks.append(prev)
        elif mode == "sequential":
            for m in models:
                for owner, name, is_param in _tensors(m):
                    if not is_param:  # buffers go to the GPU for good
                        _swap(owner, name, False, ctx.to_device(owner._buffers[name]))
                for mod in m.modules():
                    if any(p is not None for p in mod._parameters.values()):
                        self.hooks.append(_SequentialHook(ctx, mod))

    @property
    def active(self) -> bool:
        return self.mode != "none"

    def host(self):
        """Where to build (and convert) the offloaded models."""
        return self.ctx.host() if self.active else _null()

    def free_all(self):
        """``maybe_free_model_hooks()`` at the end of the pipeline call."""
        if self.mode == "model":
            for h in self.hooks:
                h.offload()
            self.ctx.empty_cache()


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
