#!/usr/bin/env bash
# bench.sh: every policy on every bundled trace — peak reserved against the
# live-bytes bound, utilization, device calls, replay speed — written as CSV,
# plotted, and put into docs/bench/results.md together with the criterion
# figures and the commands that made them. BENCHMARKS.md (measurements made
# by hand, dated) is never written here.
#
#   bash scripts/bench.sh            # full run (criterion benches: several minutes)
#   bash scripts/bench.sh --quick    # skip criterion, table and plots only
#
# With DYNAPIPE=PATH/allocation_simulator.py (a checkout of
# github.com/awslabs/optimizing-multitask-training-through-dynamic-pipelines,
# and `pip install sortedcontainers`), the full run also times DynaPipe's
# Python model of the allocator against `vramlab replay` on 1M- and
# 10M-event CSV traces (scripts/bench_vs_dynapipe.py).
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
OUT=docs/bench
mkdir -p "$OUT"
cargo build --release --locked -q
./target/release/vramlab bench --repeat "${REPEAT:-3}" --csv "$OUT/bench.csv" --markdown "$OUT/table.md" --plots "$OUT/plots" >/dev/null

mbs() { # group/function -> "median time (MB/s)" from criterion's estimates and benchmark.json
    local d="target/criterion/$1/new"
    [ -f "$d/estimates.json" ] || { echo "-"; return; }
    python3 - "$d" <<'PY'
import json, sys
d = sys.argv[1]
ns = json.load(open(f"{d}/estimates.json"))["median"]["point_estimate"]
tp = json.load(open(f"{d}/benchmark.json")).get("throughput") or {}
b = tp.get("Bytes") or tp.get("BytesDecimal") or 0
print(f"{ns/1e6:.1f} ms ({b/ns*1e3:.0f} MB/s)" if b else f"{ns/1e6:.1f} ms")
PY
}

crit() { # group/function -> "median time" and throughput from criterion's estimates
    local f="target/criterion/$1/new/estimates.json"
    [ -f "$f" ] || { echo "-"; return; }
    python3 - "$f" "${2:-0}" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
ns = e["median"]["point_estimate"]
elems = int(sys.argv[2])
if elems:
    print(f"{ns/1e6:.1f} ms ({elems/ns*1e3:.2f} M events/s)")
else:
    print(f"{ns/1e6:.0f} ms")
PY
}

if [ $QUICK = 0 ]; then
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
    # What a user waits for: whole-process timings, and the same with an
    # older build for a before/after column when OLD_BIN names one.
    python3 scripts/bench_process.py --runs 5 --all-cores ${OLD_BIN:+--old "$OLD_BIN"} > "$OUT/process.md"
    if [ -n "${DYNAPIPE:-}" ]; then
        python3 scripts/make_1m_csv.py target/1m.csv
        python3 scripts/make_1m_csv.py target/10m.csv --events 10000000
        python3 scripts/bench_vs_dynapipe.py --dynapipe "$DYNAPIPE" target/1m.csv target/10m.csv \
            --csv "$OUT/dynapipe.csv" > "$OUT/dynapipe.md"
    fi
fi
EVENTS=$(python3 -c "print(3280*305)")
{
    echo "# Benchmark results (made by \`bash scripts/bench.sh\`)"
    echo
    echo "Made by \`bash scripts/bench.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores ($(uname -m)), $(rustc --version)."
    echo "The machine was shared with other work; throughput figures vary by ±20 % between runs."
    echo
    echo "## Replay throughput (criterion)"
    echo
    echo "| benchmark | median |"
    echo "|---|---|"
    for b in default expandable_segments max_split_size_mb_256 roundup_power2_divisions_4; do
        echo "| \`cd benches && cargo bench --bench replay\` replay/$b (bundled GPT trace x305, $EVENTS events) | $(crit "replay/$b" "$EVENTS") |"
    done
    echo "| \`cd benches && cargo bench --bench sweep\` default grid (44 settings) x 100k events, 2 threads | $(crit sweep/default_grid_44_settings_100k_events) |"
    echo
    echo "## Reading (criterion)"
    echo
    echo "| benchmark | median (throughput) |"
    echo "|---|---|"
    for b in csv csv_text_ids vlt vlt_zstd; do
        echo "| \`cd benches && cargo bench --bench read\` read_1m_events/$b (1,000,000 events) | $(mbs "read_1m_events/$b") |"
    done
    for d in target/criterion/pickle_read/*/; do
        [ -f "$d/new/estimates.json" ] || continue
        n=$(basename "$d")
        echo "| \`cd benches && cargo bench --bench pickle\` pickle_read/$n (a real snapshot in ../shared/traces/real) | $(mbs "pickle_read/$n") |"
    done
    echo
    if [ -f "$OUT/process.md" ]; then
        echo "## Whole process (what a user waits for)"
        echo
        echo "\`python3 scripts/bench_process.py --runs 5 --all-cores${OLD_BIN:+ --old OLD_BIN}\`: best of 5 wall-clock runs of the release binary"
        echo "on every core: \`replay\` of a CSV trace reads on one thread and replays on another."
        echo "\`replay\` also replays under the other driver address order when a tie it decides was met"
        echo "(docs/driver-placement.md); \`--no-placement-check\` leaves that second replay out."
        echo
        cat "$OUT/process.md"
    fi
    # Only this run's comparison: a table left from another run has no raw
    # data beside it (dynapipe.csv is rewritten with each run).
    if [ -n "${DYNAPIPE:-}" ] && [ -f "$OUT/dynapipe.md" ]; then
        echo
        cat docs/bench/dynapipe-intro.md
        echo
        cat "$OUT/dynapipe.md"
    fi
    echo
    echo "## Every policy on every bundled trace"
    echo
    echo "\`vramlab bench --csv docs/bench/bench.csv --markdown docs/bench/table.md\`: unlimited device;"
    echo "*over bound* is peak reserved above the peak of live (requested) bytes, the bound no allocator can beat;"
    echo "utilization is peak active / peak reserved; device calls are cudaMalloc + cudaFree (+ map/unmap);"
    echo "events/s is the replay speed of each trace repeated to at least 200k events, fastest of 3."
    echo
    for t in gpt-small-train llama-3-8b-train-seq1024 llama-3-8b-infer-seq1024 sd15-512; do
        [ -f "$OUT/plots/$t-policies.png" ] && echo "![every policy on $t](plots/$t-policies.png)" && echo
    done
    echo "The table: [table.md](table.md) (and [bench.csv](bench.csv))."
} > "$OUT/results.md"
echo "wrote $OUT/results.md, $OUT/table.md, $OUT/bench.csv and plots in $OUT"
