"""Pinned host memory the way offloading tools use it, run with this
process's torch on vramlab's fake CUDA device, so that PyTorch's own pinned
host caching allocator can be judged against vramlab's model of it
(docs/host-allocator-spec.md; replay/tests/host_oracle.rs;
docs/results/pinned-host-offload.md).

    bash scripts/oracle_experiments/run.sh 2.15 host_offload.py driver SCENARIO \\
        [--scale F] [--steps N] [--out RESULT.json] [--record SNAPSHOT.pickle]
    bash scripts/oracle_experiments/run.sh 2.15 host_offload.py driver --list

Every scenario imitates one tool's pinned memory: what it pins, in which
order, how it copies (non_blocking copies make PyTorch record an event on
the copy's stream when the block is freed) and when it synchronizes. The
shapes are those of real models divided by 8 in each dimension at the
default --scale 1/64, so every weight matrix is exactly 1/64 of the real
one and rounds up to the same power-of-two ratio; thresholds of 1 MiB at
this scale stand for 64 MiB at full size. --scale F multiplies every
size by F*64 (for matrices: each dimension by sqrt(F*64)).

Nothing in torch is patched: the script notes each size it asks PyTorch to
pin (`requested`, and the `log` the driver uses to put
`host_empty_cache` lines into the converted trace), and reads
`torch.cuda.host_memory_stats()`: after every pin (the peak of
`allocated_bytes.current` and of `active_bytes.current`, and the whole
dict at the first pin that reached the final `allocated_bytes.peak`), and
at the end, printed as the last line of stdout.

--record (2.14+): records `_record_memory_history(...,
record_pinned_host_memory=True, record_cuda=False)` and dumps the
snapshot; with PYTORCH_ALLOC_CONF=pinned_max_round_threshold_mb:0,
pinned_max_cached_size_mb:0 every block is exactly its request and is
never cached, so the snapshot's `alloc` sizes are the requests. In record
mode the number of host trace entries before and after each
`_host_emptyCache()` is logged (the history has no entry for that call).

The fake device should run with VRAMLAB_FAKECUDA_EVENTS=sync (events
complete when their stream, the event or the device is synchronized, as on
a GPU that is still busy), as scripts/oracle_experiments/host_offload.sh
does; the output names the fake's settings.
"""

import argparse
import json
import math
import os
import random
import sys
import weakref

try:
    import torch
except ImportError:  # --csv needs no torch
    torch = None

MIB = 1 << 20
BF16 = torch.bfloat16 if torch else None
FP32 = torch.float32 if torch else None


class Host:
    """The pins of one run: each size asked for, when it is freed, and
    PyTorch's host statistics after each pin."""

    def __init__(self, record):
        self.record = record
        self.log = []  # ["pin", id, bytes, how] / ["free", id] / ["empty_cache", n0, n1] / ["sync", what]
        self.next_id = 0
        self.live = {}  # id -> bytes
        self.requested = 0
        self.requested_peak = 0
        self.pins = 0
        self.max_current = -1
        self.max_active = 0
        self.at_peak = None

    # -- pins -------------------------------------------------------------

    def _noted(self, t, nbytes, how):
        pid = self.next_id
        self.next_id += 1
        self.pins += 1
        self.log.append(["pin", pid, nbytes, how])
        if nbytes > 0:
            self.live[pid] = nbytes
            self.requested += nbytes
            self.requested_peak = max(self.requested_peak, self.requested)
            weakref.finalize(t, self._freed, pid)
        self._sample(len(self.log) - 1)
        return t

    def _freed(self, pid):
        self.log.append(["free", pid])
        self.requested -= self.live.pop(pid)

    def _sample(self, at):
        s = torch.cuda.host_memory_stats()
        cur = s.get("allocated_bytes.current", 0)
        self.max_active = max(self.max_active, s.get("active_bytes.current", 0))
        if cur > self.max_current:
            self.max_current = cur
            self.at_peak = {"log_index": at, "stats": s}

    def empty(self, shape, dtype, how="empty"):
        """torch.empty(shape, dtype, pin_memory=True)."""
        t = torch.empty(shape, dtype=dtype, pin_memory=True)
        return self._noted(t, t.numel() * t.element_size(), how)

    def empty_strided(self, shape, stride, dtype):
        """torch.empty_strided(..., pin_memory=True) (vLLM's maybe_offload_to_cpu)."""
        t = torch.empty_strided(shape, stride, dtype=dtype, device="cpu", pin_memory=True)
        span = (sum((n - 1) * s for n, s in zip(shape, stride)) + 1) if all(shape) else 0
        return self._noted(t, span * t.element_size(), "empty_strided")

    def pin_memory(self, cpu):
        """cpu.pin_memory(): a pinned copy of a pageable CPU tensor (R1.5: the
        byte span of the view)."""
        span = (sum((n - 1) * s for n, s in zip(cpu.shape, cpu.stride())) + 1) if cpu.numel() else 0
        return self._noted(cpu.pin_memory(), span * cpu.element_size(), "pin_memory")

    def to_cpu(self, gpu):
        """gpu.to("cpu", non_blocking=True): PyTorch pins the destination
        (`_to_copy`) and records an event on the current stream when it is
        freed. `gpu` must be contiguous."""
        assert gpu.is_contiguous()
        t = gpu.to("cpu", non_blocking=True)
        return self._noted(t, gpu.numel() * gpu.element_size(), "to_cpu")

    # -- other calls ------------------------------------------------------

    def _entries(self):
        if not self.record:
            return None
        return len(torch.cuda.memory._snapshot().get("host_traces", []))

    def empty_cache(self):
        n0 = self._entries()
        torch._C._host_emptyCache()
        n1 = self._entries()
        self.log.append(["empty_cache", n0, n1])

    def synchronize(self):
        torch.cuda.synchronize()
        self.log.append(["sync", "device"])

    def sync_stream(self, stream, name):
        stream.synchronize()
        self.log.append(["sync", name])


