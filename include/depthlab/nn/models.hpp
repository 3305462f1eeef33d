#pragma once
// Models of the two studies: an ALBERT-style encoder (factorised embedding E -> H, a stack
// of encoder layers — tied by default —, an MLM head tied to the token embedding, a pooler
// and a 2-way sentence-order head) and an encoder-decoder Transformer for translation.
#include <cmath>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "depthlab/data/token_batch.hpp"
#include "depthlab/nn/transformer.hpp"

namespace depthlab::nn {

// ----------------------------------------------------------------------------- ALBERT
struct albert_config {
    index_t vocab = 8000;
    index_t embed = 128;      // E (factorised embedding size)
    index_t max_len = 128;
    index_t segments = 2;
    int depth = 6;            // iterations of the (tied) stack; N_max with ACT
    transformer_config layer{.dim = 256, .heads = 4, .ff_dim = 1024, .act = activation::gelu, .dropout = 0.1,
                             .attention_dropout = 0.1, .norm_first = false, .ln_eps = 1e-12, .init = init_scheme::bert};
    // Dropout on the pooled [CLS] features before the sentence-order classifier (BERT's
    // classifier dropout). 0 as in ALBERT's pretraining; it touches the head only, so ACT's
    // compact path (which needs a dropout-free layer) still runs.
    double sop_dropout = 0.0;
};
/// albert_config's fields by name (io::save_config / load_config).
template <class C, class F>
    requires std::same_as<std::remove_const_t<C>, albert_config>
void config_fields(C& c, F&& f) {
    f("vocab", c.vocab);
    f("embed", c.embed);
    f("max_len", c.max_len);
    f("segments", c.segments);
    f("depth", c.depth);
    f("layer", c.layer);
    f("sop_dropout", c.sop_dropout);
}

using data::token_batch;  // (data/token_batch.hpp)

template <class T, class B = backend::cpu>
class AlbertEmbeddings : public Module<T, B> {
public:
    AlbertEmbeddings(const albert_config& c, Generator& gen) : cfg_(c), rng_(&gen) {
        word = &this->register_module("word_embeddings", std::make_unique<Embedding<T, B>>(c.vocab, c.embed, gen, 0.02));
        position = &this->register_module("position_embeddings", std::make_unique<Embedding<T, B>>(c.max_len, c.embed, gen, 0.02));
        segment = &this->register_module("token_type_embeddings", std::make_unique<Embedding<T, B>>(c.segments, c.embed, gen, 0.02));
        norm = &this->register_module("norm", std::make_unique<LayerNorm<T, B>>(c.embed, c.layer.ln_eps));
        projection = &this->register_module("projection", std::make_unique<Linear<T, B>>(c.embed, c.layer.dim, gen, c.layer.init));
    }
    /// -> (B, T, H)
    Var<T, B> operator()(const token_batch& b) const {
        DEPTHLAB_CHECK(b.length <= cfg_.max_len, shape_error, "AlbertEmbeddings: sequence length ", b.length, " > max_len ", cfg_.max_len);
        std::vector<std::int64_t> pos(static_cast<std::size_t>(b.length));
        for (index_t t = 0; t < b.length; ++t) pos[t] = t;
        Var<T, B> e = (*word)(b.ids, {b.batch, b.length});
        e = add(e, (*position)(pos, {b.length}));
        e = e + (*segment)(b.segments, {b.batch, b.length});
        e = dropout((*norm)(e), static_cast<T>(cfg_.layer.dropout), *rng_, this->is_training());
        return (*projection)(e);
    }
    Embedding<T, B>*word, *position, *segment;
    LayerNorm<T, B>* norm;
    Linear<T, B>* projection;

private:
    albert_config cfg_;
    Generator* rng_;
};

/// The MLM head's activation for a model whose layers use `layer_act`: GELU in its tanh form,
/// or its exact form when the layers use that (HF's heads use the layers' hidden_act; a
/// ReLU model keeps the tanh GELU in its head, as depthlab always had).
inline activation mlm_activation(activation layer_act) {
    return layer_act == activation::gelu_erf ? activation::gelu_erf : activation::gelu;
}

/// ALBERT's MLM head at selected flat positions (b * T + t) only — the other positions are
/// never projected to the vocabulary: dense H -> E, GELU (`act`: see mlm_activation), LN,
/// then the decoder tied to the token embedding (transposed) plus an output bias.
/// hidden: (B, T, H) -> (n, V).
template <class T, class B>
Var<T, B> albert_mlm_logits(const Var<T, B>& hidden, std::span<const std::int64_t> positions, const Linear<T, B>& dense,
                            const LayerNorm<T, B>& norm, const Var<T, B>& word_embedding, const Var<T, B>& bias,
                            activation act = activation::gelu) {
    const Shape& s = hidden.shape();
    Var<T, B> h = gather_rows(reshape(hidden, {s[0] * s[1], s[2]}), positions);
    return linear(norm(linear_activate(act, h, dense.weight, dense.bias)), word_embedding, bias);
}
/// Sentence-order (or classification) logits from the pooled [CLS] token: dense + tanh,
/// dropout p (when training; `gen` draws the mask), then the classifier.
/// hidden: (B, T, H) -> (B, classes).
template <class T, class B>
Var<T, B> albert_sop_logits(const Var<T, B>& hidden, const Linear<T, B>& pooler, const Linear<T, B>& classifier, double p = 0,
                            Generator* gen = nullptr, bool training = false) {
    const Shape& s = hidden.shape();
    std::vector<std::int64_t> cls(static_cast<std::size_t>(s[0]));
    for (index_t b = 0; b < s[0]; ++b) cls[b] = b * s[1];
    Var<T, B> pooled = depthlab::tanh(pooler(gather_rows(reshape(hidden, {s[0] * s[1], s[2]}), cls)));
    if (training && p > 0) {
        DEPTHLAB_CHECK(gen != nullptr, usage_error, "albert_sop_logits: dropout ", p, " needs a generator");
        pooled = dropout(pooled, static_cast<T>(p), *gen, true);
    }
    return classifier(pooled);
}

/// ALBERT: embeddings -> Stack<EncoderLayer, Tying> -> heads. Tying defaults to `tied`.
template <class T, class B = backend::cpu, class Tying = tied>
class Albert : public Module<T, B> {
public:
    explicit Albert(const albert_config& c, std::uint64_t seed = 0);
    /// Hidden states (B, T, H) after `iterations` layers (default: the configured depth).
    Var<T, B> encode(const token_batch& b, int iterations = -1) const {
        return encoder->forward(iterations, (*embeddings)(b), padding_mask<T, B>(b.lengths, b.length));
    }
    /// MLM logits (n, V) at the given flat positions (b * T + t) only.
    Var<T, B> mlm_logits(const Var<T, B>& hidden, std::span<const std::int64_t> positions) const {
        return albert_mlm_logits(hidden, positions, *mlm_dense, *mlm_norm, embeddings->word->weight, mlm_bias,
                                 mlm_activation(cfg.layer.act));
    }
    /// Sentence-order logits (B, 2) from the pooled first ([CLS]) token.
    Var<T, B> sop_logits(const Var<T, B>& hidden) const {
        return albert_sop_logits(hidden, *pooler, *sop, cfg.sop_dropout, &gen_, this->is_training());
    }

