"""Command-line plumbing shared by ``vramlab_record.cpu`` and ``vramlab_record.gpu``.

Both take either a built-in workload with its parameters::

    python -m vramlab_record.cpu -o out.csv llama-3-8b-train --seq 1024 --checkpointing true

or a user script after ``--`` (run with :mod:`runpy` as ``__main__``, with
``sys.argv`` set to the script and its arguments)::

    python -m vramlab_record.gpu -o out.pickle -- train.py --lr 1e-4
    python -m vramlab_record.gpu -o out.pickle -- -m mypackage.train --lr 1e-4
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import runpy
import shlex
import sys

from .workloads import WORKLOADS, parse_value


def split_argv(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """Splits at the first ``--``: (recorder args, script argv or None)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, None


def workload_params(name: str, rest: list[str]) -> dict:
    """Parses ``--param value`` pairs for a built-in workload."""
    if name not in WORKLOADS:
        raise SystemExit(f"unknown workload '{name}'; built-in workloads: {', '.join(WORKLOADS)}")
    w = WORKLOADS[name]
    defaults = {**w.params, **w.optional}
    p = argparse.ArgumentParser(prog=name, description=w.doc)
    for k, v in defaults.items():
        p.add_argument(f"--{k.replace('_', '-')}", dest=k, default=None, metavar=type(v).__name__.upper(),
                       help=f"default: {v}")
    ns = p.parse_args(rest)
    params = dict(defaults)
    given = set()
    for k, v in vars(ns).items():
        if v is not None:
            given.add(k)
            try:
                params[k] = parse_value(defaults[k], v)
            except ValueError as e:
                raise SystemExit(f"{name}: --{k.replace('_', '-')}: {e}") from None
    if w.resolve:
        try:
            params = getattr(w.load_module(), w.resolve)(params, given)
        except ValueError as e:
            raise SystemExit(f"{name}: {e}") from None
    return params


def header_params(name: str, params: dict) -> dict:
    """The parameters a recording's header names: all but the optional ones
    left at their default (see ``Workload.optional``)."""
    w = WORKLOADS[name]
    return {k: v for k, v in params.items() if not (k in w.optional and v == w.optional[k])}


def list_workloads() -> str:
    lines = []
    for name, w in WORKLOADS.items():
        ps = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in {**w.params, **w.optional}.items())
        lines.append(f"{name}\n    {w.doc}\n    {ps}")
    return "\n".join(lines)


def versions() -> str:
    """Versions of the libraries that shape the recording."""
    out = [f"python {platform.python_version()}"]
    for pkg in ("torch", "transformers", "diffusers"):
        try:
            out.append(f"{pkg} {importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return ", ".join(out)


def run_script(script_argv: list[str]) -> None:
    """Runs a user script (or ``-m module``) as ``__main__``."""
    if not script_argv:
        raise SystemExit("nothing to run after '--'")
    saved = sys.argv[:]
    try:
        if script_argv[0] == "-m":
            if len(script_argv) < 2:
                raise SystemExit("-m needs a module name")
            sys.argv = script_argv[1:]
            runpy.run_module(script_argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = script_argv[:]
            sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(script_argv[0])))
            runpy.run_path(script_argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    finally:
        sys.argv = saved


def command_line(prog: str) -> str:
    return f"python -m {prog} " + shlex.join(sys.argv[1:])
