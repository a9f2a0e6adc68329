#!/usr/bin/env bash
# gpu-check.sh: the whole GPU check of vramlab in one run (< 10 minutes on
# one H200): CudaDevice tests, PyTorch ground truth for every corpus trace
# under a grid of allocator settings, `vramlab fidelity` on each snapshot
# PyTorch wrote, the OOM point, and malloc/free latency of the native
# policy on CudaDevice against PyTorch's own allocator.
#
# Two steps, because the GPU machine has no Rust toolchain and no network:
#
#   1. Here (any machine with cargo):
#        bash scripts/gpu-check.sh --prepare
#      builds `vramlab` (release, feature cuda) and the GPU test binary and
#      copies them, stripped, with BUILD_INFO, into target/gpu-check-bin/
#      (ignored by git; a few MiB).
#   2. On the GPU machine, from the repository root, with that folder
#      carried along (device tool: carry ["target/gpu-check-bin"]):
#        bash scripts/gpu-check.sh
#      If target/gpu-check-bin/ is missing and cargo exists there, it builds
#      offline instead (cargo build --release --features cuda --offline).
#
# Results: docs/results/gpu-<UTC date>/ (summary.md, summary.json, env.txt,
# tests.log, and one folder per trace with PyTorch's snapshots, stats,
# timings and vramlab's JSON). When $OUT is set (the device tool), the
# folder is also packed into $OUT/gpu-results.tgz and summary.md and the log
# are copied to $OUT. Unpack here with
#   tar xzf /path/to/gpu-results.tgz -C docs/results
#
# Options / environment:
#   --prepare          build the binaries (step 1) and exit
#   --budget SECONDS   stop starting new traces after this much time (default 360)
#   TRACES="a.csv b.csv"  traces to check (default workloads/data/*.csv)
#   PYTHON=python3     the Python that has torch
#
# Exit status: 0 when every test passed, every fidelity check was exact and
# every leak check passed; 1 otherwise; 2 when no GPU could be used.

set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BIN_DIR="$ROOT/target/gpu-check-bin"
PYTHON=${PYTHON:-python3}
BUDGET=${BUDGET:-360}
PREPARE=0
while [ $# -gt 0 ]; do
    case "$1" in
    --prepare) PREPARE=1 ;;
    --budget) BUDGET=$2; shift ;;
    -h | --help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

die() { echo "gpu-check: $*" >&2; exit 2; }

# ------------------------------------------------------------- prepare
build_here() {
    local tdir=${CARGO_TARGET_DIR:-$ROOT/target}
    local offline=()
    [ "${1:-}" = offline ] && offline=(--offline)
    echo "== cargo build --release --features cuda ${offline[*]}"
    cargo build --release --features cuda "${offline[@]}" || return 1
    echo "== cargo test --no-run (GPU tests)"
    local test_bin
    test_bin=$(cargo test --release --features cuda "${offline[@]}" \
        -p vramlab-allocator --test cuda_device --no-run --message-format=json 2>/dev/null |
        "$PYTHON" -c 'import json,sys
for l in sys.stdin:
    try: m = json.loads(l)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "cuda_device":
        print(m["executable"])' | tail -1)
    [ -n "$test_bin" ] || { echo "gpu-check: could not find the cuda_device test binary" >&2; return 1; }
    mkdir -p "$BIN_DIR"
    cp "$tdir/release/vramlab" "$BIN_DIR/vramlab"
    cp "$test_bin" "$BIN_DIR/cuda_device"
    strip "$BIN_DIR/vramlab" "$BIN_DIR/cuda_device" 2>/dev/null || true
    {
        echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
        echo "commit: $(git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
        echo "rustc: $(rustc --version 2>/dev/null)"
        echo "glibc: $(ldd --version 2>/dev/null | head -1)"
    } >"$BIN_DIR/BUILD_INFO"
    echo "== binaries in $BIN_DIR:"
    ls -la "$BIN_DIR"
}

if [ $PREPARE = 1 ]; then
    build_here || exit 1
    exit 0
fi

# ------------------------------------------------------------- binaries
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }

