#!/usr/bin/env python3
"""Runs every `vramlab ...` command of the shell examples in README.md and
the user guide (docs/guide/*.md), and fails, naming the file and line, when
one exits non-zero.

    cargo build --release -p vramlab
    python3 scripts/check_doc_examples.py [--vramlab target/release/vramlab] [-v] [FILE.md ...]

Blocks fenced as ```sh, ```bash, ```shell or ```console are read (in
`console` blocks, the lines that start with `$ `). A logical line (lines
ending in `\\` joined) is run when its first word is `vramlab` (or a `for`
loop around it); `cargo run --release [-q] --` and `target/release/vramlab`
count as `vramlab`. Other lines (`cargo test`, `cd`, `pip`) are counted and
not run.

Each Markdown file runs in a fresh temporary directory that holds links to
the repository's workloads/, tests/, benches/, examples/ and scripts/,
`../shared` when the repository has one beside it, and the files the
examples name as the user's own: my_run.pickle (a PyTorch snapshot from
tests/pools/snapshots), run_a.pickle, run_b.pickle, job_a.pickle,
job_b.pickle and big/*.pickle (snapshots written by `vramlab replay
--snapshot-out` from bundled traces). The blocks of one file run in order in
that directory, so a later command may read what an earlier one wrote.
Nothing is written into the repository.

A block can be marked by an HTML comment on the line before it (blank lines
between are allowed):

    <!-- doc-examples: skip (needs a GPU) -->     not run; the reason is printed
    <!-- doc-examples: needs ../shared/traces/real -->
                                                  run only where that path
                                                  (relative to the repository
                                                  root) exists
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANGS = {"sh", "bash", "shell", "console"}
LINKED = ["workloads", "tests", "benches", "examples", "scripts"]
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
MARKER = re.compile(r"<!--\s*doc-examples:\s*(.*?)\s*-->")
VRAMLAB_ALIASES = [
    (re.compile(r"\bcargo run --release(?: -q)? -- "), "vramlab "),
    (re.compile(r"(?<![\w/])target/release/vramlab\b"), "vramlab"),
]
RUNNABLE = re.compile(r"^(vramlab\s|for\s.*;\s*do\s+vramlab\s)")


class Block:
    def __init__(self, path, line, lang, marker):
        self.path, self.line, self.lang, self.marker = path, line, lang, marker
        self.lines = []  # (line number, text)

    def commands(self):
        """Logical lines: (line number, text), comments and prompts removed."""
        out, cur, start = [], "", None
        for n, text in self.lines:
            s = text.strip()
            if self.lang == "console" and not cur:
                if not s.startswith("$ "):
                    continue
                s = s[2:]
            if not cur and (not s or s.startswith("#")):
                continue
            if start is None:
                start = n
            if s.endswith("\\"):
                cur += s[:-1].rstrip() + " "
                continue
            cur += s
            out.append((start, strip_comment(cur).strip()))
            cur, start = "", None
        if cur:
            out.append((start, strip_comment(cur).strip()))
        return [(n, c) for n, c in out if c]


def strip_comment(line):
    """The line without a trailing `# comment` outside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def blocks(path):
    lines = path.read_text().splitlines()
    found, block, fence, marker = [], None, None, None
    for i, text in enumerate(lines, 1):
        if block is not None:
            if text.strip().startswith(fence) and text.strip().strip(fence[0]) == "":
                found.append(block)
                block = None
            else:
                block.lines.append((i, text))
            continue
        m = FENCE.match(text)
        if m:
            fence = m.group(2)
            lang = m.group(3).lower()
            if lang in LANGS:
                block = Block(path, i, lang, marker)
            else:
                block = Block(path, i, "other", marker)
            marker = None
            continue
        mm = MARKER.search(text)
        if mm:
            marker = mm.group(1)
        elif text.strip():
            marker = None
    return [b for b in found if b.lang != "other"]


def alias(cmd):
    for pattern, repl in VRAMLAB_ALIASES:
        cmd = pattern.sub(repl, cmd)
    return cmd


