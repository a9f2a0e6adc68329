"""A sweep on a process pool: the same rows as `vramlab sweep`, written to
Parquet and summarised as a fleet.

    python examples/fleet/process_pool.py [TRACE_OR_FOLDER ...]
"""

import concurrent.futures
import sys
import tempfile
from pathlib import Path

import vramlab

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    traces = sys.argv[1:] or [str(ROOT / "workloads" / "data" / "gpt-small-train.csv"), str(ROOT / "tests" / "explain" / "pinned-split.csv")]
    grid = ["default", "expandable_segments:True", "max_split_size_mb:128", "garbage_collection_threshold:0.8"]
    with concurrent.futures.ProcessPoolExecutor() as pool:
        rows = vramlab.sweep(traces, grid, capacity="24GiB", executor=pool)
    assert rows == vramlab.sweep(traces, grid, capacity="24GiB"), "the executor changes nothing"
    with tempfile.TemporaryDirectory() as d:
        try:
            rows.to_parquet(Path(d) / "rows.parquet")
            assert vramlab.read_rows(Path(d) / "rows.parquet") == rows
            print(f"{len(rows)} rows, written to Parquet and read back")
        except ImportError as e:
            print(f"{len(rows)} rows ({e})")
    report = vramlab.fleet_report(rows)
    best = report.best_setting
    print(f"best setting across {report.traces} traces: {best.grid_line} ({best.saved_bytes / 2**20:.0f} MiB saved; hurts {best.hurts or 'none'})")


if __name__ == "__main__":
    main()
