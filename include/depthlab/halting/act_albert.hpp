#pragma once
// ACT-ALBERT (../shared/papers.md §A): ALBERT's factorised embeddings, one tied layer iterated
// with per-token halting (halting::ActEncoder), the MLM head tied to the token embedding and
// the sentence-order head. Loss = L_mlm + L_sop + τ · mean_batch(P).
#include <span>

#include "depthlab/halting/act.hpp"
#include "depthlab/nn/models.hpp"

namespace depthlab::halting {

template <class T, class B = backend::cpu, class Policy = act>
class ActAlbert : public nn::Module<T, B> {
public:
    ActAlbert(const nn::albert_config& c, act_options opt, std::uint64_t seed = 0) : cfg(c), gen_(seed) {
        embeddings = &this->register_module("embeddings", std::make_unique<nn::AlbertEmbeddings<T, B>>(c, gen_));
        encoder = &this->register_module("encoder", std::make_unique<ActEncoder<T, B, Policy>>(c.layer, gen_, opt));
        mlm_dense = &this->register_module("mlm.dense", std::make_unique<nn::Linear<T, B>>(c.layer.dim, c.embed, gen_, c.layer.init));
        mlm_norm = &this->register_module("mlm.norm", std::make_unique<nn::LayerNorm<T, B>>(c.embed, c.layer.ln_eps));
        mlm_bias = this->register_parameter("mlm.bias", Tensor<T, B>::zeros({c.vocab}));
        pooler = &this->register_module("pooler", std::make_unique<nn::Linear<T, B>>(c.layer.dim, c.layer.dim, gen_, c.layer.init));
        sop = &this->register_module("sop_classifier", std::make_unique<nn::Linear<T, B>>(c.layer.dim, 2, gen_, c.layer.init));
    }
    /// Hidden states, ponder cost and the halting record of a batch.
    act_result<T, B> encode(const nn::token_batch& b) const { return (*encoder)((*embeddings)(b), b.lengths); }
    Var<T, B> mlm_logits(const Var<T, B>& hidden, std::span<const std::int64_t> positions) const {
        return nn::albert_mlm_logits(hidden, positions, *mlm_dense, *mlm_norm, embeddings->word->weight, mlm_bias);
    }
    Var<T, B> sop_logits(const Var<T, B>& hidden) const { return nn::albert_sop_logits(hidden, *pooler, *sop); }

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
    Generator gen_;
};

}  // namespace depthlab::halting
