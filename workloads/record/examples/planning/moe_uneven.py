"""An MoE layer with uneven routing: each step the router sends a
different number of tokens to each of 8 experts (a fixed pseudo-random
load), so the expert buffers change size from step to step — the shape
where a caching allocator's cached blocks stop fitting. Recorded without
a GPU:

    vramlab record --torch 2.15 -o moe.pickle -- moe_uneven.py
"""
import torch
import torch.nn as nn


def main():
    torch.cuda.set_device(0)
    w, experts, tokens = 2048, 8, 8192
    gate = nn.Linear(w, experts).cuda()
    ffn = nn.ModuleList([nn.Sequential(nn.Linear(w, 4 * w), nn.GELU(), nn.Linear(4 * w, w)) for _ in range(experts)]).cuda()
    opt = torch.optim.AdamW(list(gate.parameters()) + list(ffn.parameters()), lr=1e-4)
    seed = 12345
    for step in range(4):
        x = torch.randn(tokens, w, device="cuda", requires_grad=True)
        logits = gate(x)
        # The load per expert: skewed, and different every step.
        loads = []
        for e in range(experts):
            seed = (seed * 1103515245 + 12345) % (1 << 31)
            loads.append(1 + seed % (tokens // 2))
        scale = tokens / sum(loads)
        counts = [max(1, int(n * scale)) for n in loads]
        outs = []
        start = 0
        for e, n in enumerate(counts):
            xe = x[start % tokens:][:n] if start + n <= tokens else x[:n]
            outs.append(ffn[e](xe.contiguous()))
            start += n
        y = torch.cat(outs)
        (y.float().pow(2).mean() + logits.float().mean()).backward()
        opt.step()
        opt.zero_grad()
        del x, logits, outs, y


if __name__ == "__main__":
    main()
