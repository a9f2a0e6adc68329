#!/usr/bin/env bash
# Catching the next PyTorch release: install its wheel (the oracle's cache),
# diff its allocator-config keys and snapshot keys against the newest
# release vramlab knows, run the release matrix on it, and list every row
# where its own allocator and vramlab's newest rules part.
#
#   bash scripts/new_release.sh 2.16            # the new release
#   BASE=2.15 bash scripts/new_release.sh 2.16  # compared with this one
#
# What to do with the output: docs/oracle.md ("A new release").
set -uo pipefail
cd "$(dirname "$0")/.."
new=$1
base=${BASE:-2.15}
cache=${VRAMLAB_ORACLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vramlab/oracle}
cargo build --release --locked -q -p vramlab -p vramlab-fakecuda
# Installs both wheels on first use (the one-event judge run is cheap).
for r in "$base" "$new"; do
    target/release/vramlab oracle workloads/data/gpt-small-train.csv --torch "$r" >/dev/null 2>"/tmp/vramlab-new-release-$r.log" \
        || { [ $? -eq 1 ] || { echo "torch $r could not be judged:"; tail -5 "/tmp/vramlab-new-release-$r.log"; exit 2; }; }
done
keys() {
    local lib
    lib=$(echo "$cache"/torch-"$1"/lib/python3*/site-packages/torch/lib)
    # Every identifier-like string of the allocator libraries that looks like a setting.
    strings $lib/libc10_cuda.so $lib/libc10.so | grep -E '^[a-z][a-z0-9]*(_[a-z0-9]+)+$' | sort -u
}
echo "== the allocator keys of every release, from the wheels (torch/data/release-keys.tsv; torch/src/keys.rs must follow)"
python3 scripts/release_keys.py && git diff --stat -- allocator/data/release-keys.tsv
echo "== strings in torch $new's allocator libraries that torch $base lacks (candidate new config keys)"
comm -13 <(keys "$base") <(keys "$new") | head -50
echo "== snapshot keys: torch $base vs torch $new"
diff <(bash scripts/oracle_experiments/run.sh "$base" snapshot_keys.py 2>/dev/null | tail -n +2) \
     <(bash scripts/oracle_experiments/run.sh "$new" snapshot_keys.py 2>/dev/null | tail -n +2) && echo "(the same)"
echo "== tie order of free blocks (allocator/tests/native_tie_order.rs)"
for p in driver ascending; do
    echo "$p: $(bash scripts/oracle_experiments/run.sh "$new" tie_order.py "$p" 2>/dev/null)"
done
echo "== the release matrix for $new (vramlab's newest rules against torch $new's allocator)"
KEEP="$base $new" bash scripts/release_matrix.sh "$new"
python3 - "$new" <<'PY'
import gzip, json, sys
rows = json.loads(gzip.open(f"docs/results/releases/torch-{sys.argv[1]}.json.gz", "rt").read() or "[]")
bad = [r for r in rows if not r["exact"]]
print(f"{len(rows) - len(bad)} of {len(rows)} rows exact")
for r in bad:
    print(f"  {r['trace']} [{r['setting']}]: {r['first_difference'] or ', '.join(r['differing'])}")
PY
