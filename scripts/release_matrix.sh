#!/usr/bin/env bash
# The release matrix: every PyTorch release's own allocator (the official
# wheel on vramlab's fake CUDA device: `vramlab oracle`) against vramlab's
# replay, on the fixed sample (scripts/oracle_sample.sh) x the five
# settings of the GPU check. Raw rows go to docs/results/releases/
# (torch-X.Y.json.gz; each run's log into logs.tar.gz there, unpacked with
# `tar -xzf logs.tar.gz`), the summary to docs/results/releases.md.
#
#   bash scripts/release_matrix.sh                 # 2.1 ... 2.15
#   bash scripts/release_matrix.sh 2.11 2.15       # some releases
#   KEEP="2.11 2.15" bash scripts/release_matrix.sh   # environments to keep
#
# Each release is installed from PyPI on first use into
# $VRAMLAB_ORACLE_CACHE (default ~/.cache/vramlab/oracle), about 6 GB; the
# environments of releases not named in KEEP (default "2.11 2.15") are
# removed after their run, so one is on disk at a time.
set -uo pipefail
cd "$(dirname "$0")/.."
releases=("$@")
if [ ${#releases[@]} -eq 0 ]; then
    releases=(2.1 2.2 2.3 2.4 2.5 2.6 2.7 2.8 2.9 2.10 2.11 2.12 2.13 2.14 2.15)
fi
keep=" ${KEEP:-2.11 2.15} "
cache=${VRAMLAB_ORACLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vramlab/oracle}
cargo build --release --locked -q -p vramlab -p vramlab-fakecuda
out=docs/results/releases
mkdir -p "$out"
mapfile -t sample < <(bash scripts/oracle_sample.sh)
settings=(--conf default --conf expandable_segments:True --conf max_split_size_mb:128
          --conf roundup_power2_divisions:4 --conf garbage_collection_threshold:0.6)
for r in "${releases[@]}"; do
    echo "== torch $r"
    start=$(date +%s)
    target/release/vramlab oracle "${sample[@]}" "${settings[@]}" --torch "$r" --json \
        > "$out/torch-$r.json" 2> "$out/torch-$r.log"
    rc=$?
    echo "rc $rc, $(( $(date +%s) - start )) s" | tee -a "$out/torch-$r.log"
    gzip -n -f "$out/torch-$r.json"
    if [[ "$keep" != *" $r "* ]]; then
        rm -rf "$cache/torch-$r"
    fi
done
# The logs, this run's with the earlier runs' of other releases: one archive.
logs=$(mktemp -d)
[ -f "$out/logs.tar.gz" ] && tar -xzf "$out/logs.tar.gz" -C "$logs"
mv "$out"/torch-*.log "$logs"/
(cd "$logs" && ls torch-*.log | sort | tar -czf logs.tar.gz --owner=0 --group=0 -T -)
mv "$logs/logs.tar.gz" "$out/logs.tar.gz" && rm -rf "$logs"
python3 scripts/releases_md.py "$out" > docs/results/releases.md
echo "wrote docs/results/releases.md"
