#pragma once
// ACT-ALBERT (../shared/papers.md §A): ALBERT's factorised embeddings, one tied layer iterated
// with per-token halting (halting::ActEncoder), the MLM head tied to the token embedding and
// the sentence-order head. Loss = L_mlm + L_sop + τ · mean_batch(P); with PonderNet the task
// losses are expectations over the halting distribution and the ponder term is the KL to the
// prior, weighted by β.
#include <span>
#include <string>

#include "depthlab/data/albert_data.hpp"
#include "depthlab/halting/act.hpp"
#include "depthlab/nn/models.hpp"

namespace depthlab::halting {

/// The study's sizes for 2 cores (../shared/papers.md §A), with the paper's N_max and τ:
///   "tiny"  H 256, 4 heads, FF 1024, N_max 6,  τ 1e-3
///   "small" H 384, 6 heads, FF 1536, N_max 12, τ 5e-4
///   "base"  H 768, 12 heads, FF 3072, N_max 24, τ 2.5e-4 (ALBERT-base)
/// E 128, no dropout (as ALBERT); vocab and max_len are the data's.
struct act_albert_setup {
    nn::albert_config model;
    act_options act;
    double tau = 1e-3;
};
inline act_albert_setup act_albert_preset(const std::string& name, std::int64_t vocab, index_t max_len) {
    act_albert_setup s;
    s.model.vocab = vocab;
    s.model.embed = 128;
    s.model.max_len = max_len;
    s.model.layer.dropout = s.model.layer.attention_dropout = 0.0;
    auto set = [&](int n_max, double tau, index_t H, int heads, index_t ff) {
        s.act.max_iterations = s.model.depth = n_max;
        s.tau = tau;
        s.model.layer.dim = H, s.model.layer.heads = heads, s.model.layer.ff_dim = ff;
    };
    if (name == "tiny") set(6, 1e-3, 256, 4, 1024);
    else if (name == "small") set(12, 5e-4, 384, 6, 1536);
    else if (name == "base") set(24, 2.5e-4, 768, 12, 3072);
    else throw usage_error("act_albert_preset: expected tiny, small or base, got '" + name + "'");
    return s;
}

template <class T, class B>
struct albert_losses {
    Var<T, B> mlm, sop;  // scalars: mean cross-entropies (PonderNet: their expectation over the halting steps)
    Var<T, B> ponder;    // ACT: mean_batch Σ_t (N_t + R_t); PonderNet: KL(p ‖ prior), mean over tokens
    act_result<T, B> encoded;
};

template <class T, class B = backend::cpu, class Policy = act>
class ActAlbert : public nn::Module<T, B> {
public:
    ActAlbert(const nn::albert_config& c, act_options opt, std::uint64_t seed = 0);
    /// Hidden states, ponder cost and the halting record of a batch.
    act_result<T, B> encode(const nn::token_batch& b) const { return (*encoder)((*embeddings)(b), b.lengths); }
    Var<T, B> mlm_logits(const Var<T, B>& hidden, std::span<const std::int64_t> positions) const {
        return nn::albert_mlm_logits(hidden, positions, *mlm_dense, *mlm_norm, embeddings->word->weight, mlm_bias,
                                     nn::mlm_activation(cfg.layer.act));
    }
    Var<T, B> sop_logits(const Var<T, B>& hidden) const {
        return nn::albert_sop_logits(hidden, *pooler, *sop, cfg.sop_dropout, &gen_, this->is_training());
    }

    /// The pretraining losses of a batch; the caller weighs ponder by τ (β for PonderNet).
    /// sop_trains_encoder false: SOP's loss reads the encoder's output as a constant, so only
    /// the SOP head (pooler and classifier) learns from it (a deviation from ALBERT, to stop the
    /// encoder from memorising sentence order; albert_act --sop-head-only-from).
    albert_losses<T, B> losses(const data::albert_batch& b, bool sop_trains_encoder = true) const;

