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
#include "depthlab/nn/language_model.hpp"
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

// ---- GPT-2 (nn::GPT2, io::hf_gpt2_names)
// config.json -> nn::gpt2_config (read_gpt2_config; "model_type" must be "gpt2"): vocab_size ->
//   vocab; n_positions -> positions; n_embd -> layer.dim; n_layer -> depth; n_head ->
//   layer.heads; n_inner -> layer.ff_dim (null: 4 n_embd); activation_function as hidden_act
//   above; resid_pdrop -> layer.dropout (embd_pdrop must equal it: depthlab has one rate for
//   both); attn_pdrop -> layer.attention_dropout; layer_norm_epsilon -> layer.ln_eps. When
//   present, scale_attn_weights must be true and scale_attn_by_inverse_layer_idx and
//   reorder_and_upcast_attn false (GPT-2's defaults; the others are not GPT-2's attention).
//   Fixed: pre-LN, init_scheme::bert.
// The weights: DIR/model.safetensors through hf_gpt2_names, with the prefix the file has
// ("transformer." as GPT2LMHeadModel, "" as GPT2Model), its sizes checked against the config
// first. save_pretrained_gpt2 writes GPT2LMHeadModel without lm_head.weight (tied), as
// transformers does, then config.json.

/// Reads DIR/config.json of a GPT-2 (io_error naming the file and key).
DEPTHLAB_OUT_OF_LINE nn::gpt2_config read_gpt2_config(const std::string& dir);
namespace detail {
DEPTHLAB_OUT_OF_LINE void write_gpt2_config(const nn::gpt2_config& c, const std::string& dir);
/// The name map of DIR/model.safetensors (its prefix), after checking the file's sizes against `c`.
DEPTHLAB_OUT_OF_LINE name_map gpt2_pretrained_names(const nn::gpt2_config& c, const std::string& dir);
}  // namespace detail

/// Reads the Hugging Face GPT-2 folder DIR (config.json + model.safetensors).
template <class T, class B = backend::cpu>
std::unique_ptr<nn::GPT2<T, B>> from_pretrained_gpt2(const std::string& dir, std::uint64_t seed = 0) {
    const nn::gpt2_config c = read_gpt2_config(dir);
    const name_map map = detail::gpt2_pretrained_names(c, dir);
    auto model = std::make_unique<nn::GPT2<T, B>>(c, seed);
    load_parameters(detail::pretrained_file(dir, "model.safetensors"), *model, map);
    return model;
}
/// Writes `model` as the Hugging Face folder DIR: model.safetensors (GPT2LMHeadModel, without
/// the tied lm_head.weight), then config.json.
template <class T, class B>
void save_pretrained_gpt2(const nn::GPT2<T, B>& model, const std::string& dir) {
    detail::make_pretrained_folder(dir);
    save_parameters(detail::pretrained_file(dir, "model.safetensors"), model, hf_gpt2_names(model.cfg), {}, {.write_tied = false});
    detail::write_gpt2_config(model.cfg, dir);
}

