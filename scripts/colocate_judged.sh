#!/usr/bin/env bash
# Judges every colocation job of tests/colocate/jobs with PyTorch's own
# processes on one shared fake GPU (vramlab colocate --oracle) and writes
# each answer, judged, to docs/results/colocation/oracle-NAME.json.
#   bash scripts/colocate_judged.sh [X.Y]   (the judge's release; default 2.15)
# Needs target/release/vramlab and VRAMLAB_FAKECUDA (docs/oracle.md). Exit
# status 1 if any figure differs.
set -euo pipefail
cd "$(dirname "$0")/.."
release=${1:-2.15}
out=${OUT:-docs/results/colocation}
mkdir -p "$out"
status=0
for job in tests/colocate/jobs/*.json; do
    name=$(basename "$job" .json)
    if target/release/vramlab colocate "$job" --oracle --torch "$release" --json > "$out/oracle-$name.json.tmp"; then
        echo "$name: every figure exact"
    else
        echo "$name: DIFFERS" >&2
        status=1
    fi
    mv "$out/oracle-$name.json.tmp" "$out/oracle-$name.json"
done
exit $status
