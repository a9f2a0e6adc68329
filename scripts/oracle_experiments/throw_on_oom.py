"""throw_on_cudamalloc_oom against the default on a 40 MiB fake device (allocator/tests/native_scenarios.rs):

    VRAMLAB_FAKECUDA_CAPACITY=41943040 PYTORCH_CUDA_ALLOC_CONF=throw_on_cudamalloc_oom:True \\
        bash scripts/oracle_experiments/run.sh 2.15 throw_on_oom.py driver 18
"""
import torch, sys
alloc = torch.cuda.caching_allocator_alloc
M = 1 << 20
a = alloc(24 * M, 0)
try:
    b = alloc(int(sys.argv[1]) * M, 0); res = "ok"
except Exception as e:
    res = "OOM: " + str(e).splitlines()[0][:90]
s = torch.cuda.memory_stats()
print(res, "| retries", s["num_alloc_retries"], "ooms", s["num_ooms"], "device_alloc", s["num_device_alloc"])
