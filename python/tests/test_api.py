"""The Python API against the command line it wraps: the same numbers on
the bundled corpus and on the real snapshots (when ../shared/traces/real
is there), in-memory inputs equal to files, errors as exceptions, and the
installed `vramlab` command.

Run from the repository root after `pip install .`:

    python -m pytest python/tests
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import vramlab

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "workloads" / "data"
REAL = ROOT.parent / "shared" / "traces" / "real"
GPT = DATA / "gpt-small-train.csv"
CONFS = ["default", "expandable_segments:True", "max_split_size_mb:256"]


def vramlab_exe() -> str:
    """The `vramlab` command installed next to this interpreter."""
    exe = Path(sys.executable).with_name("vramlab")
    if exe.exists():
        return str(exe)
    found = shutil.which("vramlab")
    assert found, "the vramlab command is not installed"
    return found


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [vramlab_exe(), *map(str, args)], capture_output=True, text=True, check=check
    )


def cli_json(*args: str):
    return json.loads(cli(*args).stdout)


def real_snapshots():
    return sorted(REAL.glob("*.pickle")) if REAL.is_dir() else []


def without_paths(v):
    """A result without the fields that name the input file."""
    if isinstance(v, list):
        return [without_paths(x) for x in v]
    return {k: x for k, x in v.items() if k not in ("trace", "source", "path")}


# --- the same numbers as the command line ------------------------------------


def test_replay_equals_the_cli_on_the_bundled_trace():
    api = vramlab.replay(GPT, conf=CONFS)
    args = ["replay", GPT, "--json"]
    for c in CONFS:
        args += ["--conf", c]
    assert api == cli_json(*args)
    assert [r.conf for r in api] == CONFS
    assert api[0].peak_reserved_bytes == api[0]["peak_reserved_bytes"] > 0


def test_one_setting_gives_one_result_and_a_list_gives_a_list():
    one = vramlab.replay(GPT)
    assert isinstance(one, dict) and one.conf == "default"
    listed = vramlab.replay(GPT, conf=["default"])
    assert isinstance(listed, list) and listed == [one]


def test_placement_gives_the_range_when_the_order_decides():
    # Under PyTorch 2.11's rules (ties by address) the order decides this
    # trace; from 2.12 (ties by allocation order) it is settled.
    tied = DATA / "llama-3-8b-infer-eager-seq2048.csv.gz"
    driver = vramlab.replay(tied, torch_version="2.11")
    ascending = vramlab.replay(tied, placement="ascending", torch_version="2.11")
    assert driver.placement == "driver" and ascending.placement == "ascending"
    assert not driver.placement_settled
    assert driver.peak_reserved_bytes == ascending.other_placement["peak_reserved_bytes"]
    assert driver.peak_reserved_range_bytes == ascending.peak_reserved_range_bytes
    assert driver == cli_json("replay", tied, "--json", "--placement", "driver", "--torch-version", "2.11")
    assert vramlab.replay(tied, torch_version="2.15").placement_settled
    with pytest.raises(vramlab.VramlabError, match="unknown placement 'up'"):
        vramlab.replay(tied, placement="up")


@pytest.mark.parametrize("path", sorted(DATA.glob("*.csv*")), ids=lambda p: p.name)
def test_every_bundled_trace_replays_as_on_the_cli(path):
    assert vramlab.replay(path, capacity="16GiB") == cli_json(
        "replay", path, "--json", "--capacity", "16GiB"
    )


@pytest.mark.parametrize("path", real_snapshots(), ids=lambda p: p.name)
def test_real_snapshots_match_the_cli(path):
    assert vramlab.replay(path, conf=CONFS[:2]) == cli_json(
        "replay", path, "--json", "--conf", CONFS[0], "--conf", CONFS[1]
    )
    assert [vramlab.oom_point(path)] == cli_json("oom-point", path, "--json")
    fid = vramlab.fidelity(path)
    assert fid == cli_json("fidelity", path, "--json")
    assert vramlab.stats(path) == cli_json("stats", path, "--json")


@pytest.mark.parametrize("path", real_snapshots(), ids=lambda p: p.name)
def test_a_snapshot_dict_equals_its_file(path):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    assert without_paths(vramlab.replay(snap)) == without_paths(vramlab.replay(path))
    assert without_paths(vramlab.oom_point(snap)) == without_paths(vramlab.oom_point(path))


def test_recommend_oom_point_and_sweep_equal_the_cli():
    rec = vramlab.recommend(GPT, gpu="rtx4090")
    assert rec == cli_json("recommend", GPT, "--gpu", "rtx4090", "--json")
    assert vramlab.oom_point(GPT, ["default", "expandable_segments:True"]) == cli_json(
        "oom-point", GPT, "--conf", "default", "--conf", "expandable_segments:True", "--json"
    )
    assert vramlab.oom_point(GPT).min_capacity > 0
    rows = vramlab.sweep(GPT, grid=CONFS, capacity="8GiB")
    assert len(rows) == len(CONFS)
    assert all(r.peak_reserved_bytes > 0 for r in rows)


def test_recommend_under_two_releases_shows_the_upgrade():
    up = vramlab.recommend(GPT, gpu="rtx4090", torch_version=["2.11", "2.15"])
    assert up == cli_json(
        "recommend", GPT, "--gpu", "rtx4090", "--torch-version", "2.11", "--torch-version", "2.15", "--json"
    )
    assert (up.from_torch, up.to_torch) == ("2.11", "2.15")
    assert up.before["torch"] == "2.11" and up.after["torch"] == "2.15"
    default = next(r for r in up.settings if r["setting"] == "default")
    assert default["fit"] == "fits_still"
    assert default["peak_reserved_before_bytes"] == default["peak_reserved_after_bytes"] > 0


def test_sweep_rows_equal_the_cli_csv(tmp_path):
    grid = tmp_path / "grid.txt"
    grid.write_text("\n".join(CONFS) + "\n")
    out = tmp_path / "rows.json"
    cli("sweep", GPT, "--grid", grid, "--quiet", "--json", out, "--capacity", "8GiB")
    assert vramlab.sweep([GPT], grid=CONFS, capacity="8GiB") == json.loads(out.read_text())


def test_a_job_folder_is_a_source_answered_for_its_worst_rank():
    # tests/jobs/two-seqs: ranks 0-2 share one trace, rank 3 has its own.
    job = ROOT / "tests" / "jobs" / "two-seqs"
    confs = ["default", "expandable_segments:True"]
    api = vramlab.replay(job, conf=confs)
    assert api == cli_json("replay", job, "--json", "--conf", confs[0], "--conf", confs[1])
    assert [s["worst_rank"] for s in api["job"]["settings"]] == [3, 3]
    assert api["job"]["settings"][0]["fits_on"] == "a10g"
    assert vramlab.oom_point(job / "job.json")["job"]["settings"][0]["card"] == "v100-16gb"


def test_rows_to_pandas():
    pd = pytest.importorskip("pandas")
    df = vramlab.sweep(GPT, grid=CONFS).to_pandas()
    assert isinstance(df, pd.DataFrame) and len(df) == len(CONFS)


# --- inputs ------------------------------------------------------------------


def test_a_list_of_events_equals_the_same_csv(tmp_path):
    events = [
        ("alloc", 1, 3_000_000),
        ("alloc", 2, 512, 0),
        {"action": "free", "id": 1},
        ("alloc", 3, 1_000_000),
        ("free_requested", 2),
        ("free_completed", 2),
        ("empty_cache",),
        ("free", 3),
    ]
    path = tmp_path / "events.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["action", "id", "size", "stream"])
        for e in events:
            if isinstance(e, dict):
                w.writerow([e["action"], e["id"], "", ""])
            else:
                w.writerow(list(e) + [""] * (4 - len(e)))
    assert without_paths(vramlab.replay(events)) == without_paths(vramlab.replay(path))
    t = vramlab.load(events)
    assert t.summary.allocs == 3 and t.summary.events == len(events)
    assert os.path.exists(t.path)
    assert without_paths(vramlab.replay(t)) == without_paths(vramlab.replay(path))


def test_load_keeps_a_dict_on_disk_while_the_trace_lives():
    snaps = real_snapshots()
    if not snaps:
        pytest.skip("../shared/traces/real is not here")
    with open(snaps[0], "rb") as f:
        snap = pickle.load(f)
    t = vramlab.load(snap)
    path = t.path
    assert os.path.exists(path) and t.devices
    assert vramlab.replay(t)["peak_reserved_bytes"] == vramlab.replay(snaps[0])["peak_reserved_bytes"]
    del t
    import gc

    gc.collect()
    assert not os.path.exists(path)


def test_gzipped_snapshot(tmp_path):
    snaps = real_snapshots()
    if not snaps:
        pytest.skip("../shared/traces/real is not here")
    gz = tmp_path / "s.pickle.gz"
    with open(snaps[0], "rb") as f, gzip.open(gz, "wb") as g:
        g.write(f.read())
    assert without_paths(vramlab.replay(gz)) == without_paths(vramlab.replay(snaps[0]))


# --- errors ------------------------------------------------------------------


def test_a_missing_file_is_a_trace_error_with_the_cli_message(tmp_path):
    missing = tmp_path / "nope.pickle"
    with pytest.raises(vramlab.TraceError) as e:
        vramlab.replay(missing)
    err = cli("replay", missing, check=False)
    assert err.returncode == 2
    assert err.stderr.strip() == f"error: {e.value}"


def test_a_malformed_trace_names_the_line():
    bad = ROOT / "tests" / "malformed" / "double-free.csv"
    with pytest.raises(vramlab.TraceError) as e:
        vramlab.replay(bad)
    assert str(e.value).endswith("double-free.csv:4: free of id 'a', which is not allocated")


def test_bad_settings_are_conf_errors_and_value_errors():
    with pytest.raises(vramlab.ConfError) as e:
        vramlab.replay(GPT, conf="max_split_size_mb:banana")
    assert isinstance(e.value, ValueError)
    assert "banana" in str(e.value)
    with pytest.raises(vramlab.ConfError):
        vramlab.replay(GPT, gpu="no-such-card")


def test_library_errors_name_python_keywords_not_flags(tmp_path):
    # The engine's messages advise options in Python's words.
    with pytest.raises(vramlab.VramlabError) as e:
        vramlab.matrix("sd15", seq=77)
    assert "resolution=, not seq=" in str(e.value)
    assert "--seq" not in str(e.value)
    # The command line says the same with its flags.
    err = cli("matrix", "sd15", "--seq", "77", check=False)
    assert "scales with --resolution, not --seq" in err.stderr
    # A command Python has a function for is advised as that function.
    with pytest.raises(vramlab.TraceError) as e:
        vramlab.run(["convert", os.fspath(GPT), os.fspath(tmp_path / "out.pickle")])
    assert "vramlab.replay(…, snapshot_out=FILE)" in str(e.value)
    assert "--snapshot-out" not in str(e.value)


def test_bad_events_are_trace_errors():
    with pytest.raises(vramlab.TraceError, match="event 1"):
        vramlab.replay([("alloc", 1, 512), ("malloc", 2, 512)])
    with pytest.raises(vramlab.TraceError, match="free of id"):
        vramlab.replay([("free", 9)])
    with pytest.raises(TypeError):
        vramlab.replay(42)


def test_notes_become_warnings():
    snaps = [p for p in real_snapshots() if "infer" in p.name]
    if not snaps:
        pytest.skip("../shared/traces/real is not here")
    from vramlab import _api

    _api._WARNED.clear()
    with pytest.warns(vramlab.VramlabWarning):
        vramlab.replay(snaps[0], start="recorded", conf="expandable_segments:True")
    # Once per note and process: a second call on the same trace is quiet.
    import warnings

    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        vramlab.replay(snaps[0], start="recorded", conf="expandable_segments:True")
    assert not [w for w in again if issubclass(w.category, vramlab.VramlabWarning)]


def test_a_fidelity_difference_is_a_result_not_an_error():
    snaps = real_snapshots()
    if not snaps:
        pytest.skip("../shared/traces/real is not here")
    r = vramlab.fidelity(snaps[0], conf="max_split_size_mb:20")
    rows = r if isinstance(r, list) else [r]
    # Replayed under other settings than the recorded ones: not exact, and
    # said so as a value (with where it first differs), not raised.
    assert [row["exact"] for row in rows] == [False] * len(rows)
    assert all(row["first_mismatch"] for row in rows)


# --- the command -------------------------------------------------------------


def test_the_command_is_installed_and_is_the_same_program():
    out = cli("--version")
    assert out.stdout.strip() == f"vramlab {vramlab.__version__}"
    table = cli("replay", GPT).stdout
    assert "peak reserved" in table
    assert cli("replay", "/no/such/file.csv", check=False).returncode == 2


def test_run_returns_the_printed_text():
    assert "h100" in vramlab.run(["gpus"])


def test_report_writes_index_html(tmp_path):
    index = vramlab.report(GPT, tmp_path / "r", gpu="rtx4090", grid=CONFS, plots=1)
    assert index.exists() and index.name == "index.html"
    assert "vramlab report" in index.read_text()


def test_record_needs_torch_and_says_so(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_torch(name, *a, **k):
        if name == "torch":
            raise ImportError("no torch here")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    with pytest.raises(ImportError, match="PyTorch"):
        with vramlab.record("x.pickle"):
            pass


def test_record_script_says_what_is_wrong_before_any_install(tmp_path):
    # A missing script and a card the fake GPU does not model are refused
    # at once (no torch environment is installed for them).
    with pytest.raises(vramlab.VramlabError, match="no such script"):
        vramlab.record_script(tmp_path / "nope.py", out=tmp_path / "x.pickle")
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    with pytest.raises(vramlab.VramlabError, match="has the properties of"):
        vramlab.record_script(script, out=tmp_path / "x.pickle", gpu="t4")


def test_matrix_equals_the_cli_and_names_its_cells(tmp_path):
    m = vramlab.matrix("sd15", resolution=512, capacity="3GiB", conf=["default", "expandable_segments:True"])
    out = tmp_path / "m.json"
    cli("matrix", "sd15", "--resolution", "512", "--capacity", "3GiB", "--conf", "default",
            "--conf", "expandable_segments:True", "--quiet", "--json", str(out))
    assert m == json.loads(out.read_text())
    assert len(m.cells) == len(m.variants) * 2
    base = [c for c in m.cells if c.variant == m.baseline_variant and c.setting == "default"]
    assert base and base[0].saved_vs_baseline == 0.0
    assert all(c.fits is not None for c in m.cells)


def test_oracle_names_a_bad_release():
    with pytest.raises(vramlab.VramlabError, match="'latest' is not a PyTorch release"):
        vramlab.oracle(GPT, torch="latest")


def _oracle_ready() -> bool:
    cache = Path(os.environ.get("VRAMLAB_ORACLE_CACHE") or Path.home() / ".cache" / "vramlab" / "oracle")
    return (cache / "torch-2.11" / "complete").exists() and bool(os.environ.get("VRAMLAB_FAKECUDA"))


@pytest.mark.skipif(not _oracle_ready(), reason="needs the oracle's torch 2.11 environment and VRAMLAB_FAKECUDA (CI's oracle step)")
def test_oracle_rows_are_the_commands():
    rows = vramlab.oracle(GPT, conf=["default", "expandable_segments:True"], torch="2.11")
    assert [(r.torch_peak_reserved_bytes, r.torch_num_device_alloc, r.exact) for r in rows] == [
        (864 << 20, 50, True),
        (780 << 20, 37, True),
    ]
    assert all(r.torch_version.startswith("2.11.") and r.first_difference is None for r in rows)


SPLIT = ROOT / "tests" / "explain" / "pinned-split.csv"


def test_explain_and_diff_equal_the_cli():
    e = vramlab.explain(SPLIT)
    assert e == cli_json("explain", str(SPLIT), "--json")
    assert [c.id for c in e.culprits] == [4, 1]
    assert e.culprits[0].pinned_bytes == 70 << 20
    assert e.culprits[0].peak_reserved_without_bytes == 152 << 20
    d = vramlab.diff(SPLIT, conf=["default", "expandable_segments:True"])
    assert d == cli_json("diff", str(SPLIT), "--conf", "default", "--conf", "expandable_segments:True", "--json")
    assert d.reserved_delta_bytes == d.allocated_delta_bytes + d.waste_delta_bytes
    two = vramlab.diff(SPLIT, ROOT / "tests" / "explain" / "pinned-split-without-4.csv")
    assert two.reserved_delta_bytes == -(80 << 20)
    assert sum(g.delta_bytes for g in two.groups) == two.allocated_delta_bytes


@pytest.mark.parametrize("path", sorted(REAL.glob("*.pickle")) if REAL.is_dir() else [], ids=lambda p: p.name)
def test_explain_of_a_real_snapshot_equals_the_cli(path):
    assert vramlab.explain(path, top=1, fixes=False) == cli_json(
        "explain", str(path), "--json", "--top", "1", "--no-fixes"
    )


HOST_SNAP = ROOT / "tests" / "releases" / "host.torch2.15.pickle"


def test_replay_rows_carry_the_pinned_host_figures():
    """A 2.15 snapshot with host_traces: the rows hold PyTorch's own host
    counts (tests/releases/host.torch2.15.stats.json), and a pinned key is
    a setting like any other."""
    stats = json.loads((ROOT / "tests" / "releases" / "host.torch2.15.stats.json").read_text())
    torch_stats = stats["host_memory_stats"]
    rows = vramlab.replay(HOST_SNAP, conf=["default", "pinned_max_round_threshold_mb:1"])
    assert rows[0].host_num_allocs == torch_stats["num_host_alloc"]
    assert rows[0].host_peak_reserved_bytes == torch_stats["allocated_bytes.peak"]
    assert rows[1].conf == "pinned_max_round_threshold_mb:1"
    rec = vramlab.recommend(HOST_SNAP, ranks_per_node=8)
    assert rec["host"]["ranks_per_node"] == 8
    assert rec["host"]["sizes_are_blocks"] is True
    assert rec["host"]["default"]["node_peak_pinned_bytes"] == 8 * torch_stats["allocated_bytes.peak"]


def test_colocate_names_who_runs_out_first():
    """Two processes on an 80 MiB device (tests/colocate/): the rollout's
    KV cache finds no room beside the trainer's cache, unless the trainer
    empties it first."""
    col = ROOT / "tests" / "colocate"
    run = vramlab.colocate([col / "trainer.csv", col / "rollout.csv"], name=["trainer", "rollout"], capacity="80MiB")
    assert run.first_oom == ["rollout", 0]
    run = vramlab.colocate(
        [col / "trainer-empty-cache.csv", col / "rollout.csv"], name=["trainer", "rollout"], capacity="80MiB"
    )
    assert run.first_oom is None
    assert run.tenants[1]["peak_reserved_bytes"] == 28 << 20


def test_colocate_job_searches_the_engines_utilization():
    """A job manifest (tests/colocate/jobs/): the rollout engine sized by
    vLLM's rule, its largest utilization found by replay (0.62: the judge's
    own bisection of PyTorch processes gave the same,
    docs/results/colocation/oracle-rollout-util-search.json), and the
    remedies replayed on the whole job."""
    job = ROOT / "tests" / "colocate" / "jobs" / "rollout-util-search.json"
    run = vramlab.colocate(job)
    assert run.search["largest_fitting"] == 0.62
    run = vramlab.colocate(ROOT / "tests" / "colocate" / "jobs" / "hybrid.json", what_if=True)
    assert run.first_oom == ["hybrid", 20]
    fits = [w["variant"] for w in run.what_if if w["first_oom"] is None]
    assert fits == ["hybrid: empty_cache() at every phase end"]


def test_gate_fails_on_an_added_buffer_and_names_its_line():
    """tests/gate/: a training step, the same step with one 256 MiB buffer
    held across its peak, and the step recorded again."""
    g = ROOT / "tests" / "gate"
    run = vramlab.gate(g / "baseline.torch2.15.pickle.gz", g / "candidate-plus-256mib.torch2.15.pickle.gz")
    assert run.passed is False
    assert run.rows[0]["reserved_delta_bytes"] == 256 << 20
    assert run.rows[0]["grew"][0]["key"] == "examples/ci_step.py:27 in main"
    assert vramlab.gate(g / "baseline.torch2.15.pickle.gz", g / "rerecorded.torch2.15.pickle.gz").passed is True


def test_plan_lies_between_peak_live_and_the_defaults():
    """The offline plan of a bundled trace: proved optimal at peak live, and
    PyTorch's defaults measured against it."""
    run = vramlab.plan(ROOT / "workloads" / "data" / "gpt-small-train.csv")
    assert run.peak_live_bytes <= run.planned_peak_bytes <= run.policies[0]["peak_reserved_bytes"]
    assert run.proved_optimal is True
    assert len(run.recipes) == 3


