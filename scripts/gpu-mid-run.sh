#!/usr/bin/env bash
# gpu-mid-run.sh: PyTorch's ground truth for snapshots recorded mid-run
# (issue 13), in one run on a GPU machine (about 5 minutes on an H200):
#
#  1. workloads/record/gpu_shapes.py records one small snapshot of each shape
#     users produce (mid-run, ring buffer, empty_cache() before/after the
#     history starts, two streams, expandable segments mid-run);
#     `vramlab fidelity` must be exact on every one.
#  2. For every mid-run snapshot (those shapes, and ../shared/traces/real if
#     present) and a set of settings: PyTorch replays the trace from a
#     *fresh* start (workloads/record/torch_replay.py, which reads snapshots as
#     `vramlab convert --start fresh` writes them: the blocks
#     in use at the first entry allocated first, in address order) and
#     `vramlab replay --start fresh` predicts it; peak reserved is compared.
#
# Binaries: as scripts/gpu-check.sh (`bash scripts/gpu-check.sh --prepare`
# here, carry target/gpu-check-bin). Results: $OUT/mid-run/ (or
# docs/results/gpu-mid-run-<date>/ without $OUT): shapes/*.pickle (stacks
# not recorded), fidelity/*.json, fresh.csv and summary.md.
#
# Exit status: 0 when every fidelity check is exact and every prediction
# equals PyTorch's peak reserved; 1 otherwise; 2 when no GPU could be used.

set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYTHON=${PYTHON:-python3}
VRAMLAB=${VRAMLAB:-$ROOT/target/gpu-check-bin/vramlab}
[ -x "$VRAMLAB" ] || VRAMLAB=$ROOT/target/release/vramlab
[ -x "$VRAMLAB" ] || { echo "gpu-mid-run: no vramlab binary (run scripts/gpu-check.sh --prepare)" >&2; exit 2; }
RES=${OUT:+$OUT/mid-run}
RES=${RES:-$ROOT/docs/results/gpu-mid-run-$(date -u +%Y-%m-%d)}
mkdir -p "$RES/shapes" "$RES/fidelity" "$RES/torch"
SETTINGS=("" "expandable_segments:True" "max_split_size_mb:128" "roundup_power2_divisions:4" "max_split_size_mb:512,expandable_segments:True")
status=0

"$PYTHON" workloads/record/gpu_shapes.py --out "$RES/shapes" || { [ $? = 2 ] && exit 2; status=1; }

echo "| snapshot | fidelity |" >"$RES/summary.md"
echo "|---|---|" >>"$RES/summary.md"
for f in "$RES"/shapes/*.pickle; do
    n=$(basename "$f" .pickle)
    if "$VRAMLAB" fidelity "$f" --json >"$RES/fidelity/$n.json" 2>"$RES/fidelity/$n.err"; then r=exact; else r=DIFFERS; status=1; fi
    echo "| $n | $r |" >>"$RES/summary.md"
done

echo "snapshot,setting,torch_peak_reserved,vramlab_peak_reserved,equal" >"$RES/fresh.csv"
SNAPS=("$RES"/shapes/*.pickle)
[ -d ../shared/traces/real ] && SNAPS+=(../shared/traces/real/*.pickle)
for f in "${SNAPS[@]}"; do
    n=$(basename "$f" .pickle)
    for c in "${SETTINGS[@]}"; do
        tag=$(echo "${c:-default}" | tr ':,' '__')
        d="$RES/torch/$n-$tag"
        "$PYTHON" workloads/record/torch_replay.py "$f" --conf "$c" --no-history --quiet --out "$d" >/dev/null 2>"$d.err" || true
        t=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['reserved_bytes.all.peak'])" "$d/memory_stats.json" 2>/dev/null || echo NA)
        v=$("$VRAMLAB" replay "$f" --conf "$c" --start fresh --json 2>/dev/null | "$PYTHON" -c "import json,sys; print(json.load(sys.stdin)['peak_reserved_bytes'])" 2>/dev/null || echo NA)
        eq=no; [ "$t" = "$v" ] && [ "$t" != NA ] && eq=yes
        [ $eq = yes ] || status=1
        echo "$n,${c:-default},$t,$v,$eq" >>"$RES/fresh.csv"
    done
done
echo >>"$RES/summary.md"
echo "fresh-start predictions equal to PyTorch: $(grep -c ',yes$' "$RES/fresh.csv") of $(($(wc -l <"$RES/fresh.csv") - 1))" >>"$RES/summary.md"
cat "$RES/summary.md"
exit $status
