#!/usr/bin/env bash
# Every command's output, table and JSON, on bundled traces and (when
# ../shared/traces/real is here) real snapshots, written one file per run
# into OUT. A refactor that must keep behaviour byte-identical is checked by
# running this before and after and diffing the two folders:
#
#   VRAMLAB=/tmp/before/vramlab bash scripts/golden_outputs.sh /tmp/golden-before
#   cargo build --release && bash scripts/golden_outputs.sh /tmp/golden-after
#   diff -r /tmp/golden-before /tmp/golden-after
#
# Each file holds the command line, its stdout, its stderr and its exit
# status; files a command writes (plots, CSV, snapshots, reports) are copied
# in beside it. The checkout's path is written ROOT so that the two runs can
# come from different checkouts.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: golden_outputs.sh OUT}
bin=${VRAMLAB:-target/release/vramlab}
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
rm -rf "$out" && mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=0
root=$PWD
# wall-clock times are the one thing that differs between two runs
clock='s/(generated in [0-9.]* [mµ]\?s)/(generated in TIME)/; s/) in [0-9.]* s$/) in TIME/'

# run NAME ARGS...: one command, its output in $out/NAME.txt; files it wrote
# under $work/files end up in $out/NAME.files/.
run() {
    local name=$1
    shift
    n=$((n + 1))
    rm -rf "$work/files" && mkdir -p "$work/files"
    {
        echo "\$ vramlab $*" | sed "s#$root#ROOT#g"
        echo "--- stdout"
        (cd "${cwd:-$work/files}" && NO_COLOR=1 "$bin" "$@" 2>"$work/stderr" | sed "s#$work#WORK#g; s#$root#ROOT#g; $clock")
        echo "--- exit ${PIPESTATUS[0]}"
        echo "--- stderr"
        sed "s#$work#WORK#g; s#$root#ROOT#g; $clock" "$work/stderr"
    } >"$out/$name.txt" 2>&1
    if [ -n "$(ls -A "$work/files")" ]; then
        cp -r "$work/files" "$out/$name.files"
        grep -rlI -e "$root" -e "$work" "$out/$name.files" | xargs -r sed -i "s#$work#WORK#g; s#$root#ROOT#g"
    fi
}

gpt=$root/workloads/data/gpt-small-train.csv
sdxl=$root/workloads/data/sdxl-resolution1024.csv.gz
llama=$root/workloads/data/llama-3-8b-infer-decode-new-tokens128.csv.gz
bundled=$root/workloads/data

for t in gpt sdxl llama; do
    path=${!t}
    run "replay-$t" replay "$path"
    run "replay-$t-json" replay "$path" --json --conf default --conf expandable_segments:True
    run "replay-$t-gpu" replay "$path" --gpu rtx4090 --conf expandable_segments:True
    run "recommend-$t" recommend "$path" --gpu h100-80gb
    run "recommend-$t-json" recommend "$path" --gpu h100-80gb --json
    run "oom-point-$t" oom-point "$path" --conf default --conf expandable_segments:True
    run "oom-point-$t-json" oom-point "$path" --json
    run "stats-$t" stats "$path"
    run "stats-$t-json" stats "$path" --json
    run "sweep-$t" sweep "$path" --gpu a100-80gb
    run "sweep-$t-csv" sweep "$path" --gpu a100-80gb --csv rows.csv
done
run replay-policy-bfc replay "$gpt" --policy bfc --conf allow_growth:true
run replay-policy-stitch replay "$gpt" --policy stitch
run replay-two-releases replay "$gpt" --torch-version 2.11 --torch-version 2.15
run replay-oom replay "$sdxl" --capacity 2GiB
run replay-oom-json replay "$sdxl" --capacity 2GiB --json
run replay-snapshot-out replay "$gpt" --conf expandable_segments:True --snapshot-out what_if.pickle
run sweep-folder sweep "$bundled" --gpu a100-80gb --csv rows.csv
run sweep-folder-json sweep "$bundled" --gpu a100-80gb --json rows.json
run sweep-shard sweep "$bundled" --shard 3/8 --csv part3.csv
run conf-grammar conf "max_split_size_mb:512,roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"
run conf-release conf "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]" --torch-version 2.9 --size 1100MiB
run conf-bad conf "max_split_size_mb:abc"
run gpus gpus
run gpus-json gpus --json
run gen-list gen --list
run gen-llama gen llama-3-8b-train --seq 4096 --checkpointing -o llama.csv.gz
run gen-sdxl gen sdxl --resolution 1536 -o sdxl.vlt.zst
run fit-llama fit llama-3-8b-train --vary seq --gpu h200 --plot fit/
run fit-sd15 fit sd15 --vary resolution --gpu rtx4090
run fit-json fit sd15 --vary resolution --gpu rtx4090 --json
run matrix-sdxl matrix sdxl --gpu rtx4090 --csv m.csv --plot matrix/
run matrix-llama matrix llama-3-8b-infer --gpu rtx4090 --no-search
run concat concat "$gpt" "$gpt" --empty-cache-between -o ab.vlt
run convert convert "$gpt" gpt.vlt.zst
run report report "$gpt" --gpu h100-80gb --out report/
run demo demo --out demo/
run missing-file replay /nonexistent/trace.csv
# The other modes of the replaying commands: a held trace (--timeline,
# --trace-device), a card given to oom-point, and a multi-rank job.
run replay-timeline replay "$gpt" --conf default --conf expandable_segments:True --timeline timeline.csv
run replay-no-check replay "$gpt" --no-placement-check --continue-on-oom --capacity 300MiB
run replay-trace-device replay "$gpt" --trace-device 0
run oom-point-capacity oom-point "$sdxl" --capacity 2GiB
run oom-point-capacity-json oom-point "$sdxl" --capacity 2GiB --json
run recommend-upgrade recommend "$llama" --gpu rtx4090 --torch-version 2.11 --upgrade-to 2.15
job=$root/workloads/data/sharded/llama-3-8b-fsdp2-8r
for mode in "" --json; do
    run "replay-job$mode" replay "$job" --gpu h100-80gb --conf default --conf expandable_segments:True $mode
    run "oom-point-job$mode" oom-point "$job" $mode
    run "recommend-job$mode" recommend "$job" --gpu h100-80gb $mode
done
run sweep-job sweep "$job" --gpu h100-80gb --csv rows.csv --json rows.json
run sweep-two-files sweep "$gpt" "$llama" --csv rows.csv
run replay-job-refused replay "$job" --snapshot-out x.pickle
cwd=$root run bench-check bench-check benches/baseline.json

real=$root/../shared/traces/real
if [ -d "$real" ]; then
    for f in "$real"/*.pickle; do
        b=$(basename "$f" .pickle)
        run "fidelity-$b" fidelity "$f"
        run "fidelity-$b-json" fidelity "$f" --json
        run "replay-$b" replay "$f" --conf default --conf expandable_segments:True
        run "replay-$b-json" replay "$f" --json
        run "stats-$b-json" stats "$f" --json
        run "recommend-$b" recommend "$f" --gpu h100-80gb
        run "oom-point-$b" oom-point "$f"
        run "convert-$b" convert "$f" --start fresh out.csv
    done
    first=$(ls "$real"/*.pickle | head -1)
    run report-real report "$first" --gpu h100-80gb --out report/
    run sweep-real sweep "$real" --gpu h100-80gb --json rows.json
else
    echo "skipped the real snapshots: $real is not here" >&2
fi
echo "$n runs written to $out"
