#pragma once
// Model configurations in checkpoint metadata, complete: every field of transformer_config,
// seq2seq_config, albert_config and act_options is written as "<prefix><field>" (nested
// configs as "<prefix><field>.<subfield>"), numbers exactly, enums by name, and read back
// strictly (a missing or malformed key is an io_error naming it). So a checkpoint rebuilds
// its model without flags:
//
//     io::save_config(st.metadata, "config.", cfg);            // when saving
//     auto cfg = io::load_config<nn::seq2seq_config>(file.metadata(), "config.");
//
// Each config's fields are listed once, in config_fields() below; the same list writes and
// reads, and tests/test_trainer.cpp checks the round trip (and the size of each struct, so
// that a new field cannot be forgotten here).
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "depthlab/core/error.hpp"
#include "depthlab/halting/act.hpp"
#include "depthlab/io/safetensors.hpp"  // metadata_map
#include "depthlab/nn/models.hpp"
#include "depthlab/nn/transformer.hpp"

namespace depthlab::io {

// ---- the field lists (C is the config or const config) ----
template <class C, class F>
    requires std::same_as<std::remove_const_t<C>, nn::transformer_config>
void config_fields(C& c, F&& f) {
    f("dim", c.dim);
    f("heads", c.heads);
    f("ff_dim", c.ff_dim);
    f("activation", c.act);
    f("dropout", c.dropout);
    f("attention_dropout", c.attention_dropout);
    f("norm_first", c.norm_first);
    f("ln_eps", c.ln_eps);
    f("init", c.init);
}
template <class C, class F>
    requires std::same_as<std::remove_const_t<C>, nn::seq2seq_config>
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
template <class C, class F>
    requires std::same_as<std::remove_const_t<C>, nn::albert_config>
void config_fields(C& c, F&& f) {
    f("vocab", c.vocab);
    f("embed", c.embed);
    f("max_len", c.max_len);
    f("segments", c.segments);
    f("depth", c.depth);
    f("layer", c.layer);
    f("sop_dropout", c.sop_dropout);
}
template <class C, class F>
    requires std::same_as<std::remove_const_t<C>, halting::act_options>
void config_fields(C& c, F&& f) {
    f("max_iterations", c.max_iterations);
    f("epsilon", c.epsilon);
    f("min_iterations", c.min_iterations);
    f("compact", c.compact);
    f("fixed_point_trace", c.fixed_point_trace);
    f("lambda_p", c.lambda_p);
    f("halting_bias", c.halting_bias);
    // (row_quantum is not saved: an execution choice of the compact path, exact either way)
}

namespace detail {
template <class V>
concept config_struct = requires(V& v) { config_fields(v, [](const char*, auto&) {}); };

template <class E>
struct enum_names;
template <>
struct enum_names<nn::activation> {
    static constexpr const char* names[] = {"gelu", "relu", "gelu_erf"};
};
template <>
struct enum_names<nn::init_scheme> {
    static constexpr const char* names[] = {"pytorch", "bert", "xavier"};
};
template <>
struct enum_names<halting::act_options::trace> {
    static constexpr const char* names[] = {"never", "eval_only", "always"};
};

template <class V>
std::string to_text(const V& v) {
    if constexpr (std::is_enum_v<V>) {
        return enum_names<V>::names[static_cast<std::size_t>(v)];
    } else if constexpr (std::is_same_v<V, bool>) {
        return v ? "true" : "false";
    } else {
        char buf[64];
        const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest exact form
        (void)ec;
        return std::string(buf, end);
    }
}
template <class V>
void from_text(const std::string& key, const std::string& s, V& v) {
    if constexpr (std::is_enum_v<V>) {
        const auto& names = enum_names<V>::names;
        for (std::size_t i = 0; i < std::size(names); ++i)
            if (s == names[i]) {
                v = static_cast<V>(i);
                return;
            }
        throw io_error(depthlab::detail::cat("config: '", key, "' = '", s, "' is not one of the names of its kind"));
    } else if constexpr (std::is_same_v<V, bool>) {
        DEPTHLAB_CHECK(s == "true" || s == "false", io_error, "config: '", key, "' = '", s, "' is not true or false");
        v = s == "true";
    } else {
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        DEPTHLAB_CHECK(!s.empty() && ec == std::errc() && end == s.data() + s.size(), io_error, "config: '", key, "' = '", s,
                       "' is not a valid ", std::is_floating_point_v<V> ? "number" : "integer");
    }
}
}  // namespace detail

/// Writes every field of config `c` into `md` under `prefix` (e.g. "config.").
template <detail::config_struct C>
void save_config(metadata_map& md, const std::string& prefix, const C& c) {
    config_fields(c, [&](const char* name, const auto& v) {
        using V = std::remove_cvref_t<decltype(v)>;
        if constexpr (detail::config_struct<V>) save_config(md, prefix + name + ".", v);
        else md[prefix + name] = detail::to_text(v);
    });
}
/// Reads every field of a C from `md` under `prefix`; throws io_error naming the first
/// missing or malformed key.
template <detail::config_struct C>
void load_config(const metadata_map& md, const std::string& prefix, C& c) {
    config_fields(c, [&](const char* name, auto& v) {
        using V = std::remove_cvref_t<decltype(v)>;
        if constexpr (detail::config_struct<V>) {
            load_config(md, prefix + name + ".", v);
        } else {
            const auto it = md.find(prefix + name);
            DEPTHLAB_CHECK(it != md.end(), io_error, "config: no '", prefix + name,
                           "' in the metadata (a checkpoint from an older version, or not a model checkpoint)");
            detail::from_text(prefix + name, it->second, v);
        }
    });
}
template <detail::config_struct C>
[[nodiscard]] C load_config(const metadata_map& md, const std::string& prefix) {
    C c;
    load_config(md, prefix, c);
    return c;
}

}  // namespace depthlab::io