// Defined outside the declarations: under DEPTHLAB_COMPILED a program links the library's copy
// and does not compile the JSON parser and serializer again (core/out_of_line.hpp).
#if DEPTHLAB_DEFINE_OUT_OF_LINE
namespace detail {
/// DIR/config.json, read strictly: every accessor throws io_error naming the file and the key.
class hf_config_json {
public:
    using json = nlohmann::json;
    explicit hf_config_json(const std::string& dir) : path_(pretrained_file(dir, "config.json")) {
        std::error_code ec;
        if (!std::filesystem::is_directory(dir, ec)) throw error("the folder ", dir, " does not exist (or is not a folder)");
        std::FILE* f = std::fopen(path_.c_str(), "rb");
        if (f == nullptr) {
            const int err = errno;
            throw error("cannot open: ", errno_text(err), " (a Hugging Face model folder holds config.json and model.safetensors)");
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
        if (failed) throw error("cannot read: ", errno_text(err));
        if (too_large) throw error("larger than ", max_bytes, " bytes: not a model config");
        try {
            j_ = json::parse(text);
        } catch (const json::exception& e) {
            throw error("malformed JSON: ", e.what());
        }
        if (!j_.is_object()) throw error("a JSON ", j_.type_name(), ", not an object");
    }
    /// What the missing-key errors say needs the key ("an ALBERT config", ...).
    std::string model = "a Hugging Face config";

    template <class... Parts>
    [[nodiscard]] io_error error(const Parts&... parts) const {
        return io_error(depthlab::detail::cat("pretrained config ", path_, ": ", parts...));
    }
    [[nodiscard]] bool has(const char* key) const { return j_.contains(key); }
    /// The key's value as the errors show it (structured values by their kind: dump() recurses).
    [[nodiscard]] std::string shown(const char* key) const { return shown(at(key)); }
    [[nodiscard]] int integer(const char* key) const {  // sizes: 1 .. INT_MAX
        const json& v = at(key);
        if (!v.is_number_integer()) throw error("'", key, "' is ", shown(v), ", not an integer");
        if (!v.is_number_unsigned() || v.get<std::uint64_t>() < 1 || v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT_MAX))
            throw error("'", key, "' = ", shown(v), " is not a size in [1, ", INT_MAX, "]");
        return static_cast<int>(v.get<std::uint64_t>());
    }
    [[nodiscard]] bool is_null(const char* key) const { return at(key).is_null(); }
    [[nodiscard]] double number(const char* key) const {
        const json& v = at(key);
        if (!v.is_number()) throw error("'", key, "' is ", shown(v), ", not a number");
        return v.get<double>();
    }
    [[nodiscard]] double probability(const char* key) const {
        const double p = number(key);
        if (!(p >= 0 && p < 1)) throw error("'", key, "' = ", shown(key), " is not a dropout probability in [0, 1)");
        return p;
    }
    [[nodiscard]] double positive(const char* key) const {
        const double v = number(key);
        if (!(v > 0)) throw error("'", key, "' = ", shown(key), " is not > 0");
        return v;
    }
    [[nodiscard]] std::string str(const char* key) const {
        const json& v = at(key);
        if (!v.is_string()) throw error("'", key, "' is ", shown(v), ", not a string");
        return v.get<std::string>();
    }
    [[nodiscard]] bool boolean(const char* key) const {
        const json& v = at(key);
        if (!v.is_boolean()) throw error("'", key, "' is ", shown(v), ", not true or false");
        return v.get<bool>();
    }
    /// "gelu_new" / "gelu" / "relu" -> gelu (tanh) / gelu_erf / relu.
    [[nodiscard]] nn::activation activation(const char* key) const {
        const std::string act = str(key);
        if (act == "gelu_new") return nn::activation::gelu;
        if (act == "gelu") return nn::activation::gelu_erf;
        if (act == "relu") return nn::activation::relu;
        throw error("'", key, "' = ", shown(key), " is not supported (\"gelu_new\", \"gelu\", \"relu\")");
    }

private:
    const json& at(const char* key) const {
        const auto it = j_.find(key);
        if (it == j_.end()) throw error("no key '", key, "' (", model, " needs it)");
        return *it;
    }
    static std::string shown(const json& v) {
        if (v.is_array()) return "an array";
        if (v.is_object()) return "an object";
        std::string s = v.dump();
        return s.size() > 80 ? s.substr(0, 77) + "..." : s;
    }
    std::string path_;
    json j_;
};
/// io_error unless DIR/model.safetensors (`f`) holds `name` with the shape `want` that `keys` of
/// DIR/config.json describe; `what` names the call.
inline void expect_config_shape(const safetensors_file& f, const char* what, const std::string& dir, const std::string& name, const Shape& want,
                                const std::string& keys) {
    const std::string config = pretrained_file(dir, "config.json"), path = pretrained_file(dir, "model.safetensors");
    DEPTHLAB_CHECK(f.contains(name), io_error, what, " ", path, ": no tensor '", name, "' of shape ", want, ", which ", config, "'s ", keys,
                   " describe");
    const Shape& got = f.entry(name).shape;
    DEPTHLAB_CHECK(got == want, io_error, what, " ", dir, ": ", config, "'s ", keys, " give tensor '", name, "' the shape ", want, ", but ", path,
                   " has ", got);
}
/// HF's name of an activation (inverse of hf_config_json::activation).
inline const char* hf_activation_name(nn::activation a) {
    return a == nn::activation::gelu_erf ? "gelu" : a == nn::activation::relu ? "relu" : "gelu_new";
}
}  // namespace detail

