"""A sweep as a Slurm job array through submitit (optional: `pip install
submitit`): one array task per chunk of cases, results kept per case id,
so a rerun after a failure only runs what is missing.

    python examples/fleet/submitit_array.py TRACE_OR_FOLDER ... [--local]
"""

import json
import sys
from pathlib import Path

import vramlab


def run_chunk(cases, out_dir):
    out = Path(out_dir)
    for c in cases:
        done = out / f"{c.id}.json"
        if not done.exists():  # idempotent: a rerun skips finished cases
            done.write_text(json.dumps(vramlab.run_case(c)))


def main() -> None:
    try:
        import submitit
    except ImportError:
        print("submitit is not installed: pip install submitit")
        return
    args = [a for a in sys.argv[1:] if a != "--local"]
    out = Path("fleet-out")
    out.mkdir(exist_ok=True)
    cases = vramlab.cases(args, ["default", "expandable_segments:True"], gpu="h100-80gb")
    chunks = [cases[i::16] for i in range(16)]
    ex = submitit.AutoExecutor(folder="fleet-logs", cluster="local" if "--local" in sys.argv else None)
    ex.update_parameters(timeout_min=30, slurm_array_parallelism=16)
    jobs = ex.map_array(run_chunk, chunks, [str(out)] * len(chunks))
    for j in jobs:
        j.result()
    rows = vramlab.Rows(json.loads((out / f"{c.id}.json").read_text()) for c in cases)
    print(f"{len(rows)} rows; best: {vramlab.fleet_report(rows).best_setting.grid_line}")


if __name__ == "__main__":
    main()
