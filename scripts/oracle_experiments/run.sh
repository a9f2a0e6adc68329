#!/usr/bin/env bash
# Runs one experiment script with the oracle's torch X.Y on the fake CUDA
# device: bash scripts/oracle_experiments/run.sh X.Y SCRIPT.py [driver|ascending [ARGS...]]
# (`vramlab oracle --torch X.Y` installs the wheel and prepares the fake first).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
release=$1; script=$2; placement=${3:-driver}
shift $(( $# < 3 ? $# : 3 ))
cache=${VRAMLAB_ORACLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vramlab/oracle}
py="$cache/torch-$release/bin/python"
[ -x "$py" ] || { echo "no torch $release in $cache: run vramlab oracle --torch $release TRACE first" >&2; exit 2; }
so=$(ls "$cache"/torch-"$release"/lib/python3*/site-packages/nvidia/*/lib/libcudart.so.* 2>/dev/null | grep -E 'libcudart\.so\.[0-9]+$' | head -1)
fake="$cache/fakecuda-$(basename "$so")"
VRAMLAB_FAKECUDA_PLACEMENT=$placement LD_PRELOAD="$fake/$(basename "$so")" LD_LIBRARY_PATH="$fake" \
    exec "$py" "$here/$script" "$@"
