"""Issue 20, part 1: GPU scripts recorded unchanged by ``python -m vramlab_record.cpu``.

Runs without a GPU (torch, transformers needed; skipped without them):

    cd workloads/record && python -m pytest tests -q
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def record(tmp_path, body: str, *flags: str):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    out = tmp_path / "out.csv"
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "vramlab_record.cpu", *flags, "-o", str(out), "--", str(script)],
                       cwd=HERE, env=env, capture_output=True, text=True, timeout=600)
    events = []
    if out.exists():
        for line in out.read_text().splitlines():
            if line.startswith(("alloc,", "free,")):
                action, i, size = line.split(",")[:3]
                events.append((action, int(i), int(size) if size else None))
    return p, events


def allocs(events):
    return [size for action, _, size in events if action == "alloc"]


def test_cuda_device_and_host_side(tmp_path):
    p, ev = record(tmp_path, """
        import torch, torch.nn as nn
        model = nn.Linear(256, 512).cuda()            # built on the host: not GPU memory
        x = torch.randn(4, 256, device="cuda")
        host = torch.randn(1000, 1000)                 # host tensor: not recorded
        y = model(x).cpu()                             # host copy: not recorded
        torch.cuda.synchronize()
        print("ok", y.shape)
    """)
    assert p.returncode == 0, p.stderr
    sizes = allocs(ev)
    assert 4_000_000 not in sizes  # the host tensor
    assert sizes[:3] == [512 * 256 * 4, 512 * 4, 4 * 256 * 4]  # weight, bias (device copies), x


def test_tied_weights_stay_tied(tmp_path):
    pytest.importorskip("transformers")
    p, ev = record(tmp_path, """
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
        c = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
        m = LlamaForCausalLM(c).to("cuda", torch.bfloat16)
        assert m.lm_head.weight is m.model.embed_tokens.weight
    """)
    assert p.returncode == 0, p.stderr
    assert allocs(ev).count(1000 * 64 * 2) == 1


def test_cuda_autocast_matches_pytorch():
    pytest.importorskip("transformers")
    env = dict(os.environ, PYTHONPATH=HERE)
    p = subprocess.run([sys.executable, "-m", "vramlab_record.check_autocast", "--layers", "1"], cwd=HERE,
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("identical") == 2


def test_sdpa_every_mode_forward_backward(tmp_path):
    p, ev = record(tmp_path, """
        import torch, torch.nn.functional as F
        def run(b, hq, hk, lq, lk, d, dtype, mask=None, p=0.0, causal=False):
            q = torch.randn(b, hq, lq, d, device="cuda", dtype=dtype, requires_grad=True)
            k = torch.randn(b, hk, lk, d, device="cuda", dtype=dtype, requires_grad=True)
            v = torch.randn(b, hk, lk, d, device="cuda", dtype=dtype, requires_grad=True)
            m = torch.ones(lq, lk, device="cuda", dtype=torch.bool).tril() if mask else None
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=p, is_causal=causal,
                                               enable_gqa=hq != hk)
            o.float().sum().backward()
        run(2, 8, 2, 128, 128, 64, torch.bfloat16, p=0.1, causal=True)   # flash
        run(2, 8, 8, 100, 100, 64, torch.float16, mask=True, p=0.1)      # efficient, padded mask
        run(2, 8, 8, 128, 128, 64, torch.float32, p=0.1)                 # efficient fp32
        run(2, 8, 2, 128, 128, 64, torch.bfloat16, mask=True, p=0.1)     # math (masked GQA)
        run(1, 4, 4, 16, 128, 64, torch.bfloat16, causal=True)           # causal, unequal lengths
        print("ok")
    """)
    assert p.returncode == 0, p.stderr
    assert "ok" in p.stdout


def test_generate_runs_to_max_new_tokens(tmp_path):
    pytest.importorskip("transformers")
    p, ev = record(tmp_path, """
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
        c = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, eos_token_id=2)
        m = LlamaForCausalLM(c).to("cuda", torch.bfloat16).eval()
        ids = torch.randint(0, 1000, (2, 16), device="cuda")
        out = m.generate(ids, max_new_tokens=12, do_sample=False)
        assert out.shape == (2, 28), out.shape
        print("ok")
    """)
    assert p.returncode == 0, p.stderr
    assert "ok" in p.stdout and "typical-data policy" in p.stderr


def test_data_dependent_error_names_line_and_assume_answers(tmp_path):
    body = """
        import torch
        x = torch.randn(64, 64, device="cuda")
        print(f"loss {(x * x).mean().item():.3f}")   # a float read: 0.0
        n = int((x > 0).sum())
        y = torch.empty(n, device="cuda")
        idx = torch.nonzero(x > 0)
        print("ok", n, tuple(idx.shape))
    """
    p, _ = record(tmp_path, body)
    assert p.returncode != 0
    assert "aten._local_scalar_dense" in p.stderr and "script.py:5" in p.stderr
    assert "--assume script.py:5=VALUE" in p.stderr
    p, ev = record(tmp_path, body, "--assume", "script.py:5=2048", "--assume", "nonzero=0.25")
    assert p.returncode == 0, p.stderr
    assert "ok 2048 (1024, 2)" in p.stdout
    assert 2048 * 4 in allocs(ev) and 1024 * 2 * 8 in allocs(ev)


def test_graph_captures_and_mempools_write_pool_events(tmp_path):
    """Issue 27: torch.cuda.graph / CUDAGraph / graph_pool_handle / MemPool /
    use_mem_pool write the trace's pool events (format v2), the captured
    allocations on the capture stream."""
    p, _ = record(tmp_path, """
        import torch, torch.nn as nn
        model = nn.Linear(1024, 4096).cuda().half()
        pool = torch.cuda.graph_pool_handle()
        keep = []
        with torch.no_grad():
            for b in (8, 1):
                x = torch.zeros(b, 1024, device="cuda", dtype=torch.half)
                model(x)                                 # eager warm-up
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=pool):
                    y = model(x)
                g.replay()
                keep.append((g, x, y))
            mp = torch.cuda.MemPool(use_on_oom=True)
            with torch.cuda.use_mem_pool(mp):
                buf = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
            del buf, mp
    """)
    assert p.returncode == 0, p.stderr
    lines = (tmp_path / "out.csv").read_text().splitlines()
    assert lines[0] == "# vramlab trace v2"
    assert "# pool.p0: graph 0,1" in lines
    assert "# pool.p1: mempool 0,2 use_on_oom" in lines
    body = [line for line in lines if not line.startswith("#")]
    rows = [line.split(",") for line in body[1:]]
    actions = [r[0] for r in rows if r[0] not in ("alloc", "free")]
    assert actions[:6] == ["empty_cache", "capture_begin", "capture_end", "empty_cache", "capture_begin", "capture_end"]
    assert actions[6:10] == ["pool_create", "pool_enter", "pool_exit", "pool_release"]
    # The captured forward allocates on the capture stream, the eager one on 0.
    begin = next(i for i, r in enumerate(rows) if r[0] == "capture_begin")
    end = next(i for i, r in enumerate(rows) if r[0] == "capture_end")
    assert rows[begin][3] == "1"
    captured = [r for r in rows[begin:end] if r[0] == "alloc"]
    assert captured and all(r[3] == "1" for r in captured)
    assert all(r[3] == "0" for r in rows[:begin] if r[0] == "alloc")
