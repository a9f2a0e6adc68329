#!/usr/bin/env bash
# Runs each fuzz target of fuzz/ for a bounded time (libFuzzer through
# cargo-fuzz) and prints the executions per target.
#
#   scripts/fuzz.sh                       # every target, 60 s each
#   scripts/fuzz.sh --seconds 600 pickle  # one target, 10 minutes
#   scripts/fuzz.sh --regressions         # replay fuzz/regressions/ only
#
# Options:
#   --seconds N        time per target (default 60)
#   --sanitizer S      address (default) or none
#   --seeds            (re)write the seed corpora (scripts/make_fuzz_seeds.py, and
#                      the .vlt seeds with `vramlab convert`) first
#   --regressions      run every target once over fuzz/regressions/<target>/
#                      and fuzz/corpus/<target>/ and stop (no fuzzing)
#   -h, --help         this text
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). cargo-fuzz passes
# nightly-only flags to rustc; on a stable toolchain this script sets
# RUSTC_BOOTSTRAP=1, which makes stable rustc accept them (works with
# Rust 1.95 and AddressSanitizer on x86_64 Linux).
#
# New corpus entries go to fuzz/corpus-work/<target>/ (not committed);
# crashes go to fuzz/artifacts/<target>/. Logs: fuzz/logs/<target>.log.
# Builds use $CARGO_TARGET_DIR/fuzz (default /work/target-fuzz/fuzz).

set -euo pipefail

seconds=60
sanitizer=address
seeds=0
regressions=0
targets=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --seconds=*) seconds="${1#*=}"; shift ;;
        --sanitizer) sanitizer="$2"; shift 2 ;;
        --sanitizer=*) sanitizer="${1#*=}"; shift ;;
        --seeds) seeds=1; shift ;;
        --regressions) regressions=1; shift ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
all=(pickle snapshot snapshot_model csv binary rmm settings replay)
if [[ ${#targets[@]} -eq 0 ]]; then
    targets=("${all[@]}")
fi
target_dir="${CARGO_TARGET_DIR:-/work/target-fuzz}/fuzz"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is missing: cargo install cargo-fuzz" >&2
    exit 2
fi

if [[ $seeds -eq 1 ]]; then
    python3 scripts/make_fuzz_seeds.py
    mkdir -p fuzz/corpus/binary
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/work/target-fuzz}" cargo build -q --bin vramlab
    vramlab="${CARGO_TARGET_DIR:-/work/target-fuzz}/debug/vramlab"
    for f in fuzz/corpus/csv/*.csv; do
        n="$(basename "$f" .csv)"
        "$vramlab" convert "$f" "fuzz/corpus/binary/$n.vlt" >/dev/null 2>&1 || true
        "$vramlab" convert "$f" "fuzz/corpus/binary/$n.vlt.zst" >/dev/null 2>&1 || true
    done
    for f in fuzz/corpus/snapshot/snap*.pickle; do
        n="$(basename "$f" .pickle)"
        "$vramlab" convert "$f" "fuzz/corpus/binary/$n-{device}.vlt" >/dev/null 2>&1 || true
    done
fi

cargo fuzz build -O -a --sanitizer "$sanitizer" --target-dir "$target_dir" >/dev/null 2>&1 ||
    cargo fuzz build -O -a --sanitizer "$sanitizer" --target-dir "$target_dir"
bin_dir="$target_dir/$(rustc -vV | sed -n 's/^host: //p')/release"

mkdir -p fuzz/logs
status=0
printf '%-16s %12s %10s %s\n' target executions seconds result
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus-work/$t" "fuzz/corpus/$t" "fuzz/regressions/$t" "fuzz/artifacts/$t"
    log="fuzz/logs/$t.log"
    if [[ $regressions -eq 1 ]]; then
        # -runs=0 executes every given input once.
        args=(-runs=0 "fuzz/regressions/$t" "fuzz/corpus/$t")
    else
        args=("-max_total_time=$seconds" -timeout=10 -rss_limit_mb=2048
            -malloc_limit_mb=1024 -max_len=65536 -print_final_stats=1
            "-artifact_prefix=fuzz/artifacts/$t/"
            "fuzz/corpus-work/$t" "fuzz/corpus/$t")
    fi
    start=$(date +%s)
    # The binary cargo-fuzz built above (running it directly avoids a
    # rebuild per target while the sources change).
    if ASAN_OPTIONS="detect_odr_violation=0:detect_leaks=1" "$bin_dir/$t" "${args[@]}" >"$log" 2>&1; then
        result=ok
    else
        result="FAILED (see $log; crashes in fuzz/artifacts/$t/)"
        status=1
    fi
    took=$(( $(date +%s) - start ))
    execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1 || true)
    if [[ -z "$execs" ]]; then
        execs=$(grep -Eo '^Done [0-9]+ runs' "$log" | grep -Eo '[0-9]+' | tail -1 || true)
    fi
    printf '%-16s %12s %10s %s\n' "$t" "${execs:-?}" "$took" "$result"
done
exit $status
