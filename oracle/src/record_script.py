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
    import inspect

    record = torch.cuda.memory._record_memory_history
    extra = {}
    if "record_pinned_host_memory" in inspect.signature(record).parameters:
        # 2.14+: PyTorch's pinned host allocator keeps its own history too
        # (the snapshot's host_segments and host_traces).
        extra["record_pinned_host_memory"] = True

    def start():
        record(max_entries=int(opts["max_entries"]), context="all", stacks=opts["stacks"], **extra)

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


def pinned_requests(torch):
    """A dispatch mode that notes the bytes of each pinned host tensor the
    script makes (``pin_memory()``, ``torch.empty(..., pin_memory=True)``,
    ``.to("cpu", non_blocking=True)``), in the order they appear: the
    requests, which PyTorch's host history (``host_traces``) does not keep
    (it records the rounded blocks). Each is ``[address, bytes]``; vramlab
    pairs them with the history's ``alloc`` entries by address. Every op
    runs as it is."""
    import weakref

    from torch.utils._python_dispatch import TorchDispatchMode

    requests = []
    live = set()
    to_copy = torch.ops.aten._to_copy.default

    def pinned_out(func, args, kwargs, out):
        # Known by the op (is_pinned() can answer False before CUDA's
        # primary context exists): pin_memory(), a factory asked for
        # pinned memory, and a non_blocking copy from the GPU to the CPU.
        if not isinstance(out, torch.Tensor) or out.device.type != "cpu":
            return False
        if func.__name__.startswith("_pin_memory") or kwargs.get("pin_memory"):
            return True
        return func is to_copy and bool(kwargs.get("non_blocking")) and bool(
            args and getattr(args[0], "is_cuda", False))

    def see(t):
        try:
            st = t.untyped_storage()
        except Exception:  # a tensor without storage (fake, sparse): not memory
            return
        ptr = st.data_ptr()
        if not ptr or ptr in live:
            return
        live.add(ptr)
        requests.append([ptr, st.nbytes()])
        weakref.finalize(st, live.discard, ptr)

    class PinnedRequests(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls):
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if pinned_out(func, args, kwargs, out):
                see(out)
            return out

    return PinnedRequests(), requests


_PLUMBING = (os.sep + os.path.join("torch", "_dynamo", "eval_frame.py"), os.sep + os.path.join("torch", "_compile.py"))


def clean_frames(frames):
    """A stack as the script alone would have it: without this launcher's
    frames (the dispatch mode at the top, ``runpy`` and ``main`` at the
    bottom) and the torch plumbing that calls a dispatch mode."""
    # The outermost of this launcher's dispatch modes (they nest).
    top = 0
    for i, f in enumerate(frames):
        if f.get("filename") == __file__ and f.get("name") == "__torch_dispatch__":
            top = i + 1
    while 0 < top < len(frames) and frames[top].get("filename", "").endswith(_PLUMBING):
        top += 1
    end = len(frames)
    while end > top and (frames[end - 1].get("filename") == __file__
                         or frames[end - 1].get("filename", "").startswith("<frozen runpy>")
                         or frames[end - 1].get("filename", "").endswith(os.sep + "runpy.py")):
        end -= 1
    return frames[top:end]


def clean_snapshot(snap):
    # Device traces are one list per device; host traces (2.14+) one list.
    traces = list(snap.get("device_traces", [])) + [snap.get("host_traces") or []]
    for trace in traces:
        for e in trace:
            if "frames" in e:
                e["frames"] = clean_frames(e["frames"])
    for seg in list(snap.get("segments", [])) + list(snap.get("host_segments") or []):
        for b in seg.get("blocks", []):
            if "frames" in b:
                b["frames"] = clean_frames(b["frames"])
            for h in b.get("history", []) or []:
                if "frames" in h:
                    h["frames"] = clean_frames(h["frames"])
    return snap


