#pragma once
// Name maps (io/name_map.hpp) of the PyTorch / Hugging Face layouts that depthlab's models share:
//
//     auto map = io::hf_albert_names(cfg);                          // AlbertForPreTraining
//     io::load_parameters("model.safetensors", albert, map);        // import
//     io::save_parameters("export.safetensors", albert, map);       // export
//
// Sources. transformers is not installable here, so the HF names are the module attribute
// names of its source (modeling_albert.py read at commit 00661e38, a v4.x; modeling_bert.py
// from the same family of versions, from memory, cross-checked against the BertModel keys
// HF checkpoints carry); the nn.Transformer names are PyTorch 1.13's state_dict() keys.
// tests/fixtures/interop/make.py rebuilds these modules by hand and writes their state dicts.
//  * hf_albert_names: transformers' modeling_albert.py (v4.x) AlbertModel / AlbertForPreTraining:
//    embeddings.{word,position,token_type}_embeddings, embeddings.LayerNorm,
//    encoder.embedding_hidden_mapping_in (the E -> H projection: HF puts it in the encoder),
//    encoder.albert_layer_groups.{g}.albert_layers.0.{attention.{query,key,value,dense,LayerNorm},
//    ffn, ffn_output, full_layer_layer_norm}, pooler; heads predictions.{dense, LayerNorm, bias,
//    decoder (tied)}, sop_classifier.classifier. Tied depthlab ALBERT = 1 group (num_hidden_groups
//    1, inner_group_num 1); untied = one group per layer. ACT's halting unit has no HF
//    counterpart: an extra tensor "depthlab.encoder.halting.{weight,bias}", or kept.
//  * hf_bert_names: modeling_bert.py BertModel / BertForPreTraining over depthlab's untied
//    Albert with embed == dim: embeddings.*, encoder.layer.{i}.attention.self.{query,key,value},
//    attention.output.{dense,LayerNorm}, intermediate.dense, output.{dense,LayerNorm},
//    pooler.dense; heads cls.predictions.{transform.dense, transform.LayerNorm, bias, decoder
//    (tied)}, cls.seq_relationship (BERT's NSP head: the same (2, H) classifier as depthlab's
//    SOP head). BERT has no embedding projection: depthlab's is `fixed` to the identity.
//  * torch_transformer_names: torch.nn.Transformer (PyTorch 1.13): {encoder,decoder}.layers.{i}.
//    {self_attn, multihead_attn}.{in_proj_weight, in_proj_bias, out_proj}, linear1, linear2,
//    norm1..3; encoder.norm / decoder.norm = depthlab's final norms of a pre-LN model. A post-LN
//    depthlab model has no final norms, so nn.Transformer's (which it always builds) are
//    rejected: build the torch model with custom_encoder / custom_decoder and norm=None.
//    nn.Transformer has no embeddings or output projection: extra tensors "depthlab.<name>".
//    PyTorch's activation="gelu" is activation::gelu_erf.
//  * hf_gpt2_names: transformers' modeling_gpt2.py (v4.x) GPT2LMHeadModel / GPT2Model over
//    nn::GPT2: {prefix}wte, wpe, h.{i}.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
//    mlp.c_proj}, ln_f; lm_head.weight is tied to wte (save_pretrained leaves it out). GPT-2's
//    Conv1D stores a weight as (in, out), the transpose of a Linear's: c_attn's columns are
//    [q | k | v], depthlab's in_proj rows. The causal-mask buffers attn.bias and
//    attn.masked_bias that older versions save are ignored.
// What a map cannot carry is configuration: activation (HF "gelu_new" = activation::gelu,
// "gelu" = gelu_erf), layer_norm_eps = ln_eps (modeling_albert.py's AlbertMLMHead LayerNorm
// uses PyTorch's default 1e-5: set model.mlm_norm->eps for exact parity), sizes, depth.
// HF's additive mask of -10000 and depthlab's -inf give the same softmax.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/io/name_map.hpp"
#include "depthlab/nn/language_model.hpp"
#include "depthlab/nn/models.hpp"