    nn::albert_config cfg;
    nn::AlbertEmbeddings<T, B>* embeddings;
    ActEncoder<T, B, Policy>* encoder;
    nn::Linear<T, B>* mlm_dense;
    nn::LayerNorm<T, B>* mlm_norm;
    Var<T, B> mlm_bias;
    nn::Linear<T, B>* pooler;
    nn::Linear<T, B>* sop;
    Generator& rng() { return gen_; }

private:
    mutable Generator gen_;  // mutable: the const forward passes draw dropout masks from it (as the layers do through their pointer)
};

// Defined outside the class body, so not inline: under DEPTHLAB_COMPILED a program calls the
// library's copy instead of compiling it again (include/depthlab/compiled.hpp).
template <class T, class B, class Policy>
ActAlbert<T, B, Policy>::ActAlbert(const nn::albert_config& c, act_options opt, std::uint64_t seed)
    : cfg(c), gen_(seed) {
    embeddings = &this->register_module("embeddings", std::make_unique<nn::AlbertEmbeddings<T, B>>(c, gen_));
    encoder = &this->register_module("encoder", std::make_unique<ActEncoder<T, B, Policy>>(c.layer, gen_, opt));
    mlm_dense = &this->register_module("mlm.dense", std::make_unique<nn::Linear<T, B>>(c.layer.dim, c.embed, gen_, c.layer.init));
    mlm_norm = &this->register_module("mlm.norm", std::make_unique<nn::LayerNorm<T, B>>(c.embed, c.layer.ln_eps));
    mlm_bias = this->register_parameter("mlm.bias", Tensor<T, B>::zeros({c.vocab}));
    pooler = &this->register_module("pooler", std::make_unique<nn::Linear<T, B>>(c.layer.dim, c.layer.dim, gen_, c.layer.init));
    sop = &this->register_module("sop_classifier", std::make_unique<nn::Linear<T, B>>(c.layer.dim, 2, gen_, c.layer.init));
}

template <class T, class B, class Policy>
albert_losses<T, B> ActAlbert<T, B, Policy>::losses(const data::albert_batch& b, bool sop_trains_encoder) const {
    albert_losses<T, B> l;
    l.encoded = encode(b.tokens);
    const auto sop_input = [&](const Var<T, B>& y) { return sop_trains_encoder ? y : Var<T, B>::constant(y.value()); };
    if constexpr (std::is_same_v<Policy, pondernet>) {
        // PonderNet's reconstruction term: Σ_n p^n_t L(y^n_t) for every predicted token
        // (MLM) and every [CLS] (SOP), averaged like the plain losses
        const index_t Bn = b.size(), Tt = b.tokens.length, M = b.predictions();
        std::vector<std::int64_t> cls(static_cast<std::size_t>(Bn));
        for (index_t i = 0; i < Bn; ++i) cls[i] = i * Tt;
        const auto weight_at = [&](const Var<T, B>& p, std::span<const std::int64_t> rows) {
            return reshape(gather_rows(reshape(p, {Bn * Tt, 1}), rows), {static_cast<index_t>(rows.size())});
        };
        for (std::size_t n = 0; n < l.encoded.states.size(); ++n) {
            const auto& y = l.encoded.states[n];
            const auto& p = l.encoded.halt_prob[n];
            const auto mlm_n = sum(mul(weight_at(p, b.mlm_positions), cross_entropy_rows(mlm_logits(y, b.mlm_positions), b.mlm_labels)));
            const auto sop_n = sum(mul(weight_at(sop_input(p), cls), cross_entropy_rows(sop_logits(sop_input(y)), b.sop_labels)));
            accumulate(l.mlm, mlm_n);
            accumulate(l.sop, sop_n);
        }
        l.mlm = scale(l.mlm, T(1) / static_cast<T>(std::max<index_t>(M, 1)));
        l.sop = scale(l.sop, T(1) / static_cast<T>(Bn));
    } else {
        l.mlm = cross_entropy(mlm_logits(l.encoded.hidden, b.mlm_positions), b.mlm_labels);
        l.sop = cross_entropy(sop_logits(sop_input(l.encoded.hidden)), b.sop_labels);
    }
    l.ponder = l.encoded.ponder;
    return l;
}

}  // namespace depthlab::halting
