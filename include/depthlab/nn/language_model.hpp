#pragma once
// A decoder-only language model in GPT-2's shape (Radford et al. 2019): learned token and
// position embeddings, pre-LN blocks of causal self-attention and a feed-forward network,
// a final LayerNorm, and logits from the token embedding's transpose (tied output).
//
//     nn::gpt2_config cfg = nn::gpt2_preset("tiny", vocab);
//     nn::GPT2<float> lm(cfg, /*seed=*/1);
//     auto loss = lm.loss(batch);                    // next-token cross-entropy, mean over predicted tokens
//     auto logits = lm.logits(batch);                // (B, T, V)
//
// Parameters: "wte.weight" (V, D), "wpe.weight" (positions, D), the blocks under
// "decoder.<i>" (each an EncoderLayer run with a causal mask: "decoder.<i>.self_attention",
// "decoder.<i>.feed_forward", so the analyses type them D:SA and D:FF) and "ln_f". A block
// has no cross-attention. io::hf_gpt2_names maps them to Hugging Face's GPT-2 names.
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "depthlab/data/token_batch.hpp"
#include "depthlab/nn/transformer.hpp"

namespace depthlab::nn {

struct gpt2_config {
    index_t vocab = 8000;
    index_t positions = 256;  // the longest sequence (HF's n_positions)
    int depth = 4;            // blocks (n_layer)
    /// GPT-2's block: pre-LN, GELU (tanh, HF's "gelu_new"), dropout 0.1 on the embeddings,
    /// the residual branches and the attention weights, N(0, 0.02) weights.
    transformer_config layer{.dim = 256, .heads = 4, .ff_dim = 1024, .act = activation::gelu, .dropout = 0.1,
                             .attention_dropout = 0.1, .norm_first = true, .ln_eps = 1e-5, .init = init_scheme::bert};

    /// usage_error naming the first bad field.
    void validate() const {
        DEPTHLAB_CHECK(vocab > 0 && positions > 0 && depth >= 1, usage_error, "gpt2_config: vocab ", vocab, ", positions ", positions, ", depth ",
                       depth, " must all be >= 1");
        DEPTHLAB_CHECK(layer.norm_first, usage_error, "gpt2_config: GPT-2's blocks are pre-LN (layer.norm_first = true)");
        layer.validate("gpt2_config");
    }
};
/// gpt2_config's fields by name (io::save_config / load_config).
template <class C, class F>
    requires std::same_as<std::remove_const_t<C>, gpt2_config>
void config_fields(C& c, F&& f) {
    f("vocab", c.vocab);
    f("positions", c.positions);
    f("depth", c.depth);
    f("layer", c.layer);
}

/// Language-model sizes for 2 cores (GPT-2 small is 12 blocks of d 768):
///   "tiny"  4 blocks, d 128, 4 heads, FF 512, 128 positions   smoke runs, minutes
///   "small" 6 blocks, d 256, 4 heads, FF 1024, 256 positions  tens of minutes
inline gpt2_config gpt2_preset(const std::string& name, index_t vocab) {
    gpt2_config c{.vocab = vocab};
    if (name == "tiny") c.depth = 4, c.positions = 128, c.layer.dim = 128, c.layer.heads = 4, c.layer.ff_dim = 512;
    else if (name == "small") c.depth = 6, c.positions = 256, c.layer.dim = 256, c.layer.heads = 4, c.layer.ff_dim = 1024;
    else throw usage_error("gpt2_preset: '" + name + "' is not one of tiny, small");
    return c;
}
/// "4 blocks, d 128, 4 heads, FF 512, 128 positions, dropout 0.1, vocab 8000"
inline std::string describe(const gpt2_config& c) {
    std::ostringstream os;
    os << c.depth << " blocks, d " << c.layer.dim << ", " << c.layer.heads << " heads, FF " << c.layer.ff_dim << ", " << c.positions
       << " positions, dropout " << c.layer.dropout << ", vocab " << c.vocab;
    return os.str();
}

/// Next-token targets of a batch (B*T): position t's target is the id at t + 1; the last
/// real position of each sequence and the padding get `ignore_index`.
inline std::vector<std::int64_t> next_token_targets(const data::token_batch& b, std::int64_t ignore_index = -100) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(b.batch * b.length), ignore_index);
    for (index_t s = 0; s < b.batch; ++s)
        for (index_t t = 0; t + 1 < b.lengths[static_cast<std::size_t>(s)]; ++t)
            out[static_cast<std::size_t>(s * b.length + t)] = b.ids[static_cast<std::size_t>(s * b.length + t + 1)];
    return out;
}