if [ ! -x "$BIN_DIR/vramlab" ] || [ ! -x "$BIN_DIR/cuda_device" ]; then
    if command -v cargo >/dev/null; then
        build_here offline || die "offline build failed (run 'bash scripts/gpu-check.sh --prepare' where cargo has network and carry target/gpu-check-bin)"
    else
        die "no $BIN_DIR/{vramlab,cuda_device} and no cargo: run 'bash scripts/gpu-check.sh --prepare' first and carry target/gpu-check-bin"
    fi
fi
VRAMLAB="$BIN_DIR/vramlab"

# The driver library: make sure the real libcuda (not a toolkit stub) is
# found by dlopen.
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/cuda/compat; do
    if [ -e "$d/libcuda.so.1" ] || [ -e "$d/libcuda.so" ]; then
        case ":${LD_LIBRARY_PATH:-}:" in *":$d:"*) ;; *) export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
        break
    fi
done

DATE=$(date -u +%Y-%m-%d)
RES="$ROOT/docs/results/gpu-$DATE"
mkdir -p "$RES"
LOG="$RES/gpu-check.log"
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }

# ------------------------------------------------------------- environment
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    if command -v nvidia-smi >/dev/null; then
        echo "nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
    else
        echo "nvidia-smi: not found"
    fi
    echo "torch: $("$PYTHON" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)"
    echo "python: $("$PYTHON" --version 2>&1)"
    echo "host: $(uname -srm)"
    echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-}"
    sed 's/^/vramlab /' "$BIN_DIR/BUILD_INFO" 2>/dev/null
    echo "vramlab --version: $("$VRAMLAB" --version 2>&1)"
} >"$RES/env.txt"
cat "$RES/env.txt" | tee -a "$LOG"

# ------------------------------------------------------------- GPU tests
say ""
say "== GPU tests (allocator/tests/cuda_device.rs)"
"$BIN_DIR/cuda_device" --include-ignored --test-threads=1 --nocapture >"$RES/tests.log" 2>&1
TEST_RC=$?
cat "$RES/tests.log" >>"$LOG"
grep -E "^test |test result|^GPU 0|skipped" "$RES/tests.log"
NO_VRAMLAB_GPU=0
if grep -q "skipped: no CUDA driver/device" "$RES/tests.log" || [ $TEST_RC -eq 126 ] || [ $TEST_RC -eq 127 ]; then
    # Keep going: PyTorch's ground truth is worth having even when the
    # vramlab binaries cannot reach the GPU (fidelity can be checked later
    # on the returned snapshots).
    say "gpu-check: the vramlab GPU tests could not use the GPU (rc $TEST_RC):"
    grep -m1 "skipped:" "$RES/tests.log" | tee -a "$LOG"
    NO_VRAMLAB_GPU=1
fi

# ------------------------------------------------------------- corpus
if [ -n "${TRACES:-}" ]; then
    read -r -a TRACE_LIST <<<"$TRACES"
