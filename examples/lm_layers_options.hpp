#pragma once
// lm_layers' options: the fields, their defaults and their flags, by section of --help and of
// the config.toml each run writes (examples/common/cli.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/device.hpp"

struct options {
    std::string preset = "tiny", data = ".data/english", out = "runs/lm_layers", hf_checkpoint, device = "cpu", precision = "auto";
    std::int64_t layers = 0, dim = 0, heads = 0, ff = 0, seq_len = 0, separator = 3;
    double dropout = -1;
    std::int64_t steps = 2500, batch = 16, warmup = -1, log_every = 50, eval_every = 500, save_every = 500, dev_sequences = 64;
    double lr = 2e-3, weight_decay = 0.01, clip = 1.0, max_minutes = 0;
    std::uint64_t seed = 1;
    std::int64_t eval_sequences = 128, prune_max_k = -1, grid_steps = 10, bootstrap = 1000;
    double clip_fraction = 0.1, epsilon = 0.02;
    std::vector<int> shallow_layers;  // depths of the trained shallower models (iso-FLOP comparison)
    bool resume = false, no_divergence_guard = false;
};

inline void add_options(examples::cli& args, options& o) {
    args.section("Model")
        .option("preset", o.preset, "tiny (4 blocks, d 128, FF 512, 128 positions) | small (6 blocks, d 256, FF 1024, 256 positions)").one_of({"tiny", "small"})
        .option("layers", o.layers, "blocks (0: the preset's)").range<std::int64_t>(0, 256)
        .option("dim", o.dim, "model width (0: the preset's)").range<std::int64_t>(0, 1 << 16)
        .option("heads", o.heads, "attention heads (0: the preset's)").range<std::int64_t>(0, 1024)
        .option("ff", o.ff, "feed-forward width (0: the preset's)").range<std::int64_t>(0, 1 << 18)
        .option("dropout", o.dropout, "dropout on embeddings, residual branches and attention weights (< 0: the preset's, 0.1)").range(-1.0, 0.99)
        .option("hf-checkpoint", o.hf_checkpoint, "analyse this Hugging Face GPT-2 instead of training one: a folder with config.json and model.safetensors "
                                                  "(or that model.safetensors); its vocabulary must be the data's tokenizer's")
        .section("Data")
        .option("data", o.data, "folder with train.ids, dev.ids and spm.vocab (scripts/fetch-data english && scripts/train-tokenizer)")
        .option("seq-len", o.seq_len, "tokens per sequence (0: the model's positions)").range<std::int64_t>(0, 1 << 20)
        .option("separator", o.separator, "the id that closes every document in the token stream (3: [SEP] of scripts/train-tokenizer)").range<std::int64_t>(0, 1 << 30)
        .option("seed", o.seed, "random seed (initialisation, data order, dropout)")
        .section("Optimisation")
        .option("steps", o.steps, "optimiser steps (AdamW)").range<std::int64_t>(0, 1000000000)
        .option("batch", o.batch, "sequences per step").range<std::int64_t>(1, 1 << 20)
        .option("lr", o.lr, "peak learning rate (linear warm-up, then linear decay)").positive()
        .option("warmup", o.warmup, "warm-up steps (negative: 5% of the steps)").range<std::int64_t>(-1, 1000000000)
        .option("weight-decay", o.weight_decay, "decoupled weight decay of every weight but norms and biases").range(0.0, 1.0)
        .option("clip", o.clip, "gradient clipping by global norm (0: off)").range(0.0, 1e6)
        .option("max-minutes", o.max_minutes, "stop training after this many minutes (0: no limit)").range(0.0, 1e7)
        .section("Evaluation")
        .option("eval-every", o.eval_every, "steps between dev perplexity evaluations (0: only at the end)").range<std::int64_t>(0, 1000000000)
        .option("dev-sequences", o.dev_sequences, "dev sequences of the evaluations during training (0: all)").range<std::int64_t>(0, 1 << 30)
        .section("Analyses")
        .option("eval-sequences", o.eval_sequences, "dev sequences of the analyses' metric, perplexity (0: all)").range<std::int64_t>(0, 1 << 30)
        .option("clip-fraction", o.clip_fraction, "contribution: each rise in perplexity is clipped at this x the baseline perplexity").range(1e-6, 1e6)
        .option("bootstrap", o.bootstrap, "contribution_ci.csv, criticality_ci.csv: bootstrap resamples of the analysis sequences (95% interval of each rise and each α)").range<std::int64_t>(1, 1000000)
        .option("epsilon", o.epsilon, "criticality: a rewound module passes when perplexity stays within this fraction of the baseline").range(0.0, 100.0)
        .option("grid-steps", o.grid_steps, "criticality grid: alpha in {0, 1/k, ..., 1}").range<std::int64_t>(1, 10000)
        .option("prune-max-k", o.prune_max_k, "pruning curves up to this many blocks removed (negative: all but one)").range<std::int64_t>(-1, 100000)
        .option("shallow-layers", o.shallow_layers, "comma-separated depths: also train a model of each depth with the same recipe and compare it "
                                                    "with the pruned model of equal FLOPs (shallow.csv; empty: none)").list().range(1, 100000)
        .section("Output")
        .option("out", o.out, "output directory")
        .flag("resume", o.resume, "continue training from <out>/checkpoint.safetensors up to --steps")
        .flag("no-divergence-guard", o.no_divergence_guard, examples::no_divergence_guard_help)
        .option("log-every", o.log_every, "steps between progress lines").range<std::int64_t>(1, 1000000000)
        .option("save-every", o.save_every, "steps between checkpoints").range<std::int64_t>(1, 1000000000)
        .section("Device")
        .option("device", o.device, examples::device_help).one_of({"cpu", "cuda", "host_device"})
        .option("precision", o.precision, examples::precision_help).one_of({"auto", "f32", "bf16"});
}