def h2d(t, stream=None):
    """t.to("cuda", non_blocking=True) on `stream` (default: the current one)."""
    if stream is None:
        return t.to("cuda", non_blocking=True)
    with torch.cuda.stream(stream):
        return t.to("cuda", non_blocking=True)


def d2h_into(dst, gpu, stream=None):
    """dst.copy_(gpu, non_blocking=True): a download into a pinned buffer."""
    if stream is None:
        dst.copy_(gpu, non_blocking=True)
    else:
        with torch.cuda.stream(stream):
            dst.copy_(gpu, non_blocking=True)


class Size:
    """Sizes at a scale: `d(n)` a dimension, `b(n)` a byte count."""

    def __init__(self, scale):
        self.scale = scale
        self.f = math.sqrt(scale)

    def d(self, n):
        return max(1, round(n * self.f))

    def b(self, n):
        return max(1, round(n * self.scale))


# -- model shapes (real sizes; rows x cols of each parameter, registration order)


def qwen25_7b_layer():
    # Qwen2.5-7B (sglang / vLLM Qwen2DecoderLayer: merged qkv_proj with bias,
    # merged gate_up_proj), bf16.
    h, inter, kv = 3584, 18944, 4 * 128
    return [
        ("self_attn.qkv_proj.weight", (h + 2 * kv, h)),
        ("self_attn.qkv_proj.bias", (h + 2 * kv,)),
        ("self_attn.o_proj.weight", (h, h)),
        ("mlp.gate_up_proj.weight", (2 * inter, h)),
        ("mlp.down_proj.weight", (h, inter)),
        ("input_layernorm.weight", (h,)),
        ("post_attention_layernorm.weight", (h,)),
    ]


def llama31_8b_layer():
    # Llama-3.1-8B in vLLM (QKVParallelLinear, MergedColumnParallelLinear), bf16.
    h, inter, kv = 4096, 14336, 8 * 128
    return [
        ("self_attn.qkv_proj.weight", (h + 2 * kv, h)),
        ("self_attn.o_proj.weight", (h, h)),
        ("mlp.gate_up_proj.weight", (2 * inter, h)),
        ("mlp.down_proj.weight", (h, inter)),
        ("input_layernorm.weight", (h,)),
        ("post_attention_layernorm.weight", (h,)),
    ]


def qwen3_30b_a3b_layer():
    # Qwen3-30B-A3B in sglang (fused experts w13/w2: 128 experts), bf16.
    h, q, kv, moe, e = 2048, 32 * 128, 4 * 128, 768, 128
    return [
        ("self_attn.qkv_proj.weight", (q + 2 * kv, h)),
        ("self_attn.o_proj.weight", (h, q)),
        ("self_attn.q_norm.weight", (128,)),
        ("self_attn.k_norm.weight", (128,)),
        ("mlp.gate.weight", (e, h)),
        ("mlp.experts.w13_weight", (e, 2 * moe, h)),
        ("mlp.experts.w2_weight", (e, h, moe)),
        ("input_layernorm.weight", (h,)),
        ("post_attention_layernorm.weight", (h,)),
    ]


def qwen25_15b_layer():
    # Qwen2.5-1.5B as Hugging Face builds it (separate q/k/v with bias), fp32.
    h, inter, kv = 1536, 8960, 2 * 128
    return [
        ("self_attn.q_proj.weight", (h, h)),
        ("self_attn.q_proj.bias", (h,)),
        ("self_attn.k_proj.weight", (kv, h)),
        ("self_attn.k_proj.bias", (kv,)),
        ("self_attn.v_proj.weight", (kv, h)),
        ("self_attn.v_proj.bias", (kv,)),
        ("self_attn.o_proj.weight", (h, h)),
        ("mlp.gate_proj.weight", (inter, h)),
        ("mlp.up_proj.weight", (inter, h)),
        ("mlp.down_proj.weight", (h, inter)),
        ("input_layernorm.weight", (h,)),
        ("post_attention_layernorm.weight", (h,)),
    ]


