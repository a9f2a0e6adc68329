"""Issue 31: sharded training scripts recorded on a CPU as one rank of a fake
world (FSDP2, FSDP1, DDP, tensor parallel) and job folders.

Pinned figures are those of torch 2.15 (CI's recorder environment); the
scripts are ``examples/sharded/``. Runs without a GPU:

    cd workloads/record && python -m pytest tests/test_sharded.py -q
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.fsdp")

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(HERE, "examples", "sharded")
PINNED = torch.__version__.startswith("2.15")


def run(*args: str):
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "vramlab_record.cpu", *args], cwd=HERE, env=env,
                          capture_output=True, text=True, timeout=600)


def read(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    header, events = {}, []
    with opener(path, "rt") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# ") and ": " in line:
                k, _, v = line[2:].partition(": ")
                header[k] = v
            elif line and not line.startswith(("#", "action,")):
                events.append(line.split(","))
    return header, events


def stats(path):
    header, events = read(path)
    allocs = [e for e in events if e[0] == "alloc"]
    return {
        "allocs": len(allocs),
        "peak": int(header["peak_live_bytes"]),
        "streams": sorted({int(e[3]) for e in allocs}),
        "deferred": sum(1 for e in events if e[0] == "free_requested"),
        "completed": sum(1 for e in events if e[0] == "free_completed"),
        "sizes": [int(e[2]) for e in allocs],
        "header": header,
    }


def record(tmp_path, script, world, rank, *script_args):
    out = tmp_path / f"{script}-{world}-{rank}.csv"
    p = run("--world-size", str(world), "--rank", str(rank), "-o", str(out), "--",
            os.path.join(EXAMPLES, script + ".py"), *script_args)
    assert p.returncode == 0, p.stderr[-3000:]
    return stats(out)


def pin(got, want):
    if os.environ.get("VRAMLAB_REPIN"):
        print("PIN", got)
    elif PINNED:
        assert got == want


def test_fsdp2_rank_of_eight(tmp_path):
    s = record(tmp_path, "fsdp2_mlp", 8, 0)
    h = s["header"]
    assert (h["world_size"], h["rank"], h["process_groups"]) == ("8", "0", "8")
    # One communicator: 2 ring peers x 16 channels x 4 MiB.
    assert h["outside_allocator_bytes"] == str(2 * 16 * 4 * 2**20)
    # Default stream, FSDP2's all-gather copy-in stream (all-gather buffers)
    # and its reduce-scatter stream (reduce-scatter inputs and outputs).
    assert s["streams"] == [0, 1, 3]
    # The full weights are moved to the device before fully_shard shards
    # them: the first allocation is a whole 4096 x 1024 fp32 weight.
    assert s["sizes"][0] == 4096 * 1024 * 4
    pin((s["allocs"], s["peak"]), (310, 520146952))


def test_fsdp2_options_move_the_peak(tmp_path):
    base = record(tmp_path, "fsdp2_mlp", 8, 0, "--layers", "6")
    keep = record(tmp_path, "fsdp2_mlp", 8, 0, "--layers", "6", "--no-reshard")
    offload = record(tmp_path, "fsdp2_mlp", 8, 0, "--layers", "6", "--offload")
    # Without resharding after forward, the unsharded bf16 parameters of
    # every block stay until backward.
    assert keep["peak"] > base["peak"]
    # Offloaded: sharded parameters, gradients and optimizer states on the host.
    assert offload["peak"] < base["peak"]
    pin((base["peak"], keep["peak"], offload["peak"]), (696323080, 797025288, 671141896))


def test_uneven_shards_make_a_job_with_two_traces(tmp_path):
    job = tmp_path / "job"
    p = run("--world-size", "3", "--ranks", "all", "-o", str(job), "--", os.path.join(EXAMPLES, "fsdp2_mlp.py"),
            "--steps", "1")
    assert p.returncode == 0, p.stderr[-3000:]
    manifest = json.loads((job / "job.json").read_text())
    assert manifest["vramlab_job"] == 1 and manifest["world_size"] == 3
    # 1024 rows do not split in 3: rank 2's shard is shorter, padded.
    assert manifest["ranks"] == [
        {"rank": 0, "trace": "rank0.csv.gz"},
        {"rank": 1, "same_as": 0, "basis": "recorded"},
        {"rank": 2, "trace": "rank2.csv.gz"},
    ]
    assert sorted(os.listdir(job)) == ["job.json", "rank0.csv.gz", "rank2.csv.gz"]
    assert manifest["outside_allocator"]["bytes"] == 2 * 16 * 4 * 2**20


def test_ranks_not_recorded_are_assumed(tmp_path):
    job = tmp_path / "job"
    p = run("--world-size", "4", "--ranks", "0", "-o", str(job), "--", os.path.join(EXAMPLES, "fsdp2_mlp.py"),
            "--steps", "1", "--layers", "1")
    assert p.returncode == 0, p.stderr[-3000:]
    ranks = json.loads((job / "job.json").read_text())["ranks"]
    assert ranks[1:] == [{"rank": r, "same_as": 0, "basis": "assumed"} for r in (1, 2, 3)]


def test_fsdp1_record_stream_defers_frees(tmp_path):
    s = record(tmp_path, "fsdp1_mlp", 4, 1)
    # FSDP1 records the reduce-scatter's buffers on other streams: their
    # frees wait for the streams to synchronise.
    assert s["deferred"] > 0 and s["deferred"] == s["completed"]
    pin((s["allocs"], s["deferred"], s["peak"]), (123, 18, 612459528))


def test_ddp_buckets(tmp_path):
    s = record(tmp_path, "ddp_mlp", 4, 1)
    params = (1024 * 4096 + 4096 + 4096 * 1024 + 1024) * 4
    # The initial broadcast's flat bucket, then the reducer's one bucket of
    # every gradient, then (second forward) the rebuilt buckets: the first
    # capped at 1 MiB, so the last layer's gradients, then the rest.
    assert s["sizes"][4:6] == [params, params]
    assert 4096 * 1024 * 4 + 1024 * 4 in s["sizes"]
    pin((s["allocs"], s["peak"]), (38, 202063880))


def test_tensor_parallel_shards(tmp_path):
    s = record(tmp_path, "tp_mlp", 4, 1)
    # ColwiseParallel: rank 1 keeps 1024 of up's 4096 output rows.
    assert 1024 * 1024 * 4 in s["sizes"]
    pin((s["allocs"], s["peak"]), (57, 113287168))


def test_world_of_one(tmp_path):
    s = record(tmp_path, "fsdp2_mlp", 1, 0, "--steps", "1")
    assert s["header"]["outside_allocator_bytes"] == "0"
    assert s["allocs"] > 0


@pytest.mark.parametrize("args,message", [
    (["--world-size", "4", "--rank", "4"], "outside the world of 4 ranks"),
    (["--rank", "1"], "need --world-size"),
    (["--world-size", "4", "--ranks", "0,9"], "rank 9 is outside the world of 4"),
    (["--world-size", "4", "--ranks", "x"], "'x' is not a rank"),
])
def test_bad_world_arguments(tmp_path, args, message):
    p = run(*args, "-o", str(tmp_path / "o"), "--", os.path.join(EXAMPLES, "fsdp2_mlp.py"))
    assert p.returncode != 0
    assert message in p.stderr


def test_a_users_fsdp2_script_with_a_dataloader(tmp_path):
    """A script as people write it: meta-device init, fully_shard without a
    mesh (FSDP2's default mesh), to_empty on cuda:LOCAL_RANK, a DataLoader
    with a DistributedSampler, the loss all-reduced for logging and read
    with .item()."""
    script = tmp_path / "train.py"
    script.write_text('''
import os, torch, torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torch.distributed.fsdp import fully_shard
from transformers import AutoConfig, AutoModelForCausalLM

class Tokens(Dataset):
    def __len__(self): return 32
    def __getitem__(self, i): return torch.randint(0, 1000, (128,))

local_rank = int(os.environ["LOCAL_RANK"])
device = torch.device(f"cuda:{local_rank}")
torch.cuda.set_device(device)
dist.init_process_group(backend="nccl", device_id=device)
cfg = AutoConfig.for_model("llama", vocab_size=1000, hidden_size=256, intermediate_size=512,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
with torch.device("meta"):
    model = AutoModelForCausalLM.from_config(cfg)
for layer in model.model.layers:
    fully_shard(layer)
fully_shard(model)
model.to_empty(device=device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = Tokens()
for step, batch in enumerate(DataLoader(data, batch_size=2, sampler=DistributedSampler(data))):
    batch = batch.to(device)
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    logged = loss.detach().clone()
    dist.all_reduce(logged, op=dist.ReduceOp.AVG)
    if dist.get_rank() == 0:
        print(f"step {step} loss {logged.item():.3f}")
    if step == 1:
        break
dist.destroy_process_group()
''')
    out = tmp_path / "rank0.csv"
    p = run("--world-size", "8", "--rank", "0", "-o", str(out), "--", str(script))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "step 1 loss" in p.stdout
    s = stats(out)
    assert s["streams"] == [0, 1, 3]
    assert s["allocs"] > 100


def test_a_failing_rank_leaves_no_job(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text(
        "import os, torch, torch.distributed as dist\n"
        "dist.init_process_group('nccl')\n"
        "x = torch.ones(1024, device='cuda')\n"
        "if os.environ['RANK'] == '1':\n"
        "    raise RuntimeError('rank one fails')\n")
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.json").write_text('{"stale": true}')
    p = run("--world-size", "2", "--ranks", "all", "-o", str(job), "--", str(script))
    assert p.returncode != 0
    assert "rank 1 failed" in p.stderr and "rank one fails" in p.stderr
    assert os.listdir(job) == []


def test_subgroups_count_only_this_ranks_communicators(tmp_path):
    script = tmp_path / "groups.py"
    script.write_text(
        "import torch.distributed as dist\n"
        "dist.init_process_group('nccl')\n"
        "groups = [dist.new_group(list(range(i, i + 2))) for i in range(0, 8, 2)]\n")
    out = tmp_path / "r.csv"
    p = run("--world-size", "8", "--rank", "3", "-o", str(out), "--", str(script))
    assert p.returncode == 0, p.stderr[-3000:]
    header, _ = read(out)
    # The world's group and the pair {2, 3}: two communicators of 128 MiB.
    assert header["process_groups"] == "8 2"
    assert header["outside_allocator_bytes"] == str(2 * 128 * 2**20)
