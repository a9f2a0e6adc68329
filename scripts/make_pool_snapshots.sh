#!/usr/bin/env bash
# PyTorch's own memory snapshots of the private-pool scenarios
# (tests/pools/*.csv), each recorded by PyTorch's allocator on the fake CUDA
# device (workloads/record/torch_replay.py, the oracle's replayer) with the
# memory history on: a full recording of every scenario, and mid-run ones
# (a 300-entry ring) of serving-warmup, for torch 2.15 and 2.11; the two OOM
# scenarios on the 64 MiB device they are written for. They are
# what `vramlab fidelity` must match (replay/tests/pool_snapshots.rs).
#
#   scripts/make_pool_snapshots.sh [OUT]    # default tests/pools/snapshots
#
# Needs the oracle's cached environments (`vramlab oracle ... --torch X.Y`
# installs them) and a release build (`cargo build --release`).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-tests/pools/snapshots}
cache=${VRAMLAB_ORACLE_CACHE:-$HOME/.cache/vramlab/oracle}
mkdir -p "$out"
for v in 2.15 2.11; do
    # Installs the release's wheel and the fake device on first use.
    ./target/release/vramlab oracle tests/pools/graph-shared.csv --torch "$v" >/dev/null
    fake=$(ls -d "$cache"/fakecuda-* | head -1)
    py="$cache/torch-$v/bin/python"
    record() { # NAME TRACE CAPACITY_BYTES|- [torch_replay options]
        local name=$1 trace=$2 capacity=$3 work
        shift 3
        work=$(mktemp -d)
        env ${capacity:+VRAMLAB_FAKECUDA_CAPACITY=$capacity} \
            LD_PRELOAD="$fake/libcudart.so.13" LD_LIBRARY_PATH="$fake" \
            "$py" workloads/record/torch_replay.py "$trace" --out "$work" --quiet "$@" 2>/dev/null || true
        test -s "$work/snapshot.pickle" || { echo "error: no snapshot for $trace under torch $v" >&2; exit 1; }
        cp "$work/snapshot.pickle" "$out/$name.torch$v.pickle"
        rm -rf "$work"
    }
    for t in tests/pools/*.csv; do
        name=$(basename "$t" .csv)
        case $name in
        # The OOM scenarios on the 64 MiB device they are written for.
        capture-oom | mempool-use-on-oom) record "$name" "$t" 67108864 --continue-on-oom ;;
        *) record "$name" "$t" "" ;;
        esac
    done
    record serving-warmup-midrun tests/pools/serving-warmup.csv "" --max-entries 300
done
ls -l "$out"
