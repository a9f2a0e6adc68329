"""GPT-2-medium training under bf16 autocast, as one would write it for a GPU.

    python gpt2_medium_train_amp.py            # on a GPU

Random init from the gpt2-medium configuration written out (no download):
24 layers, d 1024, 16 heads, its default dropout 0.1 (the model is in
training mode), AdamW, 3 steps of batch 8 x seq 512.
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
config = GPT2Config(n_layer=24, n_embd=1024, n_head=16, n_positions=1024, vocab_size=50257)
model = GPT2LMHeadModel(config).cuda()
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

batch, seq = 8, 512
for step in range(3):
    input_ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("done")