else
    TRACE_LIST=(workloads/data/*.csv target/gpu-traces/*.csv)
fi

# name|PYTORCH_CUDA_ALLOC_CONF|fraction ("" = none)
SETTINGS=(
    "baseline||"
    "expandable|expandable_segments:True|"
    "mss128|max_split_size_mb:128|"
    "mss512|max_split_size_mb:512|"
    "rp2-4|roundup_power2_divisions:4|"
    "rp2-list|roundup_power2_divisions:[256:1,512:2,1024:4,>:8]|"
    "gc0.6-f0.8|garbage_collection_threshold:0.6|0.8"
)

torch_run() { # out conf fraction extra...
    local out=$1 conf=$2 frac=$3
    shift 3
    local fa=()
    [ -n "$frac" ] && fa=(--fraction "$frac")
    timeout 120 "$PYTHON" workloads/record/torch_replay.py "$TRACE" --out "$out" --conf "$conf" "${fa[@]}" "$@" >>"$LOG" 2>&1
}

for TRACE in "${TRACE_LIST[@]}"; do
    [ -f "$TRACE" ] || continue
    name=$(basename "$TRACE" .csv)
    dir="$RES/$name"
    mkdir -p "$dir"
    if [ "$(elapsed)" -ge "$BUDGET" ]; then
        say "== $name: skipped (time budget of ${BUDGET}s spent)"
        echo "skipped: time budget" >"$dir/SKIPPED"
        continue
    fi
    say ""
    say "== $name ($(elapsed)s elapsed)"
    for s in "${SETTINGS[@]}"; do
        IFS='|' read -r sname conf frac <<<"$s"
        out="$dir/torch-$sname"
        if ! torch_run "$out" "$conf" "$frac"; then
            say "  $sname: torch_replay.py failed (see gpu-check.log)"
            continue
        fi
        if [ -f "$out/snapshot.pickle" ]; then
            "$VRAMLAB" fidelity "$out/snapshot.pickle" --json >"$dir/fidelity-$sname.json" 2>"$dir/fidelity-$sname.err"
            echo $? >"$dir/fidelity-$sname.rc"
        fi
        fa=()
        [ -n "$frac" ] && fa=(--fraction "$frac")
        total=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["gpu"]["total_bytes"])' "$out/summary.json")
        "$VRAMLAB" replay "$TRACE" --conf "${conf:-default}" --capacity "$total" "${fa[@]}" --json \
            >"$dir/sim-$sname.json" 2>>"$LOG"
        say "  $sname: $(tail -1 "$LOG" | cut -c1-160)"
    done

    # The OOM point: a memory fraction of 70% of PyTorch's baseline peak.
    base="$dir/torch-baseline/summary.json"
    if [ -f "$base" ]; then
        frac=$("$PYTHON" -c 'import json,sys
s = json.load(open(sys.argv[1]))
print("%.6f" % (0.7 * s["peak_reserved_bytes"] / s["gpu"]["total_bytes"]))' "$base")
        total=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["gpu"]["total_bytes"])' "$base")
        echo "$frac" >"$dir/oom-fraction.txt"
        torch_run "$dir/torch-oom" "" "$frac" --no-history || say "  oom: torch_replay.py failed"
        "$VRAMLAB" replay "$TRACE" --capacity "$total" --fraction "$frac" --json >"$dir/sim-oom.json" 2>>"$LOG"
        "$VRAMLAB" replay "$TRACE" --device cuda --fraction "$frac" --json >"$dir/cuda-oom.json" 2>>"$LOG"
        echo $? >"$dir/cuda-oom.rc"
        say "  oom (fraction $frac): done"
    fi

    # Latency: PyTorch without memory history vs the native policy on CudaDevice.
    torch_run "$dir/torch-timing-baseline" "" "" --no-history || say "  timing: torch_replay.py failed"
    torch_run "$dir/torch-timing-expandable" "expandable_segments:True" "" --no-history || say "  timing: torch_replay.py failed"
    "$VRAMLAB" replay "$TRACE" --device cuda --conf default --conf expandable_segments:True --json \
        >"$dir/cuda-timing.json" 2>"$dir/cuda-timing.err"
    echo $? >"$dir/cuda-timing.rc"
    if [ "$(cat "$dir/cuda-timing.rc")" != 0 ]; then
        say "  vramlab --device cuda failed (rc $(cat "$dir/cuda-timing.rc")): $(head -c 300 "$dir/cuda-timing.err")"
    fi
    say "  latency runs: done ($(elapsed)s elapsed)"
done

# ------------------------------------------------------------- summary
"$PYTHON" - "$RES" "$TEST_RC" <<'PYEOF' | tee -a "$LOG"
import glob, json, os, sys

res, test_rc = sys.argv[1], int(sys.argv[2])


def load(p):
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def mib(n):
    return "-" if n is None else f"{n / 2**20:.1f}"


def us(d, k):
    return "-" if not d or not d.get("count") else f"{d[k]:.1f}"


env = open(os.path.join(res, "env.txt")).read()
lines = [f"# vramlab GPU check, {os.path.basename(res)[4:]}", "", "```", env.strip(), "```", ""]
ok = test_rc == 0
lines.append(f"GPU tests (allocator/tests/cuda_device.rs): {'passed' if test_rc == 0 else 'FAILED'}")
lines.append("")
out = {"env": env, "gpu_tests_passed": test_rc == 0, "traces": {}}
for d in sorted(glob.glob(os.path.join(res, "*/"))):
    name = os.path.basename(d.rstrip("/"))
    if os.path.exists(os.path.join(d, "SKIPPED")):
        lines += [f"## {name}: skipped (time budget)", ""]
        continue
    t = out["traces"].setdefault(name, {"settings": {}})
    lines += [f"## {name}", "", "### Fidelity (PyTorch snapshot replayed by `vramlab fidelity`) and peak reserved (MiB)", ""]
    lines.append("| setting | fidelity | addresses matched | segment events matched | PyTorch peak reserved | vramlab sim peak reserved | PyTorch leak check |")
    lines.append("|---|---|---|---|---|---|---|")
    for sname in ["baseline", "expandable", "mss128", "mss512", "rp2-4", "rp2-list", "gc0.6-f0.8"]:
        ts = load(os.path.join(d, f"torch-{sname}", "summary.json"))
        fid = load(os.path.join(d, f"fidelity-{sname}.json"))
        sim = load(os.path.join(d, f"sim-{sname}.json"))
        if ts is None:
            lines.append(f"| {sname} | torch run failed | | | | | |")
            ok = False
            continue
        exact = bool(fid and fid.get("exact"))
        ok &= exact and ts["leak_check"]["ok"]
        if fid:
            addr = f"{fid.get('alloc_addresses_matched', 0)}/{fid.get('allocs', 0)}"
            seg = f"{fid.get('segment_events_matched', 0)}/{fid.get('segment_events_expected', 0)}"
        else:
            err = open(os.path.join(d, f"fidelity-{sname}.err")).read().strip().splitlines()
            addr, seg = (err[-1][:80] if err else "no output"), ""
        conf = ts["alloc_conf"] or "default"
        if ts.get("memory_fraction") is not None:
            conf += f" (fraction {ts['memory_fraction']})"
        lines.append(
            f"| {conf} | {'exact' if exact else 'DIFFERS'} | {addr} | {seg} | {mib(ts['peak_reserved_bytes'])} | "
            f"{mib(sim and sim.get('peak_reserved_bytes'))} | {'ok' if ts['leak_check']['ok'] else 'FAILED'} |"
        )
        t["settings"][sname] = {
            "conf": conf,
            "fidelity_exact": exact,
            "fidelity": fid,
            "torch_peak_reserved_bytes": ts["peak_reserved_bytes"],
            "sim_peak_reserved_bytes": sim and sim.get("peak_reserved_bytes"),
            "torch_leak_ok": ts["leak_check"]["ok"],
        }
    lines.append("")
    # OOM point
    tor = load(os.path.join(d, "torch-oom", "summary.json"))
    sim = load(os.path.join(d, "sim-oom.json"))
    cud = load(os.path.join(d, "cuda-oom.json"))
    if tor:
        frac = open(os.path.join(d, "oom-fraction.txt")).read().strip()
        ev = lambda o: "none" if not o else str(o["event_index"])
        lines += [f"### OOM point (memory fraction {frac} = 70% of PyTorch's baseline peak)", ""]
        lines.append("| | first OOM at event | requested bytes |")
        lines.append("|---|---|---|")
        lines.append(f"| PyTorch | {ev(tor.get('oom'))} | {(tor.get('oom') or {}).get('requested_bytes', '-')} |")
        lines.append(f"| vramlab, simulated GPU | {ev(sim and sim.get('oom'))} | {((sim or {}).get('oom') or {}).get('requested_bytes', '-')} |")
        lines.append(f"| vramlab, CudaDevice | {ev(cud and cud.get('oom'))} | {((cud or {}).get('oom') or {}).get('requested_bytes', '-')} |")
        lines.append("")
        same = tor.get("oom") and sim and sim.get("oom") and cud and cud.get("oom") and \
            tor["oom"]["event_index"] == sim["oom"]["event_index"] == cud["oom"]["event_index"]
        t["oom"] = {"fraction": frac, "torch": tor.get("oom"), "sim": sim and sim.get("oom"),
                    "cuda": cud and cud.get("oom"), "same_event": bool(same)}
        ok &= bool(same)
        if cud:
            ok &= bool(cud.get("leak_check", {}).get("ok"))
    # Latency
    runs = load(os.path.join(d, "cuda-timing.json"))
    if isinstance(runs, dict):
        runs = [runs]
    lines += ["### Latency, µs (p50 / p99 / max)", ""]
    lines.append("| setting | PyTorch malloc | vramlab malloc | PyTorch free | vramlab free | cuMemAlloc | cuMemFree | map | unmap | vramlab leak check |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    t["latency"] = {}
    for i, sname in enumerate(["baseline", "expandable"]):
        ts = load(os.path.join(d, f"torch-timing-{sname}", "summary.json"))
        r = runs[i] if runs and i < len(runs) else None
        tl = ts["latency"] if ts else {}
        rl = r["latency"] if r else {}
        dc = rl.get("device_calls", {})
        ac = rl.get("allocator_calls", {})
        f3 = lambda x: "-" if not x or not x.get("count") else f"{x['p50_us']:.2f} / {x['p99_us']:.2f} / {x['max_us']:.1f}"
        leak = "-" if not r else ("ok" if r["leak_check"]["ok"] else "FAILED")
        if r:
            ok &= r["leak_check"]["ok"]
        lines.append(
            f"| {sname} | {f3(tl.get('malloc'))} | {f3(ac.get('malloc'))} | {f3(tl.get('free'))} | {f3(ac.get('free'))} | "
            f"{f3(dc.get('malloc'))} | {f3(dc.get('free'))} | {f3(dc.get('map'))} | {f3(dc.get('unmap'))} | {leak} |"
        )
        t["latency"][sname] = {"torch": tl, "vramlab": rl,
                               "torch_python_call_overhead_ns": ts and ts.get("python_call_overhead_ns")}
    if runs:
        oh = [load(os.path.join(d, f"torch-timing-{s}", "summary.json")) for s in ("baseline",)]
        if oh[0]:
            lines.append("")
            lines.append(f"PyTorch figures include the Python call overhead (a no-op call with the same arguments: "
                         f"{oh[0]['python_call_overhead_ns']} ns median); vramlab's are Rust calls of the native policy "
                         "on CudaDevice (release build).")
    lines.append("")
out["all_ok"] = ok
lines.append(f"**Overall: {'PASS' if ok else 'FAIL'}**")
with open(os.path.join(res, "summary.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
with open(os.path.join(res, "summary.json"), "w") as f:
    json.dump(out, f, indent=1)
print("\n".join(lines))
sys.exit(0 if ok else 1)
PYEOF
RC=$?
say ""
say "results: $RES ($(elapsed)s)"
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    # Two archives, to stay under the device tool's 16 MiB per file: the
    # results without PyTorch's snapshots and per-call timings, and the
    # snapshots alone (for re-checking fidelity elsewhere).
    tar czf "$OUT/gpu-results.tgz" -C "$ROOT/docs/results" --exclude=snapshot.pickle --exclude=timing.csv "gpu-$DATE"
    (cd "$ROOT/docs/results" && find "gpu-$DATE" -name snapshot.pickle -print0 |
        tar czf "$OUT/gpu-snapshots.tgz" --null -T -)
    cp "$RES/summary.md" "$OUT/summary.md"
    cp "$LOG" "$OUT/gpu-check.log"
    echo "packed into \$OUT/gpu-results.tgz (unpack with: tar xzf gpu-results.tgz -C docs/results)"
fi
exit $RC
