"""Weights loaded and converted inside a live MemPool, as an inference
engine with sleep mode does (vLLM runs its whole load, with
process_weights_after_loading, inside its CuMem pool): each MoE layer's
expert weights are replaced by a slightly larger (padded) tensor, and the
old one is freed into a pool that cannot hand it to the next, larger
request nor give it back while the pool is live (pytorch#159674). The shape
of vllm#49151 (pool 9.18 -> 14.44 GiB while live memory grew 9.08 -> 9.61
GiB), at --scale 1/8 by default. Recorded without a GPU:

    vramlab record --torch 2.15 -o conversion.pickle -- pool_weight_conversion.py
    vramlab record --torch 2.15 -o outside.pickle -- pool_weight_conversion.py --load-outside

--load-outside loads and converts in the default pool, then moves the
result into the engine pool (vllm#49151's fix: load outside the pool and
re-home the weights). --engine puts the weights in an engine pool
(engine_pool.EnginePool, a MemPool over a pluggable allocator) instead of a
plain MemPool.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

GIB = 1 << 30
phase = torch.profiler.record_function


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--scale", type=float, default=1 / 8, help="of vllm#49151's 9.08 GiB of weights")
    p.add_argument("--layers", type=int, default=48)
    p.add_argument("--load-outside", action="store_true")
    p.add_argument("--engine", action="store_true")
    args = p.parse_args()
    torch.cuda.set_device(0)
    # vllm#49151: 9.08 GiB of weights of which the converted experts are
    # the 4.73 GiB the pool strands, padded by 0.53 GiB (11.2%).
    dense = int(4.35 * GIB * args.scale) // args.layers
    experts = int(4.73 * GIB * args.scale) // args.layers
    padded = int(experts * 1.112)
    if args.engine:
        from engine_pool import EnginePool

        engine = EnginePool(torch)
        pool, use = engine.pool, engine.use
    else:
        pool = torch.cuda.MemPool()

        def use():
            return torch.cuda.use_mem_pool(pool)

    weights = []
    with phase("load"):
        if args.load_outside:
            layers = [(torch.empty(dense, dtype=torch.uint8, device="cuda"),
                       torch.empty(experts, dtype=torch.uint8, device="cuda")) for _ in range(args.layers)]
        else:
            with use():
                layers = [(torch.empty(dense, dtype=torch.uint8, device="cuda"),
                           torch.empty(experts, dtype=torch.uint8, device="cuda")) for _ in range(args.layers)]
    with phase("convert"):
        ctx = use() if not args.load_outside else torch.cuda.stream(torch.cuda.current_stream())
        with ctx:
            for i, (d, e) in enumerate(layers):
                new = torch.empty(padded, dtype=torch.uint8, device="cuda")
                new[: e.numel()].copy_(e)
                layers[i] = (d, new)
                del e, new
                torch.cuda.empty_cache()  # a no-op while the pool is live
    if args.load_outside:
        with phase("re-home"):
            # Layer by layer: a copy in the pool, the original given back.
            while layers:
                d, e = layers.pop(0)
                with use():
                    weights.append((d.clone(), e.clone()))
                del d, e
                torch.cuda.empty_cache()
    else:
        weights = layers
    with phase("serve"):
        torch.cuda.synchronize()
    del weights


if __name__ == "__main__":
    main()
