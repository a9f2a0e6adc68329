"""The Python API: each function runs the same command as the `vramlab`
command line, in-process (no subprocess), with its JSON output turned into
results and its errors into exceptions. The numbers are the CLI's numbers.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import tempfile
import warnings
import weakref
from pathlib import Path
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Union

from . import _native

__all__ = [
    "Record",
    "Rows",
    "Trace",
    "VramlabError",
    "TraceError",
    "ConfError",
    "VramlabWarning",
    "load",
    "stats",
    "replay",
    "recommend",
    "oom_point",
    "fidelity",
    "sweep",
    "report",
    "run",
]


class VramlabError(Exception):
    """A vramlab command failed; the message is the command line's."""


class TraceError(VramlabError):
    """An input trace or snapshot cannot be read: it names the file and,
    where it can, the line or event."""


class ConfError(VramlabError, ValueError):
    """An argument does not parse: an allocator setting, a size, a GPU name,
    a PyTorch release."""


class VramlabWarning(UserWarning):
    """A note the command line prints on stderr (a device skipped, a trace
    recorded mid-run, a setting that has no effect)."""


class Record(dict):
    """A JSON object of the command line's output: a dict whose keys are
    also attributes (``r.peak_reserved_bytes == r["peak_reserved_bytes"]``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | {k for k in self if k.isidentifier()})


class Rows(list):
    """Rows of a sweep, one dict per (trace, setting)."""

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (pandas must be installed)."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("Rows.to_pandas() needs pandas: pip install pandas") from e
        return pd.DataFrame([dict(r) for r in self])


Source = Union[str, "os.PathLike[str]", Mapping[str, Any], Sequence[Any], "Trace"]
Conf = Union[None, str, Sequence[str]]
Size = Union[None, int, str]


class Trace:
    """A trace or snapshot that vramlab has read (see :func:`load`).

    ``path`` is the file the commands read: the file given, or — for an
    in-memory snapshot dict or a list of events — a temporary file that
    lives as long as this object. ``summary`` is what ``vramlab stats``
    says of the chosen device, ``devices`` the same for every device.
    """

    def __init__(self, path: str, devices: List[Record], device: Optional[int], tmp: Any = None):
        self.path = path
        self.devices = devices
        self.device = device
        self._tmp = tmp
        if tmp is not None:
            weakref.finalize(self, tmp.cleanup)

    @property
    def summary(self) -> Record:
        """The summary of the device the commands replay."""
        if self.device is not None:
            for d in self.devices:
                if d.get("device") == self.device:
                    return d
        if not self.devices:
            return Record()
        return max(self.devices, key=lambda d: (d.get("allocs", 0), -d.get("device", 0)))

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"Trace({self.path!r}, events={s.get('events')}, allocs={s.get('allocs')}, "
            f"devices={len(self.devices)}, starts_mid_run={s.get('starts_mid_run')})"
        )


def run(args: Sequence[str]) -> str:
    """Runs one ``vramlab`` command (``args`` without the program name) and
    returns what it printed. The notes it prints on stderr (``note: …``,
    ``warning: …``: a device skipped, a recording that starts mid-run)
    become :class:`VramlabWarning` warnings; its progress words ("wrote
    …") are dropped. A failure raises."""
    ok, kind, text, notes = _native.call([os.fspath(a) for a in args])
    for n in notes:
        if n.startswith(("note:", "warning:")):
            warnings.warn(n, VramlabWarning, stacklevel=_caller_level())
    if ok:
        return text
    if kind == "usage":
        raise ConfError(text)
    if kind == "trace":
        raise TraceError(text)
    raise VramlabError(text)


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside this package, so that
    a warning points at the user's line."""
    package = os.path.dirname(__file__)
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == package:
        frame, level = frame.f_back, level + 1
    return level


def _json(args: Sequence[str]) -> Any:
    return json.loads(run(args), object_hook=Record)


# --- inputs -----------------------------------------------------------------

_EVENT_ACTIONS = ("alloc", "free", "free_requested", "free_completed", "empty_cache")


def _event_row(e: Any, i: int) -> str:
    if isinstance(e, Mapping):
        action = e.get("action")
        fields = [e.get("id"), e.get("size"), e.get("stream")]
    elif isinstance(e, (tuple, list)) and e:
        action, fields = e[0], list(e[1:]) + [None] * (4 - len(e))
    else:
        raise TraceError(f"event {i}: expected a tuple such as ('alloc', id, size) or a dict, got {e!r}")
    if action not in _EVENT_ACTIONS:
        raise TraceError(f"event {i}: unknown action {action!r} (expected one of {', '.join(_EVENT_ACTIONS)})")
    cells = ["" if v is None else str(v) for v in fields[:3]]
    for c in cells:
        if "," in c or "\n" in c:
            raise TraceError(f"event {i}: {c!r} contains a comma or a newline")
    return ",".join([action] + cells)


def _write_events(events: Iterable[Any], path: Path) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("# vramlab trace v1\n# source: events from Python\naction,id,size,stream\n")
        for i, e in enumerate(events):
            f.write(_event_row(e, i) + "\n")


def _materialize(source: Source) -> tuple:
    """(path, temporary directory or None) for any source."""
    if isinstance(source, Trace):
        return source.path, None
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source), None
    if isinstance(source, Mapping):
        tmp = tempfile.TemporaryDirectory(prefix="vramlab-")
        path = Path(tmp.name) / "snapshot.pickle"
        with open(path, "wb") as f:
            # Protocol 4: what torch.cuda.memory._dump_snapshot writes, and
            # the highest pytorch.org/memory_viz reads.
            pickle.dump(dict(source), f, protocol=4)
        return os.fspath(path), tmp
    if isinstance(source, Sequence) and not isinstance(source, (bytes, bytearray)):
        tmp = tempfile.TemporaryDirectory(prefix="vramlab-")
        path = Path(tmp.name) / "events.csv"
        try:
            _write_events(source, path)
        except BaseException:
            tmp.cleanup()
            raise
        return os.fspath(path), tmp
    raise TypeError(
        "a source is a path, a snapshot dict (torch.cuda.memory._snapshot()), "
        f"a list of events or a vramlab.Trace, not {type(source).__name__}"
    )


