"""PyTorch's own FSDP2 memory estimate (``FSDPMemTracker``) for a job of
``examples/sharded/llm_train.py``, for the side-by-side comparison
(``scripts/sharded_side_by_side.py``, docs/results/sharded.md).

    python -m vramlab_record.fsdp_tracker --world-size 8 -- --model llama-3-8b --parallel fsdp2 --seq 2048

Runs rank 0 under ``FakeTensorMode`` with the fake process group, as
``torch.distributed._tools.fsdp2_mem_tracker`` is meant to be used, and
prints one JSON line: the tracker's peak (bytes, the device's ``Total``),
the parameter count and the largest module's own parameter count (what
DeepSpeed's ZeRO-3 estimator takes). FSDP2 jobs only (fsdp2, hsdp, lora);
for the others it prints only the parameter counts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from .cli import split_argv

    own, script_args = split_argv(argv)
    script_args = script_args or []
    p = argparse.ArgumentParser(prog="python -m vramlab_record.fsdp_tracker", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--gpus-per-node", type=int, default=8)
    ns = p.parse_args(own)

    import warnings

    warnings.filterwarnings("ignore")
    import torch
    import torch.distributed as dist
    import torch.testing._internal.distributed.fake_pg  # noqa: F401
    from torch._C._distributed_c10d import FakeStore
    from torch.distributed.device_mesh import init_device_mesh

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(here, "examples", "sharded"))
    import llm_train as lt

    sp = argparse.ArgumentParser()
    sp.add_argument("--model", default="llama-3-8b")
    sp.add_argument("--parallel", default="fsdp2")
    sp.add_argument("--seq", type=int, default=2048)
    sp.add_argument("--batch", type=int, default=1)
    sp.add_argument("--layers", type=int, default=None)
    sp.add_argument("--steps", type=int, default=2)
    sp.add_argument("--checkpointing", action="store_true")
    sp.add_argument("--no-reshard", action="store_true")
    args = sp.parse_args(script_args)

    world = ns.world_size
    with torch.device("meta"):
        model, kind = lt.build(args.model, args.layers)
    total = sum(q.numel() for q in model.parameters())
    largest = max(sum(q.numel() for q in m.parameters(recurse=False)) for m in model.modules())
    out = {"params": total, "largest_layer_params": largest, "tracker_peak_bytes": None}
    if args.parallel not in ("fsdp2", "hsdp", "lora") or kind != "llm":
        print(json.dumps(out))
        return 0
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    per_node = min(ns.gpus_per_node, world)
    if args.parallel == "hsdp":
        mesh = init_device_mesh("cpu", (world // per_node, per_node), mesh_dim_names=("replicate", "shard"))
    else:
        mesh = init_device_mesh("cpu", (world,))
    try:
        out["tracker_peak_bytes"] = _track(model, args, mesh, lt)
    finally:
        dist.destroy_process_group()
    print(json.dumps(out))
    return 0


def _track(model, args, mesh, lt) -> int:
    """FSDPMemTracker's peak (bytes) over the job's steps."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

    with FakeTensorMode():
        with torch.device("meta"):
            model, kind = lt.build(args.model, args.layers)
        if args.parallel == "lora":
            lt.add_lora(model)
        if args.checkpointing or args.parallel == "lora":
            lt.checkpoint_blocks(model)
        lt.shard(model, mesh, not args.no_reshard)
        model.to_empty(device="cpu")
        params = [q for q in model.parameters() if q.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
        ids = torch.randint(0, 32000, (args.batch, args.seq))
        tracker = FSDPMemTracker(model, opt)
        tracker.track_inputs((ids,))
        with tracker:
            for step in range(args.steps):
                loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                if step == 0:
                    tracker.reset_mod_stats()  # the tracker follows one iteration at a time
        peak = tracker.get_tracker_snapshot("peak")
        return max(v.get("Total", 0) for v in peak.values())


if __name__ == "__main__":
    sys.exit(main())
