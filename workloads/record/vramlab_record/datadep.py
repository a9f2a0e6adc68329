"""Data-dependent ops under fake tensors: what the recorder assumes, and why.

Fake tensors have shapes but no values, so ``.item()``, ``bool(t)``,
``nonzero``, boolean-mask indexing and ``torch.equal`` cannot be computed.
The recorder answers them with this policy, in this order:

1. **Known values.** The recorder follows tensors whose elements are all
   equal to a value it knows: ``torch.ones/zeros/full`` (and ``*_like``,
   ``new_*``, ``fill_``, ``zero_``), small constants made from Python data,
   and what follows from them through casts, views, ``clone``, ``cat``/
   ``stack`` of equal values, comparisons, logical/bitwise ops,
   ``mul/add/sub``, ``where`` and ``all/any/max/min/amax/amin/sum``. An
   ``and`` with a known False (or ``mul`` by a known 0) is known False
   whatever the other side; an ``or`` with a known True is known True.
   A read of a known value is exact: e.g. generation's max-length criterion
   (``torch.full(..., cur_len >= max_length)``) is known, so ``generate()``
   stops exactly at ``max_new_tokens``.
2. **Typical data.** A comparison of unknown data with a specific value is
   assumed to be false element-wise (``eq``, ``isin``: no token equals the
   EOS/pad id; ``isnan``/``isinf``: no NaN/inf) and ``ne``/``isfinite`` true;
   integer data (token ids, indices) is assumed non-negative (``x < 0`` false,
   ``x >= 0`` true); the assumption is carried through the same ops as above. So stopping
   criteria say "not done" (no EOS is generated; generation runs to
   ``max_new_tokens``), no right padding is detected, losses are finite.
   Every read that relied on an assumption is counted and the first ones are
   listed on stderr at the end of the recording.
   A floating-point read of unknown data (``loss.item()`` for logging,
   GradScaler's found-inf sums) is 0.0.
3. **--assume KEY=VALUE** on the command line:
   ``FILE:LINE=VALUE`` answers a read at that line (of your script, or the
   innermost library line named in the error; ``FILE`` is matched as a path
   suffix), ``item=VALUE`` answers every other unknown read,
   ``nonzero=FRACTION`` sets the fraction of true elements of an unknown
   mask for ``nonzero``, boolean indexing and ``masked_select``.
4. Otherwise the recorder stops with :class:`DataDependentError`, which
   names the op, your script's line (the first frame outside torch,
   transformers, diffusers, accelerate and vramlab_record) and the
   library's line, and says which ``--assume`` would answer it.

Values are tracked per storage (a view of a uniform storage is uniform);
a write to part of a storage, or by an op without a rule, forgets it.
"""

from __future__ import annotations

import os
import sys
import weakref

import torch

aten = torch.ops.aten

#: Filled from ``--assume KEY=VALUE`` (see the module docstring).
ASSUME: dict[str, str] = {}

_LIB_PARTS = (os.sep + "torch" + os.sep, os.sep + "transformers" + os.sep, os.sep + "diffusers" + os.sep,
              os.sep + "accelerate" + os.sep, os.sep + "vramlab_record" + os.sep, os.sep + "torchvision" + os.sep,
              "<frozen ", os.sep + "runpy.py", os.sep + "contextlib.py")


def set_assumptions(pairs) -> None:
    """``pairs``: ``KEY=VALUE`` strings (``--assume``)."""
    for p in pairs or ():
        if "=" not in p:
            raise SystemExit(f"--assume {p}: expected KEY=VALUE (FILE:LINE=VALUE, item=VALUE, nonzero=FRACTION)")
        k, v = p.split("=", 1)
        ASSUME[k.strip()] = v.strip()


class DataDependentError(RuntimeError):
    pass


def install_excepthook() -> None:
    """Prints a :class:`DataDependentError` that reaches the top as its
    message alone (it names the script's line already), not the hundred
    frames of torch internals above it; other exceptions are untouched."""
    if getattr(sys.excepthook, "_vramlab", False):
        return
    previous = sys.excepthook

    def hook(kind, value, tb):
        if isinstance(value, DataDependentError):
            print(f"{kind.__name__}: {value}", file=sys.stderr)
            return
        previous(kind, value, tb)

    hook._vramlab = True
    sys.excepthook = hook


def user_frames():
    """(your script's frame, the innermost library frame), as ``path:line``."""
    f = sys._getframe(1)
    inner = None
    while f is not None:
        fn = f.f_code.co_filename
        lib = any(part in fn for part in _LIB_PARTS)
        if not lib:
            return f"{fn}:{f.f_lineno}", inner
        if inner is None and os.sep + "vramlab_record" + os.sep not in fn and os.sep + "torch" + os.sep not in fn:
            inner = f"{fn}:{f.f_lineno}"
        f = f.f_back
    return None, inner


