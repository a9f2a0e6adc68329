"""The rows of a sweep as data: their columns and types (``ROW_COLUMNS``,
versioned by ``ROW_SCHEMA``), typing a row read from CSV or Parquet, and
writing rows to Parquet (pyarrow, when installed)."""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Sequence, Tuple, Union

from . import _native

#: The version of the rows' columns (``ROW_COLUMNS``); a Parquet file
#: written by :meth:`Rows.to_parquet` carries it in its metadata.
ROW_SCHEMA = 2

#: The columns of a sweep row, in order, with their Python types: what
#: ``vramlab sweep --csv`` writes (``SWEEP_CSV_HEADER``) and ``--json``
#: holds.
ROW_COLUMNS: Tuple[Tuple[str, type], ...] = (
    ("index", int),
    ("trace", str),
    ("setting", str),
    ("policy", str),
    ("grid_line", str),
    ("capacity", int),
    ("events", int),
    ("peak_requested_bytes", int),
    ("peak_allocated_bytes", int),
    ("peak_reserved_bytes", int),
    ("waste_at_peak_bytes", int),
    ("utilization", float),
    ("num_device_alloc", int),
    ("num_device_free", int),
    ("num_sync_all_streams", int),
    ("num_alloc_retries", int),
    ("device_time_us", float),
    ("oom_event", int),
    ("oom_requested_bytes", int),
    ("start", str),
    ("oom_at_start", bool),
    ("same_as", str),
)

#: Columns a row of an older schema may lack, with the value they take.
_ADDED_COLUMNS = {"same_as": ""}

#: The columns two rows must share to be the same result (``same_as``);
#: utilization and simulated time count as the CSV writes them.
_RESULT_COLUMNS = (
    "trace", "capacity", "events", "start", "peak_requested_bytes", "peak_allocated_bytes",
    "peak_reserved_bytes", "waste_at_peak_bytes", "num_device_alloc", "num_device_free",
    "num_sync_all_streams", "num_alloc_retries", "oom_event", "oom_requested_bytes", "oom_at_start",
)


def _result_key(r: Mapping[str, Any]) -> tuple:
    return (
        r["policy"] == "native",
        *(r[c] for c in _RESULT_COLUMNS),
        f"{float(r['utilization']):.6f}",
        f"{float(r['device_time_us']):.1f}",
    )


def same_result(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Two rows are the same result: one trace, capacity and kind (PyTorch
    setting or other design) and every figure of the replay equal — the
    library's ``same_result``."""
    return _result_key(a) == _result_key(b)


def mark_same(rows: Sequence[Dict[str, Any]]) -> None:
    """Sets each row's ``same_as`` to the setting of the first earlier row
    with the same result (empty when none), as ``vramlab sweep`` does."""
    first: Dict[tuple, str] = {}
    for r in rows:
        k = _result_key(r)
        if k in first:
            r["same_as"] = first[k]
        else:
            first[k] = r["setting"]
            r["same_as"] = ""


def typed_row(row: Mapping[str, Any]) -> Dict[str, Any]:
    """``row`` (from JSON, CSV text or Parquet) with the schema's columns,
    in order, each of its type."""
    out: Dict[str, Any] = {}
    for name, kind in ROW_COLUMNS:
        if name not in row and name in _ADDED_COLUMNS:
            out[name] = _ADDED_COLUMNS[name]
            continue
        if name not in row:
            raise ValueError(f"a row has no column {name!r} (row schema {ROW_SCHEMA})")
        v = row[name]
        if kind is bool and isinstance(v, str):
            v = v.strip().lower() == "true"
        elif kind is int and not isinstance(v, bool):
            v = int(v)
        elif kind is float:
            v = float(v)
        elif kind is str:
            v = "" if v is None else str(v)
        out[name] = v
    return out


def pyarrow_parquet(what: str) -> Any:
    """``pyarrow.parquet``, or an ImportError that says what needs it."""
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ImportError(f"{what} needs pyarrow: pip install pyarrow") from e
    return pq


def write_parquet(rows: Sequence[Mapping[str, Any]], path: Union[str, "os.PathLike[str]"]) -> None:
    """Writes ``rows`` to a Parquet file with the row schema's column types
    and ``vramlab_rows_schema``/``vramlab_version`` in its metadata."""
    pq = pyarrow_parquet("Rows.to_parquet()")
    import pyarrow as pa

    kinds = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}
    schema = pa.schema(
        [pa.field(n, kinds[k]) for n, k in ROW_COLUMNS],
        metadata={"vramlab_rows_schema": str(ROW_SCHEMA), "vramlab_version": _native.version()},
    )
    typed = [typed_row(r) for r in rows]
    columns = {n: [r[n] for r in typed] for n, _ in ROW_COLUMNS}
    pq.write_table(pa.table(columns, schema=schema), os.fspath(path))