    albert_config cfg;
    AlbertEmbeddings<T, B>* embeddings;
    Stack<EncoderLayer<T, B>, Tying, T, B>* encoder;
    Linear<T, B>* mlm_dense;
    LayerNorm<T, B>* mlm_norm;
    Var<T, B> mlm_bias;
    Linear<T, B>* pooler;
    Linear<T, B>* sop;
    /// The generator behind dropout masks (saved with checkpoints for exact resumption).
    Generator& rng() { return gen_; }

private:
    mutable Generator gen_;  // mutable: the const forward passes draw dropout masks from it (as the layers do through their pointer)
};

// Defined outside the class body, so not inline: under DEPTHLAB_COMPILED a program calls the
// library's copy instead of compiling it again (include/depthlab/compiled.hpp).
template <class T, class B, class Tying>
Albert<T, B, Tying>::Albert(const albert_config& c, std::uint64_t seed) : cfg(c), gen_(seed) {
    embeddings = &this->register_module("embeddings", std::make_unique<AlbertEmbeddings<T, B>>(c, gen_));
    encoder = &this->register_module("encoder", std::make_unique<Stack<EncoderLayer<T, B>, Tying, T, B>>(c.depth, c.layer, gen_));
    mlm_dense = &this->register_module("mlm.dense", std::make_unique<Linear<T, B>>(c.layer.dim, c.embed, gen_, c.layer.init));
    mlm_norm = &this->register_module("mlm.norm", std::make_unique<LayerNorm<T, B>>(c.embed, c.layer.ln_eps));
    mlm_bias = this->register_parameter("mlm.bias", Tensor<T, B>::zeros({c.vocab}));
    pooler = &this->register_module("pooler", std::make_unique<Linear<T, B>>(c.layer.dim, c.layer.dim, gen_, c.layer.init));
    sop = &this->register_module("sop_classifier", std::make_unique<Linear<T, B>>(c.layer.dim, 2, gen_, c.layer.init));
}

// ------------------------------------------------------------------ encoder-decoder
struct seq2seq_config {
    index_t src_vocab = 4000, tgt_vocab = 4000;
    bool share_embeddings = false;  // one table for source and target (joint vocabulary)
    bool tie_output = true;         // output projection = target embedding^T
    int encoder_layers = 6, decoder_layers = 6;
    index_t max_len = 256;
    transformer_config layer{.dim = 512, .heads = 8, .ff_dim = 2048, .act = activation::relu, .dropout = 0.1,
                             .attention_dropout = 0.1, .norm_first = false, .ln_eps = 1e-5, .init = init_scheme::xavier};
};
/// seq2seq_config's fields by name (io::save_config / load_config).
template <class C, class F>
    requires std::same_as<std::remove_const_t<C>, seq2seq_config>
void config_fields(C& c, F&& f) {
    f("src_vocab", c.src_vocab);
    f("tgt_vocab", c.tgt_vocab);
    f("share_embeddings", c.share_embeddings);
    f("tie_output", c.tie_output);
    f("encoder_layers", c.encoder_layers);
    f("decoder_layers", c.decoder_layers);
    f("max_len", c.max_len);
    f("layer", c.layer);
}

/// The encoder–decoder sizes of the component-value study over a joint vocabulary (shared
/// embeddings tied to the output; post-LN, ReLU, Xavier init, dropout 0.1 as the paper):
///   "tiny"  2+2 layers, d 128, 4 heads, FF 512   smoke runs
///   "small" 3+3 layers, d 256, 4 heads, FF 1024  trains on 2 cores
///   "base"  6+6 layers, d 512, 8 heads, FF 2048  Transformer-base (Vaswani et al.)
inline seq2seq_config seq2seq_preset(const std::string& name, index_t vocab) {
    seq2seq_config c{.src_vocab = vocab, .tgt_vocab = vocab, .share_embeddings = true, .tie_output = true};
    if (name == "tiny") c.encoder_layers = c.decoder_layers = 2, c.layer.dim = 128, c.layer.heads = 4, c.layer.ff_dim = 512;
    else if (name == "small") c.encoder_layers = c.decoder_layers = 3, c.layer.dim = 256, c.layer.heads = 4, c.layer.ff_dim = 1024;
    else DEPTHLAB_CHECK(name == "base", usage_error, "seq2seq_preset: '", name, "' is not one of tiny, small, base");
    return c;
}
/// Sizes that replace a preset's: 0 (a negative dropout) keeps the preset's.
struct seq2seq_overrides {
    index_t encoder_layers = 0, decoder_layers = 0, dim = 0, heads = 0, ff_dim = 0;
    double dropout = -1;  // every sub-layer's and the attention weights'
};
/// The preset with the sizes `o` sets (e.g. from command-line flags).
inline seq2seq_config seq2seq_preset(const std::string& name, index_t vocab, const seq2seq_overrides& o) {
    seq2seq_config c = seq2seq_preset(name, vocab);
    if (o.encoder_layers > 0) c.encoder_layers = static_cast<int>(o.encoder_layers);
    if (o.decoder_layers > 0) c.decoder_layers = static_cast<int>(o.decoder_layers);
    if (o.dim > 0) c.layer.dim = o.dim;
    if (o.heads > 0) c.layer.heads = static_cast<int>(o.heads);
    if (o.ff_dim > 0) c.layer.ff_dim = o.ff_dim;
    if (o.dropout >= 0) c.layer.dropout = c.layer.attention_dropout = o.dropout;
    return c;
}
/// "3+3 layers, d 256, 4 heads, FF 1024, dropout 0.1, vocab 8000 (joint, shared + tied)"
inline std::string describe(const seq2seq_config& c) {
    std::ostringstream os;
    os << c.encoder_layers << "+" << c.decoder_layers << " layers, d " << c.layer.dim << ", " << c.layer.heads << " heads, FF " << c.layer.ff_dim
       << ", dropout " << c.layer.dropout << ", vocab " << c.src_vocab;
    if (c.src_vocab != c.tgt_vocab) os << " -> " << c.tgt_vocab;
    os << (c.share_embeddings ? (c.tie_output ? " (joint, shared + tied)" : " (joint, shared)") : c.tie_output ? " (tied output)" : "");
    return os.str();
}

/// Sinusoidal positions (Vaswani et al.): (max_len, D).
template <class T, class B = backend::cpu>
Tensor<T, B> sinusoidal_positions(index_t max_len, index_t D) {
    std::vector<T> p(static_cast<std::size_t>(max_len * D));
    for (index_t t = 0; t < max_len; ++t)
        for (index_t i = 0; i < D; i += 2) {
            const double f = std::pow(10000.0, -static_cast<double>(i) / static_cast<double>(D));
            p[t * D + i] = static_cast<T>(std::sin(t * f));
            if (i + 1 < D) p[t * D + i + 1] = static_cast<T>(std::cos(t * f));
        }
    return Tensor<T, B>::from({max_len, D}, p);
}

template <class T, class B = backend::cpu>
class Seq2SeqTransformer : public Module<T, B> {
public:
    explicit Seq2SeqTransformer(const seq2seq_config& c, std::uint64_t seed = 0);
    /// Source ids (B*Ts) -> memory (B, Ts, D).
    Var<T, B> encode(const token_batch& src) const;
    /// Target input ids (B*Tt, starting with BOS) -> logits (B, Tt, V_tgt).
    Var<T, B> decode(const Var<T, B>& memory, const token_batch& src, const token_batch& tgt_in) const;
    /// Target ids of ONE position `t` for N rows (incremental decoding): sqrt(D) *
    /// embedding + position t, dropout as in decode -> (N, 1, D).
    Var<T, B> embed_target_at(std::span<const std::int64_t> ids, index_t t) const {
        DEPTHLAB_CHECK(t >= 0 && t < cfg.max_len, shape_error, "Seq2SeqTransformer: position ", t, " >= max_len ", cfg.max_len);
        const auto N = static_cast<index_t>(ids.size());
        Var<T, B> e = scale((*tgt_embed)(ids, {N, 1}), static_cast<T>(std::sqrt(static_cast<double>(cfg.layer.dim))));
        e = add(e, Var<T, B>::constant(positions_.slice(0, t, t + 1)));
        return dropout(e, static_cast<T>(cfg.layer.dropout), gen_, this->is_training());
    }
    /// Decoder states (..., D) -> logits (..., V_tgt): the final LayerNorm (pre-LN models),
    /// then the output projection (the target embedding^T when tied).
    Var<T, B> output_logits(Var<T, B> y) const {
        if (decoder_norm) y = (*decoder_norm)(y);
        return output ? (*output)(y) : linear(y, tgt_embed->weight);
    }

