"""``torch.autocast("cuda", ...)`` on the fake CPU device, with CUDA's op lists.

The fake device that stands for the GPU is a CPU, and CPU autocast casts a
different set of ops than CUDA autocast (e.g. CPU keeps ``softmax``,
``layer_norm``, ``exp``, ``sum`` and ``pow`` in the input dtype where CUDA
runs them in fp32; CUDA casts ``addmv``, ``einsum``, ``_convolution``, the
RNN cells and ``_scaled_dot_product_flash_attention`` to the low precision;
CPU's fp32 list has linear algebra, FFTs and pooling ops CUDA leaves alone).

How it is done: a script's ``torch.autocast("cuda", dtype=...)`` (also
``torch.amp.autocast("cuda")`` and ``torch.cuda.amp.autocast()``) enters
*CPU* autocast with that dtype (so nesting, ``enabled=False`` regions such as
transformers' fp32 RoPE, ``torch.is_autocast_enabled`` and the cast cache
behave as PyTorch implements them), and while recording the ``AutocastCPU``
dispatch key runs Python kernels with **CUDA's** policy instead of the CPU
one: every op CUDA autocast registers gets its CUDA policy
(``lower_precision_fp``, ``fp32``, ``fp32_set_opt_dtype``,
``fp32_append_dtype``, ``promote``, banned ``binary_cross_entropy``), and
every op only CPU autocast registers is passed through uncast. The casts are
``Tensor.to(dtype)`` calls, recorded as allocations like any other, with
CUDA autocast's cache (fp32 leaf tensors that require grad, i.e. weights,
cast once per outermost autocast region and freed at its exit).

Where the lists come from: ``AT_FORALL_LOWER_PRECISION_FP``,
``AT_FORALL_FP32``, ``AT_FORALL_FP32_SET_OPT_DTYPE``,
``AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE`` and ``AT_FORALL_PROMOTE`` in
``ATen/autocast_mode.h`` (torch 2.15.0, shipped in the wheel as
``torch/include/ATen/autocast_mode.h``), which
``aten/src/ATen/autocast_mode.cpp`` registers for the ``Autocast`` (CUDA)
key, plus ``cudnn_convolution`` / ``cudnn_convolution_transpose``
(lower precision) registered there directly. When the installed torch ships
that header, it is parsed at run time instead of the copy below; either way
the set is checked against the live dispatcher
(``_dispatch_has_kernel_for_dispatch_key(op, "AutocastCUDA")``) and an op
CUDA autocast registers that is not in the lists is reported once on stderr.
"""

from __future__ import annotations

import os
import re
import sys
import weakref

import torch

# From torch 2.15.0's ATen/autocast_mode.h (see the module docstring).
_LOWER = """_convolution.deprecated _convolution conv1d conv2d conv3d conv_tbc conv_transpose1d
conv_transpose2d.input conv_transpose3d.input convolution prelu addmm addmv addr matmul einsum mm mv
linalg_vecdot linear addbmm baddbmm bmm chain_matmul linalg_multi_dot _thnn_fused_lstm_cell
_thnn_fused_gru_cell lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell _scaled_dot_product_flash_attention
scaled_dot_product_attention cudnn_convolution cudnn_convolution_transpose"""
_FP32 = """acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow.Tensor_Scalar
pow.Tensor_Tensor pow.Scalar softplus layer_norm native_layer_norm rms_norm group_norm frobenius_norm.dim
nuclear_norm nuclear_norm.dim cosine_similarity poisson_nll_loss cosine_embedding_loss nll_loss nll_loss2d
hinge_embedding_loss kl_div l1_loss smooth_l1_loss huber_loss mse_loss margin_ranking_loss
multilabel_margin_loss soft_margin_loss triplet_margin_loss multi_margin_loss
binary_cross_entropy_with_logits dist pdist cdist renorm logsumexp upsample_nearest1d
_upsample_nearest_exact1d upsample_nearest2d _upsample_nearest_exact2d upsample_nearest3d
_upsample_nearest_exact3d upsample_linear1d upsample_bilinear2d _upsample_bilinear2d_aa
upsample_trilinear3d upsample_bicubic2d _upsample_bicubic2d_aa"""
_FP32_SET_OPT_DTYPE = """prod prod.dim_int softmax.int log_softmax.int cumprod cumsum linalg_vector_norm
linalg_matrix_norm linalg_matrix_norm.str_ord sum sum.dim_IntList"""
_FP32_APPEND_DTYPE = "norm.Scalar norm.ScalarOpt_dim"
_PROMOTE = "addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot scatter_add"
_BANNED = "binary_cross_entropy"

_HEADER_MACROS = {
    "AT_FORALL_LOWER_PRECISION_FP": "lower_precision_fp",
    "AT_FORALL_FP32": "fp32",
    "AT_FORALL_FP32_SET_OPT_DTYPE": "fp32_set_opt_dtype",
    "AT_FORALL_PROMOTE": "promote",
}


