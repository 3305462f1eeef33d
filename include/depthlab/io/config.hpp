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
// Each config's fields are listed once, in a config_fields() next to the struct (found by
// argument-dependent lookup; nn/transformer.hpp, nn/models.hpp, halting/act.hpp, the data
// streams' states), and an enum's names in an enum_names() next to the enum; the same list
// writes and reads, so this file needs none of the floors above it. tests/test_trainer.cpp
// checks the round trip (and the size of each struct, so that a new field cannot be
// forgotten in its list).
#include <charconv>
#include <cstdint>
#include <string>
#include <span>
#include <string_view>
#include <type_traits>

#include "depthlab/core/error.hpp"
#include "depthlab/io/safetensors.hpp"  // metadata_map

namespace depthlab::io {


namespace detail {
template <class V>
concept config_struct = requires(V& v) { config_fields(v, [](const char*, auto&) {}); };


template <class V>
std::string to_text(const V& v) {
    if constexpr (std::is_enum_v<V>) {
        return enum_names(v)[static_cast<std::size_t>(v)];
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
        const auto names = enum_names(v);
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
