"""Recording under fake tensors: full-size models on a CPU, without the memory.

:func:`fake_recording` enters ``FakeTensorMode`` and an
:class:`~vramlab_record.recorder.AllocationRecorder` on a fake *CPU* device
that stands for the GPU (backward on a fake CUDA device needs a real GPU),
and patches what would otherwise make the recording differ from a CUDA run:

* ``F.scaled_dot_product_attention`` is routed as CUDA's SDPA dispatcher
  would route it, instead of the CPU kernels (or the math path, which
  materialises the L x L score matrix): FlashAttention-2 for fp16/bf16
  without a mask (grouped-query attention natively, no K/V repeat), the
  memory-efficient kernel with a mask or fp32, the math path for masked GQA.
  The flash kernels also make the allocations a real run makes around
  them (seed/offset, scratch, workspace; see ``_FlashAttention``), which
  the fake kernels skip.
* A cuBLAS workspace (``cublas_workspace`` bytes, 32 MiB as on Hopper
  GPUs; 8519680 elsewhere) is allocated for good at the first matrix
  product of the forward and again of the backward (autograd runs the
  backward on its own thread, with its own cuBLAS handle).
* LayerNorm keeps its mean and rstd in fp32 for fp16/bf16 inputs on CUDA
  (the CPU kernel keeps the input dtype): recorded at fp32 size. (GroupNorm
  keeps the input dtype on both.)
* transformers' ``is_tracing`` does not treat fake tensors as tracing, so
  its attention-mask code takes the branches a CUDA run takes (no causal
  mask tensor, hence flash attention).
* ``torch.nn.init.trunc_normal_`` (data-dependent) becomes ``normal_``.
* ``nn.Module._apply`` (``model.to(device)``, ``.to(dtype)``, ``.half()``)
  replaces converted parameters instead of swapping them in place, which
  fake tensors do not allow.

Recording a user script (``fake_recording(scripts=True)``, what
``python -m vramlab_record.cpu -- SCRIPT`` does) adds what an unchanged GPU
script needs (``SCRIPT_RULES``): ``cuda`` devices mapped to the fake CPU with
the host side kept apart (:mod:`vramlab_record.cudadev`), multi-tensor
optimizers as on CUDA, ``torch.autocast("cuda")`` with CUDA's op lists
(:mod:`vramlab_record.autocast`), SDPA in every mode and CUDA's fused dropout
(:mod:`vramlab_record.sdpa`), fp32 BatchNorm statistics for fp16/bf16 inputs,
and a policy for data-dependent ops (``.item()``, ``nonzero``, boolean
masks, ``generate()``'s stopping checks; :mod:`vramlab_record.datadep`).
The built-in workloads do not get these, so the corpus re-records byte for
byte.
"""

from __future__ import annotations

import contextlib
import gc
import math
import weakref

import torch
import torch.nn.functional as F

from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

from .flash import _FlashAttention
from .recorder import AllocationRecorder, Recording

aten = torch.ops.aten

_LOW_PRECISION = (torch.float16, torch.bfloat16)

#: Set while recording a user script (``fake_recording(scripts=True)``):
#: the CUDA-device mapping, CUDA autocast, data-dependent policy, fused
#: dropout and the full SDPA routing of :mod:`vramlab_record.sdpa`. Off for
#: the built-in workloads, so that the corpus re-records byte for byte.
SCRIPT_RULES = False