DEPTHLAB_OUT_OF_LINE pretrained_config read_pretrained_config(const std::string& dir) {
    detail::hf_config_json j(dir);
    pretrained_config pc;
    const std::string type = j.str("model_type");
    if (type == "albert") pc.model_type = hf_model::albert;
    else if (type == "bert") pc.model_type = hf_model::bert;
    else throw j.error("'model_type' = ", j.shown("model_type"), " is not supported (\"albert\", \"bert\"; GPT-2: read_gpt2_config)");
    const bool albert = pc.model_type == hf_model::albert;
    j.model = albert ? "an ALBERT config" : "a BERT config";

    nn::albert_config& c = pc.cfg;
    c.vocab = j.integer("vocab_size");
    c.layer.dim = j.integer("hidden_size");
    c.embed = albert ? j.integer("embedding_size") : c.layer.dim;
    c.depth = j.integer("num_hidden_layers");
    c.layer.heads = j.integer("num_attention_heads");
    if (c.layer.dim % c.layer.heads != 0)
        throw j.error("'hidden_size' = ", c.layer.dim, " is not divisible by 'num_attention_heads' = ", c.layer.heads);
    c.layer.ff_dim = j.integer("intermediate_size");
    c.layer.act = j.activation("hidden_act");
    c.layer.dropout = j.probability("hidden_dropout_prob");
    c.layer.attention_dropout = j.probability("attention_probs_dropout_prob");
    c.max_len = j.integer("max_position_embeddings");
    c.segments = j.integer("type_vocab_size");
    c.layer.ln_eps = j.positive("layer_norm_eps");
    c.sop_dropout = albert ? j.probability("classifier_dropout_prob") : 0.0;
    c.layer.norm_first = false;
    c.layer.init = nn::init_scheme::bert;
    if (j.has("position_embedding_type") && j.str("position_embedding_type") != "absolute")
        throw j.error("'position_embedding_type' = ", j.shown("position_embedding_type"), " is not supported (\"absolute\")");
    pc.tied = false;
    if (albert) {
        const int groups = j.integer("num_hidden_groups"), inner = j.integer("inner_group_num");
        if (inner != 1) throw j.error("'inner_group_num' = ", inner, " is not supported (1: depthlab's groups hold one layer)");
        if (groups != 1 && groups != c.depth)
            throw j.error("'num_hidden_groups' = ", groups, " with 'num_hidden_layers' = ", c.depth, " is not supported (1: tied, ", c.depth,
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
    j["hidden_act"] = detail::hf_activation_name(c.layer.act);
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
    const std::string path = pretrained_file(dir, "model.safetensors");
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
        expect_config_shape(f, "from_pretrained", dir, name, want, keys);
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
DEPTHLAB_OUT_OF_LINE nn::gpt2_config read_gpt2_config(const std::string& dir) {
    detail::hf_config_json j(dir);
    const std::string type = j.str("model_type");
    if (type != "gpt2") throw j.error("'model_type' = ", j.shown("model_type"), " is not \"gpt2\" (ALBERT and BERT: read_pretrained_config)");
    j.model = "a GPT-2 config";
    nn::gpt2_config c;
    c.vocab = j.integer("vocab_size");
    c.positions = j.integer("n_positions");
    c.layer.dim = j.integer("n_embd");
    c.depth = j.integer("n_layer");
    c.layer.heads = j.integer("n_head");
    if (c.layer.dim % c.layer.heads != 0) throw j.error("'n_embd' = ", c.layer.dim, " is not divisible by 'n_head' = ", c.layer.heads);
    c.layer.ff_dim = j.has("n_inner") && !j.is_null("n_inner") ? j.integer("n_inner") : 4 * c.layer.dim;
    c.layer.act = j.activation("activation_function");
    c.layer.dropout = j.probability("resid_pdrop");
    if (j.probability("embd_pdrop") != c.layer.dropout)
        throw j.error("'embd_pdrop' = ", j.shown("embd_pdrop"), " differs from 'resid_pdrop' = ", j.shown("resid_pdrop"),
                      ": depthlab's GPT2 has one dropout rate for both");
    c.layer.attention_dropout = j.probability("attn_pdrop");
    c.layer.ln_eps = j.positive("layer_norm_epsilon");
    c.layer.norm_first = true;
    c.layer.init = nn::init_scheme::bert;
    for (const auto& [key, want] : {std::pair{"scale_attn_weights", true}, std::pair{"scale_attn_by_inverse_layer_idx", false},
                                    std::pair{"reorder_and_upcast_attn", false}})
        if (j.has(key) && j.boolean(key) != want)
            throw j.error("'", key, "' = ", j.shown(key), " is not supported (", want ? "true" : "false", ", GPT-2's attention)");
    return c;
}

DEPTHLAB_OUT_OF_LINE void detail::write_gpt2_config(const nn::gpt2_config& c, const std::string& dir) {
    nlohmann::json j = nlohmann::json::object();  // keys sorted, as transformers writes them
    j["model_type"] = "gpt2";
    j["architectures"] = nlohmann::json::array({"GPT2LMHeadModel"});
    j["vocab_size"] = c.vocab;
    j["n_positions"] = c.positions;
    j["n_embd"] = c.layer.dim;
    j["n_layer"] = c.depth;
    j["n_head"] = c.layer.heads;
    j["n_inner"] = c.layer.ff_dim;
    j["activation_function"] = hf_activation_name(c.layer.act);
    j["resid_pdrop"] = c.layer.dropout;
    j["embd_pdrop"] = c.layer.dropout;
    j["attn_pdrop"] = c.layer.attention_dropout;
    j["layer_norm_epsilon"] = c.layer.ln_eps;
    j["initializer_range"] = 0.02;
    j["scale_attn_weights"] = true;
    j["tie_word_embeddings"] = true;
    write_file_atomically(pretrained_file(dir, "config.json"), j.dump(2) + "\n", "save_pretrained_gpt2");
}

DEPTHLAB_OUT_OF_LINE name_map detail::gpt2_pretrained_names(const nn::gpt2_config& c, const std::string& dir) {
    using depthlab::detail::cat;
    const std::string config = pretrained_file(dir, "config.json"), path = pretrained_file(dir, "model.safetensors");
    const safetensors_file f(path);  // io_error naming the file when it is missing or corrupt
    const std::string P = f.contains("transformer.wte.weight") ? "transformer." : "";
    const auto expect = [&](const std::string& name, const Shape& want, const std::string& keys) {
        expect_config_shape(f, "from_pretrained_gpt2", dir, name, want, keys);
    };
    const std::string D = cat("'n_embd' = ", c.layer.dim);
    expect(P + "wte.weight", {c.vocab, c.layer.dim}, cat("'vocab_size' = ", c.vocab, " and ", D));
    expect(P + "wpe.weight", {c.positions, c.layer.dim}, cat("'n_positions' = ", c.positions, " and ", D));
    for (int i = 0; i < c.depth; ++i) {
        const std::string L = cat(P, "h.", i, "."), layers = cat(" and 'n_layer' = ", c.depth);
        expect(L + "attn.c_attn.weight", {c.layer.dim, 3 * c.layer.dim}, D + layers);
        expect(L + "mlp.c_fc.weight", {c.layer.dim, c.layer.ff_dim}, cat("'n_inner' = ", c.layer.ff_dim, ", ", D, layers));
    }
    DEPTHLAB_CHECK(!f.contains(cat(P, "h.", c.depth, ".ln_1.weight")), io_error, "from_pretrained_gpt2 ", dir, ": ", path, " has more blocks than ",
                   config, "'s 'n_layer' = ", c.depth);
    return hf_gpt2_names(c, {.prefix = P});
}
#endif  // DEPTHLAB_DEFINE_OUT_OF_LINE

}  // namespace depthlab::io
