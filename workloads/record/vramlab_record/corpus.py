"""Re-record the bundled corpus (workloads/data/*.csv.gz and MANIFEST.tsv).

    python -m vramlab_record.corpus --raw /work/corpus-raw --data workloads/data [--jobs 2] [--only PREFIX]

Each workload family (a workload with fixed variant parameters) is
recorded at three sizes of its scaling parameter (``seq`` or
``resolution``) at batch 1, plus batch 2 at the smallest size, so that
``vramlab gen`` can learn a template (sizes as functions of the
parameters) and check it on a held-back size. Plain CSVs go to ``--raw``,
gzip-compressed copies (deterministic: no name, mtime 0) to ``--data``,
and one line per file to ``--data``/MANIFEST.tsv.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gzip
import os
import shlex
import subprocess
import sys
import time

_LLM_SEQ = [512, 1024, 2048]
_LLM_SIZES = ["1b", "3b", "13b", "70b"]

#: (family name, workload, fixed params, scaling param, sizes, batch-2 variant?)
FAMILIES = [
    ("gpt-small-train", "gpt-small-train", {}, "seq", [128, 256, 512], True),
    ("llama-3-8b-train", "llama-3-8b-train", {"attention": "flash"}, "seq", _LLM_SEQ, True),
    ("llama-3-8b-train-ckpt", "llama-3-8b-train", {"attention": "flash", "checkpointing": "true"}, "seq",
     _LLM_SEQ, True),
    ("llama-3-8b-train-eager", "llama-3-8b-train", {"attention": "eager"}, "seq", _LLM_SEQ, True),
    ("llama-3-8b-train-eager-ckpt", "llama-3-8b-train", {"attention": "eager", "checkpointing": "true"}, "seq",
     _LLM_SEQ, True),
    ("llama-3-8b-infer", "llama-3-8b-infer", {}, "seq", _LLM_SEQ, True),
    ("llama-3-8b-infer-static", "llama-3-8b-infer", {"kv_cache": "static"}, "seq", _LLM_SEQ, True),
    ("llama-3-8b-infer-eager", "llama-3-8b-infer", {"attention": "eager"}, "seq", _LLM_SEQ, True),
    ("llama-3-8b-infer-eager-static", "llama-3-8b-infer", {"attention": "eager", "kv_cache": "static"}, "seq",
     _LLM_SEQ, True),
    ("llama-3-8b-infer-int8", "llama-3-8b-infer", {"precision": "int8"}, "seq", _LLM_SEQ, True),
    # bitsandbytes' 4-bit decode takes the gemv kernel at batch 1 only: no batch variant.
    ("llama-3-8b-infer-nf4", "llama-3-8b-infer", {"precision": "nf4"}, "seq", _LLM_SEQ, False),
    ("sd15", "sd15", {}, "resolution", [256, 512, 768], True),
    ("sd15-eager", "sd15", {"attention": "eager"}, "resolution", [256, 512, 768], True),
    ("sd15-fp32", "sd15", {"precision": "fp32"}, "resolution", [256, 512, 768], True),
    ("sdxl", "sdxl", {}, "resolution", [768, 1024, 1280], True),
    ("sdxl-eager", "sdxl", {"attention": "eager"}, "resolution", [768, 1024, 1280], True),
    # Decode length: the default family at one prompt length and longer
    # generations (vramlab gen --new-tokens extends the 8-token template's
    # decode steps; these check it).
    ("llama-3-8b-infer-decode", "llama-3-8b-infer", {"seq": 512}, "new_tokens", [32, 128], False),
    # diffusers' enable_vae_tiling(): tiles engage above sample_size / 8
    # latents (SD 1.5: 512 px, SDXL: 1024 px); each family is one tile grid
    # (2x2 or 3x3 tiles), recorded where every tile but the last row and
    # column is whole, so that the sizes scale smoothly.
    ("sd15-vae-tiling", "sd15", {"vae_tiling": "true"}, "resolution", [640, 704, 768], True),
    ("sd15-vae-tiling-3x3", "sd15", {"vae_tiling": "true"}, "resolution", [896, 1024, 1152], True),
    ("sdxl-vae-tiling", "sdxl", {"vae_tiling": "true"}, "resolution", [1280, 1408, 1536], True),
    ("sdxl-vae-tiling-3x3", "sdxl", {"vae_tiling": "true"}, "resolution", [1792, 2048, 2304], True),
    # diffusers' enable_vae_slicing(): one image at a time (batch 1 is the
    # plain decode).
    ("sd15-vae-slicing", "sd15", {"vae_slicing": "true"}, "resolution", [256, 512, 768], True),
    ("sdxl-vae-slicing", "sdxl", {"vae_slicing": "true"}, "resolution", [768, 1024, 1280], True),
    # Beyond batch 2 the generator repeats the second image's decode; these
    # check it.
    ("sd15-vae-slicing-check", "sd15", {"vae_slicing": "true", "batch": 4}, "resolution", [512], False),
    ("sdxl-vae-slicing-check", "sdxl", {"vae_slicing": "true", "batch": 3}, "resolution", [1024], False),
    # diffusers' enable_model_cpu_offload() / enable_sequential_cpu_offload(),
    # as accelerate's hooks do them (workloads/offload.py): only the GPU side.
    ("sd15-offload-model", "sd15", {"offload": "model"}, "resolution", [256, 512, 768], True),
    ("sd15-offload-sequential", "sd15", {"offload": "sequential"}, "resolution", [256, 512, 768], True),
    ("sdxl-offload-model", "sdxl", {"offload": "model"}, "resolution", [768, 1024, 1280], True),
    ("sdxl-offload-sequential", "sdxl", {"offload": "sequential"}, "resolution", [768, 1024, 1280], True),
    # A leak (each step's logits kept in a list) and the same with
    # empty_cache() after every step.
    ("gpt-small-train-leak", "gpt-small-train", {"leak": "true"}, "seq", [128, 256, 512], True),
    ("gpt-small-train-leak-empty-cache", "gpt-small-train", {"leak": "true", "empty_cache": "true"}, "seq",
     [128, 256, 512], True),
    # FLUX.1-dev-shaped DiT (bf16, T5-XXL + CLIP-L, 2 steps, VAE decode).
    ("flux", "flux", {}, "resolution", [512, 768, 1024], True),
    # Model sizes (vramlab gen --size): the default variants of the other
    # Llama shapes.
    *((f"llama-{size}-train", "llama-3-8b-train", {"attention": "flash", "size": size}, "seq", _LLM_SEQ, True)
      for size in _LLM_SIZES),
    *((f"llama-{size}-infer", "llama-3-8b-infer", {"size": size}, "seq", _LLM_SEQ, True)
      for size in _LLM_SIZES),
]

MANIFEST_COLUMNS = ["file", "family", "workload", "params", "events", "allocs", "peak_live_bytes", "versions",
                    "command"]


def jobs(only: str | None):
    for family, workload, fixed, param, sizes, batch2 in FAMILIES:
        if only and not family.startswith(only):
            continue
        # A "batch" in the fixed parameters: that batch only (a check).
        runs = ([(fixed["batch"], s) for s in sizes] if "batch" in fixed else
                [(1, s) for s in sizes] + ([(2, sizes[0])] if batch2 else []))
        for batch, size in runs:
            name = f"{family}-{param.replace('_', '-')}{size}" + ("" if batch == 1 else f"-b{batch}")
            args = [workload, "--batch", str(batch), f"--{param.replace('_', '-')}", str(size)]
            for k, v in fixed.items():
                if k != "batch":
                    args += [f"--{k.replace('_', '-')}", str(v)]
            yield family, name, args


def header(path: str) -> dict:
    out = {}
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                break
            body = line[1:].strip()
            if ":" in body:
                k, v = body.split(":", 1)
                out[k.strip()] = v.strip()
    return out


def record(family, name, args, raw, data):
    csv = os.path.join(raw, name + ".csv")
    cmd = [sys.executable, "-m", "vramlab_record.cpu", "--quiet", "-o", csv, *args]
    t0 = time.time()
    subprocess.run(cmd, check=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    gz = os.path.join(data, name + ".csv.gz")
    with open(csv, "rb") as src, open(gz, "wb") as dst:
        with gzip.GzipFile(filename="", mode="wb", fileobj=dst, mtime=0, compresslevel=9) as z:
            z.write(src.read())
    h = header(csv)
    params = " ".join(f"{k[len('param.'):]}={v}" for k, v in h.items() if k.startswith("param."))
    row = {
        "file": os.path.basename(gz),
        "family": family,
        "workload": h.get("workload", ""),
        "params": params,
        "events": h["events"],
        "allocs": h["allocs"],
        "peak_live_bytes": h["peak_live_bytes"],
        "versions": h.get("framework", ""),
        "command": "python -m vramlab_record.cpu -o " + name + ".csv " + shlex.join(args),
    }
    print(f"{name}: {h['allocs']} allocs, {h['events']} events, peak {int(h['peak_live_bytes']) / 2**30:.2f} GiB, "
          f"{os.path.getsize(gz) / 1024:.0f} KiB gz, {time.time() - t0:.0f} s", file=sys.stderr)
    return row


def write_manifest(path: str, rows: list[dict]) -> None:
    old = {}
    if os.path.exists(path):
        with open(path) as f:
            cols = f.readline().rstrip("\n").split("\t")
            for line in f:
                vals = line.rstrip("\n").split("\t")
                old[vals[0]] = dict(zip(cols, vals))
    for r in rows:
        old[r["file"]] = r
    with open(path, "w") as f:
        f.write("\t".join(MANIFEST_COLUMNS) + "\n")
        for name in sorted(old):
            f.write("\t".join(str(old[name].get(c, "")) for c in MANIFEST_COLUMNS) + "\n")


def write_rust_list(data: str, out: str) -> None:
    """Writes the Rust table that compiles the corpus into vramlab-workloads
    (workloads/src/corpus_files.rs)."""
    with open(os.path.join(data, "MANIFEST.tsv")) as f:
        next(f)
        files = [n for n in (line.split("\t", 1)[0] for line in f if line.strip()) if n.endswith(".csv.gz")]
    rel = os.path.relpath(os.path.abspath(data), os.path.dirname(os.path.abspath(out)))
    with open(out, "w") as f:
        f.write("// Generated by `python -m vramlab_record.corpus` from workloads/data/MANIFEST.tsv; do not edit.\n\n")
        f.write("/// (file name, contents) of every corpus file in the manifest.\n")
        f.write("pub(crate) static FILES: &[(&str, &[u8])] = &[\n")
        for name in files:  # laid out as rustfmt lays it out
            f.write(f'    (\n        "{name}",\n        include_bytes!("{rel}/{name}"),\n    ),\n')
        f.write("];\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m vramlab_record.corpus", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--raw", required=True, help="folder for the plain CSVs")
    p.add_argument("--data", required=True, help="folder for the .csv.gz files and MANIFEST.tsv")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", help="only families whose name starts with this")
    p.add_argument("--rust", default=None, help="write the Rust file table here (default: "
                   "workloads/src/corpus_files.rs next to the data folder)")
    p.add_argument("--rust-only", action="store_true", help="only rewrite the Rust file table")
    ns = p.parse_args(argv)
    rust = ns.rust or os.path.join(os.path.dirname(os.path.abspath(ns.data)), "src", "corpus_files.rs")
    if ns.rust_only:
        write_rust_list(ns.data, rust)
        return 0
    os.makedirs(ns.raw, exist_ok=True)
    os.makedirs(ns.data, exist_ok=True)
    todo = list(jobs(ns.only))
    rows = []
    with concurrent.futures.ThreadPoolExecutor(ns.jobs) as ex:
        futs = [ex.submit(record, f, n, a, ns.raw, ns.data) for f, n, a in todo]
        for fut in futs:
            rows.append(fut.result())
    write_manifest(os.path.join(ns.data, "MANIFEST.tsv"), rows)
    write_rust_list(ns.data, rust)
    return 0


if __name__ == "__main__":
    sys.exit(main())