def _short(site):
    if site is None:
        return None
    path, _, line = site.rpartition(":")
    for marker in (os.sep + "site-packages" + os.sep, os.getcwd() + os.sep):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{path}:{line}"


def _lookup_site(*sites):
    for site in sites:
        if site is None:
            continue
        path, _, line = site.rpartition(":")
        for k, v in ASSUME.items():
            kp, _, kl = k.rpartition(":")
            if kl == line and kp and (path == kp or path.endswith(os.sep + kp.lstrip(os.sep))):
                return v
    return None


def _parse_value(v: str, dtype):
    v = v.strip()
    if dtype == torch.bool or v.lower() in ("true", "false"):
        return v.lower() in ("1", "true", "yes")
    if dtype.is_floating_point:
        return float(v)
    return int(float(v))


def _as(value, dtype):
    if dtype == torch.bool:
        return bool(value)
    if dtype.is_floating_point or dtype.is_complex:
        return float(value)
    return int(value)


# Unary rules: f(value) -> value.
_UNARY = {
    "bitwise_not": lambda v: (not v) if isinstance(v, bool) else ~int(v),
    "logical_not": lambda v: not v,
    "neg": lambda v: -v,
    "abs": abs,
}
_COPYING = {"_to_copy", "clone", "contiguous", "alias", "detach", "_unsafe_view", "view", "reshape", "expand",
            "slice", "select", "unsqueeze", "squeeze", "t", "transpose", "permute", "lift", "lift_fresh",
            "lift_fresh_copy", "repeat", "index_select", "index", "gather", "unbind", "split", "chunk",
            "as_strided", "_reshape_alias", "flatten", "narrow", "expand_as", "view_as", "numpy_T", "_conj",
            "split_with_sizes", "squeeze_", "unsqueeze_", "repeat_interleave", "diagonal", "movedim",
            "flip", "roll", "unfold", "masked_select", "reshape_as", "pin_memory", "_pin_memory", "to",
            "_to_copy_", "copy"}
_BINARY = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "bitwise_and": lambda a, b: a & b if not isinstance(a, bool) else (a and bool(b)),
    "bitwise_or": lambda a, b: a | b if not isinstance(a, bool) else (a or bool(b)),
    "bitwise_xor": lambda a, b: a ^ b, "logical_and": lambda a, b: bool(a) and bool(b),
    "logical_or": lambda a, b: bool(a) or bool(b), "logical_xor": lambda a, b: bool(a) != bool(b),
    "mul": lambda a, b: a * b, "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "rsub": lambda a, b: b - a,
    "maximum": max, "minimum": min, "div": lambda a, b: a / b if b else float("nan"),
    "__and__": lambda a, b: a & b, "__or__": lambda a, b: a | b,
}
# Assumed results of comparing unknown data (see "Typical data").
_ASSUMED_UNARY = {"isnan": False, "isinf": False, "isneginf": False, "isposinf": False, "isfinite": True}
_ASSUMED_BINARY = {"eq": False, "ne": True, "isin": False}
_REDUCE = {"all", "any", "max", "min", "amax", "amin", "sum", "mean", "argmax", "argmin"}
_FACTORY_VALUE = {"ones": 1, "ones_like": 1, "new_ones": 1, "zeros": 0, "zeros_like": 0, "new_zeros": 0}


