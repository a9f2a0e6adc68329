"""Runs a user's script unchanged with PyTorch's memory history on, and
writes PyTorch's own snapshot of it (``vramlab record``).

    python record_script.py --out DIR [--max-entries N] [--stacks python|all] -- SCRIPT [ARGS...]

The process already runs on vramlab's fake CUDA device (the environment
``vramlab record`` gives it); nothing here imitates PyTorch: the script's
own CUDA calls, PyTorch's allocator and NVIDIA's libraries decide every
allocation. History starts inside CUDA's lazy initialisation, so it sees
the first allocation and honours a ``PYTORCH_ALLOC_CONF`` the script sets
before that. At the end (normal exit, ``sys.exit``, an exception such as
an out-of-memory error) it writes ``DIR/snapshot.pickle`` and
``DIR/summary.json``; the script's own exit status is the process's.
"""

import json
import os
import pickle
import runpy
import sys
import time
import traceback


def parse(argv):
    opts = {"out": None, "max_entries": 10_000_000, "stacks": "python", "values": "track"}
    i = 0
    while i < len(argv) and argv[i] != "--":
        key = argv[i]
        if key not in ("--out", "--max-entries", "--stacks", "--values") or i + 1 >= len(argv):
            raise SystemExit(f"record_script.py: unexpected argument {key!r}")
        opts[key[2:].replace("-", "_")] = argv[i + 1]
        i += 2
    rest = argv[i + 1:]
    if opts["out"] is None or not rest:
        raise SystemExit("usage: record_script.py --out DIR [--max-entries N] [--stacks python|all] -- SCRIPT [ARGS...]")
    return opts, rest


def start_history(torch, opts):
    def start():
        torch.cuda.memory._record_memory_history(
            max_entries=int(opts["max_entries"]), context="all", stacks=opts["stacks"])

    if torch.cuda.is_initialized():
        start()
    else:
        # Runs inside torch.cuda's lazy init, before the first allocation.
        torch.cuda._lazy_call(start)


def track_values(torch, out):
    """A dispatch mode that follows the values PyTorch's kernels would
    have written where they are uniform and known (``torch.ones``, a
    ``full`` of a Python value, comparisons and logic on them: the rules of
    ``vramlab_datadep``), and answers ``.item()``/``bool()`` of such a
    tensor with that value; every op still runs as it is, so allocations
    are untouched. Any other read is the device's (what was copied there,
    else zero). Returns the mode (entered by the caller) and its tally."""
    sys.path.insert(0, out)
    import vramlab_datadep as datadep
    from torch.utils._python_dispatch import TorchDispatchMode

    values = datadep.Values()
    local_scalar = torch.ops.aten._local_scalar_dense.default
    tally = {"known_reads": 0, "device_reads": 0, "assumed_reads": 0, "examples": []}

    def reader():
        """Where a read happens: the innermost frame outside torch and this
        file (a library's line, else the script's), shortened."""
        f = sys._getframe(2)
        while f is not None:
            fn = f.f_code.co_filename
            if fn != __file__ and os.sep + "torch" + os.sep not in fn and not fn.startswith("<"):
                return datadep._short(f"{fn}:{f.f_lineno}")
            f = f.f_back
        return "?"

    class KnownValues(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls):
            # Off while torch.compile traces and compiles (so that it
            # compiles as without this mode), on while its output runs.
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is local_scalar and args and getattr(args[0], "is_cuda", False):
                v = values.get(args[0])
                if v is not None:
                    tally["known_reads" if v[1] else "assumed_reads"] += 1
                    if not v[1] and len(tally["examples"]) < 4:
                        seen = f"{reader()} -> {v[0]!r}"
                        if seen not in tally["examples"]:
                            tally["examples"].append(seen)
                    return datadep._as(v[0], args[0].dtype)
                tally["device_reads"] += 1
            out = func(*args, **kwargs)
            try:
                values.after(func, args, kwargs, out)
            except Exception:  # a rule that does not fit this op: forget, never fail the script
                for a in args:
                    values.forget(a)
            return out

    return KnownValues(), tally


