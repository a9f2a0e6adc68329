#!/usr/bin/env python3
"""Writes docs/results/releases.md (to stdout) from the raw rows of
scripts/release_matrix.sh in docs/results/releases/: torch-X.Y.json.gz (or
.json), and the runs' logs in logs.tar.gz (or torch-X.Y.log)."""
import gzip
import json
import pathlib
import re
import sys
import tarfile


def name_of(path: pathlib.Path) -> str:
    """torch-X.Y of torch-X.Y.json or torch-X.Y.json.gz."""
    return path.name.removesuffix(".gz").removesuffix(".json")


def key(path: pathlib.Path):
    v = name_of(path).removeprefix("torch-")
    return tuple(int(x) for x in v.split("."))


def read(path: pathlib.Path) -> str:
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


def rows_files(d: pathlib.Path, pattern: str):
    """The files whose name (less .json/.json.gz) matches pattern; .json.gz first."""
    found = {}
    for f in [*d.glob("torch-*.json"), *d.glob("torch-*.json.gz")]:
        if re.fullmatch(pattern, name_of(f)) and (name_of(f) not in found or f.suffix == ".gz"):
            found[name_of(f)] = f
    return list(found.values())


def log_tail(d: pathlib.Path, release: str):
    """The last three lines of a release's log: torch-X.Y.log, else in logs.tar.gz."""
    log = d / f"torch-{release}.log"
    if log.exists():
        text = log.read_text()
    elif (d / "logs.tar.gz").exists():
        with tarfile.open(d / "logs.tar.gz") as tar:
            try:
                text = tar.extractfile(f"torch-{release}.log").read().decode()
            except KeyError:
                return ["no log"]
    else:
        return ["no log"]
    return text.strip().splitlines()[-3:]


def main(folder: str) -> int:
    d = pathlib.Path(folder)
    files = sorted(rows_files(d, r"torch-\d+\.\d+"), key=key)
    out = [
        "# PyTorch's own allocator, release by release",
        "",
        "Each row: the official torch wheel of a release from PyPI, its caching allocator run on",
        "vramlab's fake CUDA device (`vramlab oracle`, the judge), against vramlab's replay of the same",
        "trace with the same capacity and placement; exact = the same peak reserved and allocated bytes,",
        "cudaMalloc/cudaFree counts, retries and OOM, and every device call in the same order. The",
        "sample is scripts/oracle-sample.txt plus the real snapshots of ../shared/traces/real (not in",
        "the repository), under the five settings of the GPU check. Raw rows: docs/results/releases/",
        "(torch-X.Y.json.gz; the runs' logs in logs.tar.gz, `tar -xzf logs.tar.gz` to unpack).",
        "",
        "    bash scripts/release_matrix.sh            # all releases; or name some: 2.11 2.15",
        "",
        "| release | judge (torch.__version__) | vramlab rules | exact / rows | first difference |",
        "|---|---|---|---|---|",
    ]
    details = []
    for f in files:
        release = name_of(f).removeprefix("torch-")
        try:
            rows = json.loads(read(f) or "null")
        except json.JSONDecodeError:
            rows = None
        if not rows:
            tail = log_tail(d, release)
            why = " / ".join(t.strip() for t in tail).replace("|", "\\|")
            out.append(f"| {release} | — | — | did not run | {why} |")
            continue
        exact = sum(1 for r in rows if r["exact"])
        diff = [r for r in rows if not r["exact"]]
        first = diff[0]["first_difference"] if diff else ""
        out.append(
            f"| {release} | {rows[0]['torch_version']} | {rows[0]['vramlab_rules']} | {exact} / {len(rows)} | "
            f"{(first or '').replace('|', '/')} |"
        )
        if diff:
            details.append(f"\n## torch {release}: rows that differ\n")
            details.append("| trace | setting | peak reserved (PyTorch / vramlab) | cudaMalloc | first divergent decision |")
            details.append("|---|---|---|---|---|")
            for r in diff:
                details.append(
                    f"| {r['trace']} | {r['setting']} | {r['torch_peak_reserved_bytes']} / "
                    f"{r['vramlab_peak_reserved_bytes']} | {r['torch_num_device_alloc']} / "
                    f"{r['vramlab_num_device_alloc']} | {r['first_difference'] or ', '.join(r['differing'])} |"
                )
    older = sorted(rows_files(d, r"torch-.*-vs-rules-.*"), key=lambda f: f.name)
    if older:
        details.append("\n## What older rules miss\n")
        details.append("The same sample judged by a release's allocator against vramlab replaying an *older*")
        details.append("release's rules (`vramlab oracle SAMPLE... --torch R --torch-version OLD`): the rows where")
        details.append("the allocator changed between the two.\n")
        details.append("| judge | vramlab rules | exact / rows | peak reserved differs | cudaMalloc count differs | example |")
        details.append("|---|---|---|---|---|---|")
        for f in older:
            rows = json.loads(read(f) or "[]")
            if not rows:
                continue
            bad = [r for r in rows if not r["exact"]]
            res = sum(r["torch_peak_reserved_bytes"] != r["vramlab_peak_reserved_bytes"] for r in rows)
            mal = sum(r["torch_num_device_alloc"] != r["vramlab_num_device_alloc"] for r in rows)
            worst = max(bad, key=lambda r: abs(r["torch_peak_reserved_bytes"] - r["vramlab_peak_reserved_bytes"]), default=None)
            ex = ""
            if worst:
                d = (worst["torch_peak_reserved_bytes"] - worst["vramlab_peak_reserved_bytes"]) / 2**20
                ex = f"{worst['trace']} [{worst['setting']}]: PyTorch {d:+.0f} MiB"
            details.append(
                f"| {rows[0]['torch_version']} | {rows[0]['vramlab_rules']} | {len(rows) - len(bad)} / {len(rows)} | "
                f"{res} | {mal} | {ex} |"
            )
    print("\n".join(out + details))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "docs/results/releases"))