def scaled(shape, sz):
    """A parameter's shape at the scale: every dimension but an expert
    count (3-D fused experts keep their 128 experts, so the other two
    shrink by the matrix factor)."""
    if len(shape) == 3:
        e, r, c = shape
        return (e, sz.d(r), sz.d(c))
    return tuple(sz.d(n) for n in shape)


def contiguous_stride(shape):
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc)
        acc *= n
    return tuple(reversed(st))


def nbytes_of(shape, dtype):
    return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


# -- scenarios ------------------------------------------------------------


def cpu_offload_gb(host, sz, steps, layer, n_layers, offload_gb):
    """vLLM / sglang `--cpu-offload-gb` (maybe_offload_to_cpu): whole
    parameters, layer by layer from the first, are moved to pinned CPU
    memory (torch.empty_strided(..., pin_memory=True) + a blocking copy)
    until the budget is reached; every forward copies them to the GPU with
    `.to(device, non_blocking=True)` (functional_call) and drops the copies.
    One synchronize per decode step (the sampled tokens are read)."""
    budget = sz.b(offload_gb * (1 << 30))
    offloaded, done = [], 0
    for _ in range(n_layers):
        if done >= budget:
            break
        params = []
        for _name, shape in layer:
            if done >= budget:
                break
            shape = scaled(shape, sz)
            gpu = torch.empty(shape, dtype=BF16, device="cuda")
            cpu = host.empty_strided(shape, contiguous_stride(shape), BF16)
            cpu.copy_(gpu)
            params.append(cpu)
            done += nbytes_of(shape, BF16)
            del gpu
        offloaded.append(params)
    for _ in range(steps):
        for params in offloaded:
            on_gpu = [p.to("cuda", non_blocking=True) for p in params]
            del on_gpu
        host.synchronize()
    return {"offloaded_layers": len(offloaded), "offload_budget_bytes": budget}


def sglang_cpu_offload(host, sz, steps):
    """sglang --cpu-offload-gb 4 on Qwen2.5-7B (28 layers, bf16)."""
    return cpu_offload_gb(host, sz, steps, qwen25_7b_layer(), 28, 4)


def vllm_cpu_offload(host, sz, steps):
    """vLLM --cpu-offload-gb 4 on Llama-3.1-8B (32 layers, bf16)."""
    return cpu_offload_gb(host, sz, steps, llama31_8b_layer(), 32, 4)


def sglang_moe_layerwise(host, sz, steps):
    """sglang's layer-wise offloader (--offload-group-size 4
    --offload-num-in-group 1 --offload-prefetch-step 1) on Qwen3-30B-A3B,
    8 layers: every 4th layer's parameters live in pinned CPU memory; while
    layer i runs, the next offloaded layer is prefetched to the GPU with
    non_blocking copies on a side stream that the compute stream waits on."""
    layer = qwen3_30b_a3b_layer()
    n_layers, group = 8, 4
    pinned = {}
    for i in range(n_layers):
        if i % group == group - 1:
            ps = []
            for _name, shape in layer:
                shape = scaled(shape, sz)
                ps.append(host.pin_memory(torch.empty(shape, dtype=BF16)))
            pinned[i] = ps
    side = torch.cuda.Stream()
    offloaded = sorted(pinned)
    for _ in range(steps):
        ready = {}
        with torch.cuda.stream(side):
            ready[offloaded[0]] = [p.to("cuda", non_blocking=True) for p in pinned[offloaded[0]]]
        for i in range(n_layers):
            if i in ready:
                torch.cuda.current_stream().wait_stream(side)
                ready.pop(i)
                nxt = [j for j in offloaded if j > i]
                if nxt:
                    with torch.cuda.stream(side):
                        ready[nxt[0]] = [p.to("cuda", non_blocking=True) for p in pinned[nxt[0]]]
        host.synchronize()
    return {"offloaded_layers": offloaded}


def sglang_hicache(host, sz, steps):
    """sglang hierarchical cache (--enable-hierarchical-cache,
    --hicache-ratio 2): one pinned host KV pool twice the device pool
    (MHATokenToKVPoolHost: torch.empty((2, layers, tokens, heads, dim),
    pin_memory=True)), Qwen2.5-7B (28 layers, 4 KV heads of 128, bf16), a
    600k-token host pool at full size (here 1/1024 of it at the default
    scale: one pool, so the token count is what scales). Pages are written
    back and loaded with non_blocking copies per layer."""
    layers, heads, dim = 28, 4, 128
    tokens = max(1, round(600_000 * sz.scale / 16))
    pool = host.empty((2, layers, tokens, heads, dim), BF16)
    page = 64
    dev = torch.empty((2, layers, page, heads, dim), dtype=BF16, device="cuda")
    rng = random.Random(7)
    for _ in range(steps):
        for _ in range(4):
            start = rng.randrange(0, max(1, tokens - page))
            for layer in range(layers):
                d2h_into(pool[:, layer, start:start + page], dev[:, layer])
            _ = h2d(pool[:, 0, start:start + page])
        host.synchronize()
    return {"host_pool_tokens": tokens}


