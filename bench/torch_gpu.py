#!/usr/bin/env python3
"""PyTorch eager on the GPU: the training steps of bench/bench_cuda.cu, same shapes.

    python3 bench/torch_gpu.py OUT.json

encoder_layer_train: nn.TransformerEncoderLayer (post-LN, GELU tanh, dropout 0,
batch_first), forward + backward of sum(y) into the parameters and the input.
act_encoder_train: a shared layer iterated with ACT halting (Graves / Dehghani et al.),
the usual masked PyTorch formulation: every position runs through the layer each
iteration until every token has halted (N_max 6, halting bias -0.6 as in bench_cuda.cu).
float32 with TF32 off (as depthlab's f32), and the encoder layer also under
torch.autocast("cuda", dtype=torch.bfloat16) (depthlab's bf16: bf16 GEMM inputs, f32 master
weights). Prints and writes [{what, precision, shape, ms}, ...].
"""
import json
import sys
import time

import torch
import torch.nn.functional as F

SHAPES = [(256, 4, 1024, 32, 128), (512, 8, 2048, 32, 128), (768, 12, 3072, 32, 128)]


def name(d, h, ff, b, s):
    return f"d{d}_h{h}_ff{ff}_b{b}_s{s}"


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def timed(step, min_time=0.5):
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    n, start = 0, time.perf_counter()
    while True:
        step()
        n += 1
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time and n >= 5:
            return 1e3 * elapsed / n


def act_forward(layer, halting, x, n_max=6, eps=0.01):
    b, s, d = x.shape
    state = x
    cum = torch.zeros(b, s, device=x.device)
    remainders = torch.zeros(b, s, device=x.device)
    updates = torch.zeros(b, s, device=x.device)
    out = torch.zeros_like(x)
    for n in range(n_max):
        y = layer(state)
        p = torch.sigmoid(halting(y)).squeeze(-1)
        running = (cum < 1.0 - eps).float()
        new_halted = ((cum + p * running) > 1.0 - eps).float() * running
        if n == n_max - 1:
            new_halted = running
        still = running - new_halted
        cum = cum + p * still
        rem = (1.0 - cum) * new_halted
        remainders = remainders + rem
        cum = cum + rem
        updates = updates + running
        w = (p * still + rem).unsqueeze(-1)
        out = out + w * y
        state = y
        if running.sum().item() == 0:  # the host decision masked implementations make
            break
    return out, (updates + remainders).mean()


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "torch_gpu.json"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    results = []
    for d, h, ff, b, s in SHAPES:
        torch.manual_seed(1)
        layer = torch.nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, activation=gelu_tanh, batch_first=True).to(dev)
        x = torch.rand(b, s, d, device=dev, requires_grad=True)

        def enc_step():
            layer.zero_grad(set_to_none=True)
            x.grad = None
            layer(x).sum().backward()

        def enc_step_bf16():
            layer.zero_grad(set_to_none=True)
            x.grad = None
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = layer(x)
            y.float().sum().backward()

        results.append({"what": "encoder_layer_train", "precision": "f32", "shape": name(d, h, ff, b, s), "ms": timed(enc_step)})
        results.append({"what": "encoder_layer_train", "precision": "bf16", "shape": name(d, h, ff, b, s), "ms": timed(enc_step_bf16)})
        halting = torch.nn.Linear(d, 1).to(dev)
        with torch.no_grad():
            halting.bias.fill_(-0.6)

        def act_step():
            layer.zero_grad(set_to_none=True)
            halting.zero_grad(set_to_none=True)
            x.grad = None
            hidden, ponder = act_forward(layer, halting, x)
            (hidden.sum() + ponder).backward()

        results.append({"what": "act_encoder_train", "precision": "f32", "shape": name(d, h, ff, b, s), "ms": timed(act_step)})
        print(*results[-3:], sep="\n", flush=True)
    json.dump(results, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main()
