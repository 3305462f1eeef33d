#pragma once
// Hugging Face model folders: `config.json` + `model.safetensors`, as transformers'
// save_pretrained writes them and from_pretrained reads them.
//
//     auto albert = io::from_pretrained<nn::Albert<float>>("albert-folder");          // HF ALBERT, 1 layer group
//     auto bert = io::from_pretrained<nn::Albert<float, backend::cpu, nn::untied>>("bert-folder");
//     io::save_pretrained(*albert, "export");                        // AlbertForPreTraining
//     io::save_pretrained(*bert, "export-bert", io::hf_model::bert); // BertForPreTraining
//
// from_pretrained returns a std::unique_ptr: depthlab's modules can be neither copied nor
// moved (their layers hold pointers to the model's generator).
//
// config.json -> nn::albert_config (read_pretrained_config; "model_type" picks the model):
//   vocab_size -> vocab; embedding_size -> embed (BERT: no key, embed = hidden_size);
//   hidden_size -> layer.dim; num_hidden_layers -> depth; num_attention_heads -> layer.heads;
//   intermediate_size -> layer.ff_dim; hidden_act "gelu_new" / "gelu" / "relu" -> gelu (tanh) /
//   gelu_erf / relu; hidden_dropout_prob -> layer.dropout; attention_probs_dropout_prob ->
//   layer.attention_dropout; max_position_embeddings -> max_len; type_vocab_size -> segments;
//   layer_norm_eps -> layer.ln_eps; classifier_dropout_prob -> sop_dropout (ALBERT; BERT: 0);
//   ALBERT's num_hidden_groups / inner_group_num: 1 / 1 = tied (nn::tied), num_hidden_layers /
//   1 = untied (nn::untied); position_embedding_type must be "absolute" when present.
//   Fixed: layer.norm_first = false, layer.init = init_scheme::bert. Every other key
//   (architectures, torch_dtype, transformers_version, token ids, ...) is ignored. Every
//   listed key is required (a missing one is an error, not a default).
// The weights go through io::hf_albert_names / io::hf_bert_names (io/layouts.hpp), strictly
// (load_parameters without allow_extra). The head is the file's: with the sentence-order /
// next-sentence classifier ("sop_classifier.classifier.weight" / "cls.seq_relationship.weight")
// it is *ForPreTraining; without it, *Model (prefix "albert." / "bert." when the file's names
// have it), and the model's heads keep their fresh values (drawn from `seed`). A file with the
// MLM head but no sentence head (AlbertForMaskedLM, BertForMaskedLM) has no map: an error.
// Before the model is built, the config's sizes are checked against the file's tensors (so a
// config.json cannot make depthlab allocate what the file does not hold).
// ALBERT's MLM-head LayerNorm gets eps 1e-5, as in modeling_albert.py of the transformers
// version the maps follow (io/layouts.hpp; later versions use layer_norm_eps: set
// model->mlm_norm->eps for those).
//
// save_pretrained writes model.safetensors (atomic, through the same maps, *ForPreTraining,
// without the tied copies predictions.decoder.* as transformers' save_pretrained does) and then
// config.json (atomic, keys sorted, indent 2): the inverse of the table plus model_type,
// architectures, initializer_range 0.02, position_embedding_type "absolute" and, for ALBERT,
// num_hidden_groups (1 tied, depth untied) and inner_group_num 1. The folder is created if
// needed; what a model cannot be written as (pre-LN, BERT with embed != dim, ...) is a
// usage_error before anything is written.
//
// Errors (io_error) name the file and the key: no folder, no config.json, malformed JSON, a
// missing key, a wrong type, an unsupported value, a folder whose model is not Model (tying),
// sizes that do not match the weights. Sharded checkpoints and pytorch_model.bin are not read.
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "depthlab/core/error.hpp"
#include "depthlab/core/out_of_line.hpp"
#include "depthlab/io/atomic_file.hpp"
#include "depthlab/io/layouts.hpp"
#include "depthlab/io/name_map.hpp"
#include "depthlab/io/safetensors.hpp"
#include "depthlab/nn/models.hpp"

