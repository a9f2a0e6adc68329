#!/usr/bin/env bash
# The offline plan of every trace of the corpus (workloads/data) and of the
# traces given, against PyTorch's default, expandable segments, GMLake-style
# stitching and the plan replayed as a policy:
# docs/results/plan/corpus.csv (bash scripts/plan_corpus.sh [MORE TRACES]);
# with CORPUS=0, the traces given only.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-docs/results/plan/corpus.csv}
bin=${VRAMLAB:-target/release/vramlab}
echo "trace,allocations,initial_blocks,peak_live_bytes,greedy_peak_bytes,planned_peak_bytes,proved_optimal,search_nodes,default_peak_reserved_bytes,default_fragmentation_ratio,es_peak_reserved_bytes,es_fragmentation_ratio,stitch_peak_reserved_bytes,plan_policy_peak_reserved_bytes" > "$out"
corpus=(workloads/data/*.csv workloads/data/*.csv.gz)
[ "${CORPUS:-1}" = 0 ] && corpus=()
for f in "${corpus[@]}" "$@"; do
    # Stitching replayed from the same start as the plan (fresh for a
    # trace recorded mid-run).
    stitch=$("$bin" replay "$f" --policy stitch --start fresh --json 2>/dev/null |
        python3 -c 'import json, sys; d = json.load(sys.stdin); d = d[0] if isinstance(d, list) else d; print(d["peak_reserved_bytes"])')
    "$bin" plan "$f" --conf default --conf expandable_segments:True --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
s = d["search"] or {}
p = d["policies"]
print(",".join(str(x) for x in [sys.argv[1], d["buffers"], d["initial_blocks"], d["peak_live_bytes"], d["greedy_peak_bytes"], d["planned_peak_bytes"],
      str(d["proved_optimal"]).lower(), s.get("nodes", ""), p[0]["peak_reserved_bytes"], round(p[0]["fragmentation_ratio"], 4),
      p[1]["peak_reserved_bytes"], round(p[1]["fragmentation_ratio"], 4), sys.argv[2], d["policy_peak_bytes"]]))' "$f" "$stitch" >> "$out"
done
echo "wrote $out ($(($(wc -l < "$out") - 1)) traces)"
