#!/usr/bin/env python3
"""Scaling model for data-parallel depthlab training on larger clusters (docs/distributed.md).

    docs/results/dist/scaling.py [build/bench_dist_1x2.json]

Per step, every rank computes its local batch, then the gradient buckets are all-reduced
once (not overlapped with backward: depthlab reduces after the last micro-batch). A ring
all-reduce of S bytes over W ranks moves 2 (W - 1) / W * S bytes through each link and
takes 2 (W - 1) latency steps:
    t_allreduce = 2 (W - 1) / W * S / bandwidth + 2 (W - 1) * latency
Efficiency = t_compute / (t_compute + t_allreduce): the share of a step spent computing
(weak scaling: each rank keeps its local batch, the global batch grows with W).

Inputs:
  * parameter counts: parameter_count() of the presets with an 8000-piece vocabulary
    (halting::act_albert_preset, nn::seq2seq_preset), f32 gradients (4 bytes each);
  * compute per step of a local batch of 32 sequences x 128 tokens:
      - "this CPU": measured by depthlab_bench_dist (1 process, 2 threads) for tiny and small
        when its JSON is given (synthetic text: its halting, not N_max / 2); base and the 6+6
        model from their training FLOPs at CPU_RATE, this machine's bf16 encoder-layer train
        step (docs/performance.md: d256, 20.9 GFLOP in 54.0 ms);
      - "GPU": an assumption, not a measurement: 400 TFLOP/s bf16 peak at 40 % utilisation.
  * training FLOPs per step: 6 x (parameters a token passes through) x tokens, plus
    attention (12 T d per token per layer, forward and backward); ACT-ALBERT runs its shared
    layer N times, N = N_max / 2 assumed (mean iterations depend on the data and tau).
"""
import json
import sys

BYTES = 4                      # f32 gradients
TOKENS = 32 * 128              # local batch per rank
LATENCY = 5e-6                 # s per ring step (an assumption for 25-100 Gb/s fabrics)
GPU_FLOPS = 400e12 * 0.40      # the assumed GPU rate
CPU_RATE = 20.9e9 / 54.0e-3    # FLOP/s of this CPU in a bf16 training step (measured, see above)

# name: (parameters, layer parameters a token passes per iteration, d, passes (iterations or layers), T, output-projection size)
MODELS = {
    "ACT-ALBERT tiny": dict(params=1971395, layer=790017, d=256, passes=6 / 2, out=128 * 8000 * 0.15),
    "ACT-ALBERT small": dict(params=3071427, layer=1774849, d=384, passes=12 / 2, out=128 * 8000 * 0.15),
    "ACT-ALBERT base": dict(params=8927427, layer=7088641, d=768, passes=24 / 2, out=128 * 8000 * 0.15),
    # 6+6, d 512, FF 2048: encoder layer 3.15 M, decoder layer 4.2 M; 4096 source and 4096 target tokens
    "Transformer 6+6 (translation)": dict(params=48234496, layer=(6 * 3150336 + 6 * 4200960) / 12, d=512, passes=12, out=512 * 8000),
}
UNTIED = {"ACT-ALBERT tiny": 6, "ACT-ALBERT small": 12, "ACT-ALBERT base": 24}  # N_max: an untied stack of that depth


def flops(m):
    per_token = 6 * (m["layer"] * m["passes"] + m["out"]) + 12 * 128 * m["d"] * m["passes"]
    return per_token * TOKENS


def ring(size_bytes, ranks, gbit):
    return 2 * (ranks - 1) / ranks * size_bytes / (gbit * 1e9 / 8) + 2 * (ranks - 1) * LATENCY


def main():
    measured = {}
    if len(sys.argv) > 1:
        for b in json.load(open(sys.argv[1]))["benchmarks"]:
            name = "ACT-ALBERT " + b["name"].split("/")[1]
            measured[name] = b["real_time"] / 1e3  # ms -> s
    cpu_rate = CPU_RATE

    print("| model | parameters | gradient | all-reduce, 8 ranks, 25 / 100 Gb/s | compute per step: this CPU | efficiency (CPU, 25 Gb/s) | compute per step: GPU (assumed) | efficiency (GPU) 25 / 100 Gb/s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, m in MODELS.items():
        size = m["params"] * BYTES
        t25, t100 = ring(size, 8, 25), ring(size, 8, 100)
        if name in measured:
            cpu, how = measured[name], "measured"
        elif cpu_rate:
            cpu, how = flops(m) / cpu_rate, "from FLOPs"
        else:
            cpu, how = None, ""
        gpu = flops(m) / GPU_FLOPS
        cpu_s = f"{cpu:.2f} s ({how})" if cpu else "n/a"
        eff_cpu = f"{cpu / (cpu + t25):.3f}" if cpu else "n/a"
        untied = f" (untied {UNTIED[name]} layers: {(m['params'] + (UNTIED[name] - 1) * m['layer']) * BYTES / 1e6:.0f} MB)" if name in UNTIED else ""
        print(f"| {name} | {m['params'] / 1e6:.2f} M | {size / 1e6:.1f} MB{untied} | {t25 * 1e3:.1f} / {t100 * 1e3:.1f} ms | {cpu_s} | {eff_cpu} | "
              f"{gpu * 1e3:.1f} ms | {gpu / (gpu + t25):.2f} / {gpu / (gpu + t100):.2f} |")
    print(f"\nFLOP/s assumed: this CPU {cpu_rate / 1e9:.0f} G (measured), the GPU {GPU_FLOPS / 1e12:.0f} T (assumed)")


if __name__ == "__main__":
    main()
