#pragma once
// component_value's options: the fields, their defaults and their flags, by section of --help
// and of the config.toml each run writes (examples/common/cli.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include <depthlab/depthlab.hpp>

#include "common/cli.hpp"
#include "common/device.hpp"
#include "common/distributed.hpp"

struct options {
    std::string preset = "small", data = ".data/translation", out = "runs/component_value", checkpoint, device = "cpu", precision = "auto", src_lang, tgt_lang;
    depthlab::nn::seq2seq_overrides sizes;  // 0 (dropout < 0): the preset's
    std::int64_t steps = 4000, log_every = 50, save_every = 500, dev_every = 500, dev_sentences = 200;
    std::int64_t max_train_len = 128, max_source_len = 128, main_repeat = 1, accum = 1;
    depthlab::train::translation_recipe recipe;  // lr, warm-up, max tokens, label smoothing, clip, seed
    double max_train_minutes = 0;
    bool resume = false, no_divergence_guard = false, with_mt = false, skip_analyses = false, no_clip = false, distributed = false;
    std::int64_t beam = 4, analysis_beam = 1, eval_sentences = 200, decode_batch = 100, grid_steps = 10, max_evaluations = 8,
                 prune_max_k = 8, rewind_steps = 200;
    double alpha = 0.6, epsilon = 0.5, rewind_lr = 0, tolerance = 1.0 / 16, clip_fraction = 0.1;
    std::string search = "grid", rank_by = "contribution", shallow_checkpoint, ablation = "zero", granularity = "sublayer";
    std::int64_t ablation_batches = 8, bootstrap = 1000;
    std::vector<int> rewind_k = {0, 2, 4};
};

