"""vramlab from Python, as in a notebook: replay a trace under several
settings, rank the default grid for a card, find the smallest card, sweep
into pandas, write the HTML report.

    pip install .            # from the repository root: the module and the `vramlab` command
    python examples/python_quickstart.py [TRACE]

TRACE defaults to the bundled GPT training step; any PyTorch snapshot
(`torch.cuda.memory._dump_snapshot("x.pickle")`) works the same way, and so
does the snapshot dict itself (`torch.cuda.memory._snapshot()`).
"""

import sys
import tempfile
from pathlib import Path

import vramlab

GiB = 1 << 30
trace = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parents[1] / "workloads/data/gpt-small-train.csv")

# Read it once (a snapshot dict or a list of events works too).
t = vramlab.load(trace)
print(t)

# The same step under three settings: peak reserved, and the part of it that
# is "reserved but unallocated" at the peak.
for r in vramlab.replay(t, conf=["default", "expandable_segments:True", "max_split_size_mb:256"]):
    print(f"{r.conf:32} peak reserved {r.peak_reserved_bytes / GiB:6.2f} GiB, waste at peak {r.waste_at_peak_bytes / GiB:5.2f} GiB")

# Rank the built-in grid for a card and print the line to export.
rec = vramlab.recommend(t, gpu="rtx4090")
print(rec.verdict, "-", rec.why)
for shell, line in rec.export:  # empty when the defaults are fine
    print(f"  {shell:10} {line}")

# The smallest capacity it fits, with the defaults.
p = vramlab.oom_point(t)
print(f"fits from {p.min_capacity / GiB:.2f} GiB (no setting can go below {p.lower_bound / GiB:.2f} GiB)")

# Every setting of a small grid as rows (a DataFrame with pandas installed).
rows = vramlab.sweep(t, grid=["default", "expandable_segments:True", "roundup_power2_divisions:4"])
try:
    print(rows.to_pandas()[["setting", "peak_reserved_bytes", "waste_at_peak_bytes"]])
except ImportError:
    for row in rows:
        print(row["setting"], row["peak_reserved_bytes"])

# The HTML report with plots.
out = Path(tempfile.mkdtemp(prefix="vramlab-report-"))
print("report:", vramlab.report(t, out, gpu="rtx4090", plots=2))

# Why it reserves more than it allocates: the waste at the peak by cause, and
# the live allocations that pin it, each with the peak replayed without it.
e = vramlab.explain(t, top=3)
print(f"waste at peak {e.waste_at_peak_bytes / GiB:.2f} GiB: pinned {e.waste.pinned_bytes / GiB:.2f}, releasable {e.waste.releasable_bytes / GiB:.2f}")
for c in e.culprits:
    print(f"  id {c.id}: pins {c.pinned_bytes / GiB:.3f} GiB; without it the peak is {c.peak_reserved_without_bytes / GiB:.2f} GiB")

# The same sweep on a process pool (or Dask, submitit, Ray): the same rows.
if __name__ == "__main__":
    import concurrent.futures

    with concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
        assert vramlab.sweep(t, grid=["default", "expandable_segments:True"], executor=pool) == vramlab.sweep(
            t, grid=["default", "expandable_segments:True"]
        )
    print("best across the fleet:", vramlab.fleet_report(rows).best_setting.grid_line)
