#pragma once
// Translating a fixed set of sentences many times: what a translation study does when its
// metric is BLEU on a test set (baseline, every ablation, every interpolation step).
//
//   nn::translation_set test = nn::make_translation_set("test", sources, references, {.batch_sentences = 100});
//   nn::translator<float, B> trans(model, [&](auto ids) { return tok.decode(ids); });
//   auto hyps = trans.translate(test, {.beam = 4});   // detokenised, in the order of `references`
//
// * Batches: sentences sorted by source length (stable) and cut into batches of
//   batch_sentences, so padding is small; hypotheses come back in the original order.
// * Encoder-output cache: translating the same set again (the set made by one call of
//   make_translation_set, or a copy of it; do not edit a set) reuses the encoder outputs as
//   long as nothing on the encoder side changed — every encoder parameter (embeddings, layers,
//   the final norm of a pre-LN model) is compared exactly with the values of the last encoder
//   run, and so is which encoder sub-layers are switched on. Other state of the model (its
//   config, a LayerNorm's eps) is assumed fixed: call invalidate() after changing it. Ablating a decoder module therefore costs only decoding; ablating or
//   interpolating an encoder module re-encodes. Comparing costs one pass over the encoder
//   parameters (one download each on a device), far less than encoding.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/data/translation.hpp"
#include "depthlab/nn/decoding.hpp"
#include "depthlab/nn/models.hpp"
#include "depthlab/nn/transformer.hpp"

namespace depthlab::nn {

/// Sentences to translate, sorted by source length and cut into batches.
struct translation_set {
    std::string name;
    std::vector<std::string> references;            // in the caller's order
    std::vector<token_batch> batches;               // source ids (+ EOS), padded
    std::vector<std::vector<std::size_t>> members;  // members[b][j]: caller index of row j of batch b
    std::size_t truncated = 0;                      // sources cut to max_source_tokens
    std::uint64_t id = 0;                           // unique per make_translation_set call: the translator's cache key
    [[nodiscard]] std::size_t size() const { return references.size(); }
};

namespace detail {
inline std::uint64_t next_translation_set_id() {
    static std::atomic<std::uint64_t> next{1};
    return next++;
}
}  // namespace detail

struct translation_set_options {
    std::size_t batch_sentences = 100;     // sentences per batch (beam search decodes beam rows per sentence)
    index_t max_source_tokens = 128;       // longer sources are cut (the count is in translation_set::truncated)
    std::int64_t eos_id = 3, pad_id = 0;   // the translation sentencepiece model's ids
};

/// sources[i]: token ids of sentence i (no EOS); references[i]: its reference text.
inline translation_set make_translation_set(std::string name, std::span<const std::vector<std::int64_t>> sources,
                                            std::vector<std::string> references, const translation_set_options& o = {}) {
    DEPTHLAB_CHECK(sources.size() == references.size(), shape_error, "make_translation_set(", name, "): ", sources.size(), " sources but ",
                   references.size(), " references");
    DEPTHLAB_CHECK(o.batch_sentences > 0 && o.max_source_tokens > 0, usage_error, "make_translation_set(", name,
                   "): batch_sentences and max_source_tokens must be positive, got ", o.batch_sentences, " and ", o.max_source_tokens);
    translation_set s;
    s.id = detail::next_translation_set_id();
    s.name = std::move(name);
    s.references = std::move(references);
    const std::size_t n = sources.size();
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return sources[a].size() < sources[b].size(); });
    for (std::size_t i = 0; i < n; i += o.batch_sentences) {
        std::vector<std::vector<std::int64_t>> rows;
        std::vector<std::size_t> idx;
        for (std::size_t j = i; j < std::min(n, i + o.batch_sentences); ++j) {
            auto ids = sources[order[j]];
            if (static_cast<index_t>(ids.size()) > o.max_source_tokens) {
                ids.resize(static_cast<std::size_t>(o.max_source_tokens));
                ++s.truncated;
            }
            rows.push_back(std::move(ids));
            idx.push_back(order[j]);
        }
        s.batches.push_back(make_source_batch(rows, o.eos_id, o.pad_id));
        s.members.push_back(std::move(idx));
    }
    return s;
}

/// The first n pairs of `text` (all when n = 0), sources tokenised by encode(text) -> ids.
template <class Encode>
translation_set make_translation_set(std::string name, const data::parallel_text& text, std::size_t n, Encode&& encode,
                                     const translation_set_options& o = {}) {
    n = n == 0 ? text.size() : std::min(n, text.size());
    std::vector<std::vector<std::int64_t>> sources;
    for (std::size_t i = 0; i < n; ++i) {
        const auto ids = encode(text.src[i]);
        sources.emplace_back(ids.begin(), ids.end());
    }
    return make_translation_set(std::move(name), sources, {text.tgt.begin(), text.tgt.begin() + static_cast<std::ptrdiff_t>(n)}, o);
}

/// Which batches of a translation_set this process decodes: batch b when b mod ranks == rank
/// (every batch by default). Data-parallel decoding gives each rank its share and gathers the
/// hypotheses (train/translation_score.hpp).
struct batch_shard {
    int rank = 0, ranks = 1;
    [[nodiscard]] bool owns(std::size_t batch) const { return static_cast<int>(batch % static_cast<std::size_t>(ranks)) == rank; }
    bool operator==(const batch_shard&) const = default;
};

