"""A GRPO-style RL step on one GPU, written as for a real card and recorded
without one (`vramlab record`): a policy trained with FSDP2 (one rank of a
world of N) and a rollout engine whose weights and KV cache live in an
engine pool that sleeps while the trainer runs (vLLM's sleep mode, verl's
and TRL's colocated setup). The engine pool is a torch.cuda.MemPool over
workloads/record/sleep_pool.c (engine_pool.EnginePool); its sleeps and
wakes, and the phases, are record_function scopes that vramlab reads back
from the snapshot.

    # trainer and engine in one process (verl's hybrid engine)
    vramlab record --torch 2.15 --world-size 8 -o grpo-one -- grpo_step.py --role both
    # two processes on one card: record each, then `vramlab colocate`
    vramlab record --torch 2.15 --world-size 8 -o grpo-trainer -- grpo_step.py --role trainer
    vramlab record --torch 2.15 -o grpo-rollout.pickle -- grpo_step.py --role rollout

Options: --width N, --layers N (the policy), --group N, --prompt N,
--response N (the rollout's batch: group × prompts, tokens), --kv-blocks N
(the engine's KV cache), --steps N, --empty-cache (the trainer empties its
cache before the engine wakes).
"""

import argparse
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from engine_pool import EnginePool  # noqa: E402

phase = torch.profiler.record_function


def policy(width: int, layers: int) -> nn.Module:
    return nn.Sequential(
        *[nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)) for _ in range(layers)]
    )


class Engine:
    """The rollout engine: bf16 weights and a paged KV cache in its pool."""

    def __init__(self, args, layers: int):
        self.args = args
        self.pool = EnginePool(torch)
        w = args.width
        with phase("load"), self.pool.use():
            self.weights = [
                (torch.empty(4 * w, w, dtype=torch.bfloat16, device="cuda"),
                 torch.empty(w, 4 * w, dtype=torch.bfloat16, device="cuda"))
                for _ in range(layers)
            ]
        with phase("kv_cache"), self.pool.use():
            # One tensor per layer: blocks × (K, V) × 16 tokens × width.
            self.kv = [torch.empty(args.kv_blocks, 2, 16, w, dtype=torch.bfloat16, device="cuda") for _ in range(layers)]

    def generate(self):
        a, w = self.args, self.args.width
        batch = a.group * a.prompts
        with phase("rollout"):
            tokens = torch.empty(batch, a.prompt + a.response, dtype=torch.long, device="cuda")
            for _ in range(a.response // 16):  # a decode step per 16 tokens
                h = torch.empty(batch, w, dtype=torch.bfloat16, device="cuda")
                for up, down in self.weights:
                    h = (h @ up.t()).relu() @ down.t()
                logits = torch.empty(batch, a.vocab, dtype=torch.float32, device="cuda")
                del h, logits
            return tokens

    def sleep(self):
        with phase("sleep"):
            self.pool.sleep()

    def wake(self):
        with phase("wake"):
            self.pool.wake()

    def load_from(self, model: nn.Module):
        """The weight sync: each trainer layer gathered and copied in."""
        with phase("sync"):
            for block, (up, down) in zip(model, self.weights):
                full_up = block[0].weight.full_tensor() if hasattr(block[0].weight, "full_tensor") else block[0].weight
                up.copy_(full_up)
                full_down = block[2].weight.full_tensor() if hasattr(block[2].weight, "full_tensor") else block[2].weight
                down.copy_(full_down)
                del full_up, full_down


def trainer(args):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    dist.init_process_group("nccl")
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    mesh = init_device_mesh("cuda", (world,))
    with phase("load"):
        model = policy(args.width, args.layers).cuda()
        kw = {"mesh": mesh, "mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)}
        for block in model:
            fully_shard(block, **kw)
        fully_shard(model, **kw)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    return model, opt


def train_step(args, model, opt, tokens):
    batch = tokens.shape[0] // int(os.environ.get("WORLD_SIZE", "1"))
    with phase("train"):
        for _ in range(2):  # old-policy log-probs, then the update
            x = torch.empty(max(batch, 1), tokens.shape[1], args.width, device="cuda")
            loss = model(x).float().pow(2).mean()
            loss.backward()
            del x, loss
        opt.step()
        opt.zero_grad()
        if args.empty_cache:
            torch.cuda.empty_cache()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--role", choices=["both", "trainer", "rollout"], default="both")
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--prompt", type=int, default=256)
    p.add_argument("--response", type=int, default=512)
    p.add_argument("--kv-blocks", type=int, default=512)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--empty-cache", action="store_true")
    args = p.parse_args()
    if args.role == "rollout":
        torch.cuda.set_device(0)
        engine = Engine(args, args.layers)
        for _ in range(args.steps):
            tokens = engine.generate()
            del tokens
            engine.sleep()
            engine.wake()
        return
    model, opt = trainer(args)
    engine = Engine(args, args.layers) if args.role == "both" else None
    for _ in range(args.steps):
        if engine is not None:
            tokens = engine.generate()
            engine.sleep()
        else:
            tokens = torch.empty(args.group * args.prompts, args.prompt + args.response, dtype=torch.long, device="cuda")
        train_step(args, model, opt, tokens)
        del tokens
        if engine is not None:
            engine.wake()
            engine.load_from(model)
    import torch.distributed as dist

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