def vllm_kv_swap(host, sz, steps):
    """vLLM (V0) --swap-space 4 on Qwen2.5-7B: CacheEngine pins one CPU KV
    cache per layer (torch.zeros((2, num_cpu_blocks, 16, 4, 128), bf16,
    pin_memory=True)), with num_cpu_blocks = swap bytes // (bytes of one
    block in all 28 layers); preempted sequences' blocks are swapped out
    (GPU->CPU) and back in with non_blocking copies."""
    layers, block, heads, dim = 28, 16, 4, 128
    per_block_layer = 2 * block * heads * dim * 2
    swap = sz.b(4 << 30)
    num_blocks = swap // (per_block_layer * layers)
    caches = [host.empty((2, num_blocks, block, heads, dim), BF16) for _ in range(layers)]
    for c in caches:
        c.zero_()
    gpu = [torch.empty((2, 64, block, heads, dim), dtype=BF16, device="cuda") for _ in range(layers)]
    rng = random.Random(11)
    for _ in range(steps):
        n = rng.randrange(1, max(2, min(8, num_blocks)))
        dst = rng.randrange(0, max(1, num_blocks - n))
        for layer in range(layers):  # swap out
            d2h_into(caches[layer][:, dst:dst + n], gpu[layer][:, :n])
        host.synchronize()
        for layer in range(layers):  # swap in
            gpu[layer][:, :n].copy_(caches[layer][:, dst:dst + n], non_blocking=True)
        host.synchronize()
    return {"num_cpu_blocks": num_blocks}