class _Input:
    """A source as a file for the duration of one call."""

    def __init__(self, source: Source):
        self.path, self._tmp = _materialize(source)
        self.device = source.device if isinstance(source, Trace) else None

    def __enter__(self) -> "_Input":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


def _opt(args: List[str], flag: str, value: Any) -> None:
    if value is not None:
        args += [flag, str(value)]


def _confs(conf: Conf) -> List[str]:
    if conf is None:
        return []
    if isinstance(conf, str):
        return [conf]
    return list(conf)


# --- the commands -----------------------------------------------------------


def load(source: Source, *, device: Optional[int] = None, torch_version: Optional[str] = None) -> Trace:
    """Reads a trace once: a path in any format the command line reads
    (snapshot ``.pickle``/``.pickle.gz``, ``.csv``, ``.csv.gz``, ``.vlt``,
    RMM logs), a snapshot dict as ``torch.cuda.memory._snapshot()`` returns
    it, or a list of events (``("alloc", id, size[, stream])``,
    ``("free", id)``, ``("free_requested", id)``, ``("free_completed", id)``,
    ``("empty_cache",)`` or dicts with those keys). Pass the result to the
    other functions to avoid writing an in-memory source again."""
    if isinstance(source, Trace):
        return source
    path, tmp = _materialize(source)
    try:
        args = ["stats", path, "--json"]
        _opt(args, "--torch-version", torch_version)
        devices = _json(args)
    except BaseException:
        if tmp is not None:
            tmp.cleanup()
        raise
    return Trace(path, list(devices), device, tmp)


def stats(source: Source, *, device: Optional[int] = None, torch_version: Optional[str] = None) -> List[Record]:
    """``vramlab stats --json``: one summary per device (events,
    allocations, peak live bytes, the recorded state of a mid-run
    snapshot, …)."""
    with _Input(source) as inp:
        args = ["stats", inp.path, "--json"]
        _opt(args, "--trace-device", device if device is not None else inp.device)
        _opt(args, "--torch-version", torch_version)
        return list(_json(args))