def cuda_like_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                   enable_gqa=False):
    """``F.scaled_dot_product_attention`` routed like CUDA's dispatcher, as the
    built-in workloads (the corpus) were recorded; scripts (and dropout) take
    :func:`vramlab_record.sdpa.cuda_like_sdpa`, which also covers dropout,
    causal with unequal lengths, unaligned masks and odd head dims."""
    if dropout_p != 0.0 or SCRIPT_RULES:
        from .sdpa import cuda_like_sdpa as full

        return full(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    hq, hk = query.shape[-3], key.shape[-3]
    d = query.shape[-1]
    gqa = hq != hk
    if gqa and not enable_gqa:
        raise RuntimeError("SDPA: query and key head counts differ and enable_gqa is False")
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    flash_ok = (
        attn_mask is None
        and query.dtype in _LOW_PRECISION
        and d <= 256
        and d % 8 == 0
        and query.dim() == 4
    )
    if flash_ok:
        # Flash takes (B, H, L, D) views and returns a (B, H, L, D)-shaped
        # view of a (B, L, H, D) buffer, as on CUDA.
        return _FlashAttention.apply(query, key, value, is_causal, scale)
    if gqa:
        # The memory-efficient kernel has no GQA: CUDA falls back to math.
        return aten._scaled_dot_product_attention_math(
            query, key, value, attn_mask, 0.0, is_causal, None, scale=scale, enable_gqa=True
        )[0]
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # SDPA converts a boolean mask to an additive one of the query dtype.
        attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill_(~attn_mask, float("-inf"))
    if attn_mask is not None:
        attn_mask = attn_mask.expand(query.shape[0], hq, query.shape[-2], key.shape[-2])
    need_lse = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    squeeze = query.dim() == 3
    if squeeze:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
    out = aten._scaled_dot_product_efficient_attention(
        query, key, value, attn_mask, need_lse, 0.0, is_causal, scale=scale
    )[0]
    return out.squeeze(0) if squeeze else out


def _fake_module_apply(self, fn, recurse=True):
    """``nn.Module._apply`` (``.to``, ``.half``, ``.cuda``, ...) for fake
    tensors, which cannot be swapped in place: a converted parameter becomes
    a new ``Parameter`` (the old storage is freed when nothing else holds
    it, as ``param.data = new`` frees it on a GPU); an unchanged one stays.
    For scripts (``SCRIPT_RULES``) a parameter shared by several modules
    (tied embeddings) is converted once and stays shared, as the in-place
    swap keeps it on a GPU (built-in workloads build tied models
    themselves)."""
    global _APPLY_MEMO
    outer = _APPLY_MEMO is None
    if outer and SCRIPT_RULES:
        _APPLY_MEMO = {}
    try:
        if recurse:
            for module in self.children():
                module._apply(fn)
        for key, param in list(self._parameters.items()):
            if param is None:
                continue
            hit = _APPLY_MEMO.get(id(param)) if _APPLY_MEMO is not None else None
            if hit is not None and hit[0]() is param:
                self._parameters[key] = hit[1]
                continue
            with torch.no_grad():
                new = fn(param)
            if new is param:
                continue
            p = torch.nn.Parameter(new, requires_grad=param.requires_grad)
            if param.grad is not None:
                with torch.no_grad():
                    p.grad = fn(param.grad)
            self._parameters[key] = p
            if _APPLY_MEMO is not None:
                # A weak reference: an unshared old parameter is still freed
                # at once (as param.data = new frees it on a GPU).
                _APPLY_MEMO[id(param)] = (weakref.ref(param), p)
            del param, p
        for key, buf in list(self._buffers.items()):
            if buf is not None:
                self._buffers[key] = fn(buf)
    finally:
        if outer:
            _APPLY_MEMO = None
    return self


_APPLY_MEMO = None


def _trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    with torch.no_grad():
        return tensor.normal_(mean, std)


@contextlib.contextmanager
def patched_for_fake():
    """Applies the patches described in the module docstring."""
    import sys

    saved = (F.scaled_dot_product_attention, torch.nn.init.trunc_normal_, torch.nn.Module._apply)
    F.scaled_dot_product_attention = cuda_like_sdpa
    torch.nn.init.trunc_normal_ = _trunc_normal_
    torch.nn.Module._apply = _fake_module_apply
    hf = sys.modules.get("transformers.utils.import_utils")
    if hf is None:
        try:
            import transformers.utils.import_utils as hf
        except ImportError:
            hf = None
    hf_saved = getattr(hf, "is_fake_tensor", None)
    if hf_saved is not None:
        hf.is_fake_tensor = lambda x: False
    mu = sys.modules.get("transformers.masking_utils")
    if mu is None and hf is not None:
        import transformers.masking_utils as mu
    packed_saved = getattr(mu, "find_packed_sequence_indices", None)
    if packed_saved is not None:
        mu.find_packed_sequence_indices = _find_packed_sequence_indices
    try:
        yield
    finally:
        F.scaled_dot_product_attention, torch.nn.init.trunc_normal_, torch.nn.Module._apply = saved
        if hf_saved is not None:
            hf.is_fake_tensor = hf_saved
        if packed_saved is not None:
            mu.find_packed_sequence_indices = packed_saved


def _find_packed_sequence_indices(position_ids):
    """transformers' check for packed sequences, as a CUDA run executes it
    (the same tensors), answering "not packed" where the real one reads the
    answer from the GPU (data-dependent, impossible with fake tensors)."""
    first = position_ids[:, :1] - 1
    diff = torch.diff(position_ids, prepend=first, dim=-1)
    packed = (diff != 1).cumsum(-1)
    del first, diff
    answer = (packed[:, -1] == 0).all()
    del answer, packed
    return None


#: Bytes of the cuBLAS workspace on Hopper (H100/H200) GPUs; PyTorch uses
#: 4096·2 KiB + 16·8 KiB = 8519680 bytes on other GPUs.
CUBLAS_WORKSPACE_HOPPER = 32 * 1024 * 1024

_MATMUL_OPS = {
    aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default, aten.addmv.default,
    aten.mv.default, aten.addbmm.default, aten._scaled_mm.default,
}
# GroupNorm keeps its statistics in the input dtype on CUDA too (measured).
_NORM_OPS = {aten.native_layer_norm.default}
# BatchNorm keeps fp32 statistics for fp16/bf16 inputs on CUDA (cuDNN /
# native CUDA kernels), the input dtype on the CPU (scripts only: checked by
# vramlab_record.check_autocast against the CUDA meta kernels).
_BN_OPS = {aten._batch_norm_with_update.default, aten._native_batch_norm_legit.default,
           aten.native_batch_norm.default, aten._native_batch_norm_legit_functional.default}


class FakeCudaRecorder(AllocationRecorder):
    """The recorder with the CUDA-side differences described in the module
    docstring: cuBLAS workspaces and fp32 norm statistics."""

    def __init__(self, recording=None, device_type="cpu", cublas_workspace=CUBLAS_WORKSPACE_HOPPER,
                 values=None):
        super().__init__(recording, device_type=device_type)
        self.cublas_workspace = cublas_workspace
        self._workspaces: dict[str, int] = {}
        #: :class:`vramlab_record.datadep.Values` (scripts only): known values
        #: and the data-dependent policy.
        self.values = values
        #: "host" while a top-level call works on the script's host side
        #: (see :mod:`vramlab_record.cudadev`); None or "device" otherwise.
        self._side = None

    # ---- host / device sides (vramlab_record.cudadev) -------------------
    @contextlib.contextmanager
    def side(self, which):
        saved, self._side = self._side, which
        try:
            yield
        finally:
            self._side = saved

    def is_host(self, t) -> bool:
        try:
            return id(t.untyped_storage()) in self._host
        except (RuntimeError, NotImplementedError):
            return False

    def _see(self, t, scale=1):
        if self._side == "host":
            try:
                key = id(t.untyped_storage())
            except (RuntimeError, NotImplementedError):
                return
            if key not in self._live:
                self._host_tensor(t)
                return
        super()._see(t, scale=scale)

    def _data_dependent(self, func, args, kwargs):
        """Answers the data-dependent ops (see :mod:`vramlab_record.datadep`);
        ``NotImplemented`` for every other op."""
        from . import datadep

        if func is aten._local_scalar_dense.default:
            t = args[0]
            if getattr(t, "constant", None) is not None:
                return NotImplemented  # FakeTensorMode knows it exactly (small host constants)
            return self.values.scalar(func, t)
        if func is aten.nonzero.default:
            out = datadep.nonzero_like(self.values, func, args[0])
            self._see(out)
            return out
        if func is aten.masked_select.default:
            x, mask = torch.broadcast_tensors(args[0], args[1])
            n = self.values.mask_count(func, mask)
            out = torch.empty((n,), dtype=x.dtype, device=x.device)
            self._see(out)
            return out
        if func in (aten.index.Tensor, aten.index_put_.default, aten.index_put.default):
            idx = args[1]
            if any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in idx):
                new = []
                for i in idx:
                    if isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8):
                        nz = self._data_dependent(aten.nonzero.default, (i,), {})
                        new.extend(nz.unbind(1))
                    else:
                        new.append(i)
                return self.__torch_dispatch__(func, (), (args[0], new) + tuple(args[2:]), kwargs)
        if func is aten.equal.default:
            a, b = self.values.get(args[0]), self.values.get(args[1])
            if a is not None and b is not None and a[1] and b[1]:
                return a[0] == b[0]
            return bool(self.values.scalar(func, torch.empty((), dtype=torch.bool)))
        return NotImplemented

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.values is not None:
            answer = self._data_dependent(func, args, kwargs or {})
            if answer is not NotImplemented:
                return answer
            try:
                out = self._dispatch(func, types, args, kwargs)
            except (DataDependentOutputException, DynamicOutputShapeException) as e:
                from .datadep import user_frames

                site, inner = user_frames()
                raise self.values.error(func, site, inner, None,
                                        f"data the fake tensors do not have ({type(e).__name__}: its output "
                                        f"shape or value depends on the data)") from None
            self.values.after(func, args, kwargs or {}, out)
            return out
        return self._dispatch(func, types, args, kwargs)

    def _dispatch(self, func, types, args=(), kwargs=None):
        if self._host_mode:
            return super().__torch_dispatch__(func, types, args, kwargs)
        if func in _NORM_OPS or (SCRIPT_RULES and func in _BN_OPS and self.device_type == "cpu"):
            out = func(*args, **(kwargs or {}))
            x = args[0]
            scale = 2 if x.dtype in _LOW_PRECISION else 1
            for i, t in enumerate(out):
                if isinstance(t, torch.Tensor):
                    self._see(t, scale=scale if i > 0 else 1)
            return out
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if func in _MATMUL_OPS and self.cublas_workspace:
            key = "backward" if torch._C._current_autograd_node() is not None else "forward"
            if key not in self._workspaces:
                self._workspaces[key] = self.rec.alloc(self.cublas_workspace)
        return out


