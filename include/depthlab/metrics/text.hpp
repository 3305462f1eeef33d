#pragma once
// Text helpers shared by the metrics: UTF-8 code points and whitespace as Python 3's
// `str.split()` / `str.rstrip()` see it, so that BLEU and chrF tokenise exactly like
// sacreBLEU (which is written in Python). Invalid UTF-8 bytes count as one (non-space)
// character each.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace depthlab::metrics {

namespace detail {
/// Decode the code point starting at s[i]; `len` gets its length in bytes (>= 1).
inline char32_t decode_utf8(std::string_view s, std::size_t i, std::size_t& len) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    auto cont = [&](std::size_t k) {
        return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0u) == 0x80u;
    };
    auto bits = [&](std::size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k]) & 0x3Fu); };
    if (b0 < 0x80u) { len = 1; return b0; }
    if ((b0 & 0xE0u) == 0xC0u && b0 >= 0xC2u && cont(1)) {
        len = 2;
        return (static_cast<char32_t>(b0 & 0x1Fu) << 6) | bits(1);
    }
    if ((b0 & 0xF0u) == 0xE0u && cont(1) && cont(2)) {
        const char32_t c = (static_cast<char32_t>(b0 & 0x0Fu) << 12) | (bits(1) << 6) | bits(2);
        if (c >= 0x800 && (c < 0xD800 || c > 0xDFFF)) { len = 3; return c; }
    }
    if ((b0 & 0xF8u) == 0xF0u && cont(1) && cont(2) && cont(3)) {
        const char32_t c = (static_cast<char32_t>(b0 & 0x07u) << 18) | (bits(1) << 12) | (bits(2) << 6) | bits(3);
        if (c >= 0x10000 && c <= 0x10FFFF) { len = 4; return c; }
    }
    len = 1;
    return 0xFFFD;  // invalid byte: one opaque character
}
}  // namespace detail

/// Python's `str.isspace()` for one code point.
[[nodiscard]] constexpr bool is_python_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Byte offsets of the code points of `s`, plus s.size() at the end.
[[nodiscard]] inline std::vector<std::size_t> code_point_offsets(std::string_view s) {
    std::vector<std::size_t> off;
    off.reserve(s.size() + 1);
    for (std::size_t i = 0, len = 0; i < s.size(); i += len) {
        off.push_back(i);
        (void)detail::decode_utf8(s, i, len);
    }
    off.push_back(s.size());
    return off;
}

/// Python's `s.split()`: the runs of non-whitespace, as views into `s`.
[[nodiscard]] inline std::vector<std::string_view> split_whitespace(std::string_view s) {
    std::vector<std::string_view> out;
    std::size_t start = std::string_view::npos;
    for (std::size_t i = 0, len = 0; i < s.size(); i += len) {
        const bool space = is_python_space(detail::decode_utf8(s, i, len));
        if (space && start != std::string_view::npos) {
            out.push_back(s.substr(start, i - start));
            start = std::string_view::npos;
        } else if (!space && start == std::string_view::npos) {
            start = i;
        }
    }
    if (start != std::string_view::npos) out.push_back(s.substr(start));
    return out;
}

/// Python's `s.rstrip()`.
[[nodiscard]] inline std::string_view rstrip_whitespace(std::string_view s) {
    std::size_t end = 0;
    for (std::size_t i = 0, len = 0; i < s.size(); i += len)
        if (!is_python_space(detail::decode_utf8(s, i, len))) end = i + len;
    return s.substr(0, end);
}

/// Python's `''.join(s.split())`: all whitespace removed.
[[nodiscard]] inline std::string remove_whitespace(std::string_view s) {
    std::string out;
    for (auto w : split_whitespace(s)) out += w;
    return out;
}

namespace detail {
inline void replace_all(std::string& s, std::string_view from, std::string_view to) {
    std::string out;
    std::size_t pos = 0;
    for (std::size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
        out.append(s, pos, hit - pos);
        out += to;
    }
    if (pos == 0) return;
    out.append(s, pos, std::string::npos);
    s = std::move(out);
}
}  // namespace detail

}  // namespace depthlab::metrics
