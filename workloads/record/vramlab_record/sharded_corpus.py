"""Re-record the sharded-training corpus: job folders under workloads/data/sharded/.

    python -m vramlab_record.sharded_corpus --data workloads/data/sharded [--only PREFIX]

Each family is ``examples/sharded/llm_train.py`` recorded as a job
(:mod:`vramlab_record.job`): the first and the last rank of the world (the
ones uneven shards make different), the rest noted as assumed like rank 0.
``MANIFEST.tsv`` gets one line per job: its world, parallelism, model,
script arguments, distinct traces and each one's peak of live bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from .job import trace_header

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The script, relative to workloads/record (the recordings' working folder).
SCRIPT = "examples/sharded/llm_train.py"

#: (job name, world size, gpus per node, script arguments)
FAMILIES = [
    ("llama-3-8b-fsdp2-8r", 8, 8, ["--model", "llama-3-8b", "--parallel", "fsdp2", "--seq", "2048"]),
    ("llama-3-8b-fsdp2-64r", 64, 8, ["--model", "llama-3-8b", "--parallel", "fsdp2", "--seq", "2048"]),
    ("llama-3-8b-hsdp-64r", 64, 8, ["--model", "llama-3-8b", "--parallel", "hsdp", "--seq", "2048"]),
    ("llama-3-8b-fsdp2-ckpt-8r", 8, 8, ["--model", "llama-3-8b", "--parallel", "fsdp2", "--seq", "8192",
                                        "--checkpointing"]),
    ("llama-3-70b-fsdp2-8r", 8, 8, ["--model", "llama-3-70b", "--parallel", "fsdp2", "--seq", "2048",
                                    "--checkpointing"]),
    ("llama-3-70b-fsdp2-64r", 64, 8, ["--model", "llama-3-70b", "--parallel", "fsdp2", "--seq", "2048",
                                      "--checkpointing"]),
    ("llama-3-8b-tp-8r", 8, 8, ["--model", "llama-3-8b", "--parallel", "tp", "--seq", "2048"]),
    # The GMLake setting: LoRA + recompute + ZeRO-3-style sharding, OPT-1.3B, 4 GPUs.
    ("opt-1.3b-lora-ckpt-fsdp2-4r", 4, 4, ["--model", "opt-1.3b", "--parallel", "lora", "--seq", "1024",
                                           "--batch", "8"]),
    ("gpt2-ddp-8r", 8, 8, ["--model", "gpt2", "--parallel", "ddp", "--seq", "1024", "--batch", "8"]),
    ("resnet-50-ddp-8r", 8, 8, ["--model", "resnet-50", "--parallel", "ddp", "--batch", "64"]),
]

COLUMNS = ["job", "world_size", "gpus_per_node", "parallel", "model", "args", "traces", "peak_live_bytes",
           "outside_allocator_bytes", "command"]


def record(data: str, name: str, world: int, per_node: int, args: list[str]) -> dict:
    out = os.path.join(data, name)
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "vramlab_record.cpu", "--world-size", str(world), "--gpus-per-node", str(per_node),
           "--ranks", f"0,{world - 1}", "-o", os.path.relpath(out, HERE), "--quiet", "--", SCRIPT, *args]
    t0 = time.time()
    subprocess.run(cmd, check=True, cwd=HERE)
    manifest = json.load(open(os.path.join(out, "job.json")))
    traces = [e for e in manifest["ranks"] if "trace" in e]
    peaks = [f"rank{e['rank']}={trace_header(os.path.join(out, e['trace']))['peak_live_bytes']}" for e in traces]
    print(f"{name}: {len(traces)} distinct trace(s), {time.time() - t0:.0f} s", file=sys.stderr)
    flag = {a: b for a, b in zip(args, args[1:] + [""]) if a.startswith("--") and not b.startswith("--")}
    return {
        "job": name, "world_size": world, "gpus_per_node": per_node, "parallel": flag.get("--parallel", ""),
        "model": flag.get("--model", ""), "args": " ".join(args), "traces": " ".join(e["trace"] for e in traces),
        "peak_live_bytes": " ".join(peaks), "outside_allocator_bytes": manifest["outside_allocator"]["bytes"],
        "command": "cd workloads/record && python -m vramlab_record.cpu " + " ".join(cmd[3:]),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="folder of the job folders and MANIFEST.tsv")
    p.add_argument("--only", default="", help="only the jobs whose name starts with this")
    ns = p.parse_args(argv)
    os.makedirs(ns.data, exist_ok=True)
    path = os.path.join(ns.data, "MANIFEST.tsv")
    rows = {}
    if os.path.exists(path):
        with open(path) as f:
            head = f.readline().rstrip("\n").split("\t")
            for line in f:
                row = dict(zip(head, line.rstrip("\n").split("\t")))
                rows[row["job"]] = row
    for name, world, per_node, args in FAMILIES:
        if name.startswith(ns.only):
            rows[name] = record(ns.data, name, world, per_node, args)
    with open(path, "w") as f:
        f.write("\t".join(COLUMNS) + "\n")
        for name, *_ in FAMILIES:
            if name in rows:
                f.write("\t".join(str(rows[name].get(c, "")) for c in COLUMNS) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
