"""Sweeps that scale out: a sweep as small, picklable cases with stable ids
(:func:`cases`), a pure function that runs one (:func:`run_case`), any
executor to run them (:func:`sweep_on`), rows to Parquet and back
(:func:`read_rows`; :meth:`Rows.to_parquet` is in ``_rows``), and a summary of a fleet's
rows (:func:`fleet_report`).

The rows are the command line's ``vramlab sweep --json`` rows, whichever
executor ran them, in the sweep's order.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _api, _native
from ._api import Record, Rows, Source
from ._rows import ROW_COLUMNS, ROW_SCHEMA, pyarrow_parquet, typed_row

__all__ = ["Case", "cases", "run_case", "sweep_on", "read_rows", "fleet_report"]

@dataclasses.dataclass(frozen=True)
class Case:
    """One trace × setting of a sweep, self-contained: what a worker needs
    to give the row the whole sweep gives. Small and picklable; ``id`` is
    stable — it comes from the trace file's bytes and name, the device, the
    setting, the PyTorch release, the capacity, the placement, the start
    and vramlab's version — so a shard's results can be kept and resumed
    by id. ``path`` must be readable where the case runs."""

    id: str
    index: int
    trace: str
    path: str
    device: int
    grid_line: str
    setting: str
    torch_version: str
    capacity: int
    placement: str
    start: Optional[str]
    read_torch_version: Optional[str]
    trace_sha256: str
    vramlab_version: str
    schema: int = 1

    def to_cli(self) -> Dict[str, Any]:
        """The case as ``vramlab run-case`` reads it."""
        return {
            "schema": self.schema,
            "index": self.index,
            "trace": self.trace,
            "path": self.path,
            "device": self.device,
            "read_torch_version": self.read_torch_version,
            "grid_line": self.grid_line,
            "setting": self.setting,
            "torch_version": self.torch_version,
            "capacity": self.capacity,
            "placement": self.placement,
            "start": self.start,
        }


_HASHES: Dict[Tuple[str, int, int], str] = {}


def _sha256(path: str) -> str:
    """The file's SHA-256, computed once per file, size and modification time."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def _case_id(fields: Mapping[str, Any], occurrence: int) -> str:
    ident = {k: fields[k] for k in sorted(fields) if k not in ("index", "path")}
    if occurrence:
        ident["occurrence"] = occurrence
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def _paths(sources: Union[Source, Sequence[Source]]) -> List[str]:
    items = _api._sources(sources)
    out = []
    for s in items:
        if isinstance(s, _api.Trace):
            out.append(s.path)
        elif isinstance(s, (str, os.PathLike)):
            out.append(os.fspath(s))
        else:
            raise TypeError(
                "cases need files that the workers can read: save a snapshot dict with "
                "pickle.dump (or torch.cuda.memory._dump_snapshot) and pass its path, "
                f"not a {type(s).__name__}"
            )
    return out


def cases(
    sources: Union[Source, Sequence[Source]],
    grid: _api.Grid = None,
    *,
    conf: Union[None, str, Sequence[str]] = None,
    gpu: Optional[str] = None,
    capacity: _api.Size = None,
    policy: Optional[str] = None,
    torch_version: Optional[str] = None,
    start: Optional[str] = None,
    placement: Optional[str] = None,
    device: Optional[int] = None,
) -> List[Case]:
    """The cases of ``vramlab.sweep(sources, grid, ...)``, in row order:
    every trace (every device of a multi-device snapshot, or ``device``)
    under every setting of ``grid`` (the built-in grid, a grid file or a
    list of grid lines) plus ``conf``. ``policy`` names another policy for
    every line that names none (``policy=NAME`` in a grid line).
    ``gpu``/``capacity``, ``torch_version``, ``start`` and ``placement`` are
    ``sweep``'s options, resolved here once for the whole sweep (the
    release, each trace's start), so that each case gives the row the whole
    sweep gives."""
    paths = _paths(sources)
    if policy is not None:
        lines = _grid_lines(grid)
        lines = [ln if "policy=" in ln else f"policy={policy} {ln}".strip() for ln in lines]
        grid = lines
    options = {
        "conf": conf,
        "gpu": gpu,
        "capacity": capacity,
        "torch_version": torch_version,
        "start": start,
        "placement": placement,
        "trace_device": device,
    }
    with tempfile.TemporaryDirectory(prefix="vramlab-plan-") as tmp, _api._Grid(grid) as g:
        plan = os.path.join(tmp, "plan.json")
        options.update(grid=g.value, plan=plan)
        _api.run(_api._argv("sweep", paths, options))
        with open(plan, encoding="utf-8") as f:
            planned = json.load(f)
    version = _native.version()
    seen: Dict[str, int] = {}
    out = []
    for c in planned:
        sha = _sha256(c["path"])
        fields = dict(c, trace_sha256=sha, vramlab_version=version)
        ident = _case_id(fields, 0)
        n = seen.get(ident, 0)
        seen[ident] = n + 1
        if n:
            ident = _case_id(fields, n)
        out.append(Case(id=ident, **fields))
    return out


