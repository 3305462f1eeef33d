#pragma once
// The translation model's training recipe (Vaswani et al. 2017, as Wang & Tu 2020 trained
// it): Adam (0.9, 0.98, eps 1e-9), an inverse-square-root warm-up, label-smoothed
// cross-entropy over batches of padded tokens. The recipe is saved in a checkpoint's
// metadata (io::save_config(meta, "train.", recipe)), so that a run that loads the
// checkpoint — rewinding's fine-tuning — trains the way the training run did. And the
// component-value study's comparison of pruning with a shallower model trained apart.
//
//   optim::Adam<float, B> adam(model.named_parameters(), train::translation_adam(recipe.lr));
//   trainer.fit([&] { return train::translation_loss(model, stream, recipe.label_smoothing); });
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "depthlab/autodiff/ops.hpp"
#include "depthlab/data/translation.hpp"
#include "depthlab/io/checkpoint.hpp"
#include "depthlab/io/config.hpp"
#include "depthlab/nn/models.hpp"
#include "depthlab/nn/translator.hpp"
#include "depthlab/train/translation_score.hpp"
#include "depthlab/optim/adam.hpp"
#include "depthlab/train/trainer.hpp"

namespace depthlab::train {

/// What a translation model was trained with.
struct translation_recipe {
    double lr = 1e-3;
    std::int64_t warmup = 1000, max_tokens = 4096;
    double label_smoothing = 0.1, clip = 1.0;
    std::uint64_t seed = 1;
};
/// The fields of translation_recipe by name (io::save_config / load_config).
template <class R, class F>
    requires std::same_as<std::remove_const_t<R>, translation_recipe>
void config_fields(R& r, F&& f) {
    f("lr", r.lr);
    f("warmup", r.warmup);
    f("max_tokens", r.max_tokens);
    f("label_smoothing", r.label_smoothing);
    f("clip", r.clip);
    f("seed", r.seed);
}

/// Adam as the Transformer paper sets it: betas (0.9, 0.98), eps 1e-9, no weight decay.
inline optim::AdamOptions translation_adam(double lr) { return {.lr = lr, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9, .weight_decay = 0}; }

/// The label-smoothed cross-entropy of the next batch of `stream` (padding ignored), logged
/// as "loss", with the batch's target tokens for tokens/s.
template <class T, class B>
micro_batch<T, B> translation_loss(nn::Seq2SeqTransformer<T, B>& model, data::translation_stream& stream, double label_smoothing) {
    const auto b = stream.next();
    auto loss = cross_entropy(model.decode(model.encode(b.src), b.src, b.tgt_in), b.tgt_out, -100, static_cast<T>(label_smoothing));
    return {.loss = loss, .logged = {{"loss", loss}}, .tokens = b.target_tokens()};
}

/// Rewinding's fine-tuning: `steps` steps of a fresh Adam at `lr` after a short linear
/// warm-up (a fifth of the steps, at most 50), clipped as the recipe, on the same batches
/// at every call (a stream seeded with recipe.seed + 1000), so that runs that rewind different
/// modules differ only in what they rewound. Returns the mean training loss of the steps.
template <class T, class B>
double finetune_translation(nn::Seq2SeqTransformer<T, B>& model, const data::translation_batcher& batcher, const translation_recipe& recipe,
                            std::int64_t steps, double lr) {
    optim::Adam<T, B> adam(model.named_parameters(), translation_adam(lr));
    data::translation_stream batches(batcher, recipe.seed + 1000);
    Trainer<T, B> fine_tune(model, adam, {.steps = steps, .clip = recipe.clip, .log_every = steps});
    const double warm = static_cast<double>(std::clamp<std::int64_t>(steps / 5, 1, 50));
    fine_tune.schedule = [&](std::int64_t done) { return lr * std::min(1.0, static_cast<double>(done + 1) / warm); };
    return fine_tune.fit([&] { return translation_loss(model, batches, recipe.label_smoothing); }).last_log.front().second;
}

/// The matrix products (flop_scope) of a teacher-forced forward of `model` as it is now (a
/// switched-off sub-layer does not run) over `batches`, per target token: the model's cost
/// per token, independent of how long its decoded hypotheses are.
template <class T, class B>
double teacher_forced_flops_per_token(const nn::Seq2SeqTransformer<T, B>& model, const std::vector<data::seq2seq_batch>& batches) {
    std::int64_t tokens = 0;
    for (const auto& b : batches) tokens += b.target_tokens();
    DEPTHLAB_CHECK(tokens > 0, usage_error, "teacher_forced_flops_per_token: ", batches.size(), " batches without a target token");
    no_grad guard;
    const flop_scope spent;
    for (const auto& b : batches) (void)model.decode(model.encode(b.src), b.src, b.tgt_in);
    return static_cast<double>(spent.flops()) / static_cast<double>(tokens);
}

/// A model with fewer decoder layers, trained apart with the same recipe: the paper's
/// baseline for pruning decoder modules. Its BLEU on the analysis sentences and its cost.
struct shallow_comparison {
    nn::seq2seq_config config;
    std::int64_t parameters = 0;
    std::uint64_t steps = 0;
    int fewer_decoder_layers = 0;
    double bleu = 0;
    double flops_per_token = 0;  // teacher_forced_flops_per_token on the caller's batches
};
/// Loads the checkpoint at `path`, which must hold `full`'s model with fewer decoder layers
/// (else usage_error naming both), scores it on `set` and counts its FLOPs per target token
/// on `flop_batches`.
template <class T, class B>
shallow_comparison compare_shallow_checkpoint(const std::string& path, const nn::seq2seq_config& full, const nn::translation_set& set,
                                              const typename nn::translator<T, B>::detokenizer& detokenize, const nn::search_options& search,
                                              std::uint64_t seed, const std::vector<data::seq2seq_batch>& flop_batches) {
    shallow_comparison r;
    r.config = io::load_config<nn::seq2seq_config>(io::safetensors_file(path).metadata(), "config.");
    const nn::seq2seq_config& sc = r.config;
    DEPTHLAB_CHECK(sc.decoder_layers < full.decoder_layers && sc.encoder_layers == full.encoder_layers && sc.layer.dim == full.layer.dim &&
                       sc.src_vocab == full.src_vocab,
                   usage_error, "--shallow-checkpoint ", path, ": expected the same model with fewer decoder layers, got ", nn::describe(sc),
                   " against ", nn::describe(full));
    nn::Seq2SeqTransformer<T, B> shallow(sc, seed);
    r.steps = io::load_checkpoint(path, shallow).get_u64("step");
    shallow.eval();
    nn::translator<T, B> scorer(shallow, detokenize);
    r.bleu = score(scorer, set, search).bleu;
    r.flops_per_token = teacher_forced_flops_per_token(shallow, flop_batches);
    r.parameters = shallow.parameter_count();
    r.fewer_decoder_layers = full.decoder_layers - sc.decoder_layers;
    return r;
}

}  // namespace depthlab::train