inline void add_options(examples::cli& args, options& o) {
    args.section("Model")
        .option("preset", o.preset, "model size: tiny | small | base").one_of({"tiny", "small", "base"})
        .option("enc-layers", o.sizes.encoder_layers, "encoder layers (0: the preset's)").range<std::int64_t>(0, 256)
        .option("dec-layers", o.sizes.decoder_layers, "decoder layers (0: the preset's)").range<std::int64_t>(0, 256)
        .option("dim", o.sizes.dim, "model width (0: the preset's)").range<std::int64_t>(0, 1 << 16)
        .option("heads", o.sizes.heads, "attention heads (0: the preset's)").range<std::int64_t>(0, 1024)
        .option("ff", o.sizes.ff_dim, "feed-forward width (0: the preset's)").range<std::int64_t>(0, 1 << 18)
        .option("dropout", o.sizes.dropout, "dropout (< 0: the preset's)").range(-1.0, 0.99)
        .option("checkpoint", o.checkpoint, "load this checkpoint (its model config, θ⁰ and training recipe) instead of training")
        .section("Data")
        .option("data", o.data, "folder with {train,dev,test}.{src,tgt}, spm.model and meta.json (scripts/prepare-parallel)")
        .option("src-lang", o.src_lang, "source language, the file extension (default: meta.json's \"src\", else en)")
        .option("tgt-lang", o.tgt_lang, "target language (default: meta.json's \"tgt\", else de)")
        .flag("with-mt", o.with_mt, "add the second corpus mt.{src,tgt} (e.g. machine-translated pairs) to the training data")
        .option("main-repeat", o.main_repeat, "with --with-mt: the main training pairs appear this many times per epoch").range<std::int64_t>(1, 1000)
        .option("max-tokens", o.recipe.max_tokens, "padded tokens per batch: sentences x max(src, tgt) length").range<std::int64_t>(1, 1 << 24)
        .option("max-train-len", o.max_train_len, "training pairs with a side longer than this many tokens are dropped (counted)").range<std::int64_t>(1, 4096)
        .option("max-source-len", o.max_source_len, "test and dev sources are cut to this many tokens (counted)").range<std::int64_t>(1, 4096)
        .option("seed", o.recipe.seed, "random seed (model init, data order, dropout)")
        .section("Optimisation")
        .option("steps", o.steps, "optimiser steps").range<std::int64_t>(0, 1000000000)
        .option("max-minutes", o.max_train_minutes, "stop training after this many minutes of training, those before a --resume included (0: no limit)").range(0.0, 1e7)
        .deprecated_alias("max-train-minutes", "max-minutes", o.max_train_minutes).range(0.0, 1e7)
        .option("accum", o.accum, "batches per step (gradient accumulation; under mpirun, per rank)").range<std::int64_t>(1, 1 << 16)
        .option("lr", o.recipe.lr, "peak learning rate").positive()
        .option("warmup", o.recipe.warmup, "warm-up steps of the inverse-square-root schedule").range<std::int64_t>(1, 1000000000)
        .option("clip", o.recipe.clip, "gradient clipping by global norm (0: off)").range(0.0, 1e6)
        .option("label-smoothing", o.recipe.label_smoothing, "label smoothing").range(0.0, 0.99)
        .section("Evaluation")
        .option("dev-every", o.dev_every, "steps between dev BLEU evaluations (0: only at the end)").range<std::int64_t>(0, 1000000000)
        .option("dev-sentences", o.dev_sentences, "dev sentences for the dev BLEU (greedy)").range<std::int64_t>(1, 1 << 24)
        .option("beam", o.beam, "beam size for the baseline test BLEU (1: greedy)").range<std::int64_t>(1, 256)
        .option("alpha", o.alpha, "GNMT length penalty exponent ((5+len)/6)^alpha for beam search").range(0.0, 10.0)
        .option("eval-sentences", o.eval_sentences, "test sentences for the analysis metric (BLEU)").range<std::int64_t>(1, 1 << 24)
        .option("analysis-beam", o.analysis_beam, "beam size of the analysis metric (1: greedy)").range<std::int64_t>(1, 256)
        .option("decode-batch", o.decode_batch, "rows decoded together (sentences x beam)").range<std::int64_t>(1, 1 << 20)
        .section("Analyses")
        .flag("skip-analyses", o.skip_analyses, "stop after training and the baseline BLEU")
        .option("clip-fraction", o.clip_fraction, "contribution: each drop is clipped at C = this x baseline (the paper: 0.1)").range(1e-6, 1e6)
        .flag("no-clip", o.no_clip, "contribution: no clipping (the score is the unclipped drop, normalised)")
        .option("ablation", o.ablation, "what a removed module outputs (contribution and pruning): zero | mean (its mean over reference batches) | "
                                        "resample (its output for another sentence of the batch)").one_of({"zero", "mean", "resample"})
        .option("ablation-batches", o.ablation_batches, "--ablation mean: training batches the mean output is taken over").range<std::int64_t>(1, 1000000)
        .option("granularity", o.granularity, "sublayer: the sub-layer study; head: also every attention head (contribution, gradient importance, "
                                              "pruning; head_*.csv, scores_agreement.csv)").one_of({"sublayer", "head"})
        .option("bootstrap", o.bootstrap, "contribution_ci.csv, criticality_ci.csv: bootstrap resamples of the analysis sentences (95% interval of each BLEU drop and each α)").range<std::int64_t>(1, 1000000)
        .option("search", o.search, "criticality search: grid | bisection").one_of({"grid", "bisection"})
        .option("grid-steps", o.grid_steps, "criticality grid: alpha in {0, 1/k, ..., 1}").range<std::int64_t>(1, 10000)
        .option("tolerance", o.tolerance, "criticality bisection: bracket width to stop at").range(1e-6, 1.0)
        .option("max-evaluations", o.max_evaluations, "criticality bisection: evaluations per module").range<std::int64_t>(1, 10000)
        .option("epsilon", o.epsilon, "criticality: BLEU within epsilon of the baseline passes").range(0.0, 100.0)
        .option("prune-max-k", o.prune_max_k, "pruning curve up to this many modules removed").range<std::int64_t>(0, 100000)
        .option("rank-by", o.rank_by, "ranking for rewinding: contribution | criticality").one_of({"contribution", "criticality"})
        .option("rewind-k", o.rewind_k, "comma-separated k for rewinding (0 = fine-tune only, the control)").list().range(0, 100000)
        .option("rewind-steps", o.rewind_steps, "fine-tuning steps after rewinding (0: rewinding without fine-tuning)").range<std::int64_t>(0, 1000000000)
        .option("rewind-lr", o.rewind_lr, "fine-tuning learning rate (0: the training schedule's last)").range(0.0, 10.0)
        .option("shallow-checkpoint", o.shallow_checkpoint, "compare pruning with this shallower model (trained separately with --dec-layers)")
        .section("Output")
        .option("out", o.out, "output directory")
        .flag("resume", o.resume, "continue training from <out>/checkpoint.safetensors up to --steps")
        .flag("no-divergence-guard", o.no_divergence_guard, examples::no_divergence_guard_help)
        .option("log-every", o.log_every, "steps between progress lines").range<std::int64_t>(1, 1000000000)
        .option("save-every", o.save_every, "steps between checkpoints").range<std::int64_t>(1, 1000000000)
        .section("Device")
        .option("device", o.device, examples::device_help).one_of({"cpu", "cuda", "host_device"})
        .option("precision", o.precision, examples::precision_help).one_of({"auto", "f32", "bf16"})
        .flag("distributed", o.distributed, examples::distributed_help);
}
