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
        with recorder:
            _run(ns.workload, params, script, Ctx(torch.device("cpu"), False, recorder=recorder))
            finish(recorder)
    else:
        dev = ns.device_type
        if dev == "auto":
            dev = "cuda" if (script is not None and torch.cuda.is_available()) else "cpu"
        ws = CUBLAS_WORKSPACE_HOPPER if ns.cublas_workspace is None else ns.cublas_workspace
        from .datadep import set_assumptions  # issue 20: scripts run unchanged (see fake.py)

        set_assumptions(ns.assume)
        with fake_recording(rec, device_type=dev, cublas_workspace=ws, scripts=script is not None) as recorder:
            _run(ns.workload, params, script, Ctx(torch.device(dev), True, recorder=recorder))
    seconds = time.time() - t0

    what = ns.workload or " ".join(script)
    rec.header.update({
        "source": f"vramlab_record.cpu: {what} recorded on the CPU "
                  f"({'real tensors' if ns.real else 'fake tensors'}, fake CPU device standing for the GPU)",
        "framework": cli.versions(),
        "recorder": "vramlab_record.cpu " + ("--real" if ns.real else "(FakeTensorMode)"),
        "command": cli.command_line("vramlab_record.cpu"),
    })
    if ns.workload:
        rec.header["workload"] = ns.workload
        rec.params.update(cli.header_params(ns.workload, params))
    rec.header.update({"events": rec.num_events, "allocs": rec.allocs, "peak_live_bytes": rec.peak_live_bytes})
    rec.write(ns.output)
    print(f"{ns.output}: {rec.allocs} allocations, {rec.num_events} events, peak live "
          f"{rec.peak_live_bytes / 2**30:.3f} GiB, recorded in {seconds:.1f} s", file=sys.stderr)
    return 0


def _run(workload, params, script, ctx):
    from .workloads import WORKLOADS

    if workload:
        WORKLOADS[workload].load()(ctx, **params)
    else:
        cli.run_script(script)


if __name__ == "__main__":
    sys.exit(main())