def _grid_lines(grid: _api.Grid) -> List[str]:
    if grid is None or grid == "default":
        return ["default"]
    if isinstance(grid, (str, os.PathLike)):
        text = Path(grid).read_text(encoding="utf-8")
        return [ln.split("#")[0].strip() for ln in text.splitlines() if ln.split("#")[0].strip()]
    return list(grid)


def run_case(case: Case) -> Record:
    """Replays one case and returns its row (the row ``vramlab sweep``
    gives for it). Pure: the same case gives the same row anywhere; the GIL
    is released while it replays, and the process keeps the last few traces
    it parsed, so a worker reads each trace once for all its settings."""
    if not isinstance(case, Case):
        raise TypeError(f"run_case takes a vramlab.Case (from vramlab.cases), not {type(case).__name__}")
    return _api._json(["run-case", json.dumps(case.to_cli())])


def sweep_on(executor: Any, case_list: Sequence[Case]) -> Rows:
    """Runs ``case_list`` on ``executor`` — any ``concurrent.futures``
    executor (``ProcessPoolExecutor``, Dask's ``client.get_executor()``,
    submitit's executors), or a pool with ``map`` (``multiprocessing.Pool``,
    ``ray.util.multiprocessing.Pool``) — and returns the rows in the cases'
    order."""
    if hasattr(executor, "submit"):
        futures = [executor.submit(run_case, c) for c in case_list]
        rows = [f.result() for f in futures]
    elif hasattr(executor, "map"):
        rows = list(executor.map(run_case, case_list))
    else:
        raise TypeError(
            "executor must have submit (a concurrent.futures.Executor) or map (a pool), "
            f"not {type(executor).__name__}"
        )
    # Rows sets same_as over the whole sweep.
    return Rows(Record(r) if not isinstance(r, Record) else r for r in rows)


# --- rows on disk -----------------------------------------------------------


def _read_one(path: Path) -> List[Record]:
    suffix = "".join(path.suffixes[-1:]).lower()
    if suffix == ".parquet":
        pq = pyarrow_parquet("read_rows")
        table = pq.read_table(path)
        meta = table.schema.metadata or {}
        schema = int(meta.get(b"vramlab_rows_schema", b"1"))
        if schema not in (1, ROW_SCHEMA):
            raise _api.VramlabError(f"{path}: rows of schema {schema}; this vramlab reads schema {ROW_SCHEMA}")
        return [Record(typed_row(r)) for r in table.to_pylist()]
    if suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as f:
            return [Record(typed_row(r)) for r in csv.DictReader(f)]
    if suffix == ".json":
        with open(path, encoding="utf-8") as f:
            return [Record(typed_row(r)) for r in json.load(f)]
    raise _api.VramlabError(f"{path}: rows are .parquet, .csv or .json files")


