"""Sweeps that scale out: cases and run_case, a process pool, a Dask
LocalCluster and Parquet give the command line's rows; case ids are unique
and stable; the fleet summary reads the rows."""

from __future__ import annotations

import concurrent.futures
import csv
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import vramlab

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "workloads" / "data"
TRACES = [
    DATA / "gpt-small-train.csv",
    ROOT / "tests" / "pools" / "snapshots" / "serving-warmup-midrun.torch2.15.pickle",
    ROOT / "tests" / "explain" / "pinned-split.csv",
]
GRID = ["default", "expandable_segments:True", "policy=bfc allow_growth:true", "fraction=0.9 garbage_collection_threshold:0.8"]


def vramlab_exe() -> str:
    """The `vramlab` command installed next to this interpreter."""
    exe = Path(sys.executable).with_name("vramlab")
    if exe.exists():
        return str(exe)
    found = shutil.which("vramlab")
    assert found, "the vramlab command is not installed"
    return found


def cli_rows(tmp_path: Path, *args: str) -> list:
    grid = tmp_path / "grid.txt"
    grid.write_text("".join(f"{g}\n" for g in GRID))
    out = tmp_path / "cli.json"
    exe = vramlab_exe()
    subprocess.run(
        [exe, "sweep", *map(str, TRACES), "--grid", str(grid), "--json", str(out), "--quiet", *args],
        check=True,
        capture_output=True,
    )
    return json.loads(out.read_text())


def alone(rows: list) -> list:
    """Rows as cases run alone give them: ``same_as`` is a fact of the whole
    sweep (``sweep_on`` and ``read_rows`` set it), empty in a single row."""
    return [{**r, "same_as": ""} for r in rows]


def test_cases_and_run_case_give_the_cli_rows(tmp_path):
    expected = cli_rows(tmp_path, "--capacity", "8GiB")
    cs = vramlab.cases(TRACES, GRID, capacity="8GiB")
    assert len(cs) == len(expected) == len(TRACES) * len(GRID)
    assert [c.index for c in cs] == list(range(len(cs)))
    assert [vramlab.run_case(c) for c in cs] == alone(expected)
    assert vramlab.Rows(vramlab.run_case(c) for c in cs) == expected
    assert any(r["same_as"] for r in expected), "the grid has settings that change nothing here"
    # Picklable, small, and the ids unique and stable.
    assert pickle.loads(pickle.dumps(cs)) == cs
    assert len({c.id for c in cs}) == len(cs)
    assert [c.id for c in vramlab.cases(TRACES, GRID, capacity="8GiB")] == [c.id for c in cs]
    # The id changes with what changes the row.
    other = vramlab.cases(TRACES, GRID, capacity="4GiB")
    assert not {c.id for c in other} & {c.id for c in cs}


def test_a_copied_trace_keeps_its_ids_and_a_changed_one_does_not(tmp_path):
    a = tmp_path / "a" / "t.csv"
    b = tmp_path / "b" / "t.csv"
    a.parent.mkdir()
    b.parent.mkdir()
    shutil.copy(TRACES[2], a)
    shutil.copy(TRACES[2], b)
    assert [c.id for c in vramlab.cases(a, GRID)] == [c.id for c in vramlab.cases(b, GRID)]
    both = vramlab.cases([a, b], GRID)
    assert len({c.id for c in both}) == len(both), "listed twice: still unique"
    b.write_text(b.read_text().replace("83886080", "83886592"))
    assert not {c.id for c in vramlab.cases(b, GRID)} & {c.id for c in vramlab.cases(a, GRID)}


def test_a_process_pool_gives_the_cli_rows(tmp_path):
    expected = cli_rows(tmp_path)
    with concurrent.futures.ProcessPoolExecutor(max_workers=2) as ex:
        rows = vramlab.sweep(TRACES, GRID, executor=ex)
    assert rows == expected
    assert rows == vramlab.sweep(TRACES, GRID)


def test_a_pool_with_map_works_too(tmp_path):
    import multiprocessing

    expected = cli_rows(tmp_path)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        assert vramlab.sweep(TRACES, GRID, executor=pool) == expected


