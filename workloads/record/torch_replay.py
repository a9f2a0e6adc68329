"""Replay a vramlab trace through PyTorch's own CUDA caching allocator.

This is the ground truth vramlab's native policy is checked against on a
GPU: every allocation of the trace goes through
``torch.cuda.caching_allocator_alloc(size, device, stream)`` and every free
through ``torch.cuda.caching_allocator_delete(ptr)``, under a given
``PYTORCH_CUDA_ALLOC_CONF`` and optional memory fraction, with memory
history on. The snapshot PyTorch writes is then compared with vramlab's
replay by ``vramlab fidelity OUT/snapshot.pickle``, which replays the
snapshot under its recorded ``allocator_settings``.

    python traces/record/torch_replay.py traces/data/gpt-small-train.csv \\
        --conf expandable_segments:True --out /tmp/run1

Inputs:

* a vramlab native CSV trace (v1, ``traces/src/csv/``): ``# key: value``
  header comments, the header row ``action,id,size,stream``, then
  ``alloc,ID,SIZE[,STREAM]``, ``free,ID``, ``free_requested,ID``,
  ``free_completed,ID`` and ``empty_cache`` rows;
* a PyTorch memory snapshot pickle (``torch.cuda.memory._dump_snapshot``):
  the ``alloc`` and ``free_requested`` (or ``free``) entries of one
  device's ``device_traces``, allocations named by address. A recording
  that starts mid-run begins, by default (``--start fresh``), with the
  blocks in use at its first entry allocated in address order, exactly as
  ``vramlab replay --start fresh`` starts it, so the two can be compared;
  ``--start skip`` skips the frees of those blocks instead (and counts
  them).

A ``free_requested`` is replayed as the ``caching_allocator_delete``;
``free_completed`` has no counterpart (the replay makes no cross-stream
uses, so PyTorch completes the free at once). Streams: stream 0 is the
device's default stream; every other distinct stream value gets its own
``torch.cuda.Stream``. Zero-byte allocations are null pointers, as in
PyTorch, and are neither allocated nor freed.

Outputs in ``--out DIR``:

* ``snapshot.pickle``: ``torch.cuda.memory._dump_snapshot`` at the end of
  the trace (before anything still live is freed), unless ``--no-history``;
* ``memory_stats.json``: ``torch.cuda.memory_stats()`` at the same moment;
* ``timing.csv``: ``index,action,id,size,stream,ns`` for every alloc and
  free call (``time.perf_counter_ns`` around the call; the Python call
  overhead, measured on a no-op with the same arguments, is in
  ``summary.json`` as ``python_call_overhead_ns``);
* ``summary.json``: versions, device, settings, counts, peak memory, the
  first OOM (event index and message), latency percentiles, and a leak check
  (``memory_reserved()`` is 0 after freeing what is left and
  ``empty_cache``).

Memory history costs time on every call: for latency comparisons run with
``--no-history``. The allocator settings must be in the environment before
PyTorch initialises CUDA; the script sets ``PYTORCH_CUDA_ALLOC_CONF``
(removing ``PYTORCH_ALLOC_CONF``) and re-executes itself when the
environment it was started with says otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import platform
import sys
import time

ENV_KEY = "PYTORCH_CUDA_ALLOC_CONF"
OTHER_ENV_KEY = "PYTORCH_ALLOC_CONF"
REEXEC_MARK = "VRAMLAB_TORCH_REPLAY_REEXEC"

# Event kinds of the in-memory trace.
ALLOC, FREE, EMPTY_CACHE = 0, 1, 2
KIND_NAMES = {ALLOC: "alloc", FREE: "free", EMPTY_CACHE: "empty_cache"}


class TraceFormatError(Exception):
    """A malformed trace; the message names the file and line or entry."""


# ---------------------------------------------------------------- readers
def _parse_u64(text: str, what: str, where: str) -> int:
    if not text.isdigit():
        raise TraceFormatError(f"{where}: {what} '{text}' is not a non-negative whole number")
    return int(text)


def _parse_stream(text: str, where: str) -> int:
    try:
        if text.startswith("0x"):
            v = int(text[2:], 16)
        else:
            v = int(text)
    except ValueError:
        raise TraceFormatError(f"{where}: stream '{text}' is not a stream handle") from None
    return v & 0xFFFFFFFFFFFFFFFF  # two's complement of negative int64 values


def read_csv_trace(path: str) -> tuple[dict, list]:
    """Reads a vramlab CSV trace: (header fields, events). Events are
    ``(kind, id, size, stream)`` tuples with dense integer ids."""
    header: dict = {}
    events: list = []
    live: dict[str, int] = {}
    requested: set[str] = set()
    next_id = 0
    seen_header = False
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            where = f"{path}:{lineno}"
            text = line.strip()
            if not text:
                continue
            if text.startswith("#"):
                if not seen_header:
                    body = text[1:].strip()
                    if body.startswith("vramlab trace"):
                        version = body[len("vramlab trace") :].strip()
                        if version != "v1":
                            raise TraceFormatError(f"{where}: trace format '{version}' (expected v1)")
                    elif ":" in body:
                        k, v = body.split(":", 1)
                        k = k.strip()
                        if k and not any(c.isspace() for c in k):
                            header[k] = v.strip()
                continue
            cols = [c.strip() for c in text.split(",")]
            if not seen_header:
                if cols != ["action", "id", "size", "stream"]:
                    raise TraceFormatError(
                        f"{where}: expected the header row 'action,id,size,stream', found '{text}'"
                    )
                seen_header = True
                continue
            if len(cols) > 4:
                raise TraceFormatError(f"{where}: too many columns")
            cols += [""] * (4 - len(cols))
            action, ident, size, stream = cols
            if action == "alloc":
                if not ident:
                    raise TraceFormatError(f"{where}: alloc needs an id")
                if not size:
                    raise TraceFormatError(f"{where}: alloc needs a size in bytes")
                if ident in live:
                    raise TraceFormatError(f"{where}: alloc of id '{ident}', which is still allocated")
                n = _parse_u64(size, "size", where)
                s = _parse_stream(stream, where) if stream else 0
                live[ident] = next_id
                events.append((ALLOC, next_id, n, s))
                next_id += 1
            elif action in ("free", "free_requested"):
                if not ident:
                    raise TraceFormatError(f"{where}: {action} needs an id")
                if size or stream:
                    raise TraceFormatError(f"{where}: {action} takes only an id")
                if ident not in live or ident in requested:
                    raise TraceFormatError(f"{where}: {action} of id '{ident}', which is not allocated")
                events.append((FREE, live[ident], 0, 0))
                if action == "free":
                    del live[ident]
                else:
                    requested.add(ident)
            elif action == "free_completed":
                if ident not in requested:
                    raise TraceFormatError(
                        f"{where}: free_completed of id '{ident}' without a free_requested before it"
                    )
                requested.discard(ident)
                del live[ident]
            elif action == "empty_cache":
                if ident or size or stream:
                    raise TraceFormatError(f"{where}: empty_cache takes no id, size or stream")
                events.append((EMPTY_CACHE, 0, 0, 0))
            elif not action:
                raise TraceFormatError(f"{where}: missing action")
            else:
                raise TraceFormatError(
                    f"{where}: unknown action '{action}' (expected alloc, free, "
                    "free_requested, free_completed or empty_cache)"
                )
    if not seen_header:
        raise TraceFormatError(f"{path}: no header row 'action,id,size,stream'; is this a vramlab trace?")
    return header, events


def live_at_start(snap: dict, device: int, entries: list) -> list:
    """The blocks in use at the first entry of a recording that starts
    mid-run, as vramlab's ``fresh`` start allocates them: ``(address, size,
    stream, pending)`` in address order. They are the addresses the trace
    frees before allocating them (size and stream from that entry; pending
    when the first mention is a ``free_completed``), and the final blocks in
    use that the trace never mentions (inside segments that existed when the
    recording began)."""
    mentioned: dict[int, tuple] = {}
    created: set[int] = set()
    for e in entries:
        action = e.get("action")
        if action in ("alloc", "free_requested", "free_completed", "free"):
            addr = e["addr"]
            if addr not in mentioned:
                mentioned[addr] = (action, int(e["size"]), int(e.get("stream", 0)) & 0xFFFFFFFFFFFFFFFF)
        elif action in ("segment_alloc", "segment_map"):
            created.add(e["addr"])
    out = [
        (addr, size, stream, action == "free_completed")
        for addr, (action, size, stream) in mentioned.items()
        if action != "alloc"
    ]
    for seg in snap.get("segments", []):
        if seg.get("device", 0) != device or (not seg.get("is_expandable") and seg["address"] in created):
            continue
        stream = int(seg.get("stream", 0)) & 0xFFFFFFFFFFFFFFFF
        for b in seg.get("blocks", []):
            if b["state"] == "inactive" or b["address"] in mentioned:
                continue
            size = b.get("requested_size") or b["size"]
            out.append((b["address"], int(size), stream, b["state"] != "active_allocated"))
    out.sort()
    return out


def read_snapshot_trace(path: str, device: int | None, start: str = "fresh") -> tuple[dict, list, int]:
    """Reads one device's alloc/free entries from a PyTorch snapshot pickle:
    (header fields, events, frees skipped because their block was allocated
    before the recording began). With ``start="fresh"`` the blocks in use at
    the first entry are allocated first (address order, as ``vramlab replay
    --start fresh`` does) and their frees are replayed; with ``"skip"``
    those frees are skipped and counted."""
    with open(path, "rb") as f:
        snap = pickle.load(f)
    if not isinstance(snap, dict) or "device_traces" not in snap:
        raise TraceFormatError(f"{path}: not a PyTorch memory snapshot (no 'device_traces')")
    traces = snap["device_traces"]
    if device is None:
        device = next(
            (i for i, t in enumerate(traces) if any(e.get("action") == "alloc" for e in t)),
            None,
        )
        if device is None:
            raise TraceFormatError(f"{path}: no device has alloc entries")
    if device >= len(traces):
        raise TraceFormatError(f"{path}: device {device} not in the snapshot ({len(traces)} devices)")
    header = {"source": path, "device": str(device)}
    settings = snap.get("allocator_settings") or {}
    conf = settings.get(ENV_KEY) or settings.get(OTHER_ENV_KEY)
    if conf:
        header["alloc_conf"] = conf
    events: list = []
    live: dict[int, int] = {}
    # Blocks in use at the start whose free is still pending: freed at
    # their free_completed entry.
    pending: dict[int, int] = {}
    skipped = 0
    next_id = 0
    if start == "fresh":
        for addr, size, stream, is_pending in live_at_start(snap, device, traces[device]):
            events.append((ALLOC, next_id, size, stream))
            (pending if is_pending else live)[addr] = next_id
            next_id += 1
        header["start"] = "fresh"
    for n, e in enumerate(traces[device]):
        action = e.get("action")
        if action == "alloc":
            addr = e["addr"]
            if addr in live or addr in pending:
                raise TraceFormatError(f"{path}: device_traces[{device}][{n}]: alloc of live address {addr:#x}")
            live[addr] = next_id
            events.append((ALLOC, next_id, int(e["size"]), int(e.get("stream", 0)) & 0xFFFFFFFFFFFFFFFF))
            next_id += 1
        elif action in ("free_requested", "free"):
            i = live.pop(e["addr"], None)
            if i is None:
                skipped += 1
                continue
            events.append((FREE, i, 0, 0))
        elif action == "free_completed":
            i = pending.pop(e["addr"], None)
            if i is not None:
                events.append((FREE, i, 0, 0))
    return header, events, skipped


def read_trace(path: str, device: int | None, start: str = "fresh") -> tuple[dict, list, int]:
    """Reads a CSV or snapshot trace (by content: a pickle starts with 0x80)."""
    with open(path, "rb") as f:
        first = f.read(1)
    if first == b"\x80":
        return read_snapshot_trace(path, device, start)
    header, events = read_csv_trace(path)
    return header, events, 0


# ---------------------------------------------------------------- helpers
def percentiles(values: list[int]) -> dict:
    """count, p50, p99, max and mean of nanosecond samples, in microseconds."""
    if not values:
        return {"count": 0, "p50_us": 0.0, "p99_us": 0.0, "max_us": 0.0, "mean_us": 0.0, "total_us": 0.0}
    v = sorted(values)
    n = len(v)

    def q(p: float) -> float:  # nearest rank
        return v[min(n - 1, max(0, math.ceil(p * n) - 1))] / 1e3

    return {
        "count": n,
        "p50_us": q(0.5),
        "p99_us": q(0.99),
        "max_us": v[-1] / 1e3,
        "mean_us": sum(v) / n / 1e3,
        "total_us": sum(v) / 1e3,
    }


def ensure_alloc_conf(conf: str) -> None:
    """Puts ``conf`` in PYTORCH_CUDA_ALLOC_CONF (and removes
    PYTORCH_ALLOC_CONF, which newer releases prefer) before PyTorch starts;
    re-executes the script if PyTorch was already imported with other
    settings."""
    want = conf.strip() or None
    if os.environ.get(ENV_KEY) == want and OTHER_ENV_KEY not in os.environ:
        return
    os.environ.pop(OTHER_ENV_KEY, None)
    if want:
        os.environ[ENV_KEY] = want
    else:
        os.environ.pop(ENV_KEY, None)
    if "torch" in sys.modules:
        if os.environ.get(REEXEC_MARK):
            raise SystemExit("error: PyTorch was imported before the allocator settings could be set")
        os.environ[REEXEC_MARK] = "1"
        os.execv(sys.executable, [sys.executable] + sys.argv)


# ---------------------------------------------------------------- replay
# The event number the fake device logs for the clean-up after the trace.
END_MARK = 2**64 - 1


def fake_device_mark():
    """``vramlab_fakecuda_mark`` when the process runs on vramlab's fake CUDA
    device (``vramlab oracle``), else ``None``. Called with each event's
    index before the event, so that the fake's device-call log ties every
    cudaMalloc, cudaFree, map and unmap to the event that caused it."""
    try:
        import ctypes  # noqa: PLC0415

        f = ctypes.CDLL(None).vramlab_fakecuda_mark
    except (OSError, AttributeError):
        return None
    f.argtypes = [ctypes.c_uint64]
    f.restype = None
    return f


def replay(args: argparse.Namespace) -> int:
    header, events, skipped = read_trace(args.trace, args.trace_device, args.start)
    ensure_alloc_conf(args.conf)

    import torch  # noqa: PLC0415  (after the environment is set)

    if not torch.cuda.is_available():
        print("error: no CUDA driver/device found: torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    dev = args.device
    torch.cuda.set_device(dev)
    device = torch.device("cuda", dev)
    if args.fraction is not None:
        torch.cuda.set_per_process_memory_fraction(args.fraction, dev)

    stream_ids = sorted({e[3] for e in events if e[0] == ALLOC})
    streams = {}
    for s in stream_ids:
        streams[s] = torch.cuda.default_stream(device) if s == 0 else torch.cuda.Stream(device)
    default = torch.cuda.default_stream(device)

    alloc = torch.cuda.caching_allocator_alloc
    delete = torch.cuda.caching_allocator_delete
    perf = time.perf_counter_ns
    oom_type = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError

    # Overhead of a Python call with the same arguments, for reference.
    def _noop(size, device, stream=None):
        return 0

    calib = []
    for _ in range(20000):
        t0 = perf()
        _noop(4096, dev, default)
        calib.append(perf() - t0)
    calib.sort()
    call_overhead_ns = calib[len(calib) // 2]

    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    history = not args.no_history
    if history:
        max_entries = args.max_entries or max(100_000, 8 * len(events))
        try:
            torch.cuda.memory._record_memory_history(
                enabled="all", context=None, stacks="python", max_entries=max_entries, device=dev
            )
        except TypeError:
            torch.cuda.memory._record_memory_history(max_entries=max_entries)

    mark = fake_device_mark()
    ptrs: dict[int, int] = {}
    failed: set[int] = set()
    timing: list = []
    alloc_ns: list[int] = []
    free_ns: list[int] = []
    oom = None
    replayed = 0
    t_start = perf()
    for idx, (kind, ident, size, stream) in enumerate(events):
        if mark is not None:
            mark(idx)
        if kind == ALLOC:
            if size == 0:
                ptrs[ident] = 0
                replayed += 1
                continue
            st = streams[stream]
            t0 = perf()
            try:
                p = alloc(size, dev, st)
            except oom_type as e:
                dt = perf() - t0
                failed.add(ident)
                if oom is None:
                    oom = {
                        "event_index": idx,
                        "requested_bytes": size,
                        "reserved_bytes": torch.cuda.memory_reserved(dev),
                        "allocated_bytes": torch.cuda.memory_allocated(dev),
                        "message": str(e).splitlines()[0] if str(e) else "out of memory",
                    }
                timing.append((idx, "alloc_oom", ident, size, stream, dt))
                if not args.continue_on_oom:
                    break
                replayed += 1
                continue
            dt = perf() - t0
            ptrs[ident] = p
            alloc_ns.append(dt)
            timing.append((idx, "alloc", ident, size, stream, dt))
        elif kind == FREE:
            if ident in failed:
                replayed += 1
                continue
            p = ptrs.pop(ident)
            if p:
                t0 = perf()
                delete(p)
                dt = perf() - t0
                free_ns.append(dt)
                timing.append((idx, "free", ident, 0, 0, dt))
        else:
            torch.cuda.empty_cache()
        replayed += 1
    torch.cuda.synchronize(dev)
    wall_ns = perf() - t_start

    os.makedirs(args.out, exist_ok=True)
    stats = torch.cuda.memory_stats(dev)
    if history:
        torch.cuda.memory._dump_snapshot(os.path.join(args.out, "snapshot.pickle"))
        torch.cuda.memory._record_memory_history(enabled=None)
    with open(os.path.join(args.out, "memory_stats.json"), "w") as f:
        json.dump(stats, f, indent=1, sort_keys=True)

    # Give everything back and check that it all came back.
    if mark is not None:
        mark(END_MARK)
    live_at_end = sum(1 for p in ptrs.values() if p)
    for p in ptrs.values():
        if p:
            delete(p)
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()
    reserved_after = torch.cuda.memory_reserved(dev)

    with open(os.path.join(args.out, "timing.csv"), "w") as f:
        f.write("index,action,id,size,stream,ns\n")
        for row in timing:
            f.write(",".join(str(x) for x in row) + "\n")

    props = torch.cuda.get_device_properties(dev)
    mem_total = torch.cuda.mem_get_info(dev)[1]
    summary = {
        "trace": args.trace,
        "trace_header": header,
        "events": len(events),
        "events_replayed": replayed,
        "allocs": sum(1 for e in events if e[0] == ALLOC),
        "frees_skipped_unknown_block": skipped,
        "streams": len(stream_ids),
        "alloc_conf": args.conf,
        "env": {k: os.environ.get(k) for k in (ENV_KEY, OTHER_ENV_KEY)},
        "memory_fraction": args.fraction,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "python": platform.python_version(),
        "gpu": {
            "index": dev,
            "name": props.name,
            # cudaMemGetInfo's total: what set_per_process_memory_fraction
            # multiplies (the device's total memory as the allocator sees it).
            "total_bytes": mem_total,
            "total_global_mem": props.total_memory,
        },
        "history": history,
        "peak_reserved_bytes": stats.get("reserved_bytes.all.peak", 0),
        "peak_allocated_bytes": stats.get("allocated_bytes.all.peak", 0),
        "num_alloc_retries": stats.get("num_alloc_retries", 0),
        "num_ooms": stats.get("num_ooms", 0),
        # None where the release does not count them (added in PyTorch 2.3).
        "num_device_alloc": stats.get("num_device_alloc"),
        "num_device_free": stats.get("num_device_free"),
        "oom": oom,
        "wall_ms": wall_ns / 1e6,
        "python_call_overhead_ns": call_overhead_ns,
        "latency": {
            "unit": "microseconds",
            "note": "caller-level caching_allocator_alloc / caching_allocator_delete, Python call overhead included",
            "malloc": percentiles(alloc_ns),
            "free": percentiles(free_ns),
        },
        "leak_check": {
            "live_at_end": live_at_end,
            "reserved_after_free_and_empty_cache": reserved_after,
            "ok": reserved_after == 0,
        },
    }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    if not args.quiet:
        lat = summary["latency"]
        print(
            f"{args.trace} [{args.conf or 'default'}"
            + (f", fraction {args.fraction}" if args.fraction is not None else "")
            + f"]: {replayed}/{len(events)} events, peak reserved {summary['peak_reserved_bytes']} B, "
            f"malloc p50/p99 {lat['malloc']['p50_us']:.2f}/{lat['malloc']['p99_us']:.2f} us, "
            f"free p50/p99 {lat['free']['p50_us']:.2f}/{lat['free']['p99_us']:.2f} us, "
            f"OOM {'at event ' + str(oom['event_index']) if oom else 'none'}, "
            f"leak check {'ok' if reserved_after == 0 else 'FAILED'} -> {args.out}"
        )
    return 0 if reserved_after == 0 else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="vramlab CSV trace or PyTorch snapshot pickle")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--conf", default="", help="PYTORCH_CUDA_ALLOC_CONF value ('' or 'default': none)")
    ap.add_argument("--fraction", type=float, help="torch.cuda.set_per_process_memory_fraction")
    ap.add_argument("--device", type=int, default=0, help="CUDA device index")
    ap.add_argument("--trace-device", type=int, help="for snapshots: which device's trace")
    ap.add_argument(
        "--start",
        choices=["fresh", "skip"],
        default="fresh",
        help="snapshots recorded mid-run: allocate the blocks in use at the first entry first, in address "
        "order (fresh, as `vramlab replay --start fresh`), or skip their frees (skip; before 2026-12-01 "
        "the only behaviour)",
    )
    ap.add_argument("--no-history", action="store_true", help="no memory history (clean latencies)")
    ap.add_argument("--max-entries", type=int, help="memory history ring size (default: 8 x events)")
    ap.add_argument("--continue-on-oom", action="store_true", help="skip failed allocations instead of stopping")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.conf == "default":
        args.conf = ""
    if args.fraction is not None and not 0.0 <= args.fraction <= 1.0:
        ap.error("--fraction must be between 0 and 1")
    try:
        return replay(args)
    except TraceFormatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
