#pragma once
// albert_act's options: the fields, their defaults and their flags, by section of --help and
// of the config.toml each run writes (examples/common/cli.hpp).
#include <cmath>
#include <cstdint>
#include <string>

#include "common/cli.hpp"
#include "common/device.hpp"
#include "common/distributed.hpp"

struct options {
    std::string preset = "tiny", data = ".data/english", out = "runs/albert_act";
    std::int64_t steps = 2000, batch = 32, accum = 1, seq_len = 128, warmup = -1, log_every = 25, eval_every = 250, dev_batches = 8,
                 save_every = 500, hidden = 0, heads = 0, ff = 0, embed = 128, max_iters = 0, tau_warmup = -1, min_iters = 0,
                 profile_steps = 0, sop_head_only_from = 0, host_reads = 1;
    double lr = 5e-3, weight_decay = 0.01, sop_dropout = 0, sop_weight = 1, max_minutes = 0, tau = -1, halting_bias = NAN,
           mask_prob = 0.15, clip = 1.0, epsilon = 0.01, beta = 0.01, lambda_p = 0.2;
    std::string policy = "act", device = "cpu", precision = "auto", optimizer = "lamb", fixed_checkpoint;
    std::uint64_t seed = 1;
    bool resume = false, no_divergence_guard = false, dense = false, distributed = false, chunk_jitter = false, schedule_by_time = false;
};

