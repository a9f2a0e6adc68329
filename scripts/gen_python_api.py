#!/usr/bin/env python3
"""Writes python/vramlab/_commands.py (the Python API's functions, their
keywords, types, defaults and option help, generated from the command
line's own table (`vramlab command-table`)) and python/vramlab/_options.py
(each command's flags), so that every flag is spelled once, in the Rust
`Args` struct of its command.

    cargo run -q -- command-table > /tmp/table.json
    python3 scripts/gen_python_api.py /tmp/table.json        # rewrite
    python3 scripts/gen_python_api.py /tmp/table.json --check  # CI: up to date?

What is written here by hand is only the shape of each Python function:
which command it runs, its leading positional parameters, the options a
wrapper handles itself (output files, `json`), keyword renames, how the
result is returned, and its summary. Every other option of the command
becomes a keyword, named after its long flag (`--torch-version` →
`torch_version`; a `--no-X` switch → `X: bool = True`).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "vramlab"

# Options no Python function takes: what the wrapper decides (output
# files, the JSON switch, progress bars), or what only the command line
# does (reading the environment's settings is os.environ's job in Python,
# the CUDA device replay has its own command-line output).
NEVER = {"json", "csv", "quiet", "timeline", "plot", "merge", "shard", "device", "touch", "plan"}

# The Python keyword of `--trace-device`: which device of a multi-GPU
# snapshot to replay.
RENAMES = {"trace_device": "device"}

FUNCTIONS: List[Dict[str, Any]] = [
    {
        "name": "stats",
        "command": "stats",
        "params": ["source"],
        "result": "json_list",
        "returns": "List[Record]",
        "doc": """``vramlab stats --json``: one summary per device (events,
allocations, peak live bytes, the recorded state of a mid-run snapshot, …).""",
    },
    {
        "name": "replay",
        "command": "replay",
        "params": ["source", "conf"],
        "result": "json_per_conf",
        "returns": "Union[Record, List[Record]]",
        "doc": """``vramlab replay --json``: replays ``source`` under the settings
``conf`` (a ``PYTORCH_ALLOC_CONF`` string; default: PyTorch's defaults).
With a list of settings, returns a list of results, one per setting.

A result holds ``peak_reserved_bytes``, ``peak_allocated_bytes``,
``waste_at_peak_bytes``, ``oom`` (``None`` or where and why), ``stats``
(named as ``torch.cuda.memory_stats()`` names them) and the rest of the
command line's JSON. ``peak_reserved_range_bytes`` gives the peak under
both placement orders (they differ when a tie between equal free blocks
decides the result; ``placement_settled`` is then false).""",
    },
    {
        "name": "recommend",
        "command": "recommend",
        "params": ["source", "grid"],
        "result": "json",
        "returns": "Record",
        "doc": """``vramlab recommend --json``: ranks the settings of ``grid`` (the
built-in grid, a grid file, or a list of grid lines) for a card (``gpu``)
or a memory size (``capacity``), with the verdict, the reason and the line
to export.""",
    },
    {
        "name": "oom_point",
        "command": "oom-point",
        "params": ["source", "conf"],
        "result": "json_per_conf",
        "returns": "Union[Record, List[Record]]",
        "doc": """``vramlab oom-point --json``: the smallest capacity on which the
trace runs without running out of memory under ``conf`` (``min_capacity``,
with the ``lower_bound`` no setting can beat); with ``capacity`` or
``gpu``, where and why it runs out there. A list of settings gives a list
of results.""",
    },
    {
        "name": "serve_budget",
        "command": "serve-budget",
        "params": ["source"],
        "result": "json",
        "returns": "Record",
        "doc": """``vramlab serve-budget --json``: from forwards recorded at a few
batch sizes (one phase per forward, labelled ``bs=N``), the CUDA graph
pool a serving engine's start-up captures for ``capture_sizes`` (one
shared pool, replayed: ``graph_pool_bytes``, ``captures``), vLLM's
two-graph extrapolation beside it (``linear_estimate_bytes``), and with a card (``gpu``/``capacity``) and
``kv_bytes_per_token`` the largest KV cache that fits under
``gpu_memory_utilization`` (``kv_tokens``, ``kv_bytes``).""",
    },
    {
        "name": "explain",
        "command": "explain",
        "params": ["source", "conf"],
        "result": "json",
        "returns": "Record",
        "doc": """``vramlab explain --json``: why ``source`` reserves more than it
