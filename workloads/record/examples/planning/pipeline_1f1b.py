"""One stage of a 1F1B pipeline schedule (the middle stage of 4, 8
micro-batches): warm-up forwards, then one forward and one backward in
turn, then the cool-down backwards; the activations of each micro-batch
live from its forward to its backward. The neighbours' sends and receives
are buffers of their own. Recorded without a GPU:

    vramlab record --torch 2.15 -o pp.pickle -- pipeline_1f1b.py
"""
import torch
import torch.nn as nn


def main():
    torch.cuda.set_device(0)
    stages, stage, micro = 4, 1, 8
    w, seq, mb = 2048, 1024, 2
    layers = nn.Sequential(*[nn.Sequential(nn.Linear(w, 4 * w), nn.GELU(), nn.Linear(4 * w, w)) for _ in range(4)]).cuda()
    opt = torch.optim.AdamW(layers.parameters(), lr=1e-4)
    warm = min(stages - stage - 1, micro)
    pending = []  # (input, output) of micro-batches waiting for their backward

    def forward():
        recv = torch.randn(mb, seq, w, device="cuda", requires_grad=True)  # from the stage before
        out = layers(recv)
        pending.append((recv, out))

    def backward():
        recv, out = pending.pop(0)
        grad = torch.randn_like(out)  # from the stage after
        out.backward(grad)
        send = recv.grad.clone()  # to the stage before
        del recv, out, grad, send

    for _ in range(warm):
        forward()
    for _ in range(micro - warm):
        forward()
        backward()
    while pending:
        backward()
    opt.step()
    opt.zero_grad()


if __name__ == "__main__":
    main()