_PLUMBING = (os.sep + os.path.join("torch", "_dynamo", "eval_frame.py"), os.sep + os.path.join("torch", "_compile.py"))


def clean_frames(frames):
    """A stack as the script alone would have it: without this launcher's
    frames (the dispatch mode at the top, ``runpy`` and ``main`` at the
    bottom) and the torch plumbing that calls a dispatch mode."""
    top = 0
    for i, f in enumerate(frames):
        if f.get("filename") == __file__ and f.get("name") == "__torch_dispatch__":
            top = i + 1
            while top < len(frames) and frames[top].get("filename", "").endswith(_PLUMBING):
                top += 1
            break
    end = len(frames)
    while end > top and (frames[end - 1].get("filename") == __file__
                         or frames[end - 1].get("filename", "").startswith("<frozen runpy>")
                         or frames[end - 1].get("filename", "").endswith(os.sep + "runpy.py")):
        end -= 1
    return frames[top:end]


def clean_snapshot(snap):
    for trace in snap.get("device_traces", []):
        for e in trace:
            if "frames" in e:
                e["frames"] = clean_frames(e["frames"])
    for seg in snap.get("segments", []):
        for b in seg.get("blocks", []):
            if "frames" in b:
                b["frames"] = clean_frames(b["frames"])
            for h in b.get("history", []) or []:
                if "frames" in h:
                    h["frames"] = clean_frames(h["frames"])
    return snap


def stats(torch):
    if not torch.cuda.is_initialized():
        return {}
    s = torch.cuda.memory_stats()
    pick = {
        "peak_reserved_bytes": "reserved_bytes.all.peak",
        "peak_allocated_bytes": "allocated_bytes.all.peak",
        "reserved_bytes_at_exit": "reserved_bytes.all.current",
        "num_alloc_retries": "num_alloc_retries",
        "num_ooms": "num_ooms",
        "num_device_alloc": "num_device_alloc",
        "num_device_free": "num_device_free",
    }
    return {k: s.get(v) for k, v in pick.items()}


def main():
    opts, rest = parse(sys.argv[1:])
    script = os.path.abspath(rest[0])
    os.makedirs(opts["out"], exist_ok=True)
    import torch

    start_history(torch, opts)
    mode, tally = track_values(torch, opts["out"]) if opts["values"] == "track" else (None, None)
    sys.argv = [script] + rest[1:]
    sys.path[0] = os.path.dirname(script)
    status, error = 0, None
    began = time.monotonic()
    try:
        if mode is None:
            runpy.run_path(script, run_name="__main__")
        else:
            with mode:
                runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    except BaseException as e:  # the script's own failure: recorded, then reported
        traceback.print_exc()
        status, error = 1, f"{type(e).__name__}: {e}".splitlines()[0][:500]
    seconds = time.monotonic() - began
    # What the script left behind is released (the snapshot then shows its
    # frees, as at the end of a run); a cycle kept alive by a traceback or
    # the value tracker would otherwise hold tensors past it.
    import gc

    gc.collect()
    summary = {
        "torch_version": torch.__version__,
        "device_name": torch.cuda.get_device_name(0) if torch.cuda.is_initialized() else None,
        "exit_status": status,
        "error": error,
        "script_seconds": round(seconds, 3),
        "cuda_used": torch.cuda.is_initialized(),
    }
    summary.update(stats(torch))
    if tally is not None:
        summary["values"] = tally
    if torch.cuda.is_initialized():
        snap = clean_snapshot(torch.cuda.memory._snapshot())
        with open(os.path.join(opts["out"], "snapshot.pickle"), "wb") as f:
            pickle.dump(snap, f)
    with open(os.path.join(opts["out"], "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    # The script's atexit hooks run as usual; summary.json already holds
    # its status should the teardown itself fail.
    raise SystemExit(status)


if __name__ == "__main__":
    main()
