"""workloads/record/torch_replay.py (which replays a trace through PyTorch's
own allocator on a GPU, the judge of vramlab's exactness claims) reads a
snapshot, device by device, as the requests ``vramlab convert --start
fresh`` writes: the GPU comparison and vramlab replay the same thing.
Needs no torch (only the readers are used)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT.parent / "shared" / "traces" / "real"
sys.path.insert(0, str(ROOT / "workloads" / "record"))

import torch_replay  # noqa: E402


def vramlab_exe() -> str:
    exe = Path(sys.executable).with_name("vramlab")
    return str(exe) if exe.exists() else "vramlab"


def requests(events):
    """(kind, id, size) of allocations and frees, in order."""
    return [(k, i, s if k == torch_replay.ALLOC else 0) for k, i, s, _ in events if k != torch_replay.EMPTY_CACHE]


@pytest.mark.parametrize(
    "path", sorted(REAL.glob("*.pickle")) if REAL.is_dir() else [], ids=lambda p: p.name
)
def test_fresh_start_reads_alike(path, tmp_path):
    out = tmp_path / "dev{device}.csv"
    subprocess.run(
        [vramlab_exe(), "convert", str(path), str(out), "--start", "fresh"],
        check=True,
        capture_output=True,
    )
    converted = sorted(tmp_path.glob("dev*.csv"))
    assert converted, "convert wrote nothing"
    for csv_path in converted:
        device = int(csv_path.stem[3:]) if csv_path.stem[3:].isdigit() else None
        _, from_csv = torch_replay.read_csv_trace(str(csv_path))
        _, from_snapshot = torch_replay.read_trace(str(path), device, vramlab_exe())
        assert requests(from_snapshot) == requests(from_csv), csv_path.name
