"""A sharded training step as people write it for torchrun: Hugging Face
models (random init, published configs written out), FSDP2 / HSDP / DDP /
tensor parallel / FSDP2 + LoRA + recompute. Runs unchanged on GPUs
(``torchrun --nproc-per-node 8 llm_train.py ...``) and records on a CPU:

    python -m vramlab_record.cpu --world-size 8 --rank 0 -o rank0.csv.gz -- llm_train.py --model llama-3-8b
    python -m vramlab_record.cpu --world-size 64 --ranks 0,63 -o job/ -- llm_train.py --model llama-3-70b

Models: llama-3-8b, llama-3-70b, opt-1.3b, gpt2 (LLMs, ``--seq`` tokens
per sample) and resnet-50 (224 px images). Parallelism (``--parallel``):
fsdp2 (full shard per decoder layer, bf16 compute, fp32 reduce, AdamW),
hsdp (shard within a node of ``--gpus-per-node``, replicate across nodes),
ddp (bucketed all-reduce, fp32 + bf16 autocast), tp (Megatron-style column /
row parallel attention and MLP, sequence not split), lora (FSDP2 + frozen
base, rank-16 adapters on q/v, activation checkpointing: the GMLake setting).
Sharded models are built on the meta device and materialised after
``fully_shard`` (``to_empty``), as TorchTitan does.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh

LLAMA_3_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=8192,
                  rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)
LLAMA_3_70B = dict(LLAMA_3_8B, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                   num_attention_heads=64)
# facebook/opt-1.3b config.json
OPT_1_3B = dict(vocab_size=50272, hidden_size=2048, ffn_dim=8192, num_hidden_layers=24, num_attention_heads=32,
                max_position_embeddings=2048, word_embed_proj_dim=2048, do_layer_norm_before=True)


def build(name: str, layers: int | None):
    import transformers as tf

    if name.startswith("llama"):
        cfg = dict(LLAMA_3_8B if name == "llama-3-8b" else LLAMA_3_70B)
        if layers:
            cfg["num_hidden_layers"] = layers
        return tf.LlamaForCausalLM(tf.LlamaConfig(**cfg, attn_implementation="sdpa")), "llm"
    if name == "opt-1.3b":
        cfg = dict(OPT_1_3B, num_hidden_layers=layers or OPT_1_3B["num_hidden_layers"])
        return tf.OPTForCausalLM(tf.OPTConfig(**cfg, attn_implementation="sdpa")), "llm"
    if name == "gpt2":
        cfg = tf.GPT2Config(n_layer=layers or 12, attn_implementation="sdpa")
        return tf.GPT2LMHeadModel(cfg), "llm"
    if name == "resnet-50":  # microsoft/resnet-50
        cfg = tf.ResNetConfig(depths=[3, 4, 6, 3], hidden_sizes=[256, 512, 1024, 2048], layer_type="bottleneck",
                              num_labels=1000)
        return tf.ResNetForImageClassification(cfg), "vision"
    raise SystemExit(f"unknown --model {name}")


def blocks(model) -> list:
    """The repeated blocks (decoder layers) to shard or checkpoint one by one."""
    for path in ("model.layers", "model.decoder.layers", "transformer.h"):
        obj = model
        try:
            for part in path.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        return list(obj)
    return []


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable rank-``r`` update (PEFT's LoRA)."""

    def __init__(self, base: nn.Linear, r: int = 16, alpha: int = 32):
        super().__init__()
        self.base = base
        self.lora_a = nn.Linear(base.in_features, r, bias=False, device=base.weight.device)
        self.lora_b = nn.Linear(r, base.out_features, bias=False, device=base.weight.device)
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + self.lora_b(self.lora_a(x)) * self.scale


def add_lora(model) -> None:
    for p in model.parameters():
        p.requires_grad_(False)
    for block in blocks(model):
        attn = getattr(block, "self_attn", None)
        for name in ("q_proj", "v_proj"):
            if attn is not None and isinstance(getattr(attn, name, None), nn.Linear):
                setattr(attn, name, LoRALinear(getattr(attn, name)))


def checkpoint_blocks(model) -> None:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

    kinds = {type(b) for b in blocks(model)}
    apply_activation_checkpointing(model, check_fn=lambda m: type(m) in kinds)


def shard(model, mesh, reshard: bool) -> None:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in blocks(model):
        fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard)


def tensor_parallel(model, mesh) -> None:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel()}
    # Attention reshapes with -1 heads: each rank runs its share of them.
    for block in blocks(model):
        parallelize_module(block, mesh, plan)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3-8b")
    p.add_argument("--parallel", default="fsdp2", choices=["fsdp2", "hsdp", "ddp", "tp", "lora"])
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--layers", type=int, default=None, help="fewer layers (quick tests)")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--checkpointing", action="store_true")
    p.add_argument("--no-reshard", action="store_true")
    args = p.parse_args()

    dist.init_process_group("nccl")
    world = int(os.environ["WORLD_SIZE"])
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    sharded = args.parallel in ("fsdp2", "hsdp", "lora")
    if args.parallel == "hsdp":
        mesh = init_device_mesh("cuda", (world // per_node, per_node), mesh_dim_names=("replicate", "shard"))
    else:
        mesh = init_device_mesh("cuda", (world,))

    with torch.device("meta") if sharded else torch.device("cpu"):
        model, kind = build(args.model, args.layers)
    if args.parallel == "lora":
        add_lora(model)
    if args.checkpointing or args.parallel == "lora":
        checkpoint_blocks(model)
    if sharded:
        shard(model, mesh, not args.no_reshard)
        model.to_empty(device="cuda")
    elif args.parallel == "tp":
        model = model.cuda().to(torch.bfloat16)
        tensor_parallel(model, mesh)
    else:
        model = model.cuda()
        model = nn.parallel.DistributedDataParallel(model, device_ids=[int(os.environ["LOCAL_RANK"])])
    params = [q for q in model.parameters() if q.requires_grad]
    # Tensor parallel leaves embeddings and norms plain tensors: the
    # multi-tensor kernels cannot mix them with DTensors.
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=False if args.parallel == "tp" else None)
    for _ in range(args.steps):
        if kind == "llm":
            ids = torch.randint(0, 32000, (args.batch, args.seq), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.parallel == "ddp"):
                out = model(input_ids=ids, labels=ids)
            loss = out.loss
        else:
            x = torch.randn(args.batch, 3, 224, 224, device="cuda")
            y = torch.randint(0, 1000, (args.batch,), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(pixel_values=x, labels=y).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
