"""Greedy generation with a tiny Llama (random weights, bf16, KV cache)."""
import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, bos_token_id=1, eos_token_id=2)
model = LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()
input_ids = torch.randint(0, config.vocab_size, (2, 16), device="cuda")
with torch.no_grad():
    out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=20,
                         do_sample=False, pad_token_id=0)
print("generated", tuple(out.shape))
