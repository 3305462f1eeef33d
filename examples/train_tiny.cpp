// train_tiny: trains a small encoder-decoder Transformer on a synthetic task (reverse a
// sequence) with Adam, inverse-square-root warm-up and gradient clipping; prints a progress
// line (loss, tokens/s, ETA), writes metrics.jsonl and a safetensors checkpoint that holds
// the parameters, the optimiser state and every RNG state, so `--resume` continues the run
// exactly where it stopped (same losses as an uninterrupted run).
//
//   build/examples/train_tiny --steps 300 --out runs/tiny
//   build/examples/train_tiny --steps 600 --out runs/tiny --resume
//   build/examples/train_tiny --device cuda          # the same run on a GPU (CUDA build)
//   mpirun -np 2 build/examples/train_tiny --batch 16 # data parallel (-DDEPTHLAB_WITH_MPI=ON)
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <depthlab/depthlab.hpp>

#include "common/cli.hpp"
#include "common/device.hpp"
#include "common/distributed.hpp"

using namespace depthlab;

namespace {

struct options {
    std::int64_t steps = 300, batch = 32, max_len = 8, vocab = 16, dim = 64, ff = 128, layers = 2, heads = 4, warmup = 50,
                 log_every = 25, save_every = 100;
    double lr = 2e-3, clip = 1.0, dropout = 0.0;
    std::uint64_t seed = 1;
    std::string out = "runs/train_tiny", device = "cpu", precision = "auto";
    bool resume = false, distributed = false, no_divergence_guard = false;
};

/// The whole run on backend B (the model, the optimiser and every step live there).
template <class B>
int run(const options& o, dist::communicator& comm) {
    try {
        nn::seq2seq_config cfg;
        cfg.src_vocab = cfg.tgt_vocab = o.vocab;
        cfg.share_embeddings = true;
        cfg.encoder_layers = cfg.decoder_layers = static_cast<int>(o.layers);
        cfg.max_len = o.max_len + 1;
        cfg.layer.dim = o.dim;
        cfg.layer.heads = static_cast<int>(o.heads);
        cfg.layer.ff_dim = o.ff;
        cfg.layer.dropout = cfg.layer.attention_dropout = o.dropout;
        nn::Seq2SeqTransformer<float, B> model(cfg, o.seed);
        optim::AdamOptions aopt;
        aopt.lr = o.lr;
        aopt.beta2 = 0.98;
        optim::Adam<float, B> adam(model.named_parameters(), aopt);
        const optim::inverse_sqrt schedule(o.lr, o.warmup);
        Generator data_rng(o.seed + 1);

        train::Trainer<float, B> trainer(model, adam, {.steps = o.steps, .clip = o.clip, .log_every = o.log_every,
                                                        .save_every = o.save_every, .out = o.out, .resume = o.resume, .comm = &comm,
                                                        .divergence = {.enabled = !o.no_divergence_guard}});
        dist::own_stream_per_rank(model.rng(), comm);  // (dropout masks of its own)
        trainer.skip = [&] { (void)data::reverse_task_batch(data_rng, o.batch, o.max_len, o.vocab); };
        trainer.schedule = [&](std::int64_t done) { return schedule.lr(done + 1); };
        trainer.checkpoint().track("data", data_rng);
        trainer.checkpoint().track("model", model.rng());
        io::save_config(trainer.checkpoint().metadata(), "config.", cfg);
        trainer.restore();
        std::printf("train_tiny: %lld parameters, %lld steps, device %s, ISA %s, precision %s, %d threads, %s\n", static_cast<long long>(model.parameter_count()),
                    static_cast<long long>(o.steps), B::name, cpu::to_string(cpu::active_isa()), examples::precision_description(B::name).c_str(), max_threads(),
                    examples::ranks_description(comm).c_str());
        trainer.fit([&] {
            const auto b = data::reverse_task_batch(data_rng, o.batch, o.max_len, o.vocab);
            auto loss = cross_entropy(model.decode(model.encode(b.src), b.src, b.tgt_in), b.tgt_out, -100, 0.0f);
            return train::micro_batch<float, B>{.loss = loss, .logged = {{"loss", loss}}, .tokens = b.target_tokens()};
        });
        // Final: exact loss of a fixed evaluation batch (compare runs and resumed runs).
        model.eval();
        no_grad guard;
        Generator eval_rng(12345);
        const auto b = data::reverse_task_batch(eval_rng, 256, o.max_len, o.vocab);
        const double eval_loss = cross_entropy(model.decode(model.encode(b.src), b.src, b.tgt_in), b.tgt_out).value().item();
        std::printf("final eval loss %.9g\ncheckpoint: %s\n", eval_loss, trainer.checkpoint().path().c_str());
        return 0;
    } catch (const std::exception& e) {  // depthlab::error and the standard library's (bad_alloc, filesystem)
        dist::fail(comm, "train_tiny", std::runtime_error(examples::failure_message(e)));
    }
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    examples::cli args("train_tiny", "Train a small encoder-decoder on sequence reversal; checkpoint and resume.");
    args.section("Data")
        .option("batch", o.batch, "sequences per step").range<std::int64_t>(1, 1 << 20)
        .option("max-len", o.max_len, "longest source sequence").range<std::int64_t>(1, 4096)
        .option("vocab", o.vocab, "vocabulary size (3 ids are special)").range<std::int64_t>(4, 1 << 20)
        .option("seed", o.seed, "random seed")
        .section("Model")
        .option("dim", o.dim, "model width (a multiple of --heads)").range<std::int64_t>(1, 1 << 16)
        .option("ff", o.ff, "feed-forward width").range<std::int64_t>(1, 1 << 18)
        .option("layers", o.layers, "encoder and decoder layers").range<std::int64_t>(1, 256)
        .option("heads", o.heads, "attention heads").range<std::int64_t>(1, 1024)
        .option("dropout", o.dropout, "dropout").range(0.0, 0.99)
        .section("Optimisation")
        .option("steps", o.steps, "total optimiser steps").range<std::int64_t>(0, 1000000000)
        .option("lr", o.lr, "peak learning rate").positive()
        .option("warmup", o.warmup, "warm-up steps (inverse square root schedule)").range<std::int64_t>(1, 1000000000)
        .option("clip", o.clip, "gradient clipping by global norm (0: off)").range(0.0, 1e6)
        .section("Output")
        .option("log-every", o.log_every, "steps between progress lines").range<std::int64_t>(1, 1000000000)
        .option("save-every", o.save_every, "steps between checkpoints").range<std::int64_t>(1, 1000000000)
        .option("out", o.out, "output directory (metrics.jsonl, checkpoint.safetensors)")
        .flag("resume", o.resume, "continue from <out>/checkpoint.safetensors")
        .flag("no-divergence-guard", o.no_divergence_guard, examples::no_divergence_guard_help)
        .section("Device")
        .option("device", o.device, examples::device_help).one_of({"cpu", "cuda", "host_device"})
        .option("precision", o.precision, examples::precision_help).one_of({"auto", "f32", "bf16"})
        .flag("distributed", o.distributed, examples::distributed_help);
    args.sizes({"batch", "max-len", "dim", "ff", "heads", "layers"});
    args.parse(argc, argv);
    dist::communicator& comm = examples::join("train_tiny", o.distributed);
    if (comm.is_root()) args.save_config(o.out);
    examples::use_precision(o.precision, o.device);
    return examples::on_device(o.device, "train_tiny", [&](auto tag) { return run<decltype(tag)>(o, comm); });
}