@contextlib.contextmanager
def fake_recording(recording: Recording | None = None, device_type: str = "cpu",
                   cublas_workspace: int = CUBLAS_WORKSPACE_HOPPER, scripts: bool = False):
    """Records everything inside on a fake device; yields the recorder.

    ``device_type``: the (fake) device that stands for the GPU: ``cpu``
    where there is no GPU, ``cuda`` for a script that puts its work on
    ``cuda`` (needs a machine with a GPU for the backward). Tensors created
    inside are fake; tensors made before must be passed to
    ``recorder.register`` (and be fake) to be recorded.
    ``cublas_workspace``: bytes of the emulated cuBLAS workspace (0: none).
    ``scripts``: run a script written for a GPU unchanged (``SCRIPT_RULES``):
    ``cuda`` devices on the fake CPU (:mod:`vramlab_record.cudadev`),
    ``torch.autocast("cuda")`` with CUDA's lists (:mod:`vramlab_record.autocast`),
    the data-dependent policy (:mod:`vramlab_record.datadep`), CUDA's fused
    dropout and full SDPA routing (:mod:`vramlab_record.sdpa`).
    """
    global SCRIPT_RULES
    from torch._subclasses.fake_tensor import FakeTensorMode

    values = None
    if scripts:
        from .datadep import Values, install_excepthook

        values = Values()
        install_excepthook()
    rec = FakeCudaRecorder(recording, device_type=device_type, cublas_workspace=cublas_workspace, values=values)
    with contextlib.ExitStack() as stack:
        stack.enter_context(patched_for_fake())
        # torch.cuda.empty_cache() becomes an empty_cache event.
        stack.callback(setattr, torch.cuda, "empty_cache", torch.cuda.empty_cache)
        torch.cuda.empty_cache = rec.empty_cache
        if scripts:
            from .autocast import patch_autocast
            from .sdpa import cuda_like_dropout

            SCRIPT_RULES = True
            # On a fake CUDA device (a machine with a GPU) CUDA autocast and
            # GradScaler work as they are.
            undo = patch_autocast() if device_type == "cpu" else (lambda: None)
            saved_dropout = F.dropout
            F.dropout = cuda_like_dropout

            def restore():
                global SCRIPT_RULES
                SCRIPT_RULES = False
                F.dropout = saved_dropout
                undo()

            stack.callback(restore)
            from .cudadev import cuda_grad_scaler, gpu_optimizer_defaults, host_samplers

            stack.enter_context(gpu_optimizer_defaults())
            stack.enter_context(host_samplers())
            if device_type == "cpu":
                stack.enter_context(cuda_grad_scaler())
        # CUDA graphs and MemPools write pool events (vramlab_record.graphs).
        from .graphs import fake_graphs

        stack.enter_context(fake_graphs(rec.rec))
        stack.enter_context(FakeTensorMode(allow_non_fake_inputs=False))
        if scripts and device_type == "cpu":
            from .cudadev import cuda_on_fake_cpu

            stack.enter_context(cuda_on_fake_cpu(rec))
        with rec:
            try:
                yield rec
            finally:
                gc.collect()
                if values is not None and values.report():
                    import sys

                    print(values.report(), file=sys.stderr)