namespace depthlab::io {

/// Extra tensors (depthlab parameters a layout lacks) are stored as this prefix + their name.
inline constexpr std::string_view extra_prefix = "depthlab.";

enum class hf_head { base_model, pretraining };  ///< AlbertModel / BertModel alone, or *ForPreTraining
enum class act_halting { none, extra_tensor, keep };
struct hf_albert_options {
    hf_head head = hf_head::pretraining;
    bool tied = true;                        ///< Albert<T, B, tied> / ActAlbert (1 group); false: untied, a group per layer
    act_halting halting = act_halting::none; ///< ActAlbert's encoder.halting: extra tensor or kept
    std::optional<std::string> prefix{};     ///< of the base model's names; default "albert." with heads, "" without
};
struct hf_bert_options {
    hf_head head = hf_head::base_model;
    std::optional<std::string> prefix{};     ///< default "bert." with heads, "" without
};
struct hf_gpt2_options {
    std::string prefix = "transformer.";  ///< of every name but lm_head: "transformer." (GPT2LMHeadModel), "" (GPT2Model)
};
struct torch_transformer_options {
    bool embeddings = true;  ///< true: embeddings / output projection as "depthlab.*" extra tensors; false: kept
};

namespace detail {
inline void map_affine(name_map& m, const std::string& internal, const std::string& external) {
    m.add(internal + ".weight", external + ".weight");
    m.add(internal + ".bias", external + ".bias");
}
/// One encoder layer, HF style: separate q, k, v Linear layers into the fused in_proj.
inline void map_hf_layer(name_map& m, const std::string& in, const std::string& q, const std::string& k, const std::string& v,
                         const std::string& out, const std::string& attn_norm, const std::string& ff1, const std::string& ff2,
                         const std::string& ff_norm) {
    m.split(in + "self_attention.in_proj_weight", {q + ".weight", k + ".weight", v + ".weight"});
    m.split(in + "self_attention.in_proj_bias", {q + ".bias", k + ".bias", v + ".bias"});
    map_affine(m, in + "self_attention.out_proj", out);
    map_affine(m, in + "self_attention.norm", attn_norm);
    map_affine(m, in + "feed_forward.linear1", ff1);
    map_affine(m, in + "feed_forward.linear2", ff2);
    map_affine(m, in + "feed_forward.norm", ff_norm);
}
inline void map_hf_embeddings(name_map& m, const std::string& P) {
    m.add("embeddings.word_embeddings.weight", P + "embeddings.word_embeddings.weight");
    m.add("embeddings.position_embeddings.weight", P + "embeddings.position_embeddings.weight");
    m.add("embeddings.token_type_embeddings.weight", P + "embeddings.token_type_embeddings.weight");
    map_affine(m, "embeddings.norm", P + "embeddings.LayerNorm");
    m.ignore(P + "embeddings.position_ids", "a buffer (arange), not a parameter");
    m.ignore(P + "embeddings.token_type_ids", "a buffer (zeros), not a parameter");
}
inline void keep_heads(name_map& m, const char* model) {
    const std::string why = std::string(model) + " has no pretraining heads";
    for (const char* n : {"mlm.dense.weight", "mlm.dense.bias", "mlm.norm.weight", "mlm.norm.bias", "mlm.bias", "sop_classifier.weight", "sop_classifier.bias"})
        m.keep(n, why);
}
}  // namespace detail

/// depthlab's Albert (tied or untied) / ActAlbert <-> HF AlbertModel / AlbertForPreTraining.
inline name_map hf_albert_names(const nn::albert_config& c, const hf_albert_options& o = {}) {
    const bool heads = o.head == hf_head::pretraining;
    const std::string P = o.prefix.value_or(heads ? "albert." : "");
    name_map m(heads ? "hf AlbertForPreTraining" : "hf AlbertModel");
    detail::map_hf_embeddings(m, P);
    detail::map_affine(m, "embeddings.projection", P + "encoder.embedding_hidden_mapping_in");
    for (int g = 0; g < (o.tied ? 1 : c.depth); ++g) {
        const std::string L = depthlab::detail::cat(P, "encoder.albert_layer_groups.", g, ".albert_layers.0.");
        detail::map_hf_layer(m, o.tied ? "encoder.shared." : depthlab::detail::cat("encoder.", g, "."), L + "attention.query", L + "attention.key",
                             L + "attention.value", L + "attention.dense", L + "attention.LayerNorm", L + "ffn", L + "ffn_output",
                             L + "full_layer_layer_norm");
    }
    detail::map_affine(m, "pooler", P + "pooler");
    if (heads) {
        m.tie("embeddings.word_embeddings.weight", "predictions.decoder.weight");
        detail::map_affine(m, "mlm.dense", "predictions.dense");
        detail::map_affine(m, "mlm.norm", "predictions.LayerNorm");
        m.add("mlm.bias", "predictions.bias").tie("mlm.bias", "predictions.decoder.bias");
        detail::map_affine(m, "sop_classifier", "sop_classifier.classifier");
    } else {
        detail::keep_heads(m, "AlbertModel");
    }
    for (const char* n : {"encoder.halting.weight", "encoder.halting.bias"}) {
        if (o.halting == act_halting::extra_tensor) m.add(n, std::string(extra_prefix) + n);
        else if (o.halting == act_halting::keep) m.keep(n, "ACT's halting unit has no Hugging Face counterpart");
    }
    return m;
}

/// depthlab's untied Albert with embed == dim <-> HF BertModel / BertForPreTraining.
inline name_map hf_bert_names(const nn::albert_config& c, const hf_bert_options& o = {}) {
    DEPTHLAB_CHECK(c.embed == c.layer.dim, usage_error, "hf_bert_names: BERT has no factorised embedding; embed ", c.embed, " must equal dim ",
                   c.layer.dim);
    const bool heads = o.head == hf_head::pretraining;
    const std::string P = o.prefix.value_or(heads ? "bert." : "");
    name_map m(heads ? "hf BertForPreTraining" : "hf BertModel");
    detail::map_hf_embeddings(m, P);
    m.fixed("embeddings.projection.weight", fixed_value::identity, "BERT has no embedding projection");
    m.fixed("embeddings.projection.bias", fixed_value::zeros, "BERT has no embedding projection");
    for (int i = 0; i < c.depth; ++i) {
        const std::string L = depthlab::detail::cat(P, "encoder.layer.", i, ".");
        detail::map_hf_layer(m, depthlab::detail::cat("encoder.", i, "."), L + "attention.self.query", L + "attention.self.key",
                             L + "attention.self.value", L + "attention.output.dense", L + "attention.output.LayerNorm", L + "intermediate.dense",
                             L + "output.dense", L + "output.LayerNorm");
    }
    detail::map_affine(m, "pooler", P + "pooler.dense");
    if (heads) {
        m.tie("embeddings.word_embeddings.weight", "cls.predictions.decoder.weight");
        detail::map_affine(m, "mlm.dense", "cls.predictions.transform.dense");
        detail::map_affine(m, "mlm.norm", "cls.predictions.transform.LayerNorm");
        m.add("mlm.bias", "cls.predictions.bias").tie("mlm.bias", "cls.predictions.decoder.bias");
        detail::map_affine(m, "sop_classifier", "cls.seq_relationship");
    } else {
        detail::keep_heads(m, "BertModel");
    }
    return m;
}

/// depthlab's GPT2 <-> HF GPT2LMHeadModel (prefix "transformer.") / GPT2Model (prefix "").
inline name_map hf_gpt2_names(const nn::gpt2_config& c, const hf_gpt2_options& o = {}) {
    using depthlab::detail::cat;
    const std::string& P = o.prefix;
    name_map m(P.empty() ? "hf GPT2Model" : "hf GPT2LMHeadModel");
    m.add("wte.weight", P + "wte.weight");
    if (!P.empty()) m.tie("wte.weight", "lm_head.weight");
    m.add("wpe.weight", P + "wpe.weight");
    const auto conv1d = [&](const std::string& in, const std::string& ex) {
        m.transposed(in + ".weight", ex + ".weight");
        m.add(in + ".bias", ex + ".bias");
    };
    for (int i = 0; i < c.depth; ++i) {
        const std::string in = cat("decoder.", i, "."), ex = cat(P, "h.", i, ".");
        detail::map_affine(m, in + "self_attention.norm", ex + "ln_1");
        m.transposed(in + "self_attention.in_proj_weight", ex + "attn.c_attn.weight");
        m.add(in + "self_attention.in_proj_bias", ex + "attn.c_attn.bias");
        conv1d(in + "self_attention.out_proj", ex + "attn.c_proj");
        detail::map_affine(m, in + "feed_forward.norm", ex + "ln_2");
        conv1d(in + "feed_forward.linear1", ex + "mlp.c_fc");
        conv1d(in + "feed_forward.linear2", ex + "mlp.c_proj");
        m.ignore(ex + "attn.bias", "the causal mask, a buffer");
        m.ignore(ex + "attn.masked_bias", "the masking constant, a buffer");
    }
    detail::map_affine(m, "ln_f", P + "ln_f");
    return m;
}

/// depthlab's Seq2SeqTransformer <-> torch.nn.Transformer (batch_first or not: same names).
inline name_map torch_transformer_names(const nn::seq2seq_config& c, const torch_transformer_options& o = {}) {
    using depthlab::detail::cat;
    name_map m("torch nn.Transformer");
    const auto attn = [&](const std::string& in, const std::string& ex) {
        m.add(in + ".in_proj_weight", ex + ".in_proj_weight");
        m.add(in + ".in_proj_bias", ex + ".in_proj_bias");
        detail::map_affine(m, in + ".out_proj", ex + ".out_proj");
    };
    for (int i = 0; i < c.encoder_layers; ++i) {
        const std::string in = cat("encoder.", i, "."), ex = cat("encoder.layers.", i, ".");
        attn(in + "self_attention", ex + "self_attn");
        detail::map_affine(m, in + "self_attention.norm", ex + "norm1");
        detail::map_affine(m, in + "feed_forward.linear1", ex + "linear1");
        detail::map_affine(m, in + "feed_forward.linear2", ex + "linear2");
        detail::map_affine(m, in + "feed_forward.norm", ex + "norm2");
    }
    for (int i = 0; i < c.decoder_layers; ++i) {
        const std::string in = cat("decoder.", i, "."), ex = cat("decoder.layers.", i, ".");
        attn(in + "self_attention", ex + "self_attn");
        detail::map_affine(m, in + "self_attention.norm", ex + "norm1");
        attn(in + "cross_attention", ex + "multihead_attn");
        detail::map_affine(m, in + "cross_attention.norm", ex + "norm2");
        detail::map_affine(m, in + "feed_forward.linear1", ex + "linear1");
        detail::map_affine(m, in + "feed_forward.linear2", ex + "linear2");
        detail::map_affine(m, in + "feed_forward.norm", ex + "norm3");
    }
    for (const char* side : {"encoder", "decoder"}) {
        if (c.layer.norm_first) {
            detail::map_affine(m, cat(side, "_norm"), cat(side, ".norm"));
        } else {
            for (const char* leaf : {".weight", ".bias"})
                m.reject(cat(side, ".norm", leaf), "a post-LN depthlab model has no final LayerNorm (build nn.Transformer with custom_encoder / "
                                                    "custom_decoder whose norm is None)");
        }
    }
    std::vector<std::string> own{"src_embed.weight"};
    if (!c.share_embeddings) own.emplace_back("tgt_embed.weight");
    if (!c.tie_output) own.emplace_back("output_projection.weight");
    for (const std::string& n : own) {
        if (o.embeddings) m.add(n, std::string(extra_prefix) + n);
        else m.keep(n, "nn.Transformer has no embeddings or output projection");
    }
    return m;
}

}  // namespace depthlab::io
