#!/usr/bin/env bash
# The offline plan of every trace of the corpus (workloads/data) and of the
# test recordings given, against PyTorch's default and expandable segments:
# docs/results/plan/corpus.csv (bash scripts/plan_corpus.sh [MORE TRACES]).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-docs/results/plan/corpus.csv}
bin=${VRAMLAB:-target/release/vramlab}
echo "trace,allocations,peak_live_bytes,greedy_peak_bytes,planned_peak_bytes,proved_optimal,search_nodes,default_peak_reserved_bytes,default_fragmentation_ratio,es_peak_reserved_bytes,es_fragmentation_ratio" > "$out"
for f in workloads/data/*.csv workloads/data/*.csv.gz "$@"; do
    "$bin" plan "$f" --conf default --conf expandable_segments:True --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
s = d["search"] or {}
p = d["policies"]
print(",".join(str(x) for x in [sys.argv[1], d["buffers"], d["peak_live_bytes"], d["greedy_peak_bytes"], d["planned_peak_bytes"],
      str(d["proved_optimal"]).lower(), s.get("nodes", ""), p[0]["peak_reserved_bytes"], round(p[0]["fragmentation_ratio"], 4),
      p[1]["peak_reserved_bytes"], round(p[1]["fragmentation_ratio"], 4)]))' "$f" >> "$out"
done
echo "wrote $out ($(($(wc -l < "$out") - 1)) traces)"
