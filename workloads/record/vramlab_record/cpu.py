"""Record a workload's GPU allocation stream on a CPU, without a GPU.

    python -m vramlab_record.cpu -o llama.csv.gz llama-3-8b-train --seq 1024
    python -m vramlab_record.cpu -o mine.pickle -- my_train.py --steps 2
    python -m vramlab_record.cpu --list

By default the work runs under fake tensors (``FakeTensorMode``): every
tensor has its real shape and dtype but no storage, so full-size models
record in seconds on a laptop. The device is a fake CPU that stands for the
GPU: a user script must put its model and data on ``cpu`` when CUDA is not
available (``device = "cuda" if torch.cuda.is_available() else "cpu"``),
and must not do data-dependent work (``.item()``, ``nonzero``, Python
branches on tensor values). ``--real`` runs it for real on the CPU instead
(needs the memory, allows anything).

Output by extension: ``.csv`` / ``.csv.gz`` (vramlab native trace) or
``.pickle`` (a PyTorch-snapshot-shaped file). See README.md for what this
cannot see compared with a GPU recording.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from . import cli


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    own, script = cli.split_argv(argv)
    p = argparse.ArgumentParser(prog="python -m vramlab_record.cpu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", help="output file: .csv, .csv.gz or .pickle")
    p.add_argument("--real", action="store_true", help="run for real on the CPU instead of under fake tensors")
    p.add_argument("--list", action="store_true", help="list the built-in workloads and their parameters")
    p.add_argument("--quiet", action="store_true", help="hide library warnings")
    p.add_argument("--device-type", choices=["auto", "cpu", "cuda"], default="auto",
                   help="the fake device that stands for the GPU: a script's 'cuda' tensors where CUDA is "
                        "available (auto), else 'cpu'; built-in workloads always use cpu")
    p.add_argument("--cublas-workspace", type=int, default=None, metavar="BYTES",
                   help="emulated cuBLAS workspace per thread (default 33554432, Hopper; 8519680 on other "
                        "GPUs; 0 for none)")
    p.add_argument("--assume", action="append", default=[], metavar="KEY=VALUE",  # issue 20 (datadep.py)
                   help="answer a data-dependent read: FILE:LINE=VALUE, item=VALUE, nonzero=FRACTION")
    dist = p.add_argument_group("sharded training (a script written for torchrun; see vramlab_record.distributed)")
    dist.add_argument("--world-size", type=int, default=None, metavar="N",
                      help="run the script as one rank of N, with a fake process group")
    dist.add_argument("--rank", type=int, default=None, metavar="R",
                      help="the rank to record (0..N-1; default 0); -o is its trace")
    dist.add_argument("--ranks", default=None, metavar="all|R,R,...",
                      help="record these ranks, each in its own process, into the job folder -o DIR "
                           "(job.json + one trace per distinct rank; ranks not recorded are noted as "
                           "assumed like rank 0)")
    dist.add_argument("--gpus-per-node", type=int, default=8, metavar="G",
                      help="GPUs per node: LOCAL_RANK = RANK %% G (default 8)")
    dist.add_argument("--nccl-channels", type=int, default=None, metavar="C",
                      help="NCCL channels per communicator for the outside-the-allocator estimate "
                           "(default 16)")
    p.add_argument("workload", nargs="?", help="a built-in workload (see --list)")
    ns, rest = p.parse_known_args(own)
    if ns.list:
        print(cli.list_workloads())
        return 0
    if not ns.output:
        p.error("-o/--output is required")
    if (ns.workload is None) == (script is None):
        p.error("give either a built-in workload or '-- SCRIPT [ARGS]'")
    if script is not None and rest:
        p.error(f"unrecognised arguments before '--': {' '.join(rest)}")
    params = cli.workload_params(ns.workload, rest) if ns.workload else {}
    if ns.nccl_channels is not None and ns.nccl_channels < 1:
        p.error("--nccl-channels must be at least 1")
    if ns.world_size is None and (ns.rank is not None or ns.ranks is not None):
        p.error("--rank and --ranks need --world-size")
    if ns.world_size is not None:
        if script is None:
            p.error("--world-size records a script: give '-- SCRIPT [ARGS]'")
        if ns.world_size < 1:
            p.error("--world-size must be at least 1")
        if ns.rank is not None and ns.ranks is not None:
            p.error("give --rank (one trace) or --ranks (a job folder), not both")
        if ns.ranks is not None:
            from .job import record_job

            return record_job(argv, ns, script)
        if not 0 <= (ns.rank or 0) < ns.world_size:
            p.error(f"--rank {ns.rank} is outside the world of {ns.world_size} ranks (0..{ns.world_size - 1})")
    if ns.quiet:
        warnings.filterwarnings("ignore")

    import torch

    from .fake import CUBLAS_WORKSPACE_HOPPER, fake_recording
    from .recorder import AllocationRecorder, Recording, finish
    from .workloads import WORKLOADS, Ctx

    rec = Recording()
    t0 = time.time()
    if ns.real:
        recorder = AllocationRecorder(rec, device_type="cpu")
        with recorder, _world(ns, recorder) as world:
            _run(ns.workload, params, script, Ctx(torch.device("cpu"), False, recorder=recorder))
            finish(recorder)
        recorder.complete_deferred()
    else:
        dev = ns.device_type
        if dev == "auto":
            dev = "cuda" if (script is not None and torch.cuda.is_available()) else "cpu"
        ws = CUBLAS_WORKSPACE_HOPPER if ns.cublas_workspace is None else ns.cublas_workspace
        from .datadep import set_assumptions  # issue 20: scripts run unchanged (see fake.py)

        set_assumptions(ns.assume)
        with fake_recording(rec, device_type=dev, cublas_workspace=ws, scripts=script is not None) as recorder:
            with _world(ns, recorder) as world:
                _run(ns.workload, params, script, Ctx(torch.device(dev), True, recorder=recorder))
        # Frees deferred by record_stream complete at the end (after the
        # recording's own teardown, which may release more of them).
        recorder.complete_deferred()
    seconds = time.time() - t0

    what = ns.workload or " ".join(script)
    rec.header.update({
        "source": f"vramlab_record.cpu: {what} recorded on the CPU "
                  f"({'real tensors' if ns.real else 'fake tensors'}, fake CPU device standing for the GPU)",
        "framework": cli.versions(),
        "recorder": "vramlab_record.cpu " + ("--real" if ns.real else "(FakeTensorMode)"),
        "command": cli.command_line("vramlab_record.cpu"),
    })
    if ns.world_size is not None:
        rec.header.update(_world_header(ns, world))
    if ns.workload:
        rec.header["workload"] = ns.workload
        rec.params.update(cli.header_params(ns.workload, params))
    rec.header.update({"events": rec.num_events, "allocs": rec.allocs, "peak_live_bytes": rec.peak_live_bytes})
    rec.write(ns.output)
    print(f"{ns.output}: {rec.allocs} allocations, {rec.num_events} events, peak live "
          f"{rec.peak_live_bytes / 2**30:.3f} GiB, recorded in {seconds:.1f} s", file=sys.stderr)
    return 0


def _world(ns, recorder):
    """The fake world of ``--world-size``/``--rank``, or nothing."""
    import contextlib

    if ns.world_size is None:
        return contextlib.nullcontext(None)
    from .distributed import FakeWorld

    return FakeWorld(ns.world_size, ns.rank or 0, ns.gpus_per_node, recorder=recorder)


def _world_header(ns, world) -> dict:
    """The rank's header lines: its place in the world and NCCL's estimate."""
    from .distributed import NCCL_BUFFSIZE, NCCL_CHANNELS, nccl_estimate

    channels = NCCL_CHANNELS if ns.nccl_channels is None else ns.nccl_channels
    groups = world.groups
    return {
        "world_size": ns.world_size,
        "rank": ns.rank or 0,
        "process_groups": " ".join(str(n) for n in groups) or "none",
        "outside_allocator_bytes": nccl_estimate(groups, channels, NCCL_BUFFSIZE),
        "outside_allocator": f"NCCL buffers, estimate: {sum(1 for n in groups if n > 1)} communicator(s) "
                             f"x 2 ring peers x {channels} channels x NCCL_BUFFSIZE {NCCL_BUFFSIZE} bytes",
    }


def _run(workload, params, script, ctx):
    from .workloads import WORKLOADS

    if workload:
        WORKLOADS[workload].load()(ctx, **params)
    else:
        cli.run_script(script)


if __name__ == "__main__":
    sys.exit(main())
