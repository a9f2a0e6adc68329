#!/usr/bin/env bash
# bench.sh: measures, writes the raw data to docs/bench/, then generates
# BENCHMARKS.md from it (scripts/bench_md.py). What it measures: every
# policy on every bundled trace (peak reserved against the live-bytes
# bound, utilization, device calls, replay speed: bench.csv, table.md and
# an SVG plot per trace), criterion's replay, sweep and read medians
# (criterion.csv), whole-process timings (process.md), and with DYNAPIPE
# set, vramlab against DynaPipe's allocator model (dynapipe.csv). Each part
# records its date, machine, build and command in docs/bench/runs.json.
# BENCHMARKS.md holds nothing else; the hand-made log is docs/perf-log.md.
#
#   bash scripts/bench.sh            # full run (criterion benches: several minutes)
#   bash scripts/bench.sh --quick    # the policy table and plots only, then BENCHMARKS.md
#   bash scripts/bench.sh --render   # BENCHMARKS.md from the committed data alone (seconds)
#
# With DYNAPIPE=PATH/allocation_simulator.py (a checkout of
# github.com/awslabs/optimizing-multitask-training-through-dynamic-pipelines,
# and `pip install sortedcontainers`), the full run also times DynaPipe's
# Python model of the allocator against `vramlab replay` on 1M- and
# 10M-event CSV traces (scripts/bench_vs_dynapipe.py).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=full
case "${1:-}" in
    --quick) MODE=quick ;;
    --render) MODE=render ;;
    "") ;;
    *) echo "usage: bash scripts/bench.sh [--quick | --render]" >&2; exit 2 ;;
esac
OUT=docs/bench

if [ $MODE = render ]; then
    python3 scripts/bench_md.py
    exit 0
fi

# runs.json: the date, machine, build and command of one part's run.
record_run() { # PART COMMAND [NOTE]
    python3 - "$OUT/runs.json" "$1" "$2" "${3:-}" <<'PY'
import json, os, subprocess, sys, datetime
path, part, command, note = sys.argv[1:5]
runs = json.load(open(path)) if os.path.exists(path) else {}
sh = lambda *c: subprocess.run(c, capture_output=True, text=True).stdout.strip()
run = {
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
    "machine": f"{os.cpu_count()} cores ({sh('uname', '-m')}), {sh('rustc', '--version')}",
    "build": sh("git", "rev-parse", "--short", "HEAD") + (" with changes" if sh("git", "status", "--porcelain", "--untracked-files=no") else ""),
    "command": command,
}
if note:
    run["note"] = note
runs[part] = run
open(path, "w").write(json.dumps(runs, indent=2) + "\n")
PY
}

mkdir -p "$OUT/plots"
cargo build --release --locked -q
rm -f "$OUT"/plots/*-policies.png "$OUT"/plots/*-policies.svg
./target/release/vramlab bench --repeat "${REPEAT:-3}" --csv "$OUT/bench.csv" --markdown "$OUT/table.md" --plots "$OUT/plots" >/dev/null
# `vramlab bench --plots` draws each plot as PNG and SVG; the SVG is kept.
rm -f "$OUT"/plots/*-policies.png
record_run policies "vramlab bench --repeat ${REPEAT:-3} --csv docs/bench/bench.csv --markdown docs/bench/table.md --plots docs/bench/plots"

# group/function -> "median_ms,throughput" from criterion's estimates (and
# benchmark.json for bytes); ELEMENTS > 0 gives events/s instead.
crit() { # GROUP/FUNCTION [ELEMENTS]
    python3 - "target/criterion/$1/new" "${2:-0}" <<'PY'
import json, os, sys
d, elems = sys.argv[1], int(sys.argv[2])
if not os.path.exists(f"{d}/estimates.json"):
    sys.exit(0)
ns = json.load(open(f"{d}/estimates.json"))["median"]["point_estimate"]
tp = (json.load(open(f"{d}/benchmark.json")).get("throughput") or {}) if os.path.exists(f"{d}/benchmark.json") else {}
b = tp.get("Bytes") or tp.get("BytesDecimal") or 0
thr = f"{elems / ns * 1e3:.2f} M events/s" if elems else (f"{b / ns * 1e3:.0f} MB/s" if b else "")
print(f"{ns / 1e6:.1f},{thr}" if ns < 1e8 else f"{ns / 1e6:.0f},{thr}")
PY
}

if [ $MODE = full ]; then
    # The benches are a workspace of their own; run in benches/, they build
    # into ../target (benches/.cargo/config.toml), so their reports land in
    # target/criterion, where crit reads them.
    (
        cd benches
        cargo bench --locked --bench replay -- --warm-up-time 1 --measurement-time 5 >/dev/null
        cargo bench --locked --bench sweep -- --warm-up-time 1 --measurement-time 5 >/dev/null
        cargo bench --locked --bench read -- --warm-up-time 1 --measurement-time 5 >/dev/null
        cargo bench --locked --bench pickle -- --warm-up-time 1 --measurement-time 3 >/dev/null 2>&1 || true
    )
    EVENTS=$((3280 * 305))
    {
        echo "benchmark,command,what,median_ms,throughput"
        for b in default expandable_segments max_split_size_mb_256 roundup_power2_divisions_4; do
            r=$(crit "replay/$b" "$EVENTS")
            [ -n "$r" ] && echo "replay/$b,cd benches && cargo bench --bench replay,\"bundled GPT trace x305, $EVENTS events\",$r"
        done
        r=$(crit sweep/default_grid_44_settings_100k_events)
        [ -n "$r" ] && echo "sweep/default_grid_44_settings_100k_events,cd benches && cargo bench --bench sweep,\"default grid (44 settings) x 100k events, 2 threads\",$r"
        for b in csv csv_text_ids vlt vlt_zstd; do
            r=$(crit "read_1m_events/$b")
            [ -n "$r" ] && echo "read_1m_events/$b,cd benches && cargo bench --bench read,\"1,000,000 events\",$r"
        done
        for d in target/criterion/pickle_read/*/; do
            [ -f "$d/new/estimates.json" ] || continue
            n=$(basename "$d")
            echo "pickle_read/$n,cd benches && cargo bench --bench pickle,a real snapshot in ../shared/traces/real,$(crit "pickle_read/$n")"
        done
    } > "$OUT/criterion.csv"
    record_run criterion "bash scripts/bench.sh"
    # What a user waits for: whole-process timings, and the same with an
    # older build for a before/after column when OLD_BIN names one.
    python3 scripts/bench_process.py --runs 5 --all-cores ${OLD_BIN:+--old "$OLD_BIN"} > "$OUT/process.md"
    record_run process "python3 scripts/bench_process.py --runs 5 --all-cores${OLD_BIN:+ --old OLD_BIN}" \
        "${OLD_BIN:+OLD_BIN was $OLD_BIN}"
    if [ -n "${DYNAPIPE:-}" ]; then
        python3 scripts/make_1m_csv.py target/1m.csv
        python3 scripts/make_1m_csv.py target/10m.csv --events 10000000
        python3 scripts/bench_vs_dynapipe.py --dynapipe "$DYNAPIPE" target/1m.csv target/10m.csv \
            --csv "$OUT/dynapipe.csv" > /dev/null
        record_run dynapipe "python3 scripts/bench_vs_dynapipe.py --dynapipe PATH/allocation_simulator.py target/1m.csv target/10m.csv"
    fi
fi
python3 scripts/bench_md.py
echo "wrote BENCHMARKS.md from $OUT (bench.csv, table.md, plots, criterion.csv, process.md, dynapipe.csv, runs.json)"