allocates at its reserved peak under ``conf``: ``waste_at_peak_bytes``
split into ``waste.pinned_bytes`` (free space inside segments that hold
live blocks), ``waste.releasable_bytes`` (what ``empty_cache()`` there
gives back) and ``waste.pool_cached_bytes``, with ``waste.rounding_bytes``
beside it; ``culprits`` (live allocations pinning free space that a
request making a new segment could have used, by pinned bytes: ``id``,
``size_bytes``, ``pinned_bytes``, ``frame``, and
``peak_reserved_without_bytes``, the peak replayed without it); and
``fixes`` (settings aimed at the waste, replayed). On a card too small
(``gpu``/``capacity``) the moment explained is the state just before the
failing request (``at_failure``), and each culprit says whether the trace
fits without it (``fits_without``). A trace that starts
mid-run is explained from a fresh start (ids as ``vramlab convert
--start fresh`` writes them).""",
    },
    {
        "name": "diff",
        "command": "diff",
        "params": ["source", "other", "conf"],
        "result": "json",
        "returns": "Record",
        "doc": """``vramlab diff --json``: two runs compared at their reserved peaks —
``source`` and ``other``, or ``source`` under two settings (``conf`` a
list of two). ``a`` and ``b`` hold each run's ``peak_reserved_bytes``,
``allocated_at_peak_bytes`` and ``waste_at_peak_bytes``; ``groups`` the
allocated bytes at each peak by source line (``key``, ``a_bytes``,
``b_bytes``, ``delta_bytes``; by phase and size class when a trace has no
stacks), adding up exactly; ``reserved_delta_bytes`` =
``allocated_delta_bytes`` + ``waste_delta_bytes``.""",
    },
    {
        "name": "fidelity",
        "command": "fidelity",
        "params": ["source"],
        "result": "json",
        "returns": "Union[Record, List[Record]]",
        "doc": """``vramlab fidelity --json``: replays a snapshot under its recorded
settings and compares every allocation address and segment decision with
PyTorch's. A difference is a result (``exact`` is false), not an
exception.""",
    },
    {
        "name": "oracle",
        "command": "oracle",
        "params": ["source", "conf"],
        "result": "rows",
        "returns": "Rows",
        "doc": """``vramlab oracle --json``: PyTorch's own caching allocator (the
official wheel of release ``torch``, installed from PyPI into a cached
environment on first use, or the one of ``python``) replays ``source`` on
vramlab's fake CUDA device next to vramlab's replay, under each setting of
``conf``. Returns one row per setting: ``torch_peak_reserved_bytes``,
``torch_num_device_alloc``, ``vramlab_peak_reserved_bytes``,
``vramlab_num_device_alloc``, ``exact`` and, where they part,
``first_difference``. A difference is a result, not an exception. The fake
device's library is found next to the ``vramlab`` program, in the source
tree's ``target/``, or at ``$VRAMLAB_FAKECUDA``.""",
    },
    {
        "name": "sweep",
        "command": "sweep",
        "params": ["sources", "grid", "executor"],
        "result": "rows_file",
        "returns": "Rows",
        "doc": """``vramlab sweep``: every source under every setting of ``grid``, in
parallel on all cores; rows as dicts (:meth:`Rows.to_pandas` for a
DataFrame, :meth:`Rows.to_parquet` for a file). A single path, dict or
Trace counts as one source.

With ``executor`` (a ``concurrent.futures`` executor — a process pool,
Dask's ``client.get_executor()``, submitit — or a pool with ``map``), the
sweep is split into :func:`vramlab.cases` and each runs there through
:func:`vramlab.run_case`: the same rows, in the same order (sources must
then be files the workers can read; ``threads`` does not apply).""",
    },
    {
        "name": "colocate",
        "command": "colocate",
        "params": ["sources"],
        "result": "json",
        "returns": "Record",
        "doc": """``vramlab colocate --json``: several processes on one GPU, one per
source, each replaying its trace through its own allocator (``name``,
``tenant_conf``: one per source, in order), all drawing on one device
(``gpu`` or ``capacity``). The result holds ``tenants`` (each one's
``peak_reserved_bytes``, ``num_device_alloc``, ``num_alloc_retries`` and
``oom_event``), ``first_oom`` (the tenant and its event), ``device_peak_bytes``
and ``steps`` (whose phase ran, and each tenant's reserved bytes after it).""",
    },
    {
        "name": "gate",
        "command": "gate",
        "params": ["source", "other", "conf"],
        "result": "json",
        "returns": "Record",
        "doc": """``vramlab gate --json``: a memory regression gate — ``source`` (the
baseline recording) against ``other`` (the same job recorded on a change)
under each setting. ``passed`` is the verdict; ``rows`` hold, per setting,
both peaks, ``reserved_delta_bytes`` and its ratio, the waste and
allocated deltas, the smallest cards, ``grew`` (what grew at the peak, by
source line) and ``reason`` when it failed. ``markdown`` and ``junit``
write the summary files. A failed gate is a result, not an exception.""",
    },
    {
        "name": "plan",
        "command": "plan",
        "params": ["source", "conf"],
        "result": "json",
        "returns": "Record",
        "doc": """``vramlab plan --json``: the offline plan of a trace — every
allocation placed knowing all lifetimes — against ``peak_live_bytes`` (the
bound no placement beats): ``planned_peak_bytes``, ``proved_optimal``,
``policies`` (each setting's peak, its gap to the plan and to the bound,
and STAlloc's ``fragmentation_ratio``) and ``recipes`` (priming, learned
rounding, ``max_split_size_mb``, each replayed).""",
    },
    {
        "name": "matrix",
        "command": "matrix",
        "params": ["preset"],
        "result": "json_file",
        "returns": "Record",
        "doc": """``vramlab matrix``: every recorded variant of a workload preset
(precision, attention, checkpointing, KV cache) under allocator settings
(``conf``; default: the defaults and four the guides recommend). The
result holds ``cells`` (one per variant and setting: peak reserved, the
smallest capacity and card, ``saved_vs_baseline``, whether it ``fits`` the
card and the ``largest_fitting`` size), ``variants``, ``settings`` and the
baseline. ``search=False`` skips the largest-size search.""",
    },
    {
        "name": "report",
        "command": "report",
        "params": ["source", "out_dir", "grid"],
        "result": "report",
        "returns": "Path",
        "doc": """``vramlab report``: writes the HTML report (``index.html``, plots as
PNG and SVG) into ``out_dir`` and returns the path of ``index.html``.""",
    },
]

