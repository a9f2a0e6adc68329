"""The Python functions are generated from the command line's own table:
they must be what scripts/gen_python_api.py makes of this build's table,
and every keyword must reach the command as its flag."""

import importlib.util
import inspect
import json
from pathlib import Path

import vramlab
from vramlab import _api, _native
from vramlab._options import OPTIONS

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_python_api", ROOT / "scripts" / "gen_python_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_files_match_this_builds_command_table():
    gen = _generator()
    table = json.loads(_native.command_table())
    for path, text in gen.outputs(table).items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name}: rerun scripts/gen_python_api.py"


def test_every_keyword_of_every_function_is_an_option_of_its_command():
    gen = _generator()
    for spec in gen.FUNCTIONS:
        fn = getattr(vramlab, spec["name"])
        flags = OPTIONS[spec["command"]]
        for name, p in inspect.signature(fn).parameters.items():
            if p.kind is not inspect.Parameter.KEYWORD_ONLY:
                continue
            raw = {v: k for k, v in gen.RENAMES.items()}.get(name, name)
            assert raw in flags or f"no_{raw}" in flags, (spec["name"], name)


def test_keywords_are_spelled_as_the_command_line_spells_them():
    args = _api._argv(
        "replay",
        ["t.csv"],
        {"conf": ["a", "b"], "trace_device": 1, "no_placement_check": False, "continue_on_oom": True,
         "capacity": "24GiB", "gpu": None},
    )
    assert args == ["replay", "t.csv", "--conf", "a", "--conf", "b", "--trace-device", "1",
                    "--no-placement-check", "--continue-on-oom", "--capacity", "24GiB"]


def test_a_command_line_default_is_the_python_default():
    # Nothing given: the command runs with its own defaults, as the
    # command line does.
    assert _api._argv("replay", ["t.csv"], {k: None for k in OPTIONS["replay"]}) == ["replay", "t.csv"]
