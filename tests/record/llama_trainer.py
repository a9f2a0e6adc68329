"""Hugging Face Trainer fine-tuning a tiny Llama, bf16, three steps."""
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

torch.manual_seed(0)
config = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2)
model = LlamaForCausalLM(config)
ids = torch.randint(0, 1000, (16, 32))
data = [{"input_ids": row, "labels": row} for row in ids]
args = TrainingArguments(output_dir="trainer-out", per_device_train_batch_size=4, max_steps=3, bf16=True,
                         logging_steps=1, report_to=[], save_strategy="no", disable_tqdm=True)
Trainer(model=model, args=args, train_dataset=data).train()
print("trained")