def replay(
    source: Source,
    conf: Conf = None,
    *,
    capacity: Size = None,
    gpu: Optional[str] = None,
    placement: Optional[str] = None,
    policy: str = "native",
    start: Optional[str] = None,
    torch_version: Optional[str] = None,
    device: Optional[int] = None,
    fraction: Optional[float] = None,
    continue_on_oom: bool = False,
) -> Union[Record, List[Record]]:
    """``vramlab replay --json``: replays ``source`` under the settings
    ``conf`` (a ``PYTORCH_ALLOC_CONF`` string; default: PyTorch's defaults).
    With a list of settings, returns a list of results, one per setting.

    A result holds ``peak_reserved_bytes``, ``peak_allocated_bytes``,
    ``waste_at_peak_bytes``, ``oom`` (``None`` or where and why), ``stats``
    (named as ``torch.cuda.memory_stats()`` names them) and the rest of
    the command line's JSON. ``capacity`` is bytes or a size such as
    ``"24GiB"``; ``gpu`` a card by name (``vramlab gpus``); ``start`` is
    ``"recorded"`` or ``"fresh"`` for snapshots recorded mid-run;
    ``placement`` is ``"driver"`` (default) or ``"ascending"``, where the
    simulated driver puts new segments. ``peak_reserved_range_bytes`` gives
    the peak under both orders (they differ when a tie between equal free
    blocks decides the result; ``placement_settled`` is then false)."""
    confs = _confs(conf)
    with _Input(source) as inp:
        args = ["replay", inp.path, "--json", "--policy", policy]
        for c in confs:
            args += ["--conf", c]
        _opt(args, "--capacity", capacity)
        _opt(args, "--gpu", gpu)
        _opt(args, "--placement", placement)
        _opt(args, "--start", start)
        _opt(args, "--torch-version", torch_version)
        _opt(args, "--trace-device", device if device is not None else inp.device)
        _opt(args, "--fraction", fraction)
        if continue_on_oom:
            args.append("--continue-on-oom")
        out = _json(args)
    return _one_or_list(out, conf)


def recommend(
    source: Source,
    *,
    gpu: Optional[str] = None,
    placement: Optional[str] = None,
    capacity: Size = None,
    grid: Union[None, str, Sequence[str]] = None,
    torch_version: Optional[str] = None,
    start: Optional[str] = None,
    device: Optional[int] = None,
    top: Optional[int] = None,
) -> Record:
    """``vramlab recommend --json``: ranks the settings of ``grid`` (the
    built-in grid, a grid file, or a list of grid lines) for a card
    (``gpu``) or a memory size (``capacity``), with the verdict, the reason
    and the line to export."""
    with _Input(source) as inp, _Grid(grid) as g:
        args = ["recommend", inp.path, "--json"]
        _opt(args, "--gpu", gpu)
        _opt(args, "--placement", placement)
        _opt(args, "--capacity", capacity)
        _opt(args, "--grid", g.value)
        _opt(args, "--torch-version", torch_version)
        _opt(args, "--start", start)
        _opt(args, "--trace-device", device if device is not None else inp.device)
        _opt(args, "--top", top)
        return _json(args)


def oom_point(
    source: Source,
    conf: Conf = None,
    *,
    capacity: Size = None,
    gpu: Optional[str] = None,
    placement: Optional[str] = None,
    policy: str = "native",
    start: Optional[str] = None,
    torch_version: Optional[str] = None,
    device: Optional[int] = None,
) -> Union[Record, List[Record]]:
    """``vramlab oom-point --json``: the smallest capacity on which the
    trace runs without running out of memory under ``conf``
    (``min_capacity``, with the ``lower_bound`` no setting can beat); with
    ``capacity`` or ``gpu``, where and why it runs out there. A list of
    settings gives a list of results."""
    with _Input(source) as inp:
        args = ["oom-point", inp.path, "--json", "--policy", policy]
        for c in _confs(conf):
            args += ["--conf", c]
        _opt(args, "--capacity", capacity)
        _opt(args, "--gpu", gpu)
        _opt(args, "--placement", placement)
        _opt(args, "--start", start)
        _opt(args, "--torch-version", torch_version)
        _opt(args, "--trace-device", device if device is not None else inp.device)
        out = _json(args)
    return _one_or_list(out, conf)


