#!/usr/bin/env python3
"""The fake-device recorder on the scripts of tests/record/: each runs
unchanged under `vramlab record` (torch 2.11 on the fake H200), and its
snapshot must hold what PyTorch's and NVIDIA's own code decided there:

- linear_train.py: cuBLAS/cuBLASLt's two 32 MiB workspaces (PyTorch's
  size for compute capability 9.0, one per handle), and a value sent to
  the device reads back; recorded again on a fake A100 (`--gpu a100-80gb`),
  the workspaces are PyTorch's size for other cards, 8,519,680 bytes;
  recorded with torch 2.15 (whose environment the oracle step installs),
  it asks for a 32 MiB workspace six times, as 2.15's cuBLAS path does;
- conv_train.py: cuDNN's workspaces, the exact sizes its heuristics pick
  for these convolutions on an H200's properties;
- compile_reduce_overhead.py: CUDA graphs capture inductor's code, and
  the snapshot has their private pool's segments (the captured graphs have
  nodes: PyTorch does not warn that one is empty);
- embedding_train.py: an embedding's backward runs (CUB's radix sort);
- compile_train.py: allocations made by inductor's generated code
  (torch.compile ran, and Triton's launcher with it);
- llama_generate.py: `generate` runs to max_new_tokens (the value
  tracker answers its stopping checks);
- llama_trainer.py: a Hugging Face Trainer trains three steps;
- diffusers_pipeline.py: a diffusers pipeline (a small UNet2DModel, two
  denoising steps) makes its images;
- trl_sft.py: TRL's SFTTrainer trains two steps;
- conv_train.py and compile_train.py recorded again with `--values device`:
  the same requests, event for event (the value tracker changes no
  allocation);
- accelerate_fsdp.py: an accelerate loop with FSDP2, recorded as both
  ranks of a world of 2 (a job folder), with FSDP's own all-gathers;
- the sharded corpus' small scripts (workloads/record/examples/sharded:
  DDP, FSDP1, FSDP2, tensor parallel) as ranks 0 and 3 of 4.

    python3 scripts/check_recorder.py [--vramlab target/release/vramlab] [--torch 2.11] [--keep DIR]

Exits 1 with the failures listed. The snapshots are plain pickles
(no torch needed to read them).
"""

import argparse
import collections
import os
import pickle
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "tests", "record")

#: cuDNN's workspace requests for conv_train.py on the fake H200, torch
#: 2.11.0+cu130 with nvidia-cudnn-cu13 9.19.0.56 (what its heuristics chose;
#: a new cuDNN may choose others: then re-derive them and say why).
CONV_WORKSPACES = [4231184, 8167440, 10232487, 4889232]

#: Scripts recorded as ranks of a world (`vramlab record` options); their
#: output is a job folder, and rank 0's snapshot is checked.
WORLDS = {"accelerate_fsdp": ["--world-size", "2", "--ranks", "all"]}

#: The small scripts of the sharded corpus (DDP, FSDP1, FSDP2, tensor
#: parallel), recorded as ranks 0 and 3 of 4; rank 0's snapshot is checked.
SHARDED = os.path.join(ROOT, "workloads", "record", "examples", "sharded")
SHARDED_SCRIPTS = ["ddp_mlp", "fsdp1_mlp", "fsdp2_mlp", "tp_mlp"]
for _n in SHARDED_SCRIPTS:
    WORLDS[f"sharded/{_n}"] = ["--world-size", "4", "--ranks", "0,3"]

#: Scripts recorded once more on another card: (name, --gpu).
OTHER_CARDS = [("linear_train", "a100-80gb")]

#: Scripts recorded once more without the value tracker: their requests
#: must be those of the tracked recording, event for event.
UNTRACKED = ["conv_train", "compile_train"]

#: Scripts recorded once more under another release: (name, --torch).
OTHER_RELEASES = [("linear_train", "2.15"), ("cpu_offload", "2.15")]


def allocations(snapshot):
    return [e for trace in snapshot["device_traces"] for e in trace if e["action"] == "alloc"]


def frames_mention(e, part):
    return any(part in f.get("filename", "") for f in e.get("frames", []))


def requests(snap):
    return [(e["action"], e["size"]) for trace in snap["device_traces"] for e in trace]