namespace depthlab::io {

/// The Hugging Face model types depthlab reads and writes ("model_type" in config.json).
enum class hf_model { albert, bert };
inline const char* hf_model_name(hf_model m) { return m == hf_model::albert ? "albert" : "bert"; }

/// What a config.json describes.
struct pretrained_config {
    hf_model model_type = hf_model::albert;
    nn::albert_config cfg{};
    bool tied = true;  ///< ALBERT with one shared layer group (nn::tied); false: a group per layer, and always for BERT
};

/// Reads DIR/config.json: the depthlab config it describes (io_error naming the file and key).
DEPTHLAB_OUT_OF_LINE pretrained_config read_pretrained_config(const std::string& dir);

namespace detail {
inline std::string pretrained_file(const std::string& dir, const char* name) { return (std::filesystem::path(dir) / name).string(); }

/// Writes DIR/config.json for `pc` (atomic).
DEPTHLAB_OUT_OF_LINE void write_pretrained_config(const pretrained_config& pc, const std::string& dir);
/// The HF name map of DIR/model.safetensors (its head and prefix), after checking that the
/// sizes of `pc` match the file's tensors.
DEPTHLAB_OUT_OF_LINE name_map pretrained_names(const pretrained_config& pc, const std::string& dir);

/// io_error unless a model of tying `model_tied` can hold what config.json describes.
inline void check_pretrained_tying(const pretrained_config& pc, bool model_tied, const std::string& dir) {
    using depthlab::detail::cat;
    const std::string where = cat("from_pretrained ", pretrained_file(dir, "config.json"), ": ");
    if (pc.model_type == hf_model::bert) {
        DEPTHLAB_CHECK(!model_tied, io_error, where, "'model_type' \"bert\" has a layer per position of the stack: load it into "
                       "nn::Albert<T, B, nn::untied>, not nn::Albert<T, B, nn::tied>");
        return;
    }
    // a 1-layer ALBERT is one group either way
    DEPTHLAB_CHECK(pc.cfg.depth == 1 || pc.tied == model_tied, io_error, where, "'num_hidden_groups' = ", pc.tied ? 1 : pc.cfg.depth,
                   " with 'num_hidden_layers' = ", pc.cfg.depth, " is ", pc.tied ? "a tied ALBERT (one shared layer group)" : "an untied ALBERT (a layer group per layer)",
                   ": load it into nn::Albert<T, B, nn::", pc.tied ? "tied" : "untied", ">, not nn::Albert<T, B, nn::", model_tied ? "tied" : "untied", ">");
}

/// usage_error unless `pc` (a model's config and tying) can be written as `pc.model_type`.
inline void check_pretrained_savable(const pretrained_config& pc, const std::string& dir) {
    using depthlab::detail::cat;
    const std::string where = cat("save_pretrained ", dir, ": ");
    const nn::albert_config& c = pc.cfg;
    DEPTHLAB_CHECK(!c.layer.norm_first, usage_error, where, "Hugging Face ALBERT and BERT are post-LN; a pre-LN model (layer.norm_first) has no counterpart");
    if (pc.model_type == hf_model::albert) return;
    DEPTHLAB_CHECK(!pc.tied, usage_error, where, "BERT has a layer per position of the stack: save an nn::Albert<T, B, nn::untied> as bert, "
                   "or this tied one as albert");
    DEPTHLAB_CHECK(c.embed == c.layer.dim, usage_error, where, "BERT has no factorised embedding: embed ", c.embed, " must equal dim ", c.layer.dim,
                   " (or save as albert)");
    DEPTHLAB_CHECK(c.sop_dropout == 0, usage_error, where, "BERT's next-sentence head has no dropout: sop_dropout ", c.sop_dropout,
                   " has no config.json key (set it to 0, or save as albert)");
}

inline void make_pretrained_folder(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    DEPTHLAB_CHECK(!ec, io_error, "save_pretrained ", dir, ": cannot create the folder: ", ec.message());
}

/// The models a Hugging Face folder loads into: nn::Albert, tied or untied.
template <class Model>
struct pretrained_model : std::false_type {
    static constexpr bool tied = false;
};
template <class T, class B, class Tying>
struct pretrained_model<nn::Albert<T, B, Tying>> : std::true_type {
    static constexpr bool tied = Tying::is_tied;
};
}  // namespace detail

/// Reads the Hugging Face folder DIR (config.json + model.safetensors) into a new Model:
/// nn::Albert<T, B, nn::tied> (ALBERT, one layer group) or nn::Albert<T, B, nn::untied>
/// (ALBERT with a group per layer, or BERT). Parameters the file lacks (the heads of a
/// *Model file) keep their fresh values, drawn from `seed`.
template <class Model>
std::unique_ptr<Model> from_pretrained(const std::string& dir, std::uint64_t seed = 0) {
    static_assert(detail::pretrained_model<Model>::value,
                  "io::from_pretrained: Model must be nn::Albert<T, B, nn::tied> or nn::Albert<T, B, nn::untied>");
    constexpr bool tied = detail::pretrained_model<Model>::tied;
    pretrained_config pc = read_pretrained_config(dir);
    detail::check_pretrained_tying(pc, tied, dir);
    pc.tied = tied;  // the same, except for a 1-layer ALBERT (one group either way)
    const name_map map = detail::pretrained_names(pc, dir);
    auto model = std::make_unique<Model>(pc.cfg, seed);
    if (pc.model_type == hf_model::albert) model->mlm_norm->eps = 1e-5;  // AlbertMLMHead's LayerNorm: PyTorch's default eps
    load_parameters(detail::pretrained_file(dir, "model.safetensors"), *model, map);
    return model;
}

/// Writes `model` as the Hugging Face folder DIR (model.safetensors, then config.json) of
/// `type`: ALBERT (tied or untied) or BERT (untied, embed == dim, an identity embedding
/// projection, sop_dropout 0), both *ForPreTraining.
template <class Model>
void save_pretrained(const Model& model, const std::string& dir, hf_model type = hf_model::albert) {
    static_assert(detail::pretrained_model<Model>::value,
                  "io::save_pretrained: Model must be nn::Albert<T, B, nn::tied> or nn::Albert<T, B, nn::untied>");
    const pretrained_config pc{type, model.cfg, detail::pretrained_model<Model>::tied};
    detail::check_pretrained_savable(pc, dir);
    const name_map map = type == hf_model::albert ? hf_albert_names(pc.cfg, {.tied = pc.tied})
                                                  : hf_bert_names(pc.cfg, {.head = hf_head::pretraining});
    detail::make_pretrained_folder(dir);
    save_parameters(detail::pretrained_file(dir, "model.safetensors"), model, map, {}, {.write_tied = false});
    detail::write_pretrained_config(pc, dir);
}

// Defined outside the declarations: under DEPTHLAB_COMPILED a program links the library's copy
// and does not compile the JSON parser and serializer again (core/out_of_line.hpp).
#if DEPTHLAB_DEFINE_OUT_OF_LINE
DEPTHLAB_OUT_OF_LINE pretrained_config read_pretrained_config(const std::string& dir) {
    using depthlab::detail::cat;
    using json = nlohmann::json;
    const std::string path = detail::pretrained_file(dir, "config.json");
    const auto error = [&](const auto&... parts) { return io_error(cat("pretrained config ", path, ": ", parts...)); };
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) throw error("the folder ", dir, " does not exist (or is not a folder)");

    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        const int err = errno;
        throw error("cannot open: ", detail::errno_text(err), " (a Hugging Face model folder holds config.json and model.safetensors)");
    }
    constexpr std::size_t max_bytes = std::size_t{16} << 20;
    std::string text;
    char buf[1 << 14];
    bool failed = false, too_large = false;
    for (;;) {
        const std::size_t n = std::fread(buf, 1, sizeof buf, f);
        text.append(buf, n);
        if (text.size() > max_bytes) {
            too_large = true;
            break;
        }
        if (n < sizeof buf) {
            failed = std::ferror(f) != 0;
            break;
        }
    }
    const int err = errno;
    std::fclose(f);
    if (failed) throw error("cannot read: ", detail::errno_text(err));
    if (too_large) throw error("larger than ", max_bytes, " bytes: not a model config");

    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        throw error("malformed JSON: ", e.what());
    }
    if (!j.is_object()) throw error("a JSON ", j.type_name(), ", not an object");
    const auto shown = [](const json& v) {  // (structured values by their kind: dump() recurses)
        if (v.is_array()) return std::string("an array");
        if (v.is_object()) return std::string("an object");
        std::string s = v.dump();
        return s.size() > 80 ? s.substr(0, 77) + "..." : s;
    };
    std::string model = "a Hugging Face config";
    const auto at = [&](const char* key) -> const json& {
        const auto it = j.find(key);
        if (it == j.end()) throw error("no key '", key, "' (", model, " needs it)");
        return *it;
    };
    const auto integer = [&](const char* key) -> int {  // sizes: 1 .. INT_MAX
        const json& v = at(key);
        if (!v.is_number_integer()) throw error("'", key, "' is ", shown(v), ", not an integer");
        if (!v.is_number_unsigned() || v.get<std::uint64_t>() < 1 || v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT_MAX))
            throw error("'", key, "' = ", shown(v), " is not a size in [1, ", INT_MAX, "]");
        return static_cast<int>(v.get<std::uint64_t>());
    };
    const auto number = [&](const char* key) -> double {
        const json& v = at(key);
        if (!v.is_number()) throw error("'", key, "' is ", shown(v), ", not a number");
        return v.get<double>();
    };
    const auto probability = [&](const char* key) {
        const double p = number(key);
        if (!(p >= 0 && p < 1)) throw error("'", key, "' = ", shown(at(key)), " is not a dropout probability in [0, 1)");
        return p;
    };
    const auto str = [&](const char* key) -> std::string {
        const json& v = at(key);
        if (!v.is_string()) throw error("'", key, "' is ", shown(v), ", not a string");
        return v.get<std::string>();
    };

    pretrained_config pc;
    const std::string type = str("model_type");
    if (type == "albert") pc.model_type = hf_model::albert;
    else if (type == "bert") pc.model_type = hf_model::bert;
    else throw error("'model_type' = ", shown(at("model_type")), " is not supported (\"albert\", \"bert\")");
    const bool albert = pc.model_type == hf_model::albert;
    model = albert ? "an ALBERT config" : "a BERT config";

    nn::albert_config& c = pc.cfg;
    c.vocab = integer("vocab_size");
    c.layer.dim = integer("hidden_size");
    c.embed = albert ? integer("embedding_size") : c.layer.dim;
    c.depth = integer("num_hidden_layers");
    c.layer.heads = integer("num_attention_heads");
    if (c.layer.dim % c.layer.heads != 0)
        throw error("'hidden_size' = ", c.layer.dim, " is not divisible by 'num_attention_heads' = ", c.layer.heads);
    c.layer.ff_dim = integer("intermediate_size");
    const std::string act = str("hidden_act");
    if (act == "gelu_new") c.layer.act = nn::activation::gelu;
    else if (act == "gelu") c.layer.act = nn::activation::gelu_erf;
    else if (act == "relu") c.layer.act = nn::activation::relu;
    else throw error("'hidden_act' = ", shown(at("hidden_act")), " is not supported (\"gelu_new\", \"gelu\", \"relu\")");
    c.layer.dropout = probability("hidden_dropout_prob");
    c.layer.attention_dropout = probability("attention_probs_dropout_prob");
    c.max_len = integer("max_position_embeddings");
    c.segments = integer("type_vocab_size");
    c.layer.ln_eps = number("layer_norm_eps");
    if (!(c.layer.ln_eps > 0)) throw error("'layer_norm_eps' = ", shown(at("layer_norm_eps")), " is not > 0");
    c.sop_dropout = albert ? probability("classifier_dropout_prob") : 0.0;
    c.layer.norm_first = false;
    c.layer.init = nn::init_scheme::bert;
    if (j.contains("position_embedding_type") && str("position_embedding_type") != "absolute")
        throw error("'position_embedding_type' = ", shown(at("position_embedding_type")), " is not supported (\"absolute\")");
    pc.tied = false;
    if (albert) {
        const int groups = integer("num_hidden_groups"), inner = integer("inner_group_num");
        if (inner != 1) throw error("'inner_group_num' = ", inner, " is not supported (1: depthlab's groups hold one layer)");
        if (groups != 1 && groups != c.depth)
            throw error("'num_hidden_groups' = ", groups, " with 'num_hidden_layers' = ", c.depth, " is not supported (1: tied, ", c.depth,
                        ": untied)");
        pc.tied = groups == 1;
    }
    return pc;
}