def read_rows(paths: Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]]) -> Rows:
    """Reads rows back — Parquet (:meth:`Rows.to_parquet`), or the command
    line's ``sweep --csv``/``--json`` files — and merges parts (shards,
    executors' outputs) into one sweep's rows in index order. A row that
    two parts hold must be the same in both."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    by_index: Dict[int, Record] = {}
    for p in items:
        for r in _read_one(Path(p)):
            old = by_index.get(r["index"])
            if old is not None and {**old, "same_as": ""} != {**r, "same_as": ""}:
                raise _api.VramlabError(f"{p}: row {r['index']} differs from the one another part holds")
            by_index[r["index"]] = r
    # Each part saw only its own rows: Rows decides anew which are the same.
    return Rows(by_index[i] for i in sorted(by_index))


# --- the fleet --------------------------------------------------------------

_RANK = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)


def _job_and_rank(trace: str) -> Tuple[str, Optional[int]]:
    m = _RANK.search(trace)
    if not m:
        return trace, None
    return trace[: m.start()] + "rank*" + trace[m.end():], int(m.group(1))


def fleet_report(rows: Sequence[Mapping[str, Any]], *, within: float = 0.10, baseline: str = "default") -> Record:
    """What a fleet's sweep rows say: ``near_card`` (traces whose peak
    under ``baseline`` is within ``within`` of the capacity they were swept
    on, or do not fit), ``best_setting`` (the PyTorch setting — one a user
    can export — that saves the most reserved bytes summed over the traces,
    with the traces it helps, the ones it hurts — a higher peak, or an OOM
    where the baseline fits — and the OOMs it removes), ``settings`` (that
    figure for every PyTorch setting), ``designs`` (the same for other
    allocator designs, apart: for comparison, never "best", each with its
    device calls summed, since ``direct`` — no caching, like
    ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` — pays one per request), and
    ``ranks`` (for files named per rank, ``…rank3…``: the spread of peaks
    across the ranks of each job). Traces are the rows' ``trace``; the
    baseline is the grid line ``baseline`` (each trace's first row when it
    has none)."""
    by_trace: Dict[str, List[Mapping[str, Any]]] = {}
    for r in rows:
        by_trace.setdefault(r["trace"], []).append(r)
    base: Dict[str, Mapping[str, Any]] = {}
    for t, rs in by_trace.items():
        base[t] = next((r for r in rs if r["grid_line"] == baseline), rs[0])
    near = []
    for t, b in sorted(base.items()):
        cap = b["capacity"]
        fits = b["oom_event"] < 0
        if cap and (not fits or b["peak_reserved_bytes"] >= (1 - within) * cap):
            near.append(Record(trace=t, peak_reserved_bytes=b["peak_reserved_bytes"], capacity=cap, fits=fits,
                               headroom_bytes=cap - b["peak_reserved_bytes"]))
    settings: Dict[str, Dict[str, Any]] = {}
    for t, rs in by_trace.items():
        b = base[t]
        for r in rs:
            if r is b:
                continue
            s = settings.setdefault(
                r["grid_line"],
                {"saved_bytes": 0, "helps": [], "hurts": [], "fixes_oom": [], "device_calls": 0,
                 "pytorch": r["policy"] == "native"},
            )
            s["device_calls"] += r["num_device_alloc"] + r["num_device_free"]
            b_fits, r_fits = b["oom_event"] < 0, r["oom_event"] < 0
            if b_fits and not r_fits:
                s["hurts"].append(t)
            elif r_fits and not b_fits:
                s["fixes_oom"].append(t)
            elif r_fits and b_fits:
                d = b["peak_reserved_bytes"] - r["peak_reserved_bytes"]
                s["saved_bytes"] += d
                if d > 0:
                    s["helps"].append(t)
                elif d < 0:
                    s["hurts"].append(t)
    def ranked(pytorch: bool) -> List[Record]:
        t = [
            Record(grid_line=g, saved_bytes=v["saved_bytes"], helps=sorted(v["helps"]), hurts=sorted(v["hurts"]),
                   fixes_oom=sorted(v["fixes_oom"]), device_calls=v["device_calls"])
            for g, v in settings.items()
            if v["pytorch"] == pytorch
        ]
        t.sort(key=lambda s: (-len(s.fixes_oom), -s.saved_bytes, len(s.hurts), s.device_calls, s.grid_line))
        return t

    table = ranked(True)
    designs = ranked(False)
    ranks = []
    jobs: Dict[str, List[Tuple[int, Mapping[str, Any]]]] = {}
    for t, b in base.items():
        job, rank = _job_and_rank(t)
        if rank is not None:
            jobs.setdefault(job, []).append((rank, b))
    for job, rs in sorted(jobs.items()):
        peaks = [b["peak_reserved_bytes"] for _, b in rs]
        lo, hi = min(peaks), max(peaks)
        ranks.append(Record(job=job, ranks=len(rs), min_peak_reserved_bytes=lo, max_peak_reserved_bytes=hi,
                            imbalance=(hi / lo if lo else float("inf")),
                            largest_rank=max(rs, key=lambda x: (x[1]["peak_reserved_bytes"], -x[0]))[0]))
    return Record(
        traces=len(by_trace),
        baseline=baseline,
        within=within,
        near_card=near,
        best_setting=table[0] if table else None,
        settings=table,
        designs=designs,
        ranks=ranks,
    )
