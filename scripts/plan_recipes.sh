#!/usr/bin/env bash
# The recipes `vramlab plan` learns from a trace and its plan, each replayed
# (docs/results/plan/recipes.csv): bash scripts/plan_recipes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-docs/results/plan/recipes.csv}
bin=${VRAMLAB:-target/release/vramlab}
traces=(workloads/data/gpt-small-train.csv tests/plan/fsdp2-lora-recompute-rank0.torch2.15.pickle.gz tests/plan/moe-uneven.torch2.15.pickle.gz)
echo "trace,planned_peak_bytes,default_peak_reserved_bytes,recipe,conf,peak_reserved_bytes,oom" > "$out"
for f in "${traces[@]}"; do
    "$bin" plan "$f" --json 2>/dev/null | python3 -c '
import csv, json, sys
d = json.load(sys.stdin)
w = csv.writer(sys.stdout, lineterminator="\n")
for r in d["recipes"]:
    w.writerow([sys.argv[1], d["planned_peak_bytes"], d["policies"][0]["peak_reserved_bytes"], r["what"], r["conf"], r["peak_reserved_bytes"], str(r["oom"]).lower()])' "$f" >> "$out"
done
echo "wrote $out ($(($(wc -l < "$out") - 1)) recipes)"
