"""A sweep on Ray (optional: `pip install ray`): Ray's multiprocessing pool
runs the cases; on a cluster, `ray.init(address="auto")` first.

    python examples/fleet/ray_pool.py [TRACE_OR_FOLDER ...]
"""

import sys
from pathlib import Path

import vramlab

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    try:
        from ray.util.multiprocessing import Pool
    except ImportError:
        print("ray is not installed: pip install ray")
        return
    traces = sys.argv[1:] or [str(ROOT / "workloads" / "data" / "gpt-small-train.csv")]
    grid = ["default", "expandable_segments:True"]
    with Pool() as pool:
        rows = vramlab.sweep(traces, grid, executor=pool)
    assert rows == vramlab.sweep(traces, grid)
    print(f"{len(rows)} rows on Ray")


if __name__ == "__main__":
    main()