def run(cmd, cwd, env, timeout):
    t0 = time.perf_counter()
    try:
        p = subprocess.run(["bash", "-c", "set -eo pipefail\n" + cmd], cwd=cwd, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = 124, e.stdout or b"", (e.stderr or b"") + f"\ntimed out after {timeout} s".encode()
    return rc, out.decode(errors="replace"), err.decode(errors="replace"), time.perf_counter() - t0


def prepare(work, env, timeout):
    """The temporary directory: links into the repository, and the user's own files."""
    for name in LINKED:
        (work / name).symlink_to(ROOT / name)
    shared = ROOT.parent / "shared"
    if shared.is_dir():
        (work.parent / "shared").symlink_to(shared)
    shutil.copy(ROOT / "tests/pools/snapshots/serving-warmup-midrun.torch2.15.pickle", work / "my_run.pickle")
    (work / "big").mkdir()
    made = {
        "run_a.pickle": "workloads/data/gpt-small-train.csv",
        "run_b.pickle": "workloads/data/gpt-small-train-seq256.csv.gz",
        "job_a.pickle": "workloads/data/gpt-small-train.csv",
        "job_b.pickle": "workloads/data/gpt-small-train-seq256.csv.gz",
        "big/a.pickle": "workloads/data/gpt-small-train.csv",
        "big/b.pickle": "workloads/data/sd15-resolution512.csv.gz",
    }
    for out, trace in made.items():
        rc, _, err, _ = run(f"vramlab replay {trace} --snapshot-out {out}", work, env, timeout)
        if rc != 0:
            sys.exit(f"check_doc_examples: cannot prepare {out} from {trace}:\n{err}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--vramlab", type=Path, default=ROOT / "target/release/vramlab")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per command (default 300)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    ap.add_argument("--list", action="store_true", help="print what would run, run nothing")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every command and its time")
    args = ap.parse_args()
    files = args.files or [ROOT / "README.md", *sorted((ROOT / "docs/guide").glob("*.md"))]
    exe = args.vramlab.resolve()
    if not args.list and not exe.is_file():
        sys.exit(f"check_doc_examples: no vramlab binary at {exe} (cargo build --release -p vramlab, or --vramlab)")
    bindir = Path(tempfile.mkdtemp(prefix="doc-examples-bin-"))
    (bindir / "vramlab").symlink_to(exe)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", COLUMNS="100")
    for var in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"):
        env.pop(var, None)

    ran, failed, skipped, not_run = 0, [], [], 0
    for md in files:
        md = md.resolve()
        rel = md.relative_to(ROOT) if md.is_relative_to(ROOT) else md
        todo = []
        for b in blocks(md):
            marker = b.marker or ""
            if marker.startswith("skip"):
                skipped.append(f"{rel}:{b.line}: {marker}")
                continue
            if marker.startswith("needs "):
                need = marker[len("needs "):].strip()
                if not (ROOT / need).exists():
                    skipped.append(f"{rel}:{b.line}: needs {need}, which is not here")
                    continue
            elif marker:
                failed.append(f"{rel}:{b.line}: unknown doc-examples marker: {marker}")
                continue
            for n, cmd in b.commands():
                cmd = alias(cmd)
                if RUNNABLE.match(cmd):
                    todo.append((n, cmd))
                else:
                    not_run += 1
                    if args.verbose or args.list:
                        print(f"{rel}:{n}: not a vramlab command, not run: {cmd}")
        if args.list:
            for n, cmd in todo:
                print(f"{rel}:{n}: {cmd}")
            continue
        if not todo:
            continue
        tmp = Path(tempfile.mkdtemp(prefix="doc-examples-"))
        work = tmp / "work"
        work.mkdir()
        prepare(work, env, args.timeout)
        for n, cmd in todo:
            rc, out, err, secs = run(cmd, work, env, args.timeout)
            ran += 1
            if args.verbose:
                print(f"{rel}:{n}: {secs:.1f} s, exit {rc}: {cmd}")
            if rc != 0:
                tail = "\n".join(("    " + l) for l in (err or out).strip().splitlines()[-8:])
                failed.append(f"{rel}:{n}: exit {rc}: {cmd}\n{tail}")
        if args.keep:
            print(f"{rel}: kept {work}")
        else:
            shutil.rmtree(tmp)
    shutil.rmtree(bindir)
    if args.list:
        return 0
    for s in skipped:
        print(f"skipped {s}")
    print(f"{ran} commands run, {len(failed)} failed, {len(skipped)} blocks skipped, "
          f"{not_run} lines not vramlab commands (not run)")
    for f in failed:
        print(f"FAILED {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
