// Training with an optimiser: train::Trainer owns the loop (accumulation, clipping, the
// schedule, progress lines, metrics.jsonl, checkpoints, exact resume, a NaN guard).
#include <depthlab/depthlab.hpp>

#include <cmath>
#include <iostream>

using namespace depthlab;

int main() {
    // an encoder-decoder that learns to reverse sequences of symbols
    nn::seq2seq_config cfg{.src_vocab = 12, .tgt_vocab = 12, .share_embeddings = true, .encoder_layers = 2, .decoder_layers = 2, .max_len = 16};
    cfg.layer.dim = 32, cfg.layer.heads = 4, cfg.layer.ff_dim = 64, cfg.layer.dropout = cfg.layer.attention_dropout = 0;
    nn::Seq2SeqTransformer<float> model(cfg, /*seed=*/1);
    optim::Adam<float> adam(model.named_parameters(), {.lr = 3e-3});
    const optim::inverse_sqrt schedule(3e-3, /*warmup=*/50);
    Generator data(2);

    train::Trainer<float> trainer(model, adam, {.steps = 300, .clip = 1.0, .log_every = 100, .out = "runs/tutorial_training"});
    trainer.checkpoint().track("data", data);  // the batches continue exactly after --resume
    trainer.schedule = [&](std::int64_t done) { return schedule.lr(done + 1); };
    const auto fit = trainer.fit([&] {
        const auto b = data::reverse_task_batch(data, 32, 6, 12);
        auto loss = cross_entropy(model.decode(model.encode(b.src), b.src, b.tgt_in), b.tgt_out);
        return train::micro_batch<float>{.loss = loss, .logged = {{"loss", loss}}, .tokens = b.target_tokens()};
    });
    const double last_loss = fit.last_log.front().second;
    std::cout << "trained " << fit.steps << " steps, loss " << last_loss << "; runs/tutorial_training/{metrics.jsonl,checkpoint.safetensors}\n";
    return std::isfinite(last_loss) && last_loss < 1.0 ? 0 : 1;
}
