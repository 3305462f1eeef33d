#pragma once
// Text for depthlab/report: escape() (HTML/XML escaping of every string that reaches the
// markup; invalid UTF-8 and control characters become U+FFFD), text_width() (estimated
// rendered width, used for layout), number formatting (format_number, format_fixed,
// detail::num for SVG coordinates, detail::parse_number for table cells) and
// detail::check, the std::invalid_argument that every builder throws on bad input.
// Standard library only.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

namespace depthlab::report {

// ------------------------------------------------------------------------------------
// Text
// ------------------------------------------------------------------------------------

namespace detail {

/// Decodes the code point at s[i] and advances i; an invalid or truncated sequence (or an
/// overlong form, a surrogate, > U+10FFFF) yields U+FFFD and advances by one byte.
inline char32_t next_code_point(std::string_view s, std::size_t& i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
        ++i;
        return b0;
    }
    std::size_t len = 0;
    char32_t cp = 0, min = 0;
    if ((b0 & 0xE0) == 0xC0) len = 2, cp = b0 & 0x1F, min = 0x80;
    else if ((b0 & 0xF0) == 0xE0) len = 3, cp = b0 & 0x0F, min = 0x800;
    else if ((b0 & 0xF8) == 0xF0) len = 4, cp = b0 & 0x07, min = 0x10000;
    else {
        ++i;
        return 0xFFFD;
    }
    if (i + len > s.size()) {
        ++i;
        return 0xFFFD;
    }
    for (std::size_t k = 1; k < len; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xC0) != 0x80) {
            ++i;
            return 0xFFFD;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        ++i;
        return 0xFFFD;
    }
    i += len;
    return cp;
}

inline void append_utf8(std::string& out, char32_t c) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

}  // namespace detail

/// Text for HTML/SVG text content and attribute values: & < > " ' become entities;
/// control characters (except tab, newline, carriage return), U+FFFE/U+FFFF and invalid
/// UTF-8 become U+FFFD, so the result is always well-formed XML.
inline std::string escape(std::string_view s) {
    std::string out;
    out.reserve(s.size() + s.size() / 8 + 8);
    for (std::size_t i = 0; i < s.size();) {
        char32_t c = detail::next_code_point(s, i);
        switch (c) {
            case U'&': out += "&amp;"; break;
            case U'<': out += "&lt;"; break;
            case U'>': out += "&gt;"; break;
            case U'"': out += "&quot;"; break;
            case U'\'': out += "&#39;"; break;
            default:
                if ((c < 0x20 && c != U'\t' && c != U'\n' && c != U'\r') || (c >= 0x7F && c <= 0x9F) || c == 0xFFFE ||
                    c == 0xFFFF)
                    c = 0xFFFD;
                detail::append_utf8(out, c);
        }
    }
    return out;
}

/// Estimated rendered width of `s` at `font_size` px in a sans-serif font (generous: based
/// on DejaVu Sans). Counts code points, not bytes.
inline double text_width(std::string_view s, double font_size) {
    double em = 0;
    for (std::size_t i = 0; i < s.size();) {
        const char32_t c = detail::next_code_point(s, i);
        if (c == U' ') em += 0.32;
        else if (c < 0x80 && std::string_view("il.,:;'|!jI()[]{}`/\\f").find(static_cast<char>(c)) != std::string_view::npos)
            em += 0.36;
        else if (c == U'm' || c == U'w' || c == U'M' || c == U'W') em += 0.92;
        else if (c == U't' || c == U'r') em += 0.42;
        else if (c >= U'A' && c <= U'Z') em += 0.72;
        else if (c >= U'0' && c <= U'9') em += 0.64;
        else if (c < 0x80) em += 0.61;
        else if (c >= 0x2E80) em += 1.0;  // CJK and wider
        else em += 0.72;
    }
    return em * font_size;
}

// ------------------------------------------------------------------------------------
// Numbers
// ------------------------------------------------------------------------------------

/// `significant` significant digits (printf %g); NaN reads "n/a", infinities "∞" / "−∞".
inline std::string format_number(double v, int significant = 3) {
    if (std::isnan(v)) return "n/a";
    if (std::isinf(v)) return v > 0 ? "\u221E" : "\u2212\u221E";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", std::clamp(significant, 1, 17), v);
    return buf;
}

/// `decimals` digits after the point (printf %f); NaN reads "n/a"; never "-0.0".
inline std::string format_fixed(double v, int decimals) {
    if (!std::isfinite(v)) return format_number(v);
    decimals = std::clamp(decimals, 0, 17);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    std::string s = buf;
    if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
    return s;
}

namespace detail {

/// SVG coordinate: at most two decimals, trailing zeros trimmed; non-finite becomes 0.
inline std::string num(double v) {
    if (!std::isfinite(v)) v = 0;
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    std::string s = buf;
    if (s.find('.') != std::string::npos) {
        while (s.back() == '0') s.pop_back();
        if (s.back() == '.') s.pop_back();
    }
    if (s == "-0") s = "0";
    return s;
}

/// True when the whole of `s` (surrounding blanks allowed) is a number strtod accepts.
inline bool parse_number(std::string_view s, double& out) {
    const auto b = s.find_first_not_of(" \t");
    if (b == std::string_view::npos) return false;
    const auto e = s.find_last_not_of(" \t");
    const std::string t(s.substr(b, e - b + 1));
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size()) return false;
    out = v;
    return true;
}

/// The error of every report builder: std::invalid_argument, "depthlab::report: <what>".
inline void check(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("depthlab::report: " + what);
}

}  // namespace detail

}  // namespace depthlab::report