DEPTHLAB_OUT_OF_LINE void detail::write_pretrained_config(const pretrained_config& pc, const std::string& dir) {
    const nn::albert_config& c = pc.cfg;
    const bool albert = pc.model_type == hf_model::albert;
    nlohmann::json j = nlohmann::json::object();  // keys sorted, as transformers writes them
    j["model_type"] = hf_model_name(pc.model_type);
    j["architectures"] = nlohmann::json::array({albert ? "AlbertForPreTraining" : "BertForPreTraining"});
    j["vocab_size"] = c.vocab;
    if (albert) j["embedding_size"] = c.embed;
    j["hidden_size"] = c.layer.dim;
    j["num_hidden_layers"] = c.depth;
    if (albert) {
        j["num_hidden_groups"] = pc.tied ? 1 : c.depth;
        j["inner_group_num"] = 1;
        j["classifier_dropout_prob"] = c.sop_dropout;
    }
    j["num_attention_heads"] = c.layer.heads;
    j["intermediate_size"] = c.layer.ff_dim;
    j["hidden_act"] = c.layer.act == nn::activation::gelu_erf ? "gelu" : c.layer.act == nn::activation::relu ? "relu" : "gelu_new";
    j["hidden_dropout_prob"] = c.layer.dropout;
    j["attention_probs_dropout_prob"] = c.layer.attention_dropout;
    j["max_position_embeddings"] = c.max_len;
    j["type_vocab_size"] = c.segments;
    j["layer_norm_eps"] = c.layer.ln_eps;
    j["initializer_range"] = 0.02;
    j["position_embedding_type"] = "absolute";
    write_file_atomically(pretrained_file(dir, "config.json"), j.dump(2) + "\n", "save_pretrained");
}

