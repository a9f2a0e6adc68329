"""The Python API: each function runs the same command as the `vramlab`
command line, in-process (no subprocess), with its JSON output turned into
results and its errors into exceptions. The numbers are the CLI's numbers.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import sys
import tempfile
import warnings
import weakref
from pathlib import Path
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Union

from . import _native, _rows
from ._options import OPTIONS

__all__ = [
    "Record",
    "Rows",
    "Trace",
    "VramlabError",
    "TraceError",
    "ConfError",
    "VramlabWarning",
    "load",
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
    """Rows of a sweep, one dict per (trace, setting). Made from rows run
    anywhere (``run_case`` on any executor, in the cases' order), it sets
    each row's ``same_as`` over all of them, as ``vramlab sweep`` does: a
    case run alone cannot know which other rows share its result."""

    def __init__(self, rows: Iterable[Any] = ()) -> None:
        super().__init__(rows)
        if self and all(isinstance(r, dict) and "setting" in r and "peak_reserved_bytes" in r for r in self):
            _rows.mark_same(self)

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (pandas must be installed)."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("Rows.to_pandas() needs pandas: pip install pandas") from e
        return pd.DataFrame([dict(r) for r in self])

    def to_parquet(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the rows to a Parquet file (pyarrow must be installed),
        typed as ``vramlab.ROW_COLUMNS`` says, with ``vramlab_rows_schema``
        and ``vramlab_version`` in its metadata; :func:`vramlab.read_rows`
        reads it back."""
        _rows.write_parquet(self, path)


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


#: The notes already raised as warnings in this process.
_WARNED: set = set()


def run(args: Sequence[str]) -> str:
    """Runs one ``vramlab`` command (``args`` without the program name) and
    returns what it printed. The notes it prints on stderr (``note: …``,
    ``warning: …``: a device skipped, a recording that starts mid-run)
    become :class:`VramlabWarning` warnings; its progress words ("wrote
    …") are dropped. A failure raises."""
    ok, kind, text, notes = _native.call([os.fspath(a) for a in args])
    for n in notes:
        # Each note (it names its trace) once per process: a loaded Trace
        # used by five calls warns once, not five times.
        if n.startswith(("note:", "warning:")) and n not in _WARNED:
            _WARNED.add(n)
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


Grid = Union[None, str, "os.PathLike[str]", Sequence[str]]


class _Grid:
    """A grid argument as the command line takes it: ``default``, a file,
    or a list of lines written to a temporary file."""

    def __init__(self, grid: Grid):
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


def _one_or_list(out: Any, conf: Conf) -> Any:
    """The command's results as the settings were given: one for a string
    (or none), a list for a list."""
    results = out if isinstance(out, list) else [out]
    if isinstance(conf, (list, tuple)):
        return results
    return results[0] if len(results) == 1 else results


def _is_job(data: Any) -> bool:
    """A multi-rank job's answer (a job folder, or its job.json, as the
    trace): one object with the job's figures under ``job``."""
    return isinstance(data, Mapping) and "job" in data


def _job_answer(data: Any) -> Any:
    """A job's answer whole, its sweep rows (``rows``, ``job_rows``) as
    :class:`Rows`."""
    for key in ("rows", "job_rows"):
        if key in data:
            data[key] = Rows(data[key])
    return data


def _sources(sources: Any) -> List[Any]:
    """A sweep's sources as a list: a single path, dict or Trace, or one
    list of events, counts as one source."""
    if isinstance(sources, (str, os.PathLike, Mapping, Trace)):
        return [sources]
    if sources and not isinstance(sources[0], (str, os.PathLike, Mapping, Trace)):
        return [sources]
    return list(sources)


def _argv(command: str, positional: List[str], options: Mapping[str, Any]) -> List[str]:
    """The command line of ``command``: its positional arguments, then each
    option given (not ``None``) spelled as the command's table says."""
    table = OPTIONS[command]
    args = [command, *positional]
    for name, value in options.items():
        if value is None:
            continue
        flag, kind = table[name]
        if kind == "switch":
            if value:
                args.append(flag)
        elif kind == "negated_switch":
            if not value:
                args.append(flag)
        elif kind == "repeated" and not isinstance(value, (str, os.PathLike, int, float)):
            for v in value:
                args += [flag, os.fspath(v) if isinstance(v, os.PathLike) else str(v)]
        else:
            args += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return args


def _invoke(command: str, result: str, params: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
    """Runs one generated function's command (see _commands.py): its
    sources as files, its grid as a file, its output as the result kind
    says — ``json`` / ``json_list`` / ``json_per_conf`` / ``rows`` (the
    JSON on stdout), ``json_file`` / ``rows_file`` (the JSON a command
    writes to a file), ``report`` (the report's ``index.html``)."""
    options = dict(options)
    positional: List[str] = []
    with contextlib.ExitStack() as stack:
        if "source" in params:
            inp = stack.enter_context(_Input(params["source"]))
            positional.append(inp.path)
            if options.get("trace_device") is None:
                options["trace_device"] = inp.device
        if params.get("other") is not None:
            positional.append(stack.enter_context(_Input(params["other"])).path)
        if "sources" in params:
            for s in _sources(params["sources"]):
                positional.append(stack.enter_context(_Input(s)).path)
        if "preset" in params:
            positional.append(params["preset"])
        if "conf" in params:
            options["conf"] = params["conf"]
        if "grid" in params:
            options["grid"] = stack.enter_context(_Grid(params["grid"])).value
        if "out_dir" in params:
            options["out"] = params["out_dir"]
        if result == "report":
            run(_argv(command, positional, options))
            return Path(params["out_dir"]) / "index.html"
        if result in ("json_file", "rows_file"):
            out = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"vramlab-{command}-"))
            options.update(json=os.path.join(out, "out.json"), quiet=True)
            run(_argv(command, positional, options))
            with open(options["json"], encoding="utf-8") as f:
                data = json.load(f, object_hook=Record)
            if _is_job(data):
                return _job_answer(data)
            return Rows(data) if result == "rows_file" else data
        options["json"] = True
        data = _json(_argv(command, positional, options))
    if _is_job(data):
        return _job_answer(data)
    if result == "json_list":
        return list(data)
    if result == "json_per_conf":
        return _one_or_list(data, params.get("conf"))
    if result == "rows":
        return Rows(data)
    return data


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
        devices = _json(_argv("stats", [path], {"json": True, "torch_version": torch_version}))
    except BaseException:
        if tmp is not None:
            tmp.cleanup()
        raise
    return Trace(path, list(devices), device, tmp)