def test_a_dask_local_cluster_gives_the_cli_rows(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    expected = cli_rows(tmp_path)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            rows = vramlab.sweep(TRACES, GRID, executor=client.get_executor())
            futures = client.map(vramlab.run_case, vramlab.cases(TRACES, GRID))
            mapped = client.gather(futures)
    assert rows == expected
    assert mapped == alone(expected)
    assert vramlab.Rows(mapped) == expected


def test_parquet_round_trip_and_merging_parts(tmp_path):
    pytest.importorskip("pyarrow")
    cs = vramlab.cases(TRACES, GRID)
    rows = vramlab.sweep(TRACES, GRID)
    half = len(cs) // 2
    part1 = vramlab.Rows(vramlab.run_case(c) for c in cs[:half])
    part2 = vramlab.Rows(vramlab.run_case(c) for c in cs[half - 1 :])  # overlaps by one
    part1.to_parquet(tmp_path / "p1.parquet")
    part2.to_parquet(tmp_path / "p2.parquet")
    merged = vramlab.read_rows([tmp_path / "p2.parquet", tmp_path / "p1.parquet"])
    assert merged == rows
    import pyarrow.parquet as pq

    meta = pq.read_table(tmp_path / "p1.parquet").schema.metadata
    assert meta[b"vramlab_rows_schema"] == b"2"
    assert [f.name for f in pq.read_table(tmp_path / "p1.parquet").schema] == [n for n, _ in vramlab.ROW_COLUMNS]


def test_cli_shards_read_back_as_the_same_rows(tmp_path):
    grid = tmp_path / "grid.txt"
    grid.write_text("".join(f"{g}\n" for g in GRID))
    exe = vramlab_exe()
    parts = []
    for k in (1, 2, 3):
        p = tmp_path / f"part{k}.csv"
        subprocess.run(
            [exe, "sweep", *map(str, TRACES), "--grid", str(grid), "--shard", f"{k}/3", "--csv", str(p), "--quiet"],
            check=True,
            capture_output=True,
        )
        parts.append(p)
    merged = vramlab.read_rows(parts)
    rows = vramlab.sweep(TRACES, GRID)
    # CSV keeps utilization to 6 decimals and driver time to 0.1 us.
    for a, b in zip(merged, rows):
        assert a["utilization"] == pytest.approx(b["utilization"], abs=1e-6)
        assert a["device_time_us"] == pytest.approx(b["device_time_us"], abs=0.05)
        assert {k: v for k, v in a.items() if k not in ("utilization", "device_time_us")} == {
            k: v for k, v in b.items() if k not in ("utilization", "device_time_us")
        }


def test_conflicting_parts_and_bad_cases_are_clear_errors(tmp_path):
    rows = vramlab.sweep(TRACES[2], GRID)
    bad = [dict(r) for r in rows]
    bad[0]["peak_reserved_bytes"] += 1
    (tmp_path / "a.json").write_text(json.dumps(rows))
    (tmp_path / "b.json").write_text(json.dumps(bad))
    with pytest.raises(vramlab.VramlabError, match="row 0 differs"):
        vramlab.read_rows([tmp_path / "a.json", tmp_path / "b.json"])
    with pytest.raises(TypeError, match="files that the workers can read"):
        vramlab.cases({"segments": []}, GRID)
    with pytest.raises(TypeError, match="vramlab.Case"):
        vramlab.run_case({"index": 0})
    gone = tmp_path / "gone.csv"
    shutil.copy(TRACES[2], gone)
    case = vramlab.cases(gone, GRID)[0]
    gone.unlink()
    with pytest.raises(vramlab.VramlabError, match="gone.csv"):
        vramlab.run_case(case)


def test_policy_names_the_policy_of_every_line():
    cs = vramlab.cases(TRACES[2], ["", "allow_growth:true"], policy="bfc")
    assert [c.grid_line for c in cs] == ["policy=bfc default", "policy=bfc allow_growth:true"]
    assert [c.setting for c in cs] == [r["setting"] for r in vramlab.sweep(TRACES[2], ["policy=bfc", "policy=bfc allow_growth:true"])]


def test_the_fleet_report(tmp_path):
    ranks = []
    for r in range(4):
        p = tmp_path / f"job.rank{r}.csv"
        text = TRACES[2].read_text()
        if r == 3:
            text = text.replace("31457280", "52428800")  # the last rank holds more
        p.write_text(text)
        ranks.append(p)
    rows = vramlab.sweep(ranks, ["default", "expandable_segments:True"], capacity="256MiB")
    rep = vramlab.fleet_report(rows, within=0.10)
    assert rep.traces == 4
    assert rep.best_setting.grid_line == "expandable_segments:True"
    assert rep.best_setting.saved_bytes > 0
    assert [n.trace for n in rep.near_card] == sorted(p.name for p in ranks)
    (job,) = rep.ranks
    assert job.job == "job.rank*.csv" and job.ranks == 4 and job.largest_rank == 3
    assert job.imbalance > 1.0


def test_best_is_a_pytorch_setting_and_designs_stand_apart():
    # direct (a device call per request, no cache) reserves the least on
    # every trace; it is a design nobody can export, so it is never "best".
    rows = vramlab.sweep(TRACES, ["default", "expandable_segments:True", "policy=direct"])
    rep = vramlab.fleet_report(rows)
    assert not rep.best_setting.grid_line.startswith("policy=")
    assert [d.grid_line for d in rep.designs] == ["policy=direct default"]
    direct = rep.designs[0]
    assert direct.saved_bytes > rep.best_setting.saved_bytes
    assert direct.device_calls > sum(r["num_device_alloc"] + r["num_device_free"] for r in rows if r["grid_line"] == "default")
    assert all(s.grid_line in ("expandable_segments:True",) for s in rep.settings)