inline void add_options(examples::cli& args, options& o) {
    args.section("Model")
        .option("preset", o.preset, "tiny | small | base (N_max 6/12/24, tau 1e-3/5e-4/2.5e-4; sizes for 2 cores)").one_of({"tiny", "small", "base"})
        .option("hidden", o.hidden, "H (0: preset)").range<std::int64_t>(0, 1 << 16)
        .option("heads", o.heads, "attention heads (0: preset)").range<std::int64_t>(0, 1024)
        .option("ff", o.ff, "feed-forward width (0: preset)").range<std::int64_t>(0, 1 << 18)
        .option("embed", o.embed, "factorised embedding size E").range<std::int64_t>(1, 1 << 16)
        .option("sop-dropout", o.sop_dropout, "dropout on the pooled [CLS] features before the SOP classifier (0 as ALBERT; the head only, so the compact path still runs)").range(0.0, 0.9)
        .section("Data")
        .option("data", o.data, "directory with train.ids, dev.ids and spm.vocab (scripts/fetch-data, scripts/train-tokenizer)")
        .option("seq-len", o.seq_len, "maximum sequence length").range<std::int64_t>(5, 1 << 16)
        .option("batch", o.batch, "sequences per micro-batch").range<std::int64_t>(1, 1 << 20)
        .option("mask-prob", o.mask_prob, "MLM masking rate (0.15; the thesis uses 0.20)").range(0.0, 1.0)
        .flag("chunk-jitter", o.chunk_jitter, "each epoch, close every document's first chunk at a random length, so that chunk boundaries (and SOP's sentence pairs) change between epochs (off: ALBERT's fixed boundaries)")
        .option("seed", o.seed, "random seed")
        .section("Optimisation")
        .option("steps", o.steps, "optimiser steps").range<std::int64_t>(0, 1000000000)
        .option("accum", o.accum, "micro-batches per step (gradient accumulation)").range<std::int64_t>(1, 1 << 16)
        .option("optimizer", o.optimizer, "lamb (the paper) | adamw (decoupled weight decay)").one_of({"lamb", "adamw"})
        .option("lr", o.lr, "peak learning rate").positive()
        .option("weight-decay", o.weight_decay, "weight decay of every weight but norms and biases (0.01 as ALBERT; larger: a deviation against overfitting)").range(0.0, 1.0)
        .option("warmup", o.warmup, "warm-up steps (negative: 10% of the steps)").range<std::int64_t>(-1, 1000000000)
        .option("clip", o.clip, "gradient clipping by global norm (0: off)").range(0.0, 1e6)
        .option("sop-weight", o.sop_weight, "weight of SOP's loss in the sum with MLM's (1 as ALBERT; larger: a deviation that gives the sentence-order signal more of the shared encoder)").range(0.0, 100.0)
        .option("sop-head-only-from", o.sop_head_only_from, "from this step on (under --schedule-by-time: this share of the schedule, by steps or by the clock, whichever comes first), SOP trains its head (pooler, classifier) only: the encoder gets MLM and ponder gradients, no SOP ones (0: never, as ALBERT; a deviation against SOP's memorising the training documents)").range<std::int64_t>(0, 1000000000)
        .option("max-minutes", o.max_minutes, "stop after this much training time (those before a --resume included), then evaluate and report (0: no limit; the schedule still spans --steps unless --schedule-by-time)").range(0.0, 1e6)
        .flag("schedule-by-time", o.schedule_by_time, "warm-up, tau ramp and learning-rate decay advance with the training time as well as the steps, so that they end with --max-minutes on a machine slower than --steps assumed (the run then takes fewer steps; needs --max-minutes)")
        .section("Halting")
        .option("policy", o.policy, "halting: act (the paper) | pondernet | act_graves | act_ut | fixed (N_max iterations)").one_of({"act", "pondernet", "act_graves", "act_ut", "fixed"})
        .option("max-iters", o.max_iters, "N_max (0: preset)").range<std::int64_t>(0, 1024)
        .option("tau", o.tau, "ponder weight (negative: preset)").range(-1.0, 1e3)
        .option("tau-warmup", o.tau_warmup, "steps over which tau ramps up from 0 (negative: 30% of the steps)").range<std::int64_t>(-1, 1000000000)
        .option("halting-bias", o.halting_bias, "initial halting bias (default: the policy's, 0 as the paper, 1 for act_graves; negative: more iterations at first)").range(-100.0, 100.0)
        .option("min-iters", o.min_iters, "no token halts before this iteration").range<std::int64_t>(0, 1024)
        .option("epsilon", o.epsilon, "halting threshold 1 - epsilon").range(1e-6, 0.999)
        .option("beta", o.beta, "pondernet: weight of KL(p || geometric prior), used instead of tau").range(0.0, 1e3)
        .option("lambda-p", o.lambda_p, "pondernet: the geometric prior's halting probability per iteration").range(1e-6, 1.0)
        .flag("dense", o.dense, "use the dense masked reference path instead of the compact one")
        .section("Output")
        .option("out", o.out, "output directory")
        .option("log-every", o.log_every, "steps between progress lines").range<std::int64_t>(1, 1000000000)
        .option("eval-every", o.eval_every, "steps between dev evaluations").range<std::int64_t>(0, 1000000000)
        .option("dev-batches", o.dev_batches, "dev batches per evaluation").range<std::int64_t>(1, 1 << 20)
        .option("save-every", o.save_every, "steps between checkpoints").range<std::int64_t>(1, 1000000000)
        .option("fixed-checkpoint", o.fixed_checkpoint, "iso_flop.csv: also a model trained apart with --policy fixed (this run's sizes; its --max-iters is its depth), "
                                                        "evaluated on the same dev batches")
        .option("profile-steps", o.profile_steps, "time every op of this many steps (after 5 warm-up steps), print the table and write <out>/profile.csv (0: off)").range<std::int64_t>(0, 1000000)
        .flag("resume", o.resume, "continue from <out>/checkpoint.safetensors")
        .flag("no-divergence-guard", o.no_divergence_guard, examples::no_divergence_guard_help)
        .section("Device")
        .option("device", o.device, examples::device_help).one_of({"cpu", "cuda", "host_device"})
        .option("precision", o.precision, examples::precision_help).one_of({"auto", "f32", "bf16"})
        .option("host-reads", o.host_reads, "compact ACT path on a device: reads per forward of which tokens still run, one synchronisation each "
                                            "(-1: after every iteration, the CPU's rows and so its results bit for bit; the CPU always reads every iteration)").range<std::int64_t>(-1, 1024)
        .flag("distributed", o.distributed, examples::distributed_help);
}
