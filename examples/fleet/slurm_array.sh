#!/bin/bash
# A sweep as a Slurm job array with the command line alone: each task runs
# one shard (pairs are dealt round-robin), then one job merges the parts.
#
#   sbatch --array=1-16 examples/fleet/slurm_array.sh /shared/snapshots/
#   vramlab sweep --merge parts/part*.csv --csv rows.csv     # after the array
#
# Outside Slurm (SLURM_ARRAY_TASK_ID unset) it runs every shard in turn and
# merges them, which is what CI does.
#SBATCH --job-name=vramlab-sweep
#SBATCH --cpus-per-task=4
#SBATCH --time=00:30:00
set -euo pipefail
traces=("${@:-workloads/data/gpt-small-train.csv}")
n=${SLURM_ARRAY_TASK_COUNT:-4}
mkdir -p parts
if [[ -n "${SLURM_ARRAY_TASK_ID:-}" ]]; then
    vramlab sweep "${traces[@]}" --gpu h100-80gb --shard "$SLURM_ARRAY_TASK_ID/$n" --csv "parts/part$SLURM_ARRAY_TASK_ID.csv" --quiet
else
    for k in $(seq 1 "$n"); do
        vramlab sweep "${traces[@]}" --gpu h100-80gb --shard "$k/$n" --csv "parts/part$k.csv" --quiet
    done
    vramlab sweep --merge parts/part*.csv --csv parts/rows.csv
fi