def fsdp2_cpu_offload(host, sz, steps):
    """FSDP2 with CPUOffloadPolicy(pin_memory=True), Qwen2.5-1.5B (28
    layers, fp32), 8 ranks (this rank's dim-0 shards): each sharded
    parameter is pinned once (param.pin_memory()); forward copies the
    shards to the GPU non_blocking (all-gather input); backward copies each
    reduce-scattered gradient to the CPU on the reduce-scatter stream with
    .to("cpu", non_blocking=True) (pinned by PyTorch), records an event and
    synchronizes it before the CPU optimizer step; zero_grad(set_to_none)
    frees the gradients."""
    world = 8
    layers = []
    for _ in range(28):
        shards = []
        for _name, shape in qwen25_15b_layer():
            shape = scaled(shape, sz)
            rows = -(-shape[0] // world)
            sh = (rows,) + tuple(shape[1:])
            shards.append(host.pin_memory(torch.empty(sh, dtype=FP32)))
        layers.append(shards)
    rs = torch.cuda.Stream()
    for _ in range(steps):
        for shards in layers:  # forward: unshard
            gathered = [s.to("cuda", non_blocking=True) for s in shards]
            del gathered
        grads = []
        for shards in reversed(layers):  # backward: reduce-scatter, offload
            rs.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(rs):
                for s in shards:
                    g = torch.empty(s.shape, dtype=FP32, device="cuda")
                    grads.append(host.to_cpu(g))
                    del g
            ev = rs.record_event()
        ev.synchronize()
        host.log.append(["sync", "grad_offload_event"])
        for shards in layers:  # CPU optimizer step
            for s in shards:
                s.mul_(0.999)
        del grads  # zero_grad(set_to_none=True)
        torch.cuda.current_stream().synchronize()
        host.log.append(["sync", "current_stream"])
    return {"world": world}


def deepspeed_zero_offload(host, sz, steps):
    """DeepSpeed ZeRO-2 with offload_optimizer {device: cpu, pin_memory:
    true}, Qwen2.5-1.5B (1.54B parameters, bf16 training), 8 ranks: this
    rank's fp32 master partition of each parameter group (decay, no-decay)
    is pinned, and so is its fp32 gradient partition; a bf16 buffer the
    size of the largest parameter (the embedding) is pinned for gradient
    staging (temp_grad_buffer_for_cpu_offload). Each step copies gradients
    into the pinned partitions non_blocking, runs the CPU Adam step, and
    copies the updated weights back."""
    world = 8
    decay = 1_543_714_304 - 28 * (2 * 1536 + 1536 + 2 * 256) - 1536
    no_decay = 28 * (2 * 1536 + 1536 + 2 * 256) + 1536
    align = 2 * world
    parts = []
    for numel in (decay, no_decay):
        part = -(-numel // align) * align // world
        part = max(1, round(part * sz.scale))
        master = host.pin_memory(torch.empty(part, dtype=FP32))
        grad = host.pin_memory(torch.zeros(part, dtype=FP32))
        parts.append((master, grad))
    temp = host.pin_memory(torch.zeros(max(1, round(151936 * 1536 * sz.scale)), dtype=BF16))
    gpu_grads = [torch.empty(m.numel(), dtype=FP32, device="cuda") for m, _ in parts]
    for _ in range(steps):
        for (_m, g), gg in zip(parts, gpu_grads):
            d2h_into(g, gg)
        d2h_into(temp[: min(temp.numel(), 4096)], torch.empty(min(temp.numel(), 4096), dtype=BF16, device="cuda"))
        host.synchronize()
        for m, g in parts:
            m.add_(g, alpha=-1e-3)
        for m, _g in parts:
            _ = h2d(m)
        host.synchronize()
    return {"world": world}


def dataloader_text(host, sz, steps):
    """DataLoader(pin_memory=True) with dynamic padding: batches of 8
    sequences padded to the longest (a multiple of 64, 128..4096 tokens);
    input_ids, attention_mask and labels (int64) each pinned by the
    pin-memory thread (tensor.pin_memory()), up to 2 batches ahead of the
    step; the step copies them non_blocking and drops them; the loss is
    read every step (a synchronize)."""
    rng = random.Random(3)
    batch = max(1, round(8 * sz.scale * 64))

    def make():
        n = rng.choice([128, 256, 320, 512, 704, 1024, 1536, 2048, 2112, 4096])
        return [host.pin_memory(torch.zeros((batch, n), dtype=torch.int64)) for _ in range(3)]

    prefetched(host, make, steps)
    return {"batch": batch}


def prefetched(host, make, steps):
    """A DataLoader's pin-memory thread two batches ahead: each step copies
    the oldest batch non_blocking, pins the next, drops the old one and
    synchronizes."""
    ahead = [make(), make()]
    for _ in range(steps):
        b = ahead.pop(0)
        on_gpu = [h2d(t) for t in b]
        ahead.append(make())
        del b, on_gpu
        host.synchronize()


def dataloader_images(host, sz, steps):
    """DataLoader(pin_memory=True) of ImageNet batches: 32 images
    3x224x224 float32 (19.3 MB: a 32 MiB block) and 32 int64 labels,
    pinned 2 batches ahead (prefetch), copied non_blocking, dropped after
    the step; one synchronize per step."""
    side = sz.d(224)

    def make():
        return [
            host.pin_memory(torch.zeros((32, 3, side, side), dtype=FP32)),
            host.pin_memory(torch.zeros(32, dtype=torch.int64)),
        ]

    prefetched(host, make, steps)
    return {"image_side": side}


def activation_offload(host, sz, steps):
    """torch.autograd.graph.save_on_cpu(pin_memory=True) around a 4-layer
    bf16 MLP stack (Qwen2.5-7B widths, 1024 tokens): every tensor autograd
    saves, weights included, is copied to a fresh pinned tensor
    (torch.empty(..., pin_memory=True) + copy_) in forward and brought back
    with .to(device, non_blocking=True) in backward. The hooks are
    save_on_cpu's own, with the sizes noted."""
    h, inter, tokens = sz.d(3584), sz.d(18944), 1024
    layers = []
    for _ in range(4):
        layers.append((
            torch.nn.Linear(h, 2 * inter, bias=False, device="cuda", dtype=BF16),
            torch.nn.Linear(inter, h, bias=False, device="cuda", dtype=BF16),
        ))

    def pack(tensor):
        packed = host.empty(tensor.size(), tensor.dtype, how="save_on_cpu")
        packed.copy_(tensor)
        return (tensor.device, packed)

    def unpack(packed):
        device, t = packed
        return t.to(device, non_blocking=True)

    for _ in range(steps):
        x = torch.zeros((1, tokens, h), dtype=BF16, device="cuda", requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = x
            for up, down in layers:
                gu = up(y)
                g, u = gu.chunk(2, dim=-1)
                y = y + down(torch.nn.functional.silu(g) * u)
            loss = y.float().sum()
        loss.backward()
        del x, y, gu, g, u, loss
        host.synchronize()
    return {"hidden": h, "intermediate": inter, "tokens": tokens}


def pow2_straddle(host, sz, steps):
    """Sizes just around powers of two, freed and asked for again in
    another order: 2^k+1 and 2^k-1, 1.5*2^k, 0.75*2^k, 3*2^k+5, a 0-byte
    and a 1-byte pin; what a rounded cache reuses and an exact one
    cannot."""
    base = 1 << max(12, round(math.log2(max(1, sz.b(64 * MIB)))))
    sizes = [base + 1, base - 1, base * 3 // 2, base * 3 // 4, 3 * base + 5,
             base // 2 + 1, 2 * base, 0, 1, base * 5 // 4]
    rng = random.Random(5)
    held = [host.empty(n, torch.uint8) for n in sizes]
    for _ in range(steps):
        order = list(range(len(held)))
        rng.shuffle(order)
        for i in order[: len(order) // 2]:
            held[i] = None
        for i in order[: len(order) // 2]:
            n = sizes[(i + 3) % len(sizes)]
            held[i] = host.empty(n, torch.uint8)
            _ = h2d(held[i]) if n else None
        host.synchronize()
    del held
    return {"base": base}


def rlhf_sleep_wake(host, sz, steps):
    """RLHF colocated rollout/training (verl, OpenRLHF): vLLM sleep(level=1)
    backs each of its weight allocations (cumem: multiples of 2 MiB) up to
    a pinned CPU tensor (torch.empty(bytes, uint8, pin_memory=True) +
    copy_); wake_up() copies them back and drops the backups; then the
    trainer offloads gradients (.to("cpu", non_blocking=True)) and frees
    them; torch._C._host_emptyCache() after each phase (the host cache
    survives torch.cuda.empty_cache())."""
    # Llama-3.1-8B weight allocations, rounded up to 2 MiB like cumem's.
    gran = 2 * MIB
    shapes = [(s, 2) for _n, s in llama31_8b_layer() if len(s) == 2][:4]
    alloc_bytes = []
    for (r, c), el in shapes:
        full = r * c * el
        alloc_bytes.append(-(-full // gran) * gran)
    alloc_bytes = [sz.b(b) for b in alloc_bytes] * 4  # 4 layers
    for _ in range(steps):
        backups = []
        for n in alloc_bytes:  # sleep
            gpu = torch.empty(n, dtype=torch.uint8, device="cuda")
            cpu = host.empty(n, torch.uint8, how="sleep_backup")
            cpu.copy_(gpu)
            backups.append(cpu)
            del gpu
        for cpu in backups:  # wake_up
            gpu = torch.empty(cpu.numel(), dtype=torch.uint8, device="cuda")
            gpu.copy_(cpu)
            del gpu
        del backups, cpu
        host.empty_cache()
        grads = []
        for n in alloc_bytes[: len(alloc_bytes) // 2]:  # training: offload grads
            g = torch.empty(n // 2, dtype=BF16, device="cuda")
            grads.append(host.to_cpu(g))
            del g
        host.synchronize()
        del grads
        host.empty_cache()
    return {"allocations": len(alloc_bytes)}


def two_streams(host, sz, steps):
    """A copy pipeline on two side streams: each chunk's pinned staging
    buffer is uploaded on stream A and the result downloaded into it on
    stream B, so its free records two events; stream A alone is
    synchronized mid-step (B's events still pending: the oldest-first
    processing waits on them), then the device."""
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    rng = random.Random(13)
    chunks = [sz.b(n) for n in (48 * MIB, 64 * MIB, 40 * MIB, 96 * MIB, 33 * MIB)]
    for _ in range(steps):
        bufs = []
        for n in rng.sample(chunks, len(chunks)):
            t = host.empty(n, torch.uint8)
            g = h2d(t, a)
            b.wait_stream(a)
            d2h_into(t, g, b)
            bufs.append(t)
            del g
        del bufs, t
        host.sync_stream(a, "A")
        extra = host.empty(chunks[0], torch.uint8)
        del extra
        host.synchronize()
    return {"chunks": chunks}


def staging_sync_points(host, sz, steps):
    """Per-step pinned staging as a serving loop does it: the scheduler's
    input tensors (torch.tensor(list).pin_memory(), sizes following the
    batch size) are copied non_blocking and dropped at once, and the
    sampled logits are downloaded with .to("cpu", non_blocking=True); the
    host waits only every 4th step (torch.cuda.synchronize()), so until
    then every freed staging block waits for its event and new pins
    miss."""
    rng = random.Random(17)
    vocab = sz.d(152064)
    for step in range(steps * 4):
        bs = rng.choice([1, 3, 8, 13, 32, 48, 64])
        ids = host.pin_memory(torch.zeros(bs * 8, dtype=torch.int64))
        pos = host.pin_memory(torch.zeros(bs * 8, dtype=torch.int32))
        _ = h2d(ids), h2d(pos)
        del ids, pos
        logits = torch.empty((bs, vocab), dtype=FP32, device="cuda")
        out = host.to_cpu(logits)
        del out, logits
        if step % 4 == 3:
            host.synchronize()
    return {"vocab": vocab}



# -- the converted trace, with the empty_cache calls put back ---------------

SIGNIFICANT = ("alloc", "free_requested", "free_completed")


def make_csv(snapshot_path, result_path, converted_path, out_path):
    """`vramlab convert`'s CSV of a request-preserving recording
    (pinned_max_round_threshold_mb:0,pinned_max_cached_size_mb:0), checked
    against what the script asked for, with a `host_empty_cache` line for
    each `_host_emptyCache()` call: the history has no entry for that call,
    and with nothing ever cached it frees nothing either, so the converter
    cannot see it. The call goes after every line that comes from an entry
    written before the call returned (its own `free_completed` entries
    included) and before the first that comes from a later one. A
    `host_free` whose `free_completed` entry is later than the call (the
    converter merges a `free_requested` with a directly following
    `free_completed`) is split into `host_free_requested` before the call
    and `host_free_completed` after it: the block was still waiting for its
    event when the cache was emptied."""
    import pickle

    entries = pickle.load(open(snapshot_path, "rb"))["host_traces"]
    result = json.load(open(result_path))
    lines = open(converted_path).read().splitlines()
    head = [ln for ln in lines if ln.startswith("#")]
    rows = [ln for ln in lines if not ln.startswith("#")]
    assert rows[0] == "action,id,size,stream", rows[0]
    rows = rows[1:]

    # Match every row with its entries (segment_* entries are skipped).
    k = 0
    addr_id = {}
    out = []  # (action, id, size, anchor, completion index or None)

    def next_entry(action):
        nonlocal k
        while k < len(entries) and entries[k]["action"] not in SIGNIFICANT:
            k += 1
        if k >= len(entries) or entries[k]["action"] != action:
            got = entries[k]["action"] if k < len(entries) else "the end"
            raise SystemExit(f"{converted_path}: row {len(out)} wants entry {action}, entry {k} is {got}")
        k += 1
        return k - 1

    for r in rows:
        c = r.split(",")
        action, rid = c[0], c[1]
        if not action.startswith("host_"):
            raise SystemExit(f"{converted_path}: a device row {r!r} (record_cuda=False was expected)")
        if action == "host_alloc":
            e = next_entry("alloc")
            if int(c[2]) != entries[e]["size"]:
                raise SystemExit(f"row {r!r}: entry {e} has size {entries[e]['size']}")
            addr_id[entries[e]["addr"]] = rid
            out.append([action, rid, int(c[2]), e, None])
        elif action in ("host_free", "host_free_requested", "host_free_completed"):
            want = "free_completed" if action == "host_free_completed" else "free_requested"
            e = next_entry(want)
            if addr_id.get(entries[e]["addr"]) != rid:
                raise SystemExit(f"row {r!r}: entry {e} is another block")
            done = None
            if action == "host_free":
                done = next_entry("free_completed")
                if done != e + 1 or entries[done]["addr"] != entries[e]["addr"]:
                    raise SystemExit(f"row {r!r}: no free_completed right after entry {e}")
            out.append([action, rid, None, e, done])
        else:
            raise SystemExit(f"{converted_path}: unexpected row {r!r}")

    # The script's pins and frees, in order, against the rows'.
    pins = [x for x in result["log"] if x[0] == "pin" and x[2] > 0]
    allocs = [x for x in out if x[0] == "host_alloc"]
    if [p[2] for p in pins] != [a[2] for a in allocs]:
        raise SystemExit(f"{converted_path}: the recorded sizes are not the requests the script made")
    pin_of = {a[1]: p[1] for a, p in zip(allocs, pins)}
    frees = [x[1] for x in result["log"] if x[0] == "free"]
    freed = [pin_of[x[1]] for x in out if x[0] in ("host_free", "host_free_requested")]
    if frees != freed:
        raise SystemExit(f"{converted_path}: the recorded frees are not the script's, in its order")

    calls = [x for x in result["log"] if x[0] == "empty_cache"]
    body, ci = [], 0
    late = []  # host_free_completed lines to put after the next call
    for action, rid, size, anchor, done in out:
        while ci < len(calls) and anchor >= calls[ci][2]:
            body.append("host_empty_cache,,,")
            body.extend(late)
            late = []
            ci += 1
        if action == "host_alloc":
            body.append(f"host_alloc,{rid},{size},")
        elif action == "host_free" and ci < len(calls) and done >= calls[ci][2]:
            body.append(f"host_free_requested,{rid},,")
            late.append(f"host_free_completed,{rid},,")
        else:
            body.append(f"{action},{rid},,")
    for _ in calls[ci:]:
        body.append("host_empty_cache,,,")
        body.extend(late)
        late = []
    assert not late

    keep = [h for h in head if not h.startswith(("# source:", "# alloc_conf:", "# host_sizes:"))]
    conf = result["conf"]
    text = [keep[0],
            f"# source: scripts/oracle_experiments/host_offload.py {result['scenario']} (torch {result['torch']}, fake device)",
            "# host_sizes: requests",
            f"# recorded_alloc_conf: {conf}"] + keep[1:] + [
            f"# recorded with PYTORCH_ALLOC_CONF={conf} so every block is its request",
            f"# and {len(calls)} host_empty_cache line(s) put back from the script's log",
            "action,id,size,stream"] + body
    with open(out_path, "w") as f:
        f.write("\n".join(text) + "\n")
    print(f"{out_path}: {len(body)} rows, {len(allocs)} host_alloc, {len(calls)} host_empty_cache")


# -- the results note's table ------------------------------------------------

TABLE_SETTINGS = [  # (result file's setting, vramlab's torch and conf, column)
    ("torch2.15", "2.15", "default", "2.15 defaults"),
    ("torch2.15.round64", "2.15", "pinned_max_round_threshold_mb:64", "round_threshold 64"),
    ("torch2.15.round1", "2.15", "pinned_max_round_threshold_mb:1", "round_threshold 1 (≙64 at full size)"),
    ("torch2.15.cached1", "2.15", "pinned_max_cached_size_mb:1", "max_cached_size 1 (≙64)"),
    ("torch2.11", "2.11", "default", "2.11 defaults"),
]


def table(data_dir):
    """Markdown: pinned peak / requested peak per scenario and setting, as
    PyTorch's host_memory_stats() says (allocated_bytes.peak) and as
    vramlab's replay says (host_peak_reserved_bytes); one figure when they
    agree."""
    names = sorted(f[: -len(".vramlab-replay.json")] for f in os.listdir(data_dir)
                   if f.endswith(".vramlab-replay.json"))
    head = ["scenario", "requested peak"] + [c[3] for c in TABLE_SETTINGS]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    differ = []
    for s in names:
        ours = json.load(open(os.path.join(data_dir, f"{s}.vramlab-replay.json")))["rows"]
        cells = []
        req = None
        for setting, release, conf, _col in TABLE_SETTINGS:
            r = json.load(open(os.path.join(data_dir, f"{s}.{setting}.json")))
            req = r["requested"]["peak_bytes"]
            theirs = r["stats"]["allocated_bytes.peak"]
            mine = next(x for x in ours if x["torch"] == release and x["conf"] == conf)
            cell = f"{theirs / req:.3f}"
            if mine["host_peak_reserved_bytes"] != theirs or mine["host_num_allocs"] != r["stats"]["num_host_alloc"]:
                cell += f" (vramlab {mine['host_peak_reserved_bytes'] / req:.3f})"
                differ.append((s, setting))
            cells.append(cell)
        print(f"| {s} | {req / MIB:.2f} MiB | " + " | ".join(cells) + " |")
    print()
    print(f"disagreements (pinned peak or num_host_alloc): {differ or 'none'}")


SCENARIOS = {
    "sglang_cpu_offload": sglang_cpu_offload,
    "vllm_cpu_offload": vllm_cpu_offload,
    "sglang_moe_layerwise": sglang_moe_layerwise,
    "sglang_hicache": sglang_hicache,
    "vllm_kv_swap": vllm_kv_swap,
    "fsdp2_cpu_offload": fsdp2_cpu_offload,
    "deepspeed_zero_offload": deepspeed_zero_offload,
    "dataloader_text": dataloader_text,
    "dataloader_images": dataloader_images,
    "activation_offload": activation_offload,
    "pow2_straddle": pow2_straddle,
    "rlhf_sleep_wake": rlhf_sleep_wake,
    "two_streams": two_streams,
    "staging_sync_points": staging_sync_points,
}


def command(a):
    """The command line that makes this result again."""
    env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                   if k.startswith("VRAMLAB_FAKECUDA_") or k == "PYTORCH_ALLOC_CONF")
    release = ".".join(torch.__version__.split(".")[:2])
    args = [a.scenario, "--scale", repr(a.scale), "--steps", str(a.steps)]
    if a.record:
        args += ["--record", os.path.basename(a.record)]
    if a.out:
        args += ["--out", os.path.basename(a.out)]
    return f"{env} bash scripts/oracle_experiments/run.sh {release} host_offload.py driver {' '.join(args)}".strip()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("scenario", nargs="?")
    p.add_argument("--scale", type=float, default=1 / 64)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--record", metavar="SNAPSHOT.pickle")
    p.add_argument("--out", metavar="RESULT.json")
    p.add_argument("--list", action="store_true")
    p.add_argument("--csv", nargs=4, metavar=("SNAPSHOT", "RESULT", "CONVERTED", "OUT"),
                   help="write the trace of a request-preserving recording (see make_csv)")
    p.add_argument("--table", metavar="DIR", help="the results note's table from DIR (replay/tests/data/host)")
    a = p.parse_args()
    if a.table:
        table(a.table)
        return
    if a.csv:
        make_csv(*a.csv)
        return
    if a.list or not a.scenario:
        for name, f in SCENARIOS.items():
            print(f"{name}: {f.__doc__.split(chr(10))[0]}")
        return
    if a.scenario not in SCENARIOS:
        raise SystemExit(f"unknown scenario {a.scenario!r}: --list names them")
    torch.cuda.init()
    torch.cuda.synchronize()
    if a.record:
        torch.cuda.memory._record_memory_history(
            max_entries=1_000_000, context=None, stacks="python",
            record_pinned_host_memory=True, record_cuda=False)
    host = Host(bool(a.record))
    info = SCENARIOS[a.scenario](host, Size(a.scale), a.steps)
    import gc
    gc.collect()
    snapshot = torch.cuda.memory._snapshot() if a.record else None
    stats = torch.cuda.host_memory_stats()
    if a.record:
        import pickle
        with open(a.record, "wb") as f:
            pickle.dump(snapshot, f)
    doc = {
        "scenario": a.scenario,
        "torch": torch.__version__,
        "conf": os.environ.get("PYTORCH_ALLOC_CONF", ""),
        "fake_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("VRAMLAB_FAKECUDA_")},
        "scale": a.scale,
        "steps": a.steps,
        "recorded": bool(a.record),
        "command": command(a),
        "info": info,
        "stats": stats,
        "at_peak": host.at_peak,
        "max_active_bytes_current": host.max_active,
        "requested": {
            "pins": host.pins,
            "peak_bytes": host.requested_peak,
            "final_bytes": host.requested,
        },
        "log": host.log,
    }
    if a.out:
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
