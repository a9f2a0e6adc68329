"""A pin past the fake device's host capacity (docs/host-allocator-spec.md,
R7.3): the exception, the statistics before and after, whether a cached
block was given back to make room (no), and whether the next kernel launch
still sees the error (no: PyTorch clears it).

    VRAMLAB_FAKECUDA_HOST_CAPACITY=41943040 \\
        bash scripts/oracle_experiments/run.sh 2.15 host_oom.py driver
    VRAMLAB_FAKECUDA_HOST_CAPACITY=41943040 PYTORCH_CUDA_ALLOC_CONF=pinned_use_cuda_host_register:True \\
        bash scripts/oracle_experiments/run.sh 2.15 host_oom.py driver
"""
import torch

M = 1 << 20
torch.cuda.init()
KEYS = ("allocations.current", "num_host_alloc", "num_host_free", "host_alloc_time.count",
        "active_requests.current")


def stats():
    s = torch.cuda.host_memory_stats()
    return {k: s.get(k, 0) for k in KEYS}


def pin(n):
    try:
        return torch.empty(n, dtype=torch.uint8, pin_memory=True), None
    except Exception as e:
        return None, e


print("torch", torch.__version__, "conf", torch.cuda.memory._get_current_allocator_settings()
      if hasattr(torch.cuda.memory, "_get_current_allocator_settings") else "")
cached, _ = pin(24 * M)  # a 32 MiB block
del cached               # cached, still held from CUDA
before = stats()
t, e = pin(12 * M)       # a 16 MiB block: 48 MiB > 40 MiB
after = stats()
print("failed:", t is None)
print("type:", f"{type(e).__module__}.{type(e).__qualname__}", "| bases:",
      [f"{b.__module__}.{b.__qualname__}" for b in type(e).__mro__[1:]])
print("message:", repr(str(e)))
print("before:", before)
print("after: ", after)
print("unchanged:", before == after)
x = torch.ones(4, device="cuda") + 1  # a kernel launch checks cudaGetLastError
print("next kernel launch: ok")
t, e = pin(12 * M)
print("again:", "failed" if t is None else "ok", stats())
torch._C._host_emptyCache()
t, e = pin(12 * M)
print("after empty_cache:", "failed" if t is None else "ok", stats())
