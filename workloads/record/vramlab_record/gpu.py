"""Record a workload on a GPU with PyTorch's own memory history.

    python -m vramlab_record.gpu -o out.pickle -- train.py --epochs 1
    python -m vramlab_record.gpu -o out.pickle --alloc-conf expandable_segments:True -- -m pkg.train
    python -m vramlab_record.gpu -o llama.pickle llama-3-8b-train --seq 1024

Wraps the work in ``torch.cuda.memory._record_memory_history(enabled="all",
context=..., stacks=..., max_entries=...)`` and writes the result with
``torch.cuda.memory._dump_snapshot(path)``, then turns recording off. The
snapshot is also written when the work raises (an out-of-memory error
included: the pickle then holds the ``oom`` entry), and, with
``--dump-on-oom``, from the allocator's OOM observer at the moment of the
failure. ``--alloc-conf`` sets ``PYTORCH_ALLOC_CONF`` (and the older
``PYTORCH_CUDA_ALLOC_CONF``) before CUDA is initialised; the snapshot echoes
the settings in ``allocator_settings``. Recording starts before the user's
script runs, so the trace is self-contained (starts from an empty allocator).

Settings are echoed on stderr. ``vramlab replay out.pickle`` reads the result.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from . import cli


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    own, script = cli.split_argv(argv)
    p = argparse.ArgumentParser(prog="python -m vramlab_record.gpu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", help="snapshot pickle to write (.pickle)")
    p.add_argument("--max-entries", type=int, default=1_000_000,
                   help="ring buffer size of the allocation history (default 1000000; older entries are "
                        "overwritten when it is full, and vramlab then warns that the trace is truncated)")
    p.add_argument("--stacks", choices=["python", "all"], default="python",
                   help="stack traces to keep per entry: python (default, fast) or all (adds C++ frames; "
                        "the dump can take minutes)")
    p.add_argument("--context", choices=["all", "alloc", "state"], default="all",
                   help="which events get stack traces (default all)")
    p.add_argument("--alloc-conf", default=None, metavar="CONF",
                   help="PYTORCH_ALLOC_CONF value to run under, e.g. expandable_segments:True")
    p.add_argument("--device", type=int, default=None, help="CUDA device index (default: the current one)")
    p.add_argument("--dump-on-oom", action="store_true",
                   help="also write OUTPUT.oom.pickle from the allocator's OOM observer when an allocation fails")
    p.add_argument("--list", action="store_true", help="list the built-in workloads and their parameters")
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

    # The allocator reads its settings when CUDA is first used.
    if ns.alloc_conf is not None:
        os.environ["PYTORCH_ALLOC_CONF"] = ns.alloc_conf
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = ns.alloc_conf

    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA device is available; record on the CPU with python -m vramlab_record.cpu",
              file=sys.stderr)
        return 2
    if ns.device is not None:
        torch.cuda.set_device(ns.device)
    dev = torch.device("cuda", torch.cuda.current_device())
    conf = os.environ.get("PYTORCH_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
    settings = {
        "output": ns.output,
        "enabled": "all",
        "context": ns.context,
        "stacks": ns.stacks,
        "max_entries": ns.max_entries,
        "device": f"{dev} ({torch.cuda.get_device_name(dev)}, "
                  f"{torch.cuda.get_device_properties(dev).total_memory} bytes)",
        "PYTORCH_ALLOC_CONF": conf,
        "versions": cli.versions(),
        "run": ns.workload and f"{ns.workload} {params}" or " ".join(script),
    }
    for k, v in settings.items():
        print(f"vramlab_record.gpu: {k}: {v}", file=sys.stderr)

    if ns.dump_on_oom:
        oom_path = ns.output + ".oom.pickle"

        def on_oom(device, alloc, device_alloc, device_free):
            torch.cuda.memory._dump_snapshot(oom_path)
            print(f"vramlab_record.gpu: out of memory on device {device} asking for {alloc} bytes; "
                  f"snapshot written to {oom_path}", file=sys.stderr)

        torch._C._cuda_attach_out_of_memory_observer(on_oom)

    from .workloads import WORKLOADS, Ctx

    torch.cuda.memory._record_memory_history(
        enabled="all", context=ns.context, stacks=ns.stacks, max_entries=ns.max_entries, device=dev
    )
    t0 = time.time()
    failed = None
    try:
        if ns.workload:
            torch.cuda.set_device(dev)
            WORKLOADS[ns.workload].load()(Ctx(dev, False), **params)
        else:
            cli.run_script(script)
        torch.cuda.synchronize(dev)
    except BaseException as e:  # noqa: BLE001 - the snapshot is written first, then it propagates
        failed = e
    finally:
        seconds = time.time() - t0
        torch.cuda.memory._dump_snapshot(ns.output)
        torch.cuda.memory._record_memory_history(enabled=None, device=dev)
    stats = torch.cuda.memory_stats(dev)
    print(f"vramlab_record.gpu: {ns.output}: ran {seconds:.1f} s; peak allocated "
          f"{stats.get('allocated_bytes.all.peak', 0)} bytes, peak reserved "
          f"{stats.get('reserved_bytes.all.peak', 0)} bytes, "
          f"{stats.get('num_alloc_retries', 0)} alloc retries, {stats.get('num_ooms', 0)} OOMs",
          file=sys.stderr)
    if failed is not None:
        print(f"vramlab_record.gpu: the workload failed ({type(failed).__name__}: {failed}); "
              f"the snapshot up to the failure was written", file=sys.stderr)
        raise failed
    return 0


if __name__ == "__main__":
    sys.exit(main())