# The leading parameters a function can take, with their type and the
# option or positional they fill.
PARAMS = {
    "source": ("source: Source", "positional"),
    "sources": ("sources: Union[Source, Sequence[Source]]", "positional"),
    "other": ("other: Optional[Source] = None", "positional"),
    "executor": ("executor: Any = None", "executor"),
    "preset": ("preset: str", "positional"),
    "conf": ("conf: Conf = None", "conf"),
    "grid": ("grid: Grid = None", "grid"),
    "out_dir": ('out_dir: "Union[str, os.PathLike[str]]"', "out"),
}

TYPES = {"int": "int", "float": "float", "path": '"Union[str, os.PathLike[str]]"', "str": "str"}


def raw_keyword(arg: Dict[str, Any]) -> str:
    """The option's name in the OPTIONS table: its long flag as a Python
    name (`--torch-version` → `torch_version`)."""
    return arg["long"][2:].replace("-", "_")


def keyword(arg: Dict[str, Any]) -> str:
    """The option's keyword in a function's signature."""
    name = raw_keyword(arg)
    if arg["kind"] == "switch" and name.startswith("no_"):
        name = name[3:]
    return RENAMES.get(name, name)


def annotation(arg: Dict[str, Any]) -> str:
    if arg["kind"] == "switch":
        return "bool"
    if arg["value_name"] == "SIZE" and arg["value_type"] == "int":
        return "Size"  # bytes, or a size such as "24GiB"
    if arg["choices"]:
        base = "Literal[" + ", ".join(json.dumps(c) for c in arg["choices"]) + "]"
    else:
        base = TYPES[arg["value_type"]]
    if arg["kind"] == "repeated":
        return f"Union[None, {base}, Sequence[{base}]]"
    return f"Optional[{base}]"


def default(arg: Dict[str, Any]) -> str:
    if arg["kind"] == "switch":
        return "True" if arg["long"].startswith("--no-") else "False"
    return "None"


def python_words(text: str, command: Dict[str, Any]) -> str:
    """The command line's help in Python's words: a flag of this command
    (`--gpu`) becomes its keyword (`gpu=`; `--no-search` becomes
    `search=False`)."""
    names = {
        a["long"]: keyword(a) + ("=False" if a["kind"] == "switch" and a["long"].startswith("--no-") else "=")
        for a in command["args"]
        if a["long"]
    }
    return re.sub(r"--[a-z][a-z-]*", lambda m: names.get(m.group(0), m.group(0)), text)


def option_doc(kw: str, arg: Dict[str, Any], command: Dict[str, Any]) -> List[str]:
    help_text = python_words(" ".join(arg["help"].split()), command)
    if arg["default"] is not None and arg["kind"] != "switch":
        help_text += f" (default: {arg['default']})"
    if arg["kind"] == "switch" and arg["long"].startswith("--no-"):
        help_text = f"``False``: {help_text[0].lower()}{help_text[1:]}" if help_text else ""
    words, lines, line = help_text.split(), [], f"    {kw}:"
    for w in words:
        if len(line) + 1 + len(w) > 76:
            lines.append(line)
            line = "        " + w
        else:
            line += " " + w
    lines.append(line)
    return lines


