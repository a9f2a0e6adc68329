"""A sweep on Dask: a LocalCluster here, `Client("scheduler:8786")` on a
real cluster (the trace files must be readable by the workers).

    pip install "dask[distributed]"
    python examples/fleet/dask_cluster.py [TRACE_OR_FOLDER ...]
"""

import sys
from pathlib import Path

from dask.distributed import Client, LocalCluster

import vramlab

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    traces = sys.argv[1:] or [str(ROOT / "workloads" / "data" / "gpt-small-train.csv"), str(ROOT / "tests" / "explain" / "pinned-split.csv")]
    grid = ["default", "expandable_segments:True", "max_split_size_mb:128"]
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        # Either hand vramlab the executor ...
        rows = vramlab.sweep(traces, grid, executor=client.get_executor())
        # ... or map the cases yourself (resumable: skip the ids you have).
        cases = vramlab.cases(traces, grid)
        # Rows(...) marks the rows whose results are the same (same_as), as
        # a whole sweep does.
        mapped = vramlab.Rows(client.gather(client.map(vramlab.run_case, cases, key=[f"vramlab-{c.id}" for c in cases])))
    assert rows == mapped == vramlab.sweep(traces, grid)
    print(f"{len(rows)} rows from {len(cases)} cases on Dask, identical to the command line's")


if __name__ == "__main__":
    main()
