#!/usr/bin/env bash
# The serving budget against PyTorch's own graph pool (docs/results/serve-budget.md):
# serve-budget's start-ups for 8 capture sizes, from the forwards recorded at 3
# sizes (1, 16, 128) and at all 8, in both capture orders, replayed by PyTorch's
# allocator on the fake device (the oracle) with its snapshot kept; PyTorch's
# pool (its segments with a private pool id) against vramlab's. Fails above 2%.
#
#   scripts/serve_budget_check.sh [TORCH_RELEASE]     # default 2.15
set -euo pipefail
cd "$(dirname "$0")/.."
v=${1:-2.15}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
vl=./target/release/vramlab
pairs=()
for rec in tests/serve/llama-1b-decode-bs1-16-128.csv tests/serve/llama-1b-decode-bs1-128.csv.gz; do
    what=$(basename "$rec" | sed 's/\.csv.*//')
    for order in desc asc; do
        name="${what}_$order"
        $vl serve-budget "$rec" --capture-sizes 1,2,4,8,16,32,64,128 --order "$order" \
            --emit-trace "$work/$name.csv" --json > "$work/$name.json" 2>/dev/null
        pairs+=("$(echo "$name" | tr '-' '_')=$work/$name.json")
    done
done
$vl oracle "$work"/*.csv --torch "$v" --snapshot-out "$work/snap" | tail -n +1 | grep -v "^oracle:"
python3 scripts/serve_budget_check.py "$work/snap" "${pairs[@]}" | tee "$work/table.md"
worst=$(sed -n 's/^largest difference: \([0-9.]*\)%/\1/p' "$work/table.md")
python3 -c "import sys; sys.exit(0 if float('$worst') <= 2.0 else 1)" || { echo "error: the graph pool is $worst% off PyTorch's" >&2; exit 1; }