class Values:
    """Uniform values of storages: ``key -> (value, certain)``."""

    def __init__(self):
        self.vals: dict[int, tuple] = {}
        self.assumed_reads: list[str] = []
        self.n_assumed = 0

    # ---- storage keys --------------------------------------------------
    @staticmethod
    def _key(t):
        try:
            return id(t.untyped_storage())
        except (RuntimeError, NotImplementedError):
            return None

    def get(self, t):
        if isinstance(t, torch.Tensor):
            k = self._key(t)
            return self.vals.get(k) if k is not None else None
        if isinstance(t, (bool, int, float)):
            return (t, True)
        return None

    def set(self, t, value, certain=True):
        if not isinstance(t, torch.Tensor):
            return
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        k = id(st)
        if k not in self.vals:
            weakref.finalize(st, self.vals.pop, k, None)
        self.vals[k] = (_as(value, t.dtype), certain)

    def forget(self, t):
        if isinstance(t, torch.Tensor):
            k = self._key(t)
            if k is not None:
                self.vals.pop(k, None)

    @staticmethod
    def _whole(t) -> bool:
        try:
            return t.numel() * t.element_size() == t.untyped_storage().nbytes()
        except (RuntimeError, NotImplementedError):
            return False

    # ---- the rules -----------------------------------------------------
    def after(self, func, args, kwargs, out) -> None:
        """Propagates values through ``func`` (called after it ran)."""
        name = func.overloadpacket.__name__
        base = name.rstrip("_") if name.endswith("_") and not name.startswith("_") else name
        inplace = name != base
        outs = out if isinstance(out, (tuple, list)) else (out,)
        first = outs[0] if outs else None
        if not isinstance(first, torch.Tensor):
            if self.vals and func._schema.is_mutable:  # e.g. _foreach_add_ (returns None)
                for a in list(args) + list(kwargs.values()):
                    for t in (a if isinstance(a, (list, tuple)) else (a,)):
                        if isinstance(t, torch.Tensor):
                            self.forget(t)
            return
        res = self._rule(base, func, args, kwargs, first)
        if inplace:
            target = args[0]
            if res is not None and (self._whole(target) or self.get(target) == res):
                self.set(target, *res)
            else:
                self.forget(target)
            return
        if res is not None:
            for o in outs if base in ("unbind", "split", "chunk", "split_with_sizes") else (first,):
                self.set(o, *res)
        elif self.vals and func._schema.is_mutable:
            for a in list(args) + list(kwargs.values()):
                for t in (a if isinstance(a, (list, tuple)) else (a,)):
                    if isinstance(t, torch.Tensor):
                        self.forget(t)

    def _rule(self, base, func, args, kwargs, out):
        if base in _FACTORY_VALUE:
            return (_FACTORY_VALUE[base], True)
        if base in ("full", "new_full", "full_like", "fill", "scalar_tensor"):
            v = args[1] if base in ("new_full", "full", "full_like", "fill") and len(args) > 1 else (
                args[0] if base == "scalar_tensor" else kwargs.get("fill_value"))
            if isinstance(v, torch.Tensor):
                return self.get(v)
            return (v, True) if isinstance(v, (bool, int, float)) else None
        if base == "zero":
            return (0, True)
        if base in ("lift_fresh", "lift_fresh_copy"):
            c = getattr(out, "constant", None)
            if c is not None and 0 < c.numel() <= 64:
                from torch._subclasses.fake_tensor import unset_fake_temporarily

                with unset_fake_temporarily():
                    vals = c.flatten().tolist()
                if all(x == vals[0] for x in vals):
                    return (vals[0], True)
            return None
        if base in ("copy",):  # copy_(dst, src)
            return self.get(args[1])
        if base in _COPYING:
            return self.get(args[0]) if args else None
        if base in _UNARY:
            v = self.get(args[0])
            return (_UNARY[base](v[0]), v[1]) if v is not None else None
        if base in _ASSUMED_UNARY:
            v = self.get(args[0])
            if v is not None:
                x = v[0]
                import math
                real = {"isnan": math.isnan(x), "isinf": math.isinf(x), "isfinite": math.isfinite(x),
                        "isneginf": x == float("-inf"), "isposinf": x == float("inf")}[base]
                return (real, v[1])
            return (_ASSUMED_UNARY[base], False)
        if base in ("isin",):
            e = self.get(args[0])
            te = self.get(args[1]) if len(args) > 1 else None
            invert = kwargs.get("invert", args[3] if len(args) > 3 else False)
            if e is not None and te is not None:
                return ((e[0] == te[0]) != bool(invert), e[1] and te[1])
            return (bool(invert), False)
        if base in ("where",) and len(args) == 3:
            c, a, b = self.get(args[0]), self.get(args[1]), self.get(args[2])
            if c is not None:
                chosen = a if c[0] else b
                return (chosen[0], c[1] and chosen[1]) if chosen is not None else None
            return None
        if base in _BINARY and len(args) >= 2:
            a, b = self.get(args[0]), self.get(args[1])
            alpha = kwargs.get("alpha", args[2] if len(args) > 2 and base in ("add", "sub") else 1)
            if a is not None and b is not None:
                bv = b[0] * alpha if base in ("add", "sub") and alpha != 1 else b[0]
                certain = a[1] and b[1]
                if base in ("bitwise_and", "logical_and", "mul", "__and__"):
                    certain = certain or (a[1] and not a[0]) or (b[1] and not b[0])
                elif base in ("bitwise_or", "logical_or", "__or__"):
                    certain = certain or (a[1] and bool(a[0])) or (b[1] and bool(b[0]))
                return (_BINARY[base](a[0], bv), certain)
            known = a if a is not None else b
            if known is not None and known[1]:
                if base in ("bitwise_and", "logical_and", "mul", "__and__") and not known[0]:
                    return (0, True)
                if base in ("bitwise_or", "logical_or", "__or__") and known[0] and known[0] is not None:
                    return (True if out.dtype == torch.bool else known[0], True)
            if known is not None and base in _ASSUMED_BINARY:
                return (_ASSUMED_BINARY[base], False)
            if (b is not None and a is None and base in ("lt", "ge") and isinstance(args[0], torch.Tensor)
                    and not args[0].is_floating_point() and args[0].dtype != torch.bool and b[0] <= 0):
                # Integer data (token ids, indices) is assumed non-negative.
                return (base == "ge", False)
            return None
        if base in _REDUCE and args:
            v = self.get(args[0])
            if v is None:
                return None
            if base in ("argmax", "argmin"):
                return None
            if base in ("all", "any"):
                return (bool(v[0]), v[1])
            if base == "sum":
                if len(args) == 1 or (len(args) > 1 and not args[1]):
                    return (v[0] * args[0].numel(), v[1])
                return None
            return v
        if base in ("cat", "stack"):
            ts = args[0]
            vs = [self.get(t) for t in ts if isinstance(t, torch.Tensor) and t.numel() > 0]
            if vs and all(x is not None for x in vs) and all(x[0] == vs[0][0] for x in vs):
                return (vs[0][0], all(x[1] for x in vs))
            return None
        return None

    # ---- answers -------------------------------------------------------
    def scalar(self, func, t):
        """The value of ``t.item()`` / ``bool(t)`` (see the policy)."""
        v = self.get(t)
        site, inner = user_frames()
        forced = _lookup_site(inner, site)
        if forced is not None:
            return _parse_value(forced, t.dtype)
        if v is not None:
            if not v[1]:
                self.n_assumed += 1
                if len(self.assumed_reads) < 8:
                    self.assumed_reads.append(f"{_short(inner) or _short(site)} -> {v[0]!r}")
            return _as(v[0], t.dtype)
        if "item" in ASSUME:
            return _parse_value(ASSUME["item"], t.dtype)
        if t.dtype.is_floating_point:
            # A float read is almost always logging (loss.item()) or
            # GradScaler's found-inf sum: 0.0 (finite, nothing found).
            self.n_assumed += 1
            if len(self.assumed_reads) < 8:
                self.assumed_reads.append(f"{_short(site) or _short(inner)} -> 0.0 (float read)")
            return 0.0
        raise self.error(func, site, inner, "VALUE",
                         "the value of a tensor that fake tensors do not know (.item(), bool(), int(), "
                         "a Python `if` on a tensor)")

    def mask_count(self, func, mask) -> int:
        """How many elements of ``mask`` are true (nonzero, boolean indexing)."""
        v = self.get(mask)
        if v is not None:
            if not v[1]:
                self.n_assumed += 1
            return mask.numel() if v[0] else 0
        site, inner = user_frames()
        forced = _lookup_site(inner, site)
        frac = forced if forced is not None else ASSUME.get("nonzero")
        if frac is not None:
            return int(round(float(frac) * mask.numel()))
        raise self.error(func, site, inner, "FRACTION",
                         "how many elements of a mask are true (nonzero, x[mask], masked_select): the output "
                         "shape depends on the data")

    @staticmethod
    def error(func, site, inner, what, why):
        op = str(func)
        where = _short(site) or "?"
        lib = f" (in {_short(inner)})" if inner else ""
        keys = [k for k in (_short(site) and os.path.basename(site.rpartition(':')[0]) + ":" + site.rpartition(':')[2],
                             _short(inner)) if k]
        if what is None:
            return DataDependentError(
                f"vramlab_record: {op} needs {why}, at {where}{lib}. The CPU recorder cannot emulate this op: "
                f"keep it out of the recorded script (e.g. compute it once on the host side, from Python "
                f"values) or record on a GPU (python -m vramlab_record.gpu).")
        hint = " or ".join(f"--assume {k}={what}" for k in keys) or f"--assume FILE:LINE={what}"
        extra = " (or --assume item=VALUE for every such read)" if what == "VALUE" else \
            " (or --assume nonzero=FRACTION for every mask)"
        return DataDependentError(
            f"vramlab_record: {op} needs {why}, at {where}{lib}. Fake tensors have shapes, not values. "
            f"Tell the recorder what the GPU run would see: {hint}{extra}; or compute that branch from "
            f"Python values instead of GPU data.")

    def report(self) -> str | None:
        if not self.n_assumed:
            return None
        return (f"vramlab_record: {self.n_assumed} data-dependent reads answered by the typical-data policy "
                f"(no EOS/pad token generated, no NaN; see vramlab_record/datadep.py), e.g. "
                + "; ".join(self.assumed_reads))


def nonzero_like(values: Values, func, mask):
    count = values.mask_count(func, mask)
    return torch.empty((count, mask.dim()), dtype=torch.long, device=mask.device)
