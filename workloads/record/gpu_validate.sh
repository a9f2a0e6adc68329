#!/usr/bin/env bash
# Records the built-in workloads on a real GPU with vramlab_record.gpu and
# under fake tensors with vramlab_record.cpu on the same machine (same torch),
# then compares them (python -m vramlab_record.compare). This produced the
# comparison in workloads/record/README.md ("How close it comes").
#
#   bash workloads/record/gpu_validate.sh OUTDIR [quick]
#
# Needs a CUDA GPU with ~90 GB free for the Llama-3-8B training step, torch,
# transformers and diffusers. Writes OUTDIR/results.tar.gz (summaries,
# compact CSV exports of the GPU snapshots with their Python frames, logs).
set -u
OUT=${1:?usage: gpu_validate.sh OUTDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d)
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
PY=${PY:-python3}
mkdir -p "$W/res"
log() { echo "[$(date +%T)] $*" | tee -a "$W/res/log.txt"; }

log "versions: $($PY -c 'import torch,transformers;print(torch.__version__,transformers.__version__,torch.cuda.get_device_name(0))' 2>&1)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >>"$W/res/log.txt" 2>&1

# name | workload and parameters
RUNS=(
  "tiny-user|-- $HERE/examples/tiny_train.py --steps 2"
  "gpt-small|gpt-small-train"
  "cs336-ctx100-fwdbwd|cs336-lm --seq 100 --mode fwdbwd"
  "cs336-ctx200-fwd|cs336-lm --seq 200 --mode fwd"
  "llama-train-seq512|llama-3-8b-train --seq 512"
  "llama-train-ckpt-seq512|llama-3-8b-train --seq 512 --checkpointing true"
  "llama-infer-seq512|llama-3-8b-infer --seq 512"
  "llama-infer-static-seq512|llama-3-8b-infer --seq 512 --kv-cache static"
  "sd15-512|sd15 --resolution 512"
  "sdxl-1024|sdxl --resolution 1024"
)

# Fake recordings run in the background on the CPUs while the GPU works.
(
  for r in "${RUNS[@]}"; do
    name=${r%%|*}; args=${r#*|}
    echo "$name|$args"
  done | xargs -P 6 -I{} bash -c '
    name=${1%%|*}; args=${1#*|}
    timeout 300 '"$PY"' -m vramlab_record.cpu --quiet -o '"$W"'/fake-$name.csv.gz $args \
      >'"$W"'/res/fake-$name.log 2>&1 || echo "fake $name failed" >>'"$W"'/res/log.txt' _ {}
) &
FAKE=$!

for r in "${RUNS[@]}"; do
  name=${r%%|*}; args=${r#*|}
  log "gpu $name: $args"
  timeout 240 $PY -m vramlab_record.gpu -o "$W/gpu-$name.pickle" $args >"$W/res/gpu-$name.log" 2>&1 \
    || log "gpu $name failed (rc $?)"
done
log "gpu expandable_segments echo"
timeout 120 $PY -m vramlab_record.gpu -o "$W/gpu-gpt-expandable.pickle" --alloc-conf expandable_segments:True \
  gpt-small-train >"$W/res/gpu-gpt-expandable.log" 2>&1 || log "expandable failed"
$PY -c "import pickle;print(pickle.load(open('$W/gpu-gpt-expandable.pickle','rb'))['allocator_settings'])" \
  >>"$W/res/gpu-gpt-expandable.log" 2>&1

wait $FAKE
log "fake runs done"
for r in "${RUNS[@]}"; do
  name=${r%%|*}
  if [ -f "$W/gpu-$name.pickle" ]; then
    $PY -m vramlab_record.compare --export "$W/gpu-$name.pickle" "$W/res/gpu-$name.csv.gz" >>"$W/res/log.txt" 2>&1
    if [ -f "$W/fake-$name.csv.gz" ]; then
      cp "$W/fake-$name.csv.gz" "$W/res/"
      $PY -m vramlab_record.compare "$W/gpu-$name.pickle" "$W/fake-$name.csv.gz" --json "$W/res/cmp-$name.json" \
        >"$W/res/cmp-$name.txt" 2>&1
      cat "$W/res/cmp-$name.txt"
    fi
  fi
done
tar -C "$W" -czf "$OUT/results.tar.gz" res
log "done"
