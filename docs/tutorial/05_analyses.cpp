// The two analyses on your own model and metric (Wang & Tu 2020): contribution (remove one
// sub-layer at a time) and criticality (move one sub-layer back towards its initial weights).
// The metric here is token accuracy in [0, 1], not BLEU: the paper's clip C = base/10 would
// saturate most scores of a model at 99%, so the unclipped drop is used (clip = infinity).
#include <depthlab/depthlab.hpp>

#include <filesystem>
#include <iostream>
#include <limits>

using namespace depthlab;

int main() {
    nn::seq2seq_config cfg{.src_vocab = 12, .tgt_vocab = 12, .share_embeddings = true, .encoder_layers = 2, .decoder_layers = 2, .max_len = 16};
    cfg.layer.dim = 32, cfg.layer.heads = 4, cfg.layer.ff_dim = 64, cfg.layer.dropout = cfg.layer.attention_dropout = 0;
    nn::Seq2SeqTransformer<float> model(cfg, 1);
    const nn::Snapshot<float> theta0(model);  // θ⁰: keep it before training
    optim::Adam<float> adam(model.named_parameters(), {.lr = 3e-3});
    Generator data(2);
    train::Trainer<float> trainer(model, adam, {.steps = 200, .clip = 1.0, .log_every = 100});
    trainer.fit([&] {
        const auto b = data::reverse_task_batch(data, 32, 6, 12);
        auto loss = cross_entropy(model.decode(model.encode(b.src), b.src, b.tgt_in), b.tgt_out);
        return train::micro_batch<float>{.loss = loss, .logged = {{"loss", loss}}, .tokens = b.target_tokens()};
    });
    model.eval();
    const nn::Snapshot<float> thetaf(model);

    Generator held_out(77);
    const auto test = data::reverse_task_batch(held_out, 256, 6, 12);
    const analysis::metric_fn accuracy = [&] {  // higher is better
        return nn::accuracy(model.decode(model.encode(test.src), test.src, test.tgt_in), test.tgt_out).fraction();
    };
    const auto modules = analysis::default_modules(model);  // E:SA, E:FF, D:SA, D:EA, D:FF per layer
    const auto contrib = analysis::contribution(modules, accuracy, {.clip = std::numeric_limits<double>::infinity()});
    const auto crit = analysis::criticality(model, modules, theta0, thetaf, accuracy, {.epsilon = 0.01});
    std::filesystem::create_directories("runs");
    analysis::write_csv("runs/tutorial_contribution.csv", contrib);
    for (std::size_t i = 0; i < modules.size(); ++i)
        std::cout << modules[i].name << ": accuracy without it " << contrib.modules[i].metric_without << ", criticality α "
                  << crit.modules[i].alpha << "\n";
    std::cout << "Spearman(contribution, criticality) = " << analysis::rank_correlation(contrib, crit) << "\n";
    return contrib.base > 0.5 && contrib.modules.size() == 10 ? 0 : 1;
}