def _builtin_policies() -> dict[str, str]:
    pol = {}
    for text, p in ((_LOWER, "lower_precision_fp"), (_FP32, "fp32"), (_FP32_SET_OPT_DTYPE, "fp32_set_opt_dtype"),
                    (_FP32_APPEND_DTYPE, "fp32_append_dtype"), (_PROMOTE, "promote"), (_BANNED, "banned")):
        for name in text.split():
            pol[name] = p
    return pol


def _header_policies() -> dict[str, str] | None:
    """The lists parsed from the installed torch's ``ATen/autocast_mode.h``."""
    path = os.path.join(os.path.dirname(torch.__file__), "include", "ATen", "autocast_mode.h")
    try:
        text = open(path).read()
    except OSError:
        return None
    pol = {}
    for macro, p in _HEADER_MACROS.items():
        m = re.search(r"#define " + macro + r"\(_\)(.*?)(?:\n\s*\n|\n#)", text, re.S)
        if not m:
            return None
        for name, overload in re.findall(r"_\((\w+)(?:,\s*(\w+))?\)", m.group(1)):
            pol[f"{name}.{overload}" if overload else name] = p
    if "mm" not in pol or "softmax.int" not in pol:
        return None
    for name in ("norm.Scalar", "norm.ScalarOpt_dim"):
        pol[name] = "fp32_append_dtype"
    pol["cudnn_convolution"] = pol["cudnn_convolution_transpose"] = "lower_precision_fp"
    pol["binary_cross_entropy"] = "banned"
    return pol


def cuda_policies() -> tuple[dict[str, str], str]:
    """``{op name[.overload]: policy}`` of CUDA autocast, and where it came from."""
    pol = _header_policies()
    if pol is not None:
        return pol, "torch/include/ATen/autocast_mode.h of the installed torch"
    return _builtin_policies(), "vramlab_record.autocast's copy of torch 2.15.0's ATen/autocast_mode.h"


aten = torch.ops.aten
_KEY = torch._C.DispatchKey.AutocastCPU
_KEYSET = torch._C.DispatchKeySet(_KEY)


