#!/usr/bin/env python3
"""The oracle judged against a real GPU: PyTorch 2.11 on vramlab's fake CUDA
device against PyTorch 2.11 on an H200 (the committed raw results of
docs/results/gpu-2026-11-29), row by row: peak reserved bytes, cudaMalloc
count, retries and the first OOM, for every trace and setting that run
measured (seven settings, and the OOM point under a memory fraction).

    python3 scripts/oracle_vs_h200.py > docs/results/oracle-vs-h200.md

Needs target/release/vramlab and libvramlab_fakecuda.so (cargo build
--release -p vramlab -p vramlab-fakecuda) and the oracle's torch 2.11
(installed on first use). Traces: gpt-small-train from workloads/data, the
others from ../shared/traces/real.
"""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RUN = ROOT / "docs" / "results" / "gpu-2026-11-29"


def trace_of(folder: str) -> pathlib.Path:
    if folder.startswith("real-"):
        return ROOT.parent / "shared" / "traces" / "real" / (folder[len("real-"):] + ".pickle")
    return ROOT / "workloads" / "data" / (folder + ".csv")


def judge(trace: pathlib.Path, conf: str, fraction, total: int) -> dict:
    cmd = [str(ROOT / "target" / "release" / "vramlab"), "oracle", str(trace), "--torch", "2.11",
           "--conf", conf or "default", "--capacity", str(total), "--json"]
    if fraction is not None:
        cmd += ["--fraction", str(fraction)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr[-2000:]}")
    return json.loads(p.stdout)[0]


def main() -> int:
    rows, same = [], 0
    for folder in sorted(d for d in RUN.iterdir() if d.is_dir()):
        trace = trace_of(folder.name)
        if not trace.exists():
            print(f"skipped {folder.name}: {trace} is not here", file=sys.stderr)
            continue
        for run in sorted(folder.glob("torch-*/summary.json")):
            name = run.parent.name.removeprefix("torch-")
            if name.startswith("timing"):
                continue
            s = json.loads(run.read_text())
            o = judge(trace, s["alloc_conf"], s["memory_fraction"], s["gpu"]["total_bytes"])
            h200 = (s["peak_reserved_bytes"], s["num_device_alloc"], s["num_alloc_retries"],
                    (s["oom"] or {}).get("event_index"))
            fake = (o["torch_peak_reserved_bytes"], o["torch_num_device_alloc"], o["torch_num_alloc_retries"],
                    o["torch_oom_event"])
            ok = h200 == fake
            same += ok
            rows.append((folder.name, name, s["alloc_conf"] or "default", s["memory_fraction"], h200, fake, ok,
                         o["exact"]))
    print("# The oracle against a real GPU: PyTorch 2.11 on the fake device vs PyTorch 2.11 on an H200\n")
    print("Every trace x setting of docs/results/gpu-2026-11-29 (PyTorch 2.11.0+cu130 on an H200,")
    print("driver 580.159.04), replayed by the same wheel on vramlab's fake CUDA device with the")
    print("H200's cudaMemGetInfo total as capacity. Columns: peak reserved bytes / cudaMalloc count /")
    print("retries / first OOM event. Made by `python3 scripts/oracle_vs_h200.py`.\n")
    print(f"**{same} of {len(rows)} rows equal** (all four figures). The last column is vramlab's own replay")
    print("against the oracle on the same row.\n")
    print("| trace | run | setting | fraction | H200 | fake device | equal | vramlab = oracle |")
    print("|---|---|---|---|---|---|---|---|")
    fmt = lambda t: " / ".join("-" if x is None else str(x) for x in t)
    for r in rows:
        print(f"| {r[0]} | {r[1]} | `{r[2]}` | {r[3] if r[3] is not None else '-'} | {fmt(r[4])} | {fmt(r[5])} | "
              f"{'yes' if r[6] else 'NO'} | {'exact' if r[7] else 'differs'} |")
    return 0 if same == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
