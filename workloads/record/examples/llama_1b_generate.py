"""Greedy generation with a Llama-3.2-1B-shaped model (random init, bf16).

    python llama_1b_generate.py                # on a GPU

Batch 8, prompt 128 tokens, 256 new tokens, model.generate(do_sample=False).
"""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(
    vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
    num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
    rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
    rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    bos_token_id=128000, eos_token_id=128001,
)
model = LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()

input_ids = torch.randint(0, config.vocab_size, (8, 128), device="cuda")
with torch.no_grad():
    out = model.generate(input_ids, max_new_tokens=256, do_sample=False)
print(out.shape)