    seq2seq_config cfg;
    Embedding<T, B>*src_embed, *tgt_embed;
    Stack<EncoderLayer<T, B>, untied, T, B>* encoder;
    Stack<DecoderLayer<T, B>, untied, T, B>* decoder;
    LayerNorm<T, B>* encoder_norm = nullptr;
    LayerNorm<T, B>* decoder_norm = nullptr;
    Linear<T, B>* output = nullptr;
    Generator& rng() { return gen_; }

private:
    /// sqrt(D) * embedding + positions, then dropout.
    Var<T, B> embed(const Embedding<T, B>& table, const token_batch& b) const {
        DEPTHLAB_CHECK(b.length <= cfg.max_len, shape_error, "Seq2SeqTransformer: length ", b.length, " > max_len ", cfg.max_len);
        Var<T, B> e = scale(table(b.ids, {b.batch, b.length}), static_cast<T>(std::sqrt(static_cast<double>(cfg.layer.dim))));
        e = add(e, Var<T, B>::constant(positions_.slice(0, 0, b.length)));
        return dropout(e, static_cast<T>(cfg.layer.dropout), gen_, this->is_training());
    }
    mutable Generator gen_;
    Tensor<T, B> positions_;
};

// Defined outside the class body, so not inline: under DEPTHLAB_COMPILED a program calls the
// library's copy instead of compiling it again (include/depthlab/compiled.hpp).
template <class T, class B>
Seq2SeqTransformer<T, B>::Seq2SeqTransformer(const seq2seq_config& c, std::uint64_t seed)
    : cfg(c), gen_(seed), positions_(sinusoidal_positions<T, B>(c.max_len, c.layer.dim)) {
    const index_t D = c.layer.dim;
    const double std_emb = std::pow(static_cast<double>(D), -0.5);
    src_embed = &this->register_module("src_embed", std::make_unique<Embedding<T, B>>(c.src_vocab, D, gen_, std_emb));
    if (c.share_embeddings) {
        DEPTHLAB_CHECK(c.src_vocab == c.tgt_vocab, usage_error, "Seq2SeqTransformer: shared embeddings need one vocabulary (",
                       c.src_vocab, " vs ", c.tgt_vocab, ")");
        tgt_embed = src_embed;
    } else {
        tgt_embed = &this->register_module("tgt_embed", std::make_unique<Embedding<T, B>>(c.tgt_vocab, D, gen_, std_emb));
    }
    encoder = &this->register_module("encoder", std::make_unique<Stack<EncoderLayer<T, B>, untied, T, B>>(c.encoder_layers, c.layer, gen_));
    decoder = &this->register_module("decoder", std::make_unique<Stack<DecoderLayer<T, B>, untied, T, B>>(c.decoder_layers, c.layer, gen_));
    if (c.layer.norm_first) {
        encoder_norm = &this->register_module("encoder_norm", std::make_unique<LayerNorm<T, B>>(D, c.layer.ln_eps));
        decoder_norm = &this->register_module("decoder_norm", std::make_unique<LayerNorm<T, B>>(D, c.layer.ln_eps));
    }
    if (!c.tie_output)
        output = &this->register_module("output_projection", std::make_unique<Linear<T, B>>(D, c.tgt_vocab, gen_, c.layer.init, false));
}

template <class T, class B>
Var<T, B> Seq2SeqTransformer<T, B>::encode(const token_batch& src) const {
    Var<T, B> x = embed(*src_embed, src);
    x = encoder->forward(-1, x, padding_mask<T, B>(src.lengths, src.length));
    return encoder_norm ? (*encoder_norm)(x) : x;
}

template <class T, class B>
Var<T, B> Seq2SeqTransformer<T, B>::decode(const Var<T, B>& memory, const token_batch& src, const token_batch& tgt_in) const {
    Var<T, B> y = embed(*tgt_embed, tgt_in);
    y = decoder->forward(-1, y, memory, causal_padding_mask<T, B>(tgt_in.lengths, tgt_in.length),
                         padding_mask<T, B>(src.lengths, src.length));
    return output_logits(y);
}

}  // namespace depthlab::nn