def fake_world(torch, groups):
    """This process is one rank of ``WORLD_SIZE`` (the environment
    ``torchrun`` gives, set by ``vramlab record --world-size``), and the
    other ranks are taken to be this one: every process group the script
    creates — ``init_process_group("nccl")``, ``new_group``, a device
    mesh's — is a ``vramlab`` process group whose collectives complete at
    once, as if every rank held this rank's data: an all-gather fills each
    slot with the input, everything else leaves its tensors as they are. So
    what the collectives' callers allocate (FSDP's all-gather and
    reduce-scatter buffers, DDP's buckets, DTensor redistributions) is
    allocated as on a GPU, and checks that compare ranks (DDP's parameter
    shapes) agree. NCCL itself does not run, so its buffers are not in the
    snapshot. Appends each group's size (of the groups this rank is in) to
    ``groups``."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    from torch._C._distributed_c10d import _create_work_from_future

    world, me = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])

    def done(result):
        fut = torch.futures.Future()
        fut.set_result(result)
        return _create_work_from_future(fut)

    def gather_into(slots, inp):
        for slot in slots:
            if slot.data_ptr() != inp.data_ptr():
                slot.copy_(inp)

    class OneRankWorld(dist.ProcessGroup):
        def __init__(self, rank, size):
            super().__init__(rank, size)
            self._size = size

        def getBackendName(self):
            return "vramlab"

        @property
        def group_name(self):
            # The name c10d registered the group under (a process group made
            # in Python has no name of its own on the C++ side).
            return c10d._world.pg_names[self]

        @property
        def pg_name(self):
            return self.group_name

        def size(self):
            return self._size

        def allreduce(self, tensors, opts=None):
            return done(tensors)

        def allreduce_coalesced(self, tensors, opts=None):
            return done(tensors)

        def broadcast(self, tensors, opts=None):
            return done(tensors)

        def reduce(self, tensors, opts=None):
            return done(tensors)

        def barrier(self, opts=None):
            return done([])

        def allgather(self, outputs, inputs, opts=None):
            for outs, inp in zip(outputs, inputs):
                gather_into(outs, inp)
            return done(outputs)

        def _allgather_base(self, out, inp, opts=None):
            gather_into(list(torch.chunk(out, self._size)), inp)
            return done([out])

        def allgather_into_tensor_coalesced(self, outs, inps, opts=None):
            for o, i in zip(outs, inps):
                gather_into(list(torch.chunk(o, self._size)), i)
            return done(outs)

        def allgather_coalesced(self, outputs, inputs, opts=None):
            return self.allgather(outputs, inputs, opts)

        def reduce_scatter(self, outputs, inputs, opts=None):
            return done(outputs)

        def _reduce_scatter_base(self, out, inp, opts=None):
            return done([out])

        def reduce_scatter_tensor_coalesced(self, outs, inps, opts=None):
            return done(outs)

        def alltoall_base(self, out, inp, out_splits, in_splits, opts=None):
            return done([out])

        def alltoall(self, outs, inps, opts=None):
            return done(outs)

        def gather(self, outputs, inputs, opts=None):
            return done(outputs)

        def scatter(self, outputs, inputs, opts=None):
            return done(outputs)

        def send(self, tensors, dst, tag=0):
            return done(tensors)

        def recv(self, tensors, src, tag=0):
            return done(tensors)

        def recv_anysource(self, tensors, tag=0):
            return done(tensors)

        # The single-tensor forms c10d calls from 2.15 (all_gather_single,
        # reduce_scatter_single, ...) in place of the underscored ones.
        def all_gather_single(self, out, inp, opts=None):
            return self._allgather_base(out, inp, opts)

        def all_gather_single_coalesced(self, outs, inps, opts=None):
            return self.allgather_into_tensor_coalesced(outs, inps, opts)

        def reduce_scatter_single(self, out, inp, opts=None):
            return done([out])

        def reduce_scatter_single_coalesced(self, outs, inps, opts=None):
            return done(outs)

        def all_to_all_single(self, out, inp, out_splits, in_splits, opts=None):
            return done([out])

        def gather_single(self, *args, **kw):
            return done([])

    def create(store, rank, size, timeout):
        if size > 1 or not groups:
            groups.append(size)
        return OneRankWorld(rank, size)

    dist.Backend.register_backend("vramlab", create, devices=["cpu", "cuda"])
    orig_init = c10d.init_process_group

    def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                           store=None, group_name="", pg_options=None, device_id=None, **kw):
        kwargs = {"timeout": timeout} if timeout is not None else {}
        orig_init("vramlab", store=dist.HashStore(), world_size=world, rank=me, group_name=group_name,
                  **kwargs)

    orig_new_group = c10d.new_group

    def new_group(ranks=None, timeout=None, backend=None, pg_options=None, *args, **kw):
        kw.pop("device_id", None)
        return orig_new_group(ranks=ranks, timeout=timeout, backend="vramlab", *args, **kw)

    for mod in (dist, c10d):
        mod.init_process_group = init_process_group
        mod.new_group = new_group


def events_digest(snap):
    """A digest of the recorded events without their addresses and device:
    two ranks with the same digest made the same requests in the same order
    (what a job's ``same_as``, basis ``recorded``, says)."""
    import hashlib

    h = hashlib.sha256()
    for trace in snap.get("device_traces", []):
        for e in trace:
            h.update(f"{e.get('action')} {e.get('size')} {e.get('stream')}\n".encode())
    return h.hexdigest()


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
    groups = []
    if os.environ.get("VRAMLAB_RECORD_FAKE_WORLD") == "1":
        fake_world(torch, groups)
    mode, tally = track_values(torch, opts["out"]) if opts["values"] == "track" else (None, None)
    pinned, requests = pinned_requests(torch)
    sys.argv = [script] + rest[1:]
    sys.path[0] = os.path.dirname(script)
    status, error = 0, None
    began = time.monotonic()
    try:
        with pinned:
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
    summary["process_groups"] = groups
    if tally is not None:
        summary["values"] = tally
    if torch.cuda.is_initialized():
        snap = clean_snapshot(torch.cuda.memory._snapshot())
        if snap.get("host_traces"):
            snap["vramlab_host_requests"] = requests
        summary["events_digest"] = events_digest(snap)
        with open(os.path.join(opts["out"], "snapshot.pickle"), "wb") as f:
            pickle.dump(snap, f)
    with open(os.path.join(opts["out"], "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    # The script's atexit hooks run as usual; summary.json already holds
    # its status should the teardown itself fail.
    raise SystemExit(status)


if __name__ == "__main__":
    main()
