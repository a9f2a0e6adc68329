"""Three AdamW training steps of a Llama-3.2-1B-shaped model (random init, bf16).

    python llama_1b_train.py                   # on a GPU

Batch 4 x seq 1024, labels = inputs (causal LM loss).
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
model = LlamaForCausalLM(config).to("cuda", torch.bfloat16)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

batch, seq = 4, 1024
for step in range(3):
    input_ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("done")