def function(spec: Dict[str, Any], command: Dict[str, Any]) -> str:
    taken = {PARAMS[p][1] for p in spec["params"]}
    options = [
        (keyword(a), a)
        for a in command["args"]
        if a["long"] is not None and raw_keyword(a) not in NEVER | taken
    ]
    sig = [PARAMS[p][0] for p in spec["params"]]
    sig.append("*")
    sig += [f"{kw}: {annotation(a)} = {default(a)}" for kw, a in options]
    lines = [f"def {spec['name']}("]
    lines += [f"    {s}," for s in sig]
    lines.append(f") -> {spec['returns']}:")
    doc = spec["doc"].splitlines()
    lines.append(f'    """{doc[0]}')
    lines += [f"    {d}" if d else "" for d in doc[1:]]
    lines.append("")
    lines.append(f"    Keywords (the options of ``vramlab {command['name']}``):")
    lines.append("")
    for kw, a in options:
        lines += ["    " + ln for ln in option_doc(kw, a, command)]
    lines.append('    """')
    if "executor" in spec["params"]:
        lines.append("    if executor is not None:")
        lines.append("        return _fleet.sweep_on(")
        lines.append("            executor,")
        lines.append("            _fleet.cases(")
        lines.append("                sources,")
        lines.append("                grid,")
        lines += [f"                {kw}={kw}," for kw, a in options if kw != "threads"]
        lines.append("            ),")
        lines.append("        )")
    lines.append("    return _api._invoke(")
    lines.append(f'        "{command["name"]}",')
    lines.append(f'        "{spec["result"]}",')
    lines.append("        {" + ", ".join(f'"{p}": {p}' for p in spec["params"] if p != "executor") + "},")
    lines.append("        {")
    lines += [f'            "{raw_keyword(a)}": {kw},' for kw, a in options]
    lines.append("        },")
    lines.append("    )")
    return "\n".join(lines)


def options_table(table: List[Dict[str, Any]]) -> str:
    used = {f["command"] for f in FUNCTIONS}
    lines = [
        "# Every option of each command these functions run: its name (the long",
        "# flag as a Python name) -> (flag, kind), for _api._argv.",
        "OPTIONS = {",
    ]
    for c in table:
        if c["name"] not in used:
            continue
        lines.append(f'    "{c["name"]}": {{')
        for a in c["args"]:
            if a["long"] is None:
                continue
            kind = a["kind"]
            if kind == "switch" and a["long"].startswith("--no-"):
                kind = "negated_switch"
            lines.append(f'        "{raw_keyword(a)}": ("{a["long"]}", "{kind}"),')
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines)


def generate(table: List[Dict[str, Any]]) -> str:
    by_name = {c["name"]: c for c in table}
    parts = [
        '"""The Python API\'s functions, generated by scripts/gen_python_api.py from',
        "the command line's table (``vramlab command-table``): each keyword is an",
        "option of the command it runs, named after its long flag. Do not edit:",
        'rerun the script."""',
        "",
        "from __future__ import annotations",
        "",
        "import os",
        "from pathlib import Path",
        "from typing import Any, List, Literal, Optional, Sequence, Union",
        "",
        "from . import _api, _fleet",
        "from ._api import Conf, Grid, Record, Rows, Size, Source",
        "",
        "__all__ = [" + ", ".join(f'"{f["name"]}"' for f in FUNCTIONS) + "]",
    ]
    for spec in FUNCTIONS:
        parts += ["", "", function(spec, by_name[spec["command"]])]
    return "\n".join(parts) + "\n"


def generate_options(table: List[Dict[str, Any]]) -> str:
    return "\n".join(
        [
            '"""The flags of the commands the Python API runs, generated by',
            "scripts/gen_python_api.py from ``vramlab command-table``. Do not edit:",
            'rerun the script."""',
            "",
            options_table(table),
        ]
    ) + "\n"


def outputs(table: List[Dict[str, Any]]) -> Dict[Path, str]:
    """Each generated file and its text."""
    return {PACKAGE / "_commands.py": generate(table), PACKAGE / "_options.py": generate_options(table)}


def main(argv: List[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    table = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    stale = 0
    for path, text in outputs(table).items():
        if "--check" in argv[1:]:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                print(f"{path} is out of date: rerun scripts/gen_python_api.py", file=sys.stderr)
                stale = 1
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return stale


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