template <class T, class B = backend::cpu>
class GPT2 : public Module<T, B> {
public:
    using Block = EncoderLayer<T, B>;  // self-attention + feed-forward; causal through its mask
    /// Called with each block's index, input and output (B, T, D) during a forward.
    using block_observer = std::function<void(int block, const Var<T, B>& in, const Var<T, B>& out)>;

    explicit GPT2(const gpt2_config& c, std::uint64_t seed = 0);
    /// The final hidden states (B, T, D), after ln_f. ids (B*T), right-padded to b.length.
    Var<T, B> hidden(const data::token_batch& b, const block_observer& observe = {}) const;
    /// Logits (B, T, V): hidden states times wteᵀ.
    Var<T, B> logits(const data::token_batch& b) const { return linear(hidden(b), wte->weight); }
    /// Mean next-token cross-entropy over the predicted positions (next_token_targets).
    Var<T, B> loss(const data::token_batch& b) const { return cross_entropy(logits(b), std::span<const std::int64_t>(next_token_targets(b))); }

    gpt2_config cfg;
    Embedding<T, B>*wte, *wpe;
    Stack<Block, untied, T, B>* decoder;
    LayerNorm<T, B>* ln_f;
    Generator& rng() { return gen_; }

private:
    mutable Generator gen_;
};

// Defined outside the class body, so not inline: under DEPTHLAB_COMPILED a program calls the
// library's copy instead of compiling it again (include/depthlab/compiled.hpp).
template <class T, class B>
GPT2<T, B>::GPT2(const gpt2_config& c, std::uint64_t seed) : cfg(c), gen_(seed) {
    c.validate();
    const index_t D = c.layer.dim;
    wte = &this->register_module("wte", std::make_unique<Embedding<T, B>>(c.vocab, D, gen_, 0.02));
    wpe = &this->register_module("wpe", std::make_unique<Embedding<T, B>>(c.positions, D, gen_, 0.02));
    decoder = &this->register_module("decoder", std::make_unique<Stack<Block, untied, T, B>>(c.depth, c.layer, gen_));
    // GPT-2 scales the projections into the residual stream by 1/sqrt(2 · blocks), so that the
    // stream's variance does not grow with depth
    const double down = 1.0 / std::sqrt(2.0 * c.depth);
    for (int i = 0; i < c.depth; ++i) {
        Block& blk = decoder->layer(i);
        for (Var<T, B>* w : {&blk.self_attention.branch.out_proj->weight, &blk.feed_forward.branch.linear2->weight}) {
            std::vector<T> v = w->value().to_vector();
            for (T& x : v) x = static_cast<T>(x * down);
            w->value().copy_(Tensor<T, B>::from(w->value().shape(), v));
        }
    }
    ln_f = &this->register_module("ln_f", std::make_unique<LayerNorm<T, B>>(D, c.layer.ln_eps));
}

template <class T, class B>
Var<T, B> GPT2<T, B>::hidden(const data::token_batch& b, const block_observer& observe) const {
    DEPTHLAB_CHECK(b.length <= cfg.positions, shape_error, "GPT2: sequence length ", b.length, " > positions ", cfg.positions);
    DEPTHLAB_CHECK(static_cast<index_t>(b.lengths.size()) == b.batch, shape_error, "GPT2: ", b.lengths.size(), " lengths for a batch of ",
                   b.batch);
    for (index_t len : b.lengths)
        DEPTHLAB_CHECK(len >= 1 && len <= b.length, shape_error, "GPT2: a sequence of length ", len, " in a batch of length ", b.length,
                       " (each sequence needs 1 to ", b.length, " tokens)");
    std::vector<std::int64_t> pos(static_cast<std::size_t>(b.batch * b.length));
    for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<std::int64_t>(i % static_cast<std::size_t>(b.length));
    Var<T, B> x = add((*wte)(b.ids, {b.batch, b.length}), (*wpe)(pos, {b.batch, b.length}));
    x = dropout(x, static_cast<T>(cfg.layer.dropout), gen_, this->is_training());
    const Tensor<T, B> mask = causal_padding_mask<T, B>(b.lengths, b.length);
    for (int i = 0; i < decoder->depth; ++i) {
        Var<T, B> y = decoder->layer(i)(x, mask);
        if (observe) observe(i, x, y);
        x = std::move(y);
    }
    return (*ln_f)(x);
}

}  // namespace depthlab::nn
