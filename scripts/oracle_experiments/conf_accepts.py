"""Which settings strings a wheel accepts, and its messages for the others:
each argument through `torch.cuda.memory._set_allocator_settings` (the
parser `PYTORCH_ALLOC_CONF` goes through), one line per string.

    bash scripts/oracle_experiments/run.sh 2.15 conf_accepts.py driver "pinned_max_cached_size_mb:64" ...
"""
import sys

import torch

torch.cuda.init()
for s in sys.argv[1:]:
    try:
        torch.cuda.memory._set_allocator_settings(s)
        print(f"{s!r}\tOK")
    except Exception as e:  # PyTorch's own message, first line
        print(f"{s!r}\t{type(e).__name__}: {str(e).splitlines()[0]}")
