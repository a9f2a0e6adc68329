#!/usr/bin/env bash
# placement_ranges.sh: for every bundled trace under four settings, the
# peak reserved with the H200 driver's placement and with ascending
# addresses (docs/driver-placement.md). Prints one line per (trace,
# setting) whose peak the order changes, then the count.
#
#   bash scripts/placement_ranges.sh [TRACE...]   (default: workloads/data/*)
#   TORCH_VERSION=2.11 bash scripts/placement_ranges.sh   (another release's rules;
#   default: each trace's own, 2.15 for the bundled corpus)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q
[ $# -gt 0 ] || set -- workloads/data/*.csv*
echo "trace setting driver_MiB ascending_MiB"
for f in "$@"; do
    ./target/release/vramlab replay "$f" --json --conf default --conf expandable_segments:True \
        --conf max_split_size_mb:128 --conf roundup_power2_divisions:4 \
        ${TORCH_VERSION:+--torch-version "$TORCH_VERSION"} 2>/dev/null |
        python3 -c '
import json, sys
name = sys.argv[1]
for r in json.load(sys.stdin):
    flag = "open" if not r["placement_settled"] else "settled"
    print(name, r["conf"], r["peak_reserved_bytes"] >> 20, r["other_placement"]["peak_reserved_bytes"] >> 20, flag)
' "$(basename "$f")"
done | awk '{n++} $5 == "open" {o++; print $1, $2, $3, $4} END {printf "%d of %d (trace, setting) pairs depend on the order\n", o, n}'