def check(name, snap, out, err, work):
    allocs = allocations(snap)
    if name.endswith("@values-device"):
        with open(os.path.join(work, name.split("@")[0] + ".pickle"), "rb") as f:
            tracked = pickle.load(f)
        if requests(snap) != requests(tracked):
            yield "the value tracker changed the requests (they differ from --values device)"
        return
    sizes = collections.Counter(e["size"] for e in allocs)
    if name == "linear_train@torch2.15":
        if sizes[32 << 20] != 6:
            yield f"{sizes[32 << 20]} allocations of 32 MiB with torch 2.15, expected 6"
    elif name == "cpu_offload@torch2.15":
        # 2.14+: PyTorch's host history, and the requests vramlab notes
        # (8 weights of 612x612 fp32, then the activations brought back).
        blocks = [e["size"] for e in snap.get("host_traces", []) if e["action"] == "alloc"]
        asked = [n for _, n in snap.get("vramlab_host_requests", [])]
        if asked[:8] != [612 * 612 * 4] * 8 or 16 * 612 * 4 not in asked:
            yield f"pinned requests {asked[:10]}, expected 8 x {612 * 612 * 4} then {16 * 612 * 4}"
        if 65536 not in blocks:
            yield f"host_traces allocs {blocks}, expected the activations' 64 KiB blocks"
    elif name == "linear_train@a100-80gb":
        if sizes[8519680] != 2:
            yield f"{sizes[8519680]} allocations of 8,519,680 bytes (cuBLAS workspaces on an A100), expected 2"
    elif name == "linear_train":
        if sizes[32 << 20] != 2:
            yield f"{sizes[32 << 20]} allocations of 32 MiB (cuBLAS/cuBLASLt workspaces), expected 2"
        if "round trip [1, 2, 3]" not in out:
            yield "a tensor sent to the device did not read back as [1, 2, 3]"
    elif name == "conv_train":
        odd = [e["size"] for e in allocs if e["size"] % 512 and e["size"] >= 1 << 20]
        if odd != CONV_WORKSPACES:
            yield f"cuDNN workspaces {odd}, expected {CONV_WORKSPACES}"
    elif name == "compile_reduce_overhead":
        pools = {tuple(seg.get("segment_pool_id") or (0, 0)) for seg in snap.get("segments", [])}
        if not pools - {(0, 0)}:
            yield "no segment of a CUDA graph's private pool"
        if "The CUDA Graph is empty" in err:
            yield "PyTorch found a captured graph empty"
    elif name == "diffusers_pipeline":
        if "images (4, 64, 64, 3)" not in out or not any(frames_mention(e, "diffusers") for e in allocs):
            yield "the diffusers pipeline did not make its images"
    elif name == "trl_sft":
        if "sft trained" not in out or not any(frames_mention(e, "trl") for e in allocs):
            yield "TRL's SFTTrainer did not train"
    elif name.startswith("sharded/"):
        if not allocs:
            yield "rank 0 allocated nothing"
        if name == "sharded/fsdp2_mlp" and not any(frames_mention(e, "_fully_shard") for e in allocs):
            yield "no allocation by FSDP2 (fully_shard)"
        if name == "sharded/ddp_mlp" and not any(frames_mention(e, "distributed.py") for e in allocs):
            yield "no allocation by DDP (its gradient buckets)"
    elif name == "embedding_train":
        if "ok (50257, 256)" not in out:
            yield "the embedding's backward did not run"
    elif name == "compile_train":
        if not any(frames_mention(e, "inductor-cache") for e in allocs):
            yield "no allocation made by inductor's generated code (did torch.compile run?)"
    elif name == "llama_generate":
        if "generated (2, 36)" not in out:
            yield "generate did not run to max_new_tokens (expected output shape (2, 36))"
    elif name == "accelerate_fsdp":
        if "trained with 2 processes" not in out:
            yield "the accelerate loop did not run as 2 processes"
        if not any(frames_mention(e, "_fully_shard") for e in allocs):
            yield "no allocation by FSDP2 (fully_shard) in rank 0's snapshot"
    elif name == "llama_trainer":
        if "trained" not in out or not any(frames_mention(e, "trainer.py") for e in allocs):
            yield "the Trainer did not train (no allocation from transformers/trainer.py)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vramlab", default=os.path.join(ROOT, "target", "release", "vramlab"))
    ap.add_argument("--torch", default="2.11")
    ap.add_argument("--keep", help="keep the snapshots and work folders here")
    args = ap.parse_args()
    # Each recording runs in its own folder: the binary's path must not be relative.
    args.vramlab = os.path.abspath(args.vramlab)
    work = args.keep or tempfile.mkdtemp(prefix="vramlab-check-recorder-")
    os.makedirs(work, exist_ok=True)
    failures = []
    runs = [(s[:-3], os.path.join(SCRIPTS, s), []) for s in sorted(os.listdir(SCRIPTS)) if s.endswith(".py")]
    runs += [(f"{n}@{gpu}", os.path.join(SCRIPTS, n + ".py"), ["--gpu", gpu]) for n, gpu in OTHER_CARDS]
    runs += [(f"{n}@torch{r}", os.path.join(SCRIPTS, n + ".py"), ["--torch", r]) for n, r in OTHER_RELEASES]
    runs += [(f"{n}@values-device", os.path.join(SCRIPTS, n + ".py"), ["--values", "device"]) for n in UNTRACKED]
    runs += [(f"sharded/{n}", os.path.join(SHARDED, n + ".py"), []) for n in SHARDED_SCRIPTS]
    for name, script, extra in runs:
        out_pickle = os.path.join(work, name.replace("/", "-") + ".pickle")
        out = out_pickle
        if name in WORLDS or name.startswith("sharded/"):
            out = os.path.join(work, name.replace("/", "-") + "-job")
            out_pickle = os.path.join(out, "rank0.pickle")
        release = extra[1] if extra[:1] == ["--torch"] else args.torch
        extra = [] if extra[:1] == ["--torch"] else extra
        cmd = [args.vramlab, "record", "--torch", release, "--work", os.path.join(work, name.replace("/", "-")),
               *WORLDS.get(name, []), *extra, "-o", out, "--", script]
        run = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                             env={**os.environ, "VRAMLAB_FAKECUDA_QUIET": "1"})
        said = [line for line in run.stderr.splitlines() if line.startswith("record:")]
        print(f"{name}: " + (said[-1] if said else f"exit {run.returncode}"))
        if run.returncode != 0:
            failures.append(f"{name}: vramlab record exited {run.returncode}:\n{run.stderr[-3000:]}")
            continue
        with open(out_pickle, "rb") as f:
            snap = pickle.load(f)
        failures += [f"{name}: {why}" for why in check(name, snap, run.stdout, run.stderr, work)]
    for f in failures:
        print("FAILED", f)
    if failures:
        sys.exit(1)
    print("recorder: every script of tests/record ran unchanged on the fake GPU, with the libraries' own allocations")


if __name__ == "__main__":
    main()
