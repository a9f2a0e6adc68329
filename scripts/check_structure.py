#!/usr/bin/env python3
"""The house rules of ARCHITECTURE.md, checked: no production Rust file over
700 lines, no function over 150 lines (tests aside), no import circle
between sibling modules of a crate or of a Python package (imports inside
functions count: they hide a circle, they do not remove it), and every
repository path ARCHITECTURE.md names exists. Exits 1 with the offenders
listed.

    python3 scripts/check_structure.py

Production code is everything under the crates' src/ folders, without
`#[cfg(test)] mod tests` blocks; tests/, benches/, examples/ and fuzz/ are
not production code. A module's imports are its `crate::a::b` and
`super::x` paths (outside test blocks); an edge between two sibling modules
is counted at the level where their paths part.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_FILE = 700
MAX_FN = 150
CRATES = {
    "vramlab_allocator": "allocator/src",
    "vramlab_traces": "traces/src",
    "vramlab_workloads": "workloads/src",
    "vramlab_replay": "replay/src",
    "vramlab_reports": "reports/src",
    "vramlab_cli": "src",
    "vramlab_python": "python/src",
    "vramlab_fakecuda": "fakecuda/src",
    "vramlab_oracle": "oracle/src",
}
PY_PACKAGES = ["workloads/record/vramlab_record", "python/vramlab"]
TEST_BLOCK = re.compile(r"\n#\[cfg\(test\)\]\s*\nmod tests \{")
FN = re.compile(r"\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")


def production(path):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    m = TEST_BLOCK.search(src)
    return src[: m.start()] if m else src


def is_test_module(path):
    """A `tests.rs` that its parent declares as `#[cfg(test)] mod tests;`."""
    if os.path.basename(path) != "tests.rs":
        return False
    d = os.path.dirname(path)
    for parent in (os.path.join(d, "mod.rs"), d + ".rs", os.path.join(d, "lib.rs")):
        if os.path.exists(parent):
            with open(parent, encoding="utf-8") as f:
                if re.search(r"#\[cfg\(test\)\]\s*\n\s*mod tests;", f.read()):
                    return True
    return False


def rust_files(root):
    for d, _, fs in os.walk(os.path.join(ROOT, root)):
        for f in fs:
            path = os.path.join(d, f)
            if f.endswith(".rs") and not is_test_module(path):
                yield path


def long_functions(path, src):
    lines = src.split("\n")
    i = 0
    while i < len(lines):
        m = FN.match(lines[i])
        if not m or lines[i].strip().endswith(";"):
            i += 1
            continue
        depth, started, j = 0, False, i
        while j < len(lines):
            depth += lines[j].count("{") - lines[j].count("}")
            started |= "{" in lines[j]
            if started and depth <= 0:
                break
            j += 1
        if j - i + 1 > MAX_FN:
            yield f"function {m.group(6)} at {os.path.relpath(path, ROOT)}:{i + 1} has {j - i + 1} lines (at most {MAX_FN})"
        i = j + 1 if started else i + 1


def module_path(root, path):
    parts = os.path.relpath(path, os.path.join(ROOT, root))[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def circles(root):
    edges = {}
    for path in rust_files(root):
        mine = module_path(root, path)
        src = production(path)
        for m in re.finditer(r"crate::([a-z_0-9]+(?:::[a-z_0-9]+)*)", src):
            target = m.group(1).split("::")
            for depth in range(min(len(mine), len(target))):
                if mine[:depth] != target[:depth]:
                    break
                a, b = tuple(mine[: depth + 1]), tuple(target[: depth + 1])
                if a != b:
                    edges.setdefault(a, set()).add(b)
                    break
        for m in re.finditer(r"super::([a-z_0-9]+)", src):
            parent = mine[:-1]
            a, b = tuple(mine), tuple(parent + [m.group(1)])
            if len(a) == len(b) and a != b:
                edges.setdefault(a, set()).add(b)
    found = set()

    def walk(node, stack):
        for nxt in sorted(edges.get(node, ())):
            if nxt in stack:
                cycle = stack[stack.index(nxt):] + [nxt]
                key = frozenset(cycle)
                if key not in found:
                    found.add(key)
                    yield " -> ".join("::".join(x) for x in cycle)
            elif len(stack) < 8:
                yield from walk(nxt, stack + [nxt])

    for node in sorted(edges):
        yield from walk(node, [node])


def python_circles(package):
    """Import circles between the modules of a Python package (relative
    imports, wherever they stand)."""
    import ast

    base = os.path.join(ROOT, package)
    edges = {}
    for f in sorted(os.listdir(base)):
        if not f.endswith(".py"):
            continue
        mine = f[:-3]
        with open(os.path.join(base, f), encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                targets = [node.module] if node.module else [a.name for a in node.names]
                for t in targets:
                    t = t.split(".")[0]
                    if t != mine and os.path.exists(os.path.join(base, t + ".py")):
                        edges.setdefault(mine, set()).add(t)
    found = set()

    def walk(node, stack):
        for nxt in sorted(edges.get(node, ())):
            if nxt in stack:
                cycle = stack[stack.index(nxt):] + [nxt]
                if frozenset(cycle) not in found:
                    found.add(frozenset(cycle))
                    yield " -> ".join(cycle)
            elif len(stack) < 8:
                yield from walk(nxt, stack + [nxt])

    for node in sorted(edges):
        yield from walk(node, [node])


def architecture_paths():
    """Paths in ARCHITECTURE.md's backticks that do not exist (brace lists
    expanded: `a/{b,c}.rs`)."""
    with open(os.path.join(ROOT, "ARCHITECTURE.md"), encoding="utf-8") as f:
        text = f.read()
    for span in re.findall(r"`([^`]+)`", text):
        span = span.split(" ")[0]
        if "/" not in span or span.startswith(("http", "-", "$")) or "<" in span or "*" in span:
            continue
        m = re.match(r"^(.*)\{([^}]*)\}(.*)$", span)
        paths = [m.group(1) + x + m.group(3) for x in m.group(2).split(",")] if m else [span]
        for p in paths:
            p = p.rstrip(".,;:")
            if not os.path.exists(os.path.join(ROOT, p)):
                yield f"ARCHITECTURE.md names {p}, which does not exist"


def main():
    problems = []
    for package in PY_PACKAGES:
        problems.extend(f"import circle in {package}: {c}" for c in python_circles(package))
    problems.extend(architecture_paths())
    for crate, root in CRATES.items():
        if not os.path.isdir(os.path.join(ROOT, root)):
            continue
        for path in rust_files(root):
            src = production(path)
            n = src.count("\n")
            if n > MAX_FILE:
                problems.append(f"{os.path.relpath(path, ROOT)} has {n} production lines (at most {MAX_FILE})")
            problems.extend(long_functions(path, src))
        problems.extend(f"import circle in {crate}: {c}" for c in circles(root))
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print("structure: no file over 700 lines, no function over 150, no import circle (Rust or Python), every path ARCHITECTURE.md names exists")


if __name__ == "__main__":
    main()