DEPTHLAB_OUT_OF_LINE name_map detail::pretrained_names(const pretrained_config& pc, const std::string& dir) {
    using depthlab::detail::cat;
    const std::string config = pretrained_file(dir, "config.json"), path = pretrained_file(dir, "model.safetensors");
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        DEPTHLAB_CHECK(!std::filesystem::exists(pretrained_file(dir, "model.safetensors.index.json"), ec), io_error, "from_pretrained ", path,
                       ": no such file; the folder holds a sharded checkpoint (model.safetensors.index.json), which depthlab does not read");
        DEPTHLAB_CHECK(!std::filesystem::exists(pretrained_file(dir, "pytorch_model.bin"), ec), io_error, "from_pretrained ", path,
                       ": no such file; the folder holds pytorch_model.bin, which depthlab does not read (save it again as safetensors)");
    }
    const safetensors_file f(path);  // io_error naming the file when it is missing or corrupt
    const nn::albert_config& c = pc.cfg;
    const bool albert = pc.model_type == hf_model::albert;
    const std::string base = albert ? "albert." : "bert.";
    const std::string sop = albert ? "sop_classifier.classifier.weight" : "cls.seq_relationship.weight";
    const std::string mlm = albert ? "predictions.bias" : "cls.predictions.bias";
    const bool heads = f.contains(sop);
    DEPTHLAB_CHECK(heads || !f.contains(mlm), io_error, "from_pretrained ", path, ": the file has the MLM head ('", mlm, "') but no ",
                   albert ? "sentence-order" : "next-sentence", " head ('", sop, "'), as ", albert ? "AlbertForMaskedLM" : "BertForMaskedLM",
                   " writes it; depthlab's Hugging Face maps read ", albert ? "AlbertForPreTraining" : "BertForPreTraining", " (both heads) or ",
                   albert ? "AlbertModel" : "BertModel", " (no head)");
    const std::string P = heads || f.contains(base + "embeddings.word_embeddings.weight") ? base : "";

    // The sizes of config.json against the file's tensors, before the model is built.
    const auto expect = [&](const std::string& name, const Shape& want, const std::string& keys) {
        DEPTHLAB_CHECK(f.contains(name), io_error, "from_pretrained ", path, ": no tensor '", name, "' of shape ", want, ", which ", config,
                       "'s ", keys, " describe");
        const Shape& got = f.entry(name).shape;
        DEPTHLAB_CHECK(got == want, io_error, "from_pretrained ", dir, ": ", config, "'s ", keys, " give tensor '", name, "' the shape ", want,
                       ", but ", path, " has ", got);
    };
    const std::string E = albert ? cat("'embedding_size' = ", c.embed) : cat("'hidden_size' = ", c.layer.dim);
    const std::string H = cat("'hidden_size' = ", c.layer.dim);
    expect(P + "embeddings.word_embeddings.weight", {c.vocab, c.embed}, cat("'vocab_size' = ", c.vocab, " and ", E));
    expect(P + "embeddings.position_embeddings.weight", {c.max_len, c.embed}, cat("'max_position_embeddings' = ", c.max_len, " and ", E));
    expect(P + "embeddings.token_type_embeddings.weight", {c.segments, c.embed}, cat("'type_vocab_size' = ", c.segments, " and ", E));
    if (albert) expect(P + "encoder.embedding_hidden_mapping_in.weight", {c.layer.dim, c.embed}, cat(H, " and ", E));
    for (int i = 0; i < (pc.tied ? 1 : c.depth); ++i) {
        const std::string L = albert ? cat(P, "encoder.albert_layer_groups.", i, ".albert_layers.0.") : cat(P, "encoder.layer.", i, ".");
        const std::string layer = pc.tied ? std::string() : cat(" and 'num_hidden_layers' = ", c.depth);
        expect(L + (albert ? "attention.query.weight" : "attention.self.query.weight"), {c.layer.dim, c.layer.dim}, H + layer);
        expect(L + (albert ? "ffn.weight" : "intermediate.dense.weight"), {c.layer.ff_dim, c.layer.dim},
               cat("'intermediate_size' = ", c.layer.ff_dim, " and ", H, layer));
    }
    const hf_head head = heads ? hf_head::pretraining : hf_head::base_model;
    if (albert) return hf_albert_names(c, {.head = head, .tied = pc.tied, .prefix = P});
    return hf_bert_names(c, {.head = head, .prefix = P});
}
#endif  // DEPTHLAB_DEFINE_OUT_OF_LINE

}  // namespace depthlab::io
