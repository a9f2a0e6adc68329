"""TRL's SFTTrainer fine-tuning a tiny Llama on token ids, bf16, two steps."""
import torch
from datasets import Dataset
from tokenizers import Tokenizer, models
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import SFTConfig, SFTTrainer

torch.manual_seed(0)
config = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2)
model = LlamaForCausalLM(config)
# A word-level tokenizer over the model's 1000 ids, made here (no download).
vocab = {f"t{i}": i for i in range(1000)}
tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="t0")),
                                    unk_token="t0", pad_token="t0", eos_token="t1")
ids = torch.randint(0, 1000, (16, 32)).tolist()
data = Dataset.from_dict({"input_ids": ids})
args = SFTConfig(output_dir="sft-out", per_device_train_batch_size=4, max_steps=2, bf16=True, report_to=[],
                 save_strategy="no", disable_tqdm=True, logging_steps=1)
SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer).train()
print("sft trained")
