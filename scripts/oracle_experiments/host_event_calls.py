"""The CUDA calls behind R3.3-R3.4 of docs/host-allocator-spec.md: two
blocks used on two streams and freed (one event each), the newer one's
stream synchronized, then a pin (one query of the older event: not ready,
the error cleared, processing stops), then the older one's stream
synchronized and a pin (both events queried, oldest first). Events
complete only when synchronized (VRAMLAB_FAKECUDA_EVENTS=sync); gdb prints
each call, and vramlab_fakecuda_mark(n) ties them to the numbered steps:

    cache=~/.cache/vramlab/oracle; fake=$cache/fakecuda-libcudart.so.13
    VRAMLAB_FAKECUDA_EVENTS=sync gdb -q -batch -ex 'set breakpoint pending on' \\
        -ex 'set startup-with-shell off' \\
        -ex "set environment LD_PRELOAD=$fake/libcudart.so.13" \\
        -ex "set environment LD_LIBRARY_PATH=$fake" \\
        -ex 'dprintf cudaEventCreateWithFlags,"CREATE\\n"' \\
        -ex 'dprintf cudaEventRecordWithFlags,"RECORD %p on %p\\n",$rdi,$rsi' \\
        -ex 'dprintf cudaEventQuery,"QUERY %p\\n",$rdi' \\
        -ex 'dprintf cudaGetLastError,"GETLASTERROR\\n"' \\
        -ex 'dprintf cudaStreamSynchronize,"SSYNC %p\\n",$rdi' \\
        -ex 'dprintf vramlab_fakecuda_mark,"MARK %lu\\n",$rdi' \\
        -ex run --args $cache/torch-2.15/bin/python \\
        scripts/oracle_experiments/host_event_calls.py 2>&1 \\
        | grep -E '^(CREATE|RECORD|QUERY|GETLASTERROR|SSYNC|MARK|[0-9] )'
"""
import ctypes
import gc
import sys

import torch

fake = ctypes.CDLL(None)  # the preloaded fake's vramlab_fakecuda_mark
steps = []


def mark(what):
    steps.append(what)
    print(len(steps), what, file=sys.stderr, flush=True)
    fake.vramlab_fakecuda_mark(ctypes.c_uint64(len(steps)))


torch.cuda.init()
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
p = torch.empty(16384, dtype=torch.uint8, pin_memory=True)
q = torch.empty(32768, dtype=torch.uint8, pin_memory=True)
for src, stream in ((p, s1), (q, s2)):
    with torch.cuda.stream(stream):
        torch.empty(src.numel(), dtype=torch.uint8, device="cuda").copy_(src, non_blocking=True)
del p, q, src
gc.collect()
mark("freed p (s1), then q (s2); synchronize s2")
s2.synchronize()
mark("pin 32 KiB")
r = torch.empty(32768, dtype=torch.uint8, pin_memory=True)
mark("synchronize s1; pin 32 KiB")
s1.synchronize()
t = torch.empty(32768, dtype=torch.uint8, pin_memory=True)
mark("end")
