"""Probe: a MemPool with a sleep-capable pluggable allocator
(workloads/record/sleep_pool.c) on the fake device. Prints the figures
after each step as JSON lines."""
import ctypes, json, os, sys, subprocess, tempfile
import torch
MIB = 1 << 20
src = os.path.join(os.path.dirname(__file__), "../../workloads/record/sleep_pool.c")
so = os.path.join(tempfile.mkdtemp(), "sleep_pool.so")
subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", so, src, "-ldl"], check=True)
lib = ctypes.CDLL(so)
lib.vl_sleep.restype = ctypes.c_ulonglong
lib.vl_mapped_bytes.restype = ctypes.c_ulonglong
torch.cuda.set_device(0)
alloc = torch.cuda.memory.CUDAPluggableAllocator(so, "vl_malloc", "vl_free")
pool = torch.cuda.MemPool(alloc.allocator())
def show(step):
    free, total = torch.cuda.mem_get_info()
    s = torch.cuda.memory_stats()
    print(json.dumps({"step": step, "used": total - free, "reserved": s.get("reserved_bytes.all.current"),
        "peak_reserved": s.get("reserved_bytes.all.peak"), "num_device_alloc": s.get("num_device_alloc"),
        "retries": s.get("num_alloc_retries"), "ooms": s.get("num_ooms"), "mapped": lib.vl_mapped_bytes()}))
lib.vl_set_tag(1)
with torch.cuda.use_mem_pool(pool):
    w = torch.empty(300 * MIB, dtype=torch.uint8, device="cuda")
    kv = torch.empty(400 * MIB, dtype=torch.uint8, device="cuda")
show("pool filled")
print("released", lib.vl_sleep(1))
show("asleep")
x = torch.empty(600 * MIB, dtype=torch.uint8, device="cuda")
show("default alloc while asleep")
print("wake", lib.vl_wake(1))
show("wake while other holds")
del x
torch.cuda.empty_cache()
show("freed other")
print("wake", lib.vl_wake(1))
show("awake")
del w, kv
torch.cuda.empty_cache()
show("pool freed + empty_cache")
del pool
show("pool deleted")
