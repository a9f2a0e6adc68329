"""Checks the CUDA-autocast emulation against PyTorch's own CUDA autocast, without a GPU.

    python -m vramlab_record.check_autocast [--layers 2]

Fake tensors can live on a fake *CUDA* device without a GPU as long as no
backward runs (the autograd engine needs a CUDA context). So a forward pass
under the real ``torch.autocast("cuda")`` — the ``AutocastCUDA`` kernels of
the installed torch — can be recorded on a fake CUDA device, and compared
with the same forward recorded the way scripts are recorded without a GPU
(fake CPU device, ``torch.autocast("cuda")`` emulated by
:mod:`vramlab_record.autocast`). The allocation streams (sizes, in order, and
frees) must be identical. Models: a small GPT-2 (transformers; LayerNorm,
Conv1D addmm, NewGELU with ``pow``, dropout, SDPA, cross-entropy loss) and a
small CNN (conv, batch norm, pooling, linear, softmax, ``sum``, ``exp``,
``cumsum``, ``norm``, ``addcmul``).
"""

from __future__ import annotations

import argparse
import sys


def _raw_cuda_autocast(dtype):
    """``torch.autocast("cuda")`` without its availability checks (no GPU here)."""
    import contextlib

    import torch

    @contextlib.contextmanager
    def cm():
        prev, prev_dt = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
        torch.set_autocast_enabled("cuda", True)
        torch.set_autocast_dtype("cuda", dtype)
        torch.autocast_increment_nesting()
        try:
            yield
        finally:
            if torch.autocast_decrement_nesting() == 0:
                torch.clear_autocast_cache()
            torch.set_autocast_enabled("cuda", prev)
            torch.set_autocast_dtype("cuda", prev_dt)

    return cm()


def _gpt2(device, layers, autocast):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=layers, n_embd=256, n_head=4, n_positions=256, vocab_size=1000)
    model = GPT2LMHeadModel(cfg).to(device)
    model.train()
    ids = torch.randint(0, 1000, (2, 128), device=device)
    with autocast(torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    return loss


def _cnn(device, layers, autocast):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    convs = [nn.Conv2d(3, 16, 3, padding=1)] + [nn.Conv2d(16, 16, 3, padding=1) for _ in range(layers - 1)]
    model = nn.Sequential(*[m for c in convs for m in (c, nn.BatchNorm2d(16), nn.ReLU())],
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).to(device)
    x = torch.randn(4, 3, 32, 32, device=device)
    with autocast(torch.float16):
        y = model(x)
        p = F.softmax(y, -1)
        z = torch.addcmul(p, y, y) + torch.exp(y).sum() + torch.cumsum(y, 0) + torch.norm(y)
        loss = F.cross_entropy(y, torch.zeros(4, dtype=torch.long, device=device)) + z.float().mean()
    return loss


def _record(fn, layers, emulated: bool):
    import torch

    from .fake import fake_recording
    from .recorder import Recording

    rec = Recording()
    if emulated:
        with fake_recording(rec, device_type="cpu", scripts=True):
            out = fn("cuda", layers, lambda dt: torch.autocast("cuda", dtype=dt))
            dtype = out.dtype
            del out
    else:
        with fake_recording(rec, device_type="cuda", scripts=False):
            import vramlab_record.fake as fake

            fake.SCRIPT_RULES = True  # the same SDPA routing as for scripts
            try:
                out = fn("cuda", layers, _raw_cuda_autocast)
            finally:
                fake.SCRIPT_RULES = False
            dtype = out.dtype
            del out
    return rec, dtype


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m vramlab_record.check_autocast", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=2)
    ns = p.parse_args(argv)
    bad = 0
    for name, fn in (("gpt2", _gpt2), ("cnn", _cnn)):
        real, dt_real = _record(fn, ns.layers, emulated=False)
        emu, dt_emu = _record(fn, ns.layers, emulated=True)
        a = [(e[0], e[2]) for e in real.events if e[0] != "mark"]
        b = [(e[0], e[2]) for e in emu.events if e[0] != "mark"]
        # Up to the last allocation: the frees after it are the teardown,
        # whose order (the autocast cache, a C++ hash map) is not the point.
        last = max(i for i, e in enumerate(a) if e[0] == "alloc") + 1
        a, b = a[:last], b[:last]
        same = a == b
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        print(f"{name}: CUDA autocast on fake CUDA: {real.allocs} allocations, peak {real.peak_live_bytes} B, "
              f"loss {dt_real}; emulated on fake CPU: {emu.allocs} allocations, peak {emu.peak_live_bytes} B, "
              f"loss {dt_emu}: {'identical' if same else f'differ from event {first}'}")
        if not same:
            bad += 1
            print("   CUDA:", a[max(0, first - 3):first + 5], "\n   emul:", b[max(0, first - 3):first + 5])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
