"""Decode-step forwards of a Llama-3.2-1B-shaped model at several batch
sizes, one phase per forward ("forward bs=N"): the input `vramlab
serve-budget` reads (the engine's state is the weights, recorded first).

    cd workloads/record
    python examples/llama_1b_decode_forwards.py OUT.csv 1,8,64,128

Runs on the CPU under fake tensors (no memory, no GPU): each forward is
one decode step, `input_ids` of shape (batch, 1), as a serving engine
captures it into a CUDA graph (attention over the KV cache is the
engine's own kernel, outside this model's allocations).
"""

import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from vramlab_record import Recording, fake_recording


def main() -> int:
    out = sys.argv[1]
    sizes = [int(s) for s in sys.argv[2].split(",")]
    config = LlamaConfig(
        vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
        rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
    )
    rec = Recording()
    with fake_recording(rec) as r, torch.no_grad():
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
        r.register_module(model)
        for b in sizes:
            r.mark(f"forward bs={b}")
            ids = torch.zeros((b, 1), dtype=torch.long)
            logits = model(input_ids=ids, use_cache=False).logits
            del logits, ids
    rec.header["source"] = f"llama-3.2-1b-shaped decode forwards at batch {','.join(map(str, sizes))} (vramlab_record, fake tensors)"
    rec.write(out)
    print(f"{out}: {rec.allocs} allocations, {rec.num_events} events", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
