#!/usr/bin/env bash
# Makes replay/tests/data/host/ (read by replay/tests/host_oracle.rs and
# docs/results/pinned-host-offload.md): for each scenario of host_offload.py
#
#   SCENARIO.csv(.gz)            its pinned host requests: recorded on torch 2.15 with
#                                pinned_max_round_threshold_mb:0,pinned_max_cached_size_mb:0
#                                (every block is its request, nothing is cached),
#                                `vramlab convert --start fresh`, then host_offload.py --csv
#   SCENARIO.torch2.15.exact.json   PyTorch's host_memory_stats() of that recording
#   SCENARIO.torch2.15.json      ... of the same run, unrecorded, under the defaults
#   SCENARIO.torch2.15.round64.json   pinned_max_round_threshold_mb:64
#   SCENARIO.torch2.15.round1.json    pinned_max_round_threshold_mb:1
#   SCENARIO.torch2.15.cached1.json   pinned_max_cached_size_mb:1
#   SCENARIO.torch2.11.json      torch 2.11, defaults
#   SCENARIO.torch2.15[.round1|.cached1].pickle.gz   recordings (record_pinned_host_memory)
#                                under 2.15's defaults and two of those settings, and
#   SCENARIO.torch2.15[...].fidelity.json   `vramlab fidelity --json` of each
#
# Each JSON names the torch release, the settings and the command that made it.
# All runs use the fake device with VRAMLAB_FAKECUDA_EVENTS=sync.
#
#   cargo build -p vramlab && bash scripts/oracle_experiments/host_offload.sh [SCENARIO...]
#
# Scratch files go to $WORK (default /tmp/offload); VRAMLAB=path/to/vramlab.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
work=${WORK:-/tmp/offload}
out=replay/tests/data/host
vramlab=${VRAMLAB:-target/debug/vramlab}
py=python3
mkdir -p "$work" "$out"
export VRAMLAB_FAKECUDA_EVENTS=sync
exact="pinned_max_round_threshold_mb:0,pinned_max_cached_size_mb:0"
settings=(
  "torch2.15|2.15|"
  "torch2.15.round64|2.15|pinned_max_round_threshold_mb:64"
  "torch2.15.round1|2.15|pinned_max_round_threshold_mb:1"
  "torch2.15.cached1|2.15|pinned_max_cached_size_mb:1"
  "torch2.11|2.11|"
)
recorded=(
  "torch2.15|"
  "torch2.15.round1|pinned_max_round_threshold_mb:1"
  "torch2.15.cached1|pinned_max_cached_size_mb:1"
)
# runc CONF RELEASE SCRIPT ARGS...: run.sh under PYTORCH_ALLOC_CONF=CONF (unset when empty).
runc() {
  local conf=$1; shift
  if [ -n "$conf" ]; then PYTORCH_ALLOC_CONF=$conf bash scripts/oracle_experiments/run.sh "$@"
  else env -u PYTORCH_ALLOC_CONF bash scripts/oracle_experiments/run.sh "$@"; fi
}
# A result without its log (the log is only needed for the CSV).
slim() { "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("log",None); json.dump(d,open(sys.argv[2],"w"),indent=1); open(sys.argv[2],"a").write("\n")' "$1" "$2"; }

# vramlab's own replay of SCENARIO.csv under every setting above, the host
# figures of `vramlab replay --json` (one command per release): SCENARIO.vramlab-replay.json
vramlab_rows() {
  local s=$1 trace
  trace=$(ls "$out/$s".csv* | head -1)
  local c15=("$vramlab" replay "$trace" --torch-version 2.15 --conf "$exact" --conf default
             --conf pinned_max_round_threshold_mb:64 --conf pinned_max_round_threshold_mb:1
             --conf pinned_max_cached_size_mb:1 --json)
  local c11=("$vramlab" replay "$trace" --torch-version 2.11 --conf default --json)
  "$py" -c '
import json, subprocess, sys
out = {"scenario": sys.argv[1], "commands": [], "rows": []}
for torch, cmd in (("2.15", sys.argv[2].split("\x1f")), ("2.11", sys.argv[3].split("\x1f"))):
    rows = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    rows = rows if isinstance(rows, list) else [rows]
    out["commands"].append(" ".join(repr(c) if (not c or " " in c) else c for c in cmd))
    for r in rows:
        row = {"torch": torch}
        row.update((k, v) for k, v in r.items() if k.startswith("host_") or k == "conf")
        out["rows"].append(row)
json.dump(out, sys.stdout, indent=1)
print()' "$s" "$(IFS=$'\x1f'; echo "${c15[*]}")" "$(IFS=$'\x1f'; echo "${c11[*]}")" > "$out/$s.vramlab-replay.json"
}

if [ "${1:-}" = --replay-only ]; then
  shift
  for s in "$@"; do vramlab_rows "$s"; done
  exit 0
fi
if [ $# -gt 0 ]; then scenarios=("$@"); else
  mapfile -t scenarios < <(~/.cache/vramlab/oracle/torch-2.15/bin/python "$here/host_offload.py" --list | cut -d: -f1)
fi
for s in "${scenarios[@]}"; do
  echo "== $s"
  runc "$exact" 2.15 host_offload.py driver "$s" \
      --record "$work/$s.exact.pickle" --out "$work/$s.torch2.15.exact.json" >/dev/null
  "$vramlab" convert "$work/$s.exact.pickle" "$work/$s.conv.csv" --start fresh 2>/dev/null
  rm -f "$out/$s.csv" "$out/$s.csv.gz"
  "$py" "$here/host_offload.py" --csv "$work/$s.exact.pickle" "$work/$s.torch2.15.exact.json" \
      "$work/$s.conv.csv" "$out/$s.csv"
  if [ "$(stat -c %s "$out/$s.csv")" -gt 102400 ]; then gzip -n -9 "$out/$s.csv"; fi
  slim "$work/$s.torch2.15.exact.json" "$out/$s.torch2.15.exact.json"
  for row in "${settings[@]}"; do
    IFS='|' read -r name release conf <<<"$row"
    runc "$conf" "$release" host_offload.py driver "$s" --out "$work/$s.$name.json" >/dev/null
    slim "$work/$s.$name.json" "$out/$s.$name.json"
  done
  # Recordings under 2.15's defaults and two pinned settings, kept (gzipped)
  # for `vramlab fidelity`, with its report.
  for row in "${recorded[@]}"; do
    IFS='|' read -r name conf <<<"$row"
    runc "$conf" 2.15 host_offload.py driver "$s" \
        --record "$work/$s.$name.pickle" --out "$work/$s.$name.rec.json" >/dev/null
    gzip -n -9 -c "$work/$s.$name.pickle" > "$out/$s.$name.pickle.gz"
    cmd=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["command"])' "$work/$s.$name.rec.json")
    # (fidelity exits non-zero when the replay is not exact: the JSON says how)
    { "$vramlab" fidelity "$out/$s.$name.pickle.gz" --json || true; } \
        | "$py" -c 'import json,sys; d=json.load(sys.stdin); d["command"]=sys.argv[1]; json.dump(d,sys.stdout,indent=1); print()' \
            "$cmd && gzip -n -9 $s.$name.pickle && target/debug/vramlab fidelity $out/$s.$name.pickle.gz --json" \
            > "$out/$s.$name.fidelity.json"
  done
  vramlab_rows "$s"
done
