#!/usr/bin/env bash
# compare_builds.sh: two vramlab builds, byte for byte (stdout, stderr, exit
# code), over every CSV trace of the corpus and the tests (option sets that
# stop at and continue past OOMs, several settings, other policies, two
# releases), the malformed files, and `stats`; then the same over `.vlt`
# files converted from PyTorch's snapshots of tests/pools and, when they
# are there, ../shared/traces/real (mid-run starts, private pools, stacks),
# and over RMM logs made from corpus traces (scripts/csv_to_rmm_log.py),
# and over cut and doubled copies of one (the error compared), and over
# the snapshots read directly, reshaped copies of them included; prints each
# difference and the count. What a change that must not change answers (a faster reader,
# a streamed replay) is checked with.
#
#   bash scripts/compare_builds.sh OLD_BIN [NEW_BIN]   # NEW_BIN: target/release/vramlab
#
# OLD_BIN and NEW_BIN must have the same file name (usage lines name it).
set -uo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?usage: compare_builds.sh OLD_BIN [NEW_BIN]}
NEW=${2:-target/release/vramlab}
if [ "$(basename "$OLD")" != "$(basename "$NEW")" ]; then
    echo "the two binaries must have the same file name (messages name it)" >&2
    exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
runs=0
differ=0
check() { # ARGS...: one command under both builds
    runs=$((runs + 1))
    "$OLD" "$@" >"$tmp/o.out" 2>"$tmp/o.err"
    local ro=$?
    "$NEW" "$@" >"$tmp/n.out" 2>"$tmp/n.err"
    local rn=$?
    if [ $ro != $rn ] || ! cmp -s "$tmp/o.out" "$tmp/n.out" || ! cmp -s "$tmp/o.err" "$tmp/n.err"; then
        differ=$((differ + 1))
        echo "differs: vramlab $* (exit $ro / $rn)"
        diff "$tmp/o.out" "$tmp/n.out" | head -5
        diff "$tmp/o.err" "$tmp/n.err" | head -5
    fi
}
check_error() { # ARGS...: a command that fails: exit code, stdout and the error line
    runs=$((runs + 1))
    "$OLD" "$@" >"$tmp/o.out" 2>"$tmp/o.err"
    local ro=$?
    "$NEW" "$@" >"$tmp/n.out" 2>"$tmp/n.err"
    local rn=$?
    # A trace replayed as it is read prints the notes of its metadata
    # before a later part of the file turns out broken; the error is the
    # same.
    if [ $ro != $rn ] || ! cmp -s "$tmp/o.out" "$tmp/n.out" ||
        [ "$(tail -n 1 "$tmp/o.err")" != "$(tail -n 1 "$tmp/n.err")" ]; then
        differ=$((differ + 1))
        echo "differs: vramlab $* (exit $ro / $rn)"
        diff <(tail -n 1 "$tmp/o.err") <(tail -n 1 "$tmp/n.err")
    fi
}
option_sets=(
    ""
    "--json"
    "--conf expandable_segments:True --conf max_split_size_mb:128 --json"
    "--capacity 2GiB --json"
    "--capacity 2GiB --continue-on-oom"
    "--policy bfc --json"
    "--policy async --capacity 1GiB"
    "--torch-version 2.11 --json"
    "--torch-version 2.11 --torch-version 2.15"
)
for f in workloads/data/*.csv workloads/data/*.csv.gz tests/*/*.csv; do
    [ -f "$f" ] || continue
    for opts in "${option_sets[@]}"; do
        # shellcheck disable=SC2086 # the option sets are word lists
        check replay "$f" $opts
    done
    check stats "$f"
    check stats "$f" --json
done
for f in tests/malformed/*.csv*; do
    check replay "$f"
    check stats "$f"
done
# Binary traces (read as they are read since .vlt streaming), converted
# by the old build so that both read the same bytes.
for snap in tests/pools/snapshots/*.pickle ../shared/traces/real/*.pickle; do
    [ -f "$snap" ] || continue
    vlt="$tmp/$(basename "$snap" .pickle).vlt"
    "$OLD" convert "$snap" "$vlt" >/dev/null 2>&1 || continue
    for opts in "${option_sets[@]}"; do
        # shellcheck disable=SC2086 # the option sets are word lists
        check replay "$vlt" $opts
    done
    check stats "$vlt"
done
# RAPIDS RMM logs (read as they are read since RMM streaming), made from
# corpus traces.
for f in workloads/data/gpt-small-train.csv tests/pools/graph-shared.csv tests/explain/pending-free.csv; do
    [ -f "$f" ] || continue
    log="$tmp/$(basename "$f" .csv)-rmm.csv"
    python3 scripts/csv_to_rmm_log.py "$f" "$log"
    for opts in "${option_sets[@]}"; do
        # shellcheck disable=SC2086 # the option sets are word lists
        check replay "$log" $opts
    done
    check stats "$log"
done
for f in tests/malformed/rmm-*.csv; do
    check replay "$f"
    check stats "$f"
done
# Snapshots read directly (their entries converted as the pickle is read
# since snapshot streaming): the pool and real snapshots, the malformed
# pickles, and reshaped copies that the streamed read must hand back to the
# whole read (scripts/reshape_snapshot.py).
for snap in tests/pools/snapshots/*.pickle ../shared/traces/real/*.pickle tests/releases/*.pickle; do
    [ -f "$snap" ] || continue
    check stats "$snap"
    check stats "$snap" --json
    check replay "$snap"
    check replay "$snap" --json --conf expandable_segments:True
    check fidelity "$snap"
    for how in $(python3 scripts/reshape_snapshot.py --list); do
        python3 scripts/reshape_snapshot.py "$how" "$snap" "$tmp/reshaped.pickle" || continue
        check stats "$tmp/reshaped.pickle" --json
        check replay "$tmp/reshaped.pickle"
    done
done
for f in tests/malformed/*.pickle; do
    check stats "$f"
    check replay "$f"
done
one="$tmp/serving-warmup-midrun.torch2.15.vlt"
if [ -f "$one" ]; then
    size=$(stat -c %s "$one")
    for cut in 11 20 100 $((size / 2)) $((size - 9)) $((size - 1)); do
        head -c "$cut" "$one" >"$tmp/cut.vlt"
        check_error replay "$tmp/cut.vlt"
        check_error stats "$tmp/cut.vlt"
    done
    cat "$one" "$one" >"$tmp/twice.vlt"
    check_error replay "$tmp/twice.vlt"
fi
echo "$runs runs, $differ differ"
[ $differ = 0 ]