/// Translates translation_sets with a Seq2SeqTransformer, reusing encoder outputs (above).
template <class T, class B = backend::cpu>
class translator {
public:
    using model_type = Seq2SeqTransformer<T, B>;
    using detokenizer = std::function<std::string(std::span<const std::int64_t>)>;

    /// The model is used by reference: later changes to it (ablation, new values) are seen.
    translator(model_type& model, detokenizer decode) : model_(model), decode_(std::move(decode)) {
        DEPTHLAB_CHECK(static_cast<bool>(decode_), usage_error, "translator: empty detokenizer");
        for (auto& [name, p] : model.named_parameters())  // everything the encoder output depends on
            if (is_under(name, "src_embed") || is_under(name, "encoder") || is_under(name, "encoder_norm")) encoder_params_.push_back(p);
        for (auto& [name, r] : sublayers(model))
            if (is_under(name, "encoder")) encoder_sublayers_.push_back(r);
    }

    /// Detokenised hypotheses of every sentence of `set`, in the order of set.references.
    std::vector<std::string> translate(const translation_set& set, const search_options& o) {
        std::vector<std::string> out(set.size());
        for_each_hypothesis(set, o, [&](std::size_t i, const hypothesis& h) { out[i] = decode_(h.tokens); });
        return out;
    }
    /// The hypotheses themselves (tokens and scores), in the order of set.references.
    std::vector<hypothesis> hypotheses(const translation_set& set, const search_options& o) {
        std::vector<hypothesis> out(set.size());
        for_each_hypothesis(set, o, [&](std::size_t i, const hypothesis& h) { out[i] = h; });
        return out;
    }
    /// Forget the cached encoder outputs (never needed for correctness; frees their memory).
    void invalidate() {
        cached_set_ = 0;
        memories_.clear();
    }
    [[nodiscard]] std::size_t encoder_runs() const { return encoder_runs_; }
    [[nodiscard]] std::size_t encoder_reuses() const { return encoder_reuses_; }

    /// f(index, hypothesis) for every sentence of `set` in the batches `shard` owns.
    template <class F>
    void for_each_hypothesis(const translation_set& set, const search_options& o, F&& f, batch_shard shard = {}) {
        DEPTHLAB_CHECK(!model_.is_training(), usage_error, "translator: the model is in training mode (call model.eval() first)");
        no_grad guard;
        DEPTHLAB_CHECK(set.id != 0 && set.members.size() == set.batches.size(), usage_error, "translator: '", set.name,
                       "' was not made by make_translation_set");
        DEPTHLAB_CHECK(shard.ranks >= 1 && shard.rank >= 0 && shard.rank < shard.ranks, usage_error, "translator: shard ", shard.rank,
                       " of ", shard.ranks);
        if (cached_set_ == set.id && cached_shard_ == shard && memories_.size() == set.batches.size() && encoder_unchanged()) {
            ++encoder_reuses_;
        } else {
            cached_set_ = 0;  // nothing is cached until the new encoder outputs are all there
            memories_.clear();
            for (std::size_t b = 0; b < set.batches.size(); ++b) memories_.push_back(shard.owns(b) ? model_.encode(set.batches[b]) : Var<T, B>());
            remember_encoder();
            cached_set_ = set.id;
            cached_shard_ = shard;
            ++encoder_runs_;
        }
        for (std::size_t b = 0; b < set.batches.size(); ++b) {
            if (!shard.owns(b)) continue;
            const auto out = generate(model_, memories_[b], set.batches[b], o);
            for (std::size_t j = 0; j < out.size(); ++j) f(set.members[b][j], out[j]);
        }
    }
    /// The detokenised text of a hypothesis.
    [[nodiscard]] std::string detokenize(const hypothesis& h) const { return decode_(h.tokens); }

private:
    bool encoder_unchanged() const {
        for (std::size_t i = 0; i < encoder_sublayers_.size(); ++i)
            if (encoder_sublayers_[i]->state() != states_[i]) return false;
        for (std::size_t i = 0; i < encoder_params_.size(); ++i) {
            const auto& v = encoder_params_[i].value();
            if constexpr (B::host_accessible) {
                if (std::memcmp(v.data(), values_[i].data(), sizeof(T) * values_[i].size()) != 0) return false;
            } else if (v.to_vector() != values_[i]) {
                return false;
            }
        }
        return true;
    }
    void remember_encoder() {
        states_.clear();
        for (const auto* r : encoder_sublayers_) states_.push_back(r->state());
        values_.clear();
        for (const auto& p : encoder_params_) values_.push_back(p.value().to_vector());
    }

    const model_type& model_;
    detokenizer decode_;
    std::vector<Var<T, B>> encoder_params_;
    std::vector<const residual_base*> encoder_sublayers_;
    std::uint64_t cached_set_ = 0;  // translation_set::id of the cached encoder outputs
    batch_shard cached_shard_;  // the batches they were computed for
    std::vector<Var<T, B>> memories_;
    std::vector<residual_base::output_state> states_;
    std::vector<std::vector<T>> values_;
    std::size_t encoder_runs_ = 0, encoder_reuses_ = 0;
};

}  // namespace depthlab::nn
