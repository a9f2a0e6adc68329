"""An accelerate training loop with FSDP (written for `accelerate launch`/torchrun;
recorded with `vramlab record --world-size 2`): a tiny Llama, bf16, two steps."""
import torch
from accelerate import Accelerator, FullyShardedDataParallelPlugin
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
accelerator = Accelerator(mixed_precision="bf16", fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2))
config = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2)
model = LlamaForCausalLM(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
model, optimizer = accelerator.prepare(model, optimizer)
for _ in range(2):
    ids = torch.randint(0, 1000, (4, 32), device=accelerator.device)
    loss = model(input_ids=ids, labels=ids).loss
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
accelerator.print("trained with", accelerator.num_processes, "processes")