def _one_or_list(out: Any, conf: Conf) -> Any:
    """The command's results as the settings were given: one for a string
    (or none), a list for a list."""
    results = out if isinstance(out, list) else [out]
    if isinstance(conf, (list, tuple)):
        return results
    return results[0] if len(results) == 1 else results


def fidelity(
    source: Source,
    *,
    conf: Optional[str] = None,
    torch_version: Optional[str] = None,
    device: Optional[int] = None,
) -> Union[Record, List[Record]]:
    """``vramlab fidelity --json``: replays a snapshot under its recorded
    settings and compares every allocation address and segment decision
    with PyTorch's. A difference is a result (``exact`` is false), not an
    exception."""
    with _Input(source) as inp:
        args = ["fidelity", inp.path, "--json"]
        _opt(args, "--conf", conf)
        _opt(args, "--torch-version", torch_version)
        _opt(args, "--trace-device", device if device is not None else inp.device)
        return _json(args)


def oracle(
    source: Source,
    conf: Conf = None,
    *,
    torch: str = "2.15",
    python: Optional[str] = None,
    capacity: Size = None,
    gpu: Optional[str] = None,
    placement: Optional[str] = None,
    torch_version: Optional[str] = None,
    device: Optional[int] = None,
    fraction: Optional[float] = None,
    snapshot_out: Optional[str] = None,
) -> Rows:
    """``vramlab oracle --json``: PyTorch's own caching allocator (the
    official wheel of release ``torch``, installed from PyPI into a cached
    environment on first use, or the one of ``python``) replays ``source``
    on vramlab's fake CUDA device next to vramlab's replay, under each
    setting of ``conf``. Returns one row per setting:
    ``torch_peak_reserved_bytes``, ``torch_num_device_alloc``,
    ``vramlab_peak_reserved_bytes``, ``vramlab_num_device_alloc``, ``exact``
    and, where they part, ``first_difference``. A difference is a result,
    not an exception. The fake device's library is found next to the
    ``vramlab`` program, in the source tree's ``target/``, or at
    ``$VRAMLAB_FAKECUDA``."""
    with _Input(source) as inp:
        args = ["oracle", inp.path, "--json", "--torch", torch]
        for c in _confs(conf):
            args += ["--conf", c]
        _opt(args, "--python", python)
        _opt(args, "--capacity", capacity)
        _opt(args, "--gpu", gpu)
        _opt(args, "--placement", placement)
        _opt(args, "--torch-version", torch_version)
        _opt(args, "--trace-device", device if device is not None else inp.device)
        _opt(args, "--fraction", fraction)
        _opt(args, "--snapshot-out", snapshot_out)
        return Rows(_json(args))


class _Grid:
    """A grid argument as the command line takes it: ``default``, a file,
    or a list of lines written to a temporary file."""

    def __init__(self, grid: Union[None, str, Sequence[str]]):
        self._tmp = None
        if grid is None or isinstance(grid, (str, os.PathLike)):
            self.value = None if grid is None else os.fspath(grid)
            return
        self._tmp = tempfile.TemporaryDirectory(prefix="vramlab-grid-")
        path = Path(self._tmp.name) / "grid.txt"
        path.write_text("".join(f"{line}\n" for line in grid), encoding="utf-8")
        self.value = os.fspath(path)

    def __enter__(self) -> "_Grid":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