def _eligible(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


class CudaAutocast:
    """The emulation: Python kernels for ``AutocastCPU`` with CUDA's policy."""

    def __init__(self):
        self.lib = None
        self.depth = 0
        self.cache: dict[int, tuple] = {}
        self.source = ""
        self.unknown: list[str] = []

    # ---- kernels -------------------------------------------------------
    def _cast(self, x, dtype, cache: bool):
        if isinstance(x, (list, tuple)):
            return type(x)(reversed([self._cast(e, dtype, cache) for e in reversed(x)]))
        if not _eligible(x) or x.dtype == dtype:
            return x
        if (cache and x.dtype == torch.float32 and x.requires_grad and x.is_leaf and not x._is_view()
                and torch.is_autocast_cache_enabled()):
            hit = self.cache.get(id(x))
            if hit is not None and hit[0]() is x:
                return hit[1]
            out = x.to(dtype)
            self.cache[id(x)] = (weakref.ref(x), out)
            return out
        return x.to(dtype)

    def _cast_all(self, args, kwargs, dtype, cache: bool):
        """Casts every argument, the last first: the order in which the C++
        wrapper's ``cached_cast(args)...`` pack expansion runs (GCC evaluates
        call arguments right to left), hence the order of the allocations."""
        keys = list(kwargs)
        for k in reversed(keys):
            kwargs = dict(kwargs)
            kwargs[k] = self._cast(kwargs[k], dtype, cache)
        args = list(args)
        for i in range(len(args) - 1, -1, -1):
            args[i] = self._cast(args[i], dtype, cache)
        return tuple(args), kwargs

    def _kernel(self, op, policy: str):
        schema_args = op._schema.arguments
        name = op._opname + ("." + op._overloadname if op._overloadname != "default" else "")
        dtype_index = next((i for i, a in enumerate(schema_args) if a.name == "dtype"), None)
        emu = self

        composite = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")

        def kernel(*args, **kwargs):
            if policy == "passthrough" or emu.depth == 0:
                if composite:
                    # As a fallthrough would: the ops it decomposes into
                    # still meet autocast (e.g. cross_entropy_loss, which only
                    # CPU autocast lists, runs log_softmax + nll_loss).
                    return op.decompose(*args, **kwargs)
                with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
                    return op(*args, **kwargs)
            with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
                if policy == "lower_precision_fp":
                    args, kwargs = emu._cast_all(args, kwargs, torch.get_autocast_dtype("cpu"), True)
                elif policy == "fp32":
                    args, kwargs = emu._cast_all(args, kwargs, torch.float32, False)
                elif policy == "fp32_set_opt_dtype":
                    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
                    given = (args[dtype_index] if dtype_index is not None and dtype_index < len(args)
                             else kwargs.get("dtype"))
                    if dtype_index is not None and given is None and _eligible(first):
                        if name in ("softmax.int", "log_softmax.int") and first.dtype == torch.float16:
                            # On a CUDA tensor, softmax(half, dtype=float) is one
                            # kernel (half_to_float), no converted copy.
                            fn = aten._softmax if name == "softmax.int" else aten._log_softmax
                            return fn(args[0], args[1], True)
                        if dtype_index < len(args):
                            args = list(args)
                            args[dtype_index] = torch.float32
                        else:
                            kwargs = dict(kwargs, dtype=torch.float32)
                elif policy == "fp32_append_dtype":
                    if _eligible(args[0]):
                        if op._overloadname == "Scalar":
                            return torch.ops.aten.norm.ScalarOpt_dtype(args[0], args[1] if len(args) > 1 else 2,
                                                                       dtype=torch.float32)
                        return torch.ops.aten.norm.ScalarOpt_dim_dtype(*args, dtype=torch.float32, **kwargs)
                elif policy == "promote":
                    flat = [a for a in list(args) + list(kwargs.values()) if _eligible(a)]
                    for a in list(args) + list(kwargs.values()):
                        if isinstance(a, (list, tuple)):
                            flat += [e for e in a if _eligible(e)]
                    if flat:
                        wide = flat[0].dtype
                        for a in flat[1:]:
                            wide = torch.promote_types(wide, a.dtype)
                        args, kwargs = emu._cast_all(args, kwargs, wide, False)
                elif policy == "banned":
                    raise RuntimeError(
                        "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast "
                        "(CUDA autocast refuses them): use binary_cross_entropy_with_logits / BCEWithLogitsLoss")
                return op(*args, **kwargs)

        return kernel

    # ---- registration --------------------------------------------------
    def install(self) -> None:
        """Registers the kernels (for the recording; :meth:`uninstall` removes them)."""
        if self.lib is not None:
            return
        pol, self.source = cuda_policies()
        names = torch._C._dispatch_get_all_op_names()
        cuda_ops = {n[len("aten::"):] for n in names
                    if n.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(n, "AutocastCUDA")}
        cpu_ops = {n[len("aten::"):] for n in names
                   if n.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(n, "AutocastCPU")}
        # Registered outside autocast_mode.cpp: cuDNN's RNN (casts and
        # re-flattens its weights) and linalg_matrix_sqrth; left uncast here.
        self.unknown = sorted(cuda_ops - set(pol) - {"_cudnn_rnn", "linalg_matrix_sqrth"})
        if self.unknown:
            print(f"vramlab_record: CUDA autocast registers ops not in the lists (left uncast): "
                  f"{', '.join(self.unknown)}", file=sys.stderr)
        lib = torch.library.Library("aten", "IMPL")
        for name in sorted(set(pol) | cpu_ops):
            base, _, overload = name.partition(".")
            packet = getattr(torch.ops.aten, base, None)
            if packet is None:
                continue
            op = getattr(packet, overload or "default", None)
            if op is None:
                continue
            policy = pol.get(name, "passthrough")
            if name in pol and name not in cuda_ops and name not in cpu_ops:
                # Not registered for CUDA autocast in this torch (list out of date): nothing to override.
                continue
            lib.impl(name, self._kernel(op, policy), "AutocastCPU")
        self.lib = lib

    def uninstall(self) -> None:
        if self.lib is not None:
            self.lib._destroy()
            self.lib = None
        self.cache.clear()
        self.depth = 0

    # ---- torch.autocast("cuda") ----------------------------------------
    def enter(self) -> None:
        self.depth += 1

    def exit(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.cache.clear()


EMULATION = CudaAutocast()


def patch_autocast():
    """Makes ``torch.autocast("cuda", ...)`` run CPU autocast with CUDA's
    lists (see the module docstring). Returns an undo function."""
    from torch.amp import autocast_mode

    cls = autocast_mode.autocast
    orig_init, orig_enter, orig_exit = cls.__init__, cls.__enter__, cls.__exit__

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self._vramlab_cuda = device_type == "cuda"
        if self._vramlab_cuda:
            if dtype is None:
                dtype = torch.get_autocast_dtype("cuda")
            device_type = "cpu"
        orig_init(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    def __enter__(self):
        out = orig_enter(self)
        if getattr(self, "_vramlab_cuda", False) and self._enabled:
            EMULATION.enter()
        return out

    def __exit__(self, *exc):
        out = orig_exit(self, *exc)
        if getattr(self, "_vramlab_cuda", False) and self._enabled:
            EMULATION.exit()
        return out

    cls.__init__, cls.__enter__, cls.__exit__ = __init__, __enter__, __exit__
    EMULATION.install()

    def undo():
        cls.__init__, cls.__enter__, cls.__exit__ = orig_init, orig_enter, orig_exit
        EMULATION.uninstall()

    return undo