def test_the_plan_replays_as_a_policy():
    """`policy="plan"`: the trace's own plan in one arena mapped in 2 MiB
    pages, PyTorch's allocator for the rest; on a mid-run recording the
    plan starts fresh and places the first blocks too."""
    trace = ROOT / "workloads" / "data" / "moe-uneven.csv.gz"
    plan, default = vramlab.replay(trace, policy="plan"), vramlab.replay(trace)
    page = 2 << 20
    report = vramlab.plan(trace)
    assert plan.peak_reserved_bytes <= -(-report.greedy_peak_bytes // page) * page
    assert report.planned_peak_bytes <= plan.peak_reserved_bytes < default.peak_reserved_bytes
    assert report.policy_peak_bytes == plan.peak_reserved_bytes


def test_gate_compares_two_jobs_rank_by_rank(tmp_path):
    g = ROOT / "tests" / "gate"
    for name, rank0 in [("base", "baseline"), ("cand", "candidate-plus-256mib")]:
        d = tmp_path / name
        d.mkdir()
        (d / "rank0.pickle.gz").write_bytes((g / f"{rank0}.torch2.15.pickle.gz").read_bytes())
        (d / "job.json").write_text(
            '{"vramlab_job": 1, "world_size": 2, "ranks": [{"rank": 0, "trace": "rank0.pickle.gz"},'
            ' {"rank": 1, "same_as": 0, "basis": "recorded"}]}'
        )
    run = vramlab.gate(tmp_path / "base", tmp_path / "cand")
    assert run.passed is False
    assert [r["ranks"] for r in run.rows] == ["ranks 0-1"]
