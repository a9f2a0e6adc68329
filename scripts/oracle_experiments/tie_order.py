"""Which of two free blocks of one size PyTorch's allocator takes: the two
experiments behind allocator/tests/native_tie_order.rs. Run with a torch
wheel on vramlab's fake CUDA device (no GPU needed):

    bash scripts/oracle_experiments/run.sh 2.15 tie_order.py [driver|ascending]
"""
import torch

alloc = torch.cuda.caching_allocator_alloc
free = torch.cuda.caching_allocator_delete
M = 1 << 20


def two_whole_segments() -> str:
    a = alloc(30 * M, 0)
    b = alloc(30 * M, 0)
    free(a)
    free(b)
    c = alloc(3 * M, 0)
    free(c)
    torch.cuda.empty_cache()
    return "older segment" if c == a else "newer segment"


def older_segment_against_older_block() -> str:
    a = alloc(30 * M, 0)
    b = alloc(30 * M, 0)
    free(b)
    b1 = alloc(12 * M, 0)
    b2 = alloc(18 * M, 0)
    free(a)
    a1 = alloc(12 * M, 0)
    a2 = alloc(18 * M, 0)
    assert (a1, b1) == (a, b)
    free(a1)
    free(b1)
    c = alloc(12 * M, 0)
    for p in (c, a2, b2):
        free(p)
    torch.cuda.empty_cache()
    return "older segment (newer block)" if c == a else "newer segment (older block)"


print(torch.__version__, "| two whole segments:", two_whole_segments(),
      "| older segment vs older block:", older_segment_against_older_block())