def sweep(
    sources: Union[Source, Sequence[Source]],
    grid: Union[None, str, Sequence[str]] = None,
    *,
    gpu: Optional[str] = None,
    placement: Optional[str] = None,
    capacity: Size = None,
    torch_version: Optional[str] = None,
    start: Optional[str] = None,
    device: Optional[int] = None,
    threads: Optional[int] = None,
) -> Rows:
    """``vramlab sweep``: every source under every setting of ``grid``, in
    parallel on all cores; rows as dicts (:meth:`Rows.to_pandas` for a
    DataFrame). A single path, dict or Trace counts as one source."""
    if isinstance(sources, (str, os.PathLike, Mapping, Trace)):
        sources = [sources]
    elif sources and not isinstance(sources[0], (str, os.PathLike, Mapping, Trace)):
        sources = [sources]  # one list of events
    inputs = [_Input(s) for s in sources]
    try:
        with _Grid(grid) as g, tempfile.TemporaryDirectory(prefix="vramlab-sweep-") as out:
            rows_path = os.path.join(out, "rows.json")
            args = ["sweep", *[i.path for i in inputs], "--quiet", "--json", rows_path]
            _opt(args, "--grid", g.value)
            _opt(args, "--gpu", gpu)
            _opt(args, "--placement", placement)
            _opt(args, "--capacity", capacity)
            _opt(args, "--torch-version", torch_version)
            _opt(args, "--start", start)
            _opt(args, "--trace-device", device)
            _opt(args, "--threads", threads)
            run(args)
            with open(rows_path, encoding="utf-8") as f:
                return Rows(json.load(f, object_hook=Record))
    finally:
        for i in inputs:
            i.__exit__(None, None, None)


def matrix(
    preset: str,
    *,
    gpu: Optional[str] = None,
    placement: Optional[str] = None,
    capacity: Size = None,
    seq: Optional[int] = None,
    resolution: Optional[int] = None,
    batch: Optional[int] = None,
    conf: Conf = None,
    search: bool = True,
) -> Record:
    """``vramlab matrix``: every recorded variant of a workload preset
    (precision, attention, checkpointing, KV cache) under allocator settings
    (``conf``; default: the defaults and four the guides recommend). The
    result holds ``cells`` (one per variant and setting: peak reserved, the
    smallest capacity and card, ``saved_vs_baseline``, whether it ``fits``
    the card and the ``largest_fitting`` size), ``variants``, ``settings``
    and the baseline. ``search=False`` skips the largest-size search."""
    with tempfile.TemporaryDirectory(prefix="vramlab-matrix-") as out:
        path = os.path.join(out, "matrix.json")
        args = ["matrix", preset, "--quiet", "--json", path]
        options = {"--gpu": gpu, "--placement": placement, "--capacity": capacity,
                   "--seq": seq, "--resolution": resolution, "--batch": batch}
        for flag, value in options.items():
            _opt(args, flag, value)
        if conf is not None:
            for c in _confs(conf):
                args += ["--conf", c]
        if not search:
            args.append("--no-search")
        run(args)
        with open(path, encoding="utf-8") as f:
            return json.load(f, object_hook=Record)


def report(
    source: Source,
    out_dir: Union[str, "os.PathLike[str]"],
    *,
    gpu: Optional[str] = None,
    placement: Optional[str] = None,
    capacity: Size = None,
    grid: Union[None, str, Sequence[str]] = None,
    torch_version: Optional[str] = None,
    start: Optional[str] = None,
    device: Optional[int] = None,
    plots: Optional[int] = None,
) -> Path:
    """``vramlab report``: writes the HTML report (``index.html``, plots as
    PNG and SVG) into ``out_dir`` and returns the path of ``index.html``."""
    with _Input(source) as inp, _Grid(grid) as g:
        args = ["report", inp.path, "--out", os.fspath(out_dir)]
        _opt(args, "--gpu", gpu)
        _opt(args, "--placement", placement)
        _opt(args, "--capacity", capacity)
        _opt(args, "--grid", g.value)
        _opt(args, "--torch-version", torch_version)
        _opt(args, "--start", start)
        _opt(args, "--trace-device", device if device is not None else inp.device)
        _opt(args, "--plots", plots)
        run(args)
    return Path(out_dir) / "index.html"
