#pragma once
// Self-contained HTML reports with inline SVG figures: one file, no JavaScript, no network,
// readable on screen and on paper. Standard library only (it may be used by programs that
// do not link the rest of depthlab).
//
//   report::html_page page("ACT-ALBERT halting study");
//   page.section("Mean iterations per token category")
//       .table({"category", "ours", "paper"}, rows, {.decimals = 1, .highlight_column = 1})
//       .figure(report::bar_chart(categories, {{"ours", ours}, {"paper", paper}},
//                                 {.title = "Mean iterations", .y_label = "iterations"}),
//               "N_max = 12, tau = 5e-4.")
//       .provenance("train_act --nmax 12 (git 1a2b3c4)");
//   page.write("report.html");   // atomic: temp file + rename
//
// Figures (bar_chart, line_chart, heat_map, scatter) return SVG markup (a standalone,
// well-formed XML document with a viewBox, so it scales). Every string that reaches the
// markup (titles, labels, table cells, paragraphs) goes through escape(): the five XML
// specials become entities, control characters and invalid UTF-8 become U+FFFD. The only
// unescaped inputs are html_page::figure's SVG and html_page::raw_html, which are trusted.
//
// Missing values: NaN (or ±inf) is "not available" everywhere. Bars: no bar, "n/a" at the
// baseline. Lines: the line breaks (a gap); an isolated point keeps a marker. Heat maps:
// a hatched grey cell labelled "n/a" (and an "n/a" swatch under the colour bar). Scatter:
// the point is skipped. Tables: a numeric-formatted NaN cell reads "n/a".
//
// Colours: series use the Okabe–Ito palette (colour-blind safe) and, in line charts and
// scatter plots, a different marker shape per series too; heat maps use a sequential map
// from white to dark blue (ColorBrewer "Blues"; darker = larger), whose luminance falls
// monotonically.
//
// Layout is computed from estimated text widths (tuned on DejaVu Sans, one of the widest
// common sans fonts, so narrower system fonts only leave more room): margins grow with
// the tick labels, long category labels are rotated, legends sit above the plot area and
// never cover data.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "depthlab/io/atomic_file.hpp"

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

}  // namespace detail

// ------------------------------------------------------------------------------------
// Colours
// ------------------------------------------------------------------------------------

/// Okabe & Ito (2008), ordered so that neighbours contrast; yellow last (weak on white).
inline constexpr std::array<const char*, 8> okabe_ito = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                                         "#CC79A7", "#56B4E9", "#000000", "#F0E442"};

/// Colour of series i (cycles through okabe_ito).
inline std::string series_colour(std::size_t i) { return okabe_ito[i % okabe_ito.size()]; }

struct rgb {
    int r = 0, g = 0, b = 0;
};

/// "#rrggbb"
inline std::string to_hex(rgb c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", std::clamp(c.r, 0, 255), std::clamp(c.g, 0, 255), std::clamp(c.b, 0, 255));
    return buf;
}

/// The sequential map at t in [0, 1] (clamped): white (0) to dark blue (1), through
/// ColorBrewer "Blues". NaN gives the "n/a" grey.
inline rgb sequential_rgb(double t) {
    static constexpr std::array<rgb, 9> stops = {{{255, 255, 255},
                                                  {222, 235, 247},
                                                  {198, 219, 239},
                                                  {158, 202, 225},
                                                  {107, 174, 214},
                                                  {66, 146, 198},
                                                  {33, 113, 181},
                                                  {8, 81, 156},
                                                  {8, 48, 107}}};
    if (std::isnan(t)) return {224, 224, 224};
    t = std::clamp(t, 0.0, 1.0) * (stops.size() - 1);
    const auto k = std::min(static_cast<std::size_t>(t), stops.size() - 2);
    const double f = t - static_cast<double>(k);
    auto mix = [f](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * f)); };
    return {mix(stops[k].r, stops[k + 1].r), mix(stops[k].g, stops[k + 1].g), mix(stops[k].b, stops[k + 1].b)};
}
inline std::string sequential_colour(double t) { return to_hex(sequential_rgb(t)); }

/// WCAG relative luminance in [0, 1].
inline double relative_luminance(rgb c) {
    auto lin = [](int v) {
        const double s = std::clamp(v, 0, 255) / 255.0;
        return s <= 0.04045 ? s / 12.92 : std::pow((s + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
}

// ------------------------------------------------------------------------------------
// Axis ticks
// ------------------------------------------------------------------------------------

/// Tick positions and how to print them.
struct axis_ticks {
    std::vector<double> values;  // ascending
    double step = 0;             // linear ticks: the spacing; log ticks: 0
    int decimals = 0;            // linear ticks: digits after the point for labels
    bool log = false;
    /// The label of value v ("0.25", "8", "1e-05" for log ticks outside 1e-3..1e4).
    [[nodiscard]] std::string label(double v) const {
        if (log) {
            const double a = std::abs(v);
            if (a != 0 && (a < 1e-3 * (1 - 1e-9) || a >= 1e5 * (1 - 1e-9))) {
                char buf[32];
                std::snprintf(buf, sizeof buf, "%.0e", v);  // "1e-05"
                return buf;
            }
            return format_number(v, 6);
        }
        return format_fixed(v, decimals);
    }
    [[nodiscard]] double front() const { return values.front(); }
    [[nodiscard]] double back() const { return values.back(); }
};

/// Round ticks covering [lo, hi]: the step is 1, 2 or 5 times a power of ten, chosen so
/// that the number of intervals is closest to `target` (ties: fewer ticks); the first and
/// last ticks enclose the range (0..7.3 gives 0, 2, 4, 6, 8). integer_only: step >= 1.
/// A non-finite range gives 0..1; an empty one is widened.
inline axis_ticks nice_ticks(double lo, double hi, int target = 5, bool integer_only = false) {
    if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
    if (lo > hi) std::swap(lo, hi);
    if (hi - lo <= 1e-12 * std::max(1.0, std::abs(lo))) {
        const double d = lo == 0 ? 1 : std::abs(lo) * 0.1;
        lo -= d;
        hi += d;
        if (lo < 0 && lo + d >= 0) lo = 0;  // a constant 0 or positive series keeps a 0 base
    }
    target = std::max(target, 2);
    const double raw = (hi - lo) / target;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double best_step = 0, best_err = std::numeric_limits<double>::infinity();
    for (double m : {0.1, 1.0, 10.0})
        for (double n : {1.0, 2.0, 5.0}) {
            double step = n * mag * m;
            if (integer_only && step < 1) step = 1;
            const double intervals = std::ceil(hi / step - 1e-9) - std::floor(lo / step + 1e-9);
            const double err = std::abs(intervals - target) + (intervals < target ? 1e-3 : 0);  // ties: fewer ticks
            if (err < best_err - 1e-12) best_err = err, best_step = step;
        }
    axis_ticks t;
    t.step = best_step;
    const auto k0 = static_cast<long long>(std::floor(lo / best_step + 1e-9));
    const auto k1 = static_cast<long long>(std::ceil(hi / best_step - 1e-9));
    for (long long k = k0; k <= k1; ++k) {
        double v = static_cast<double>(k) * best_step;
        if (v == 0) v = 0;  // no -0
        t.values.push_back(v);
    }
    t.decimals = std::max(0, -static_cast<int>(std::floor(std::log10(best_step) + 1e-9)));
    return t;
}

/// Log-scale ticks covering [lo, hi] (both > 0): powers of ten from 10^floor(log10 lo)
/// to 10^ceil(log10 hi), plus 2x and 5x when the range spans at most two decades.
inline axis_ticks log_ticks(double lo, double hi) {
    if (!(lo > 0) || !(hi > 0) || !std::isfinite(lo) || !std::isfinite(hi)) lo = 1, hi = 10;
    if (lo > hi) std::swap(lo, hi);
    auto e0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
    auto e1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
    if (e1 <= e0) e1 = e0 + 1;
    axis_ticks t;
    t.log = true;
    const bool minor = e1 - e0 <= 2;
    for (int e = e0; e <= e1; ++e) {
        const double p = std::pow(10.0, e);
        t.values.push_back(p);
        if (minor && e < e1) {
            t.values.push_back(2 * p);
            t.values.push_back(5 * p);
        }
    }
    return t;
}

// ------------------------------------------------------------------------------------
// Figures: data and options
// ------------------------------------------------------------------------------------
// Every options struct begins with the same fields in the same order (title, subtitle,
// x_label, y_label, width, height), so designated initialisers read the same everywhere:
//   report::line_chart(series, {.title = "Training loss", .x_label = "step", .log_y = true});
// width/height are the viewBox size in CSS px (the figure scales down to fit its page).

struct bar_series {
    std::string name{};
    std::vector<double> values{};  // one per category; NaN: no bar
    std::vector<double> errors{};  // empty, or one half-width per category (whisker v ± e); NaN: none
};

struct bar_chart_options {
    std::string title{}, subtitle{}, x_label{}, y_label{};
    double width = 720, height = 400;
    std::optional<double> y_min{}, y_max{};  // exact when given; else 0 and the data, rounded to ticks
    bool show_values = false;            // print each bar's value above it
    int value_decimals = 1;
};

struct line_series {
    std::string name{};
    std::vector<double> x{}, y{};  // same length; a NaN/inf y (or x) breaks the line
};

struct line_chart_options {
    std::string title{}, subtitle{}, x_label{}, y_label{};
    double width = 720, height = 400;
    std::optional<double> x_min{}, x_max{}, y_min{}, y_max{};  // exact when given; else x: the data, y: rounded to ticks
    bool log_y = false;       // log10 y axis; values <= 0 are gaps
    bool markers = true;      // a marker at every point (isolated points always get one)
    bool integer_x = false;   // x ticks at whole numbers only (iterations, layers)
};

struct heat_map_options {
    std::string title{}, subtitle{}, x_label{}, y_label{};
    double width = 720;      // the height follows from the number of rows
    std::string value_label{};  // the colour bar's label, e.g. "importance"
    double lo = 0, hi = 1;    // values map from lo (white) to hi (dark blue), clamped
    bool show_values = true;  // print the value in each cell
    int value_decimals = 2;
};

struct scatter_point {
    double x = 0, y = 0;
    std::string label{};  // drawn next to the point (may be empty)
};

struct scatter_series {
    std::string name{};
    std::vector<scatter_point> points{};
};

struct scatter_options {
    std::string title{}, subtitle{}, x_label{}, y_label{};
    double width = 720, height = 440;
    std::optional<double> x_min{}, x_max{}, y_min{}, y_max{};  // exact when given; else the data with a margin
    bool show_labels = true;  // point labels, placed to avoid each other
    bool diagonal = false;    // dashed y = x reference line (e.g. rank vs rank)
};

// ------------------------------------------------------------------------------------
// Figures: drawing helpers
// ------------------------------------------------------------------------------------

namespace detail {

inline constexpr const char* font_stack =
    "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, 'Noto Sans', 'DejaVu Sans', sans-serif";
inline constexpr const char* ink = "#1f2328";
inline constexpr const char* muted = "#57606a";
inline constexpr const char* grid = "#e4e7eb";
inline constexpr const char* axis = "#8c959f";

/// A prefix for ids (patterns, gradients, clip paths) unique within the process, since
/// ids of SVGs inlined in one HTML page share a namespace.
inline std::string next_id() {
    static std::atomic<unsigned long long> n{0};
    return "dlr" + std::to_string(++n);
}

inline bool finite(double v) { return std::isfinite(v); }

struct svg {
    std::string s;
    std::string id;
    double W, H;
    svg(double w, double h, const std::string& title) : id(next_id()), W(w), H(h) {
        s.reserve(8192);
        s += "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + num(W) + " " + num(H) + "\" width=\"" + num(W) +
             "\" height=\"" + num(H) + "\" role=\"img\" aria-labelledby=\"" + id + "-title\" font-family=\"" + font_stack +
             "\" font-size=\"12\">";
        s += "<title id=\"" + id + "-title\">" + escape(title.empty() ? std::string("figure") : title) + "</title>";
        s += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>";
    }
    /// <text> with escaped content; attrs is raw attribute text.
    void text(double x, double y, std::string_view str, std::string_view attrs = {}) {
        s += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"";
        if (!attrs.empty()) {
            s += ' ';
            s += attrs;
        }
        s += '>';
        s += escape(str);
        s += "</text>";
    }
    void line(double x1, double y1, double x2, double y2, std::string_view stroke, double width = 1,
              std::string_view extra = {}) {
        s += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) +
             "\" stroke=\"" + std::string(stroke) + "\" stroke-width=\"" + num(width) + "\"";
        if (!extra.empty()) {
            s += ' ';
            s += extra;
        }
        s += "/>";
    }
    void rect(double x, double y, double w, double h, std::string_view fill, std::string_view extra = {}) {
        s += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(w, 0.0)) + "\" height=\"" +
             num(std::max(h, 0.0)) + "\" fill=\"" + std::string(fill) + "\"";
        if (!extra.empty()) {
            s += ' ';
            s += extra;
        }
        s += "/>";
    }
    /// Marker shape k (cycles): circle, square, triangle, diamond, inverted triangle.
    void marker(std::size_t k, double x, double y, double r, std::string_view fill) {
        const std::string f(fill);
        const std::string tail = "\" fill=\"" + f + "\" stroke=\"#ffffff\" stroke-width=\"1\"/>";
        switch (k % 5) {
            case 0: s += "<circle cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"" + num(r) + tail; break;
            case 1: {
                const double a = r * 0.9;
                s += "<rect x=\"" + num(x - a) + "\" y=\"" + num(y - a) + "\" width=\"" + num(2 * a) + "\" height=\"" +
                     num(2 * a) + tail;
                break;
            }
            case 2:
                s += "<path d=\"M" + num(x) + " " + num(y - 1.2 * r) + "L" + num(x + 1.1 * r) + " " + num(y + 0.8 * r) + "L" +
                     num(x - 1.1 * r) + " " + num(y + 0.8 * r) + "Z" + tail;
                break;
            case 3:
                s += "<path d=\"M" + num(x) + " " + num(y - 1.3 * r) + "L" + num(x + 1.1 * r) + " " + num(y) + "L" + num(x) +
                     " " + num(y + 1.3 * r) + "L" + num(x - 1.1 * r) + " " + num(y) + "Z" + tail;
                break;
            default:
                s += "<path d=\"M" + num(x) + " " + num(y + 1.2 * r) + "L" + num(x + 1.1 * r) + " " + num(y - 0.8 * r) + "L" +
                     num(x - 1.1 * r) + " " + num(y - 0.8 * r) + "Z" + tail;
        }
    }
    std::string finish() {
        s += "</svg>";
        return std::move(s);
    }
};

/// Title (16px, shrunk to fit) and subtitle (12px, grey), centred. Returns the y below them.
inline double draw_header(svg& g, const std::string& title, const std::string& subtitle) {
    double y = 8;
    if (!title.empty()) {
        const double fs = std::clamp((g.W - 24) / std::max(1.0, text_width(title, 1.0)), 10.0, 16.0);
        y += fs + 6;
        g.text(g.W / 2, y, title,
               "text-anchor=\"middle\" font-size=\"" + num(fs) + "\" font-weight=\"600\" fill=\"" + std::string(ink) + "\"");
    }
    if (!subtitle.empty()) {
        const double fs = std::clamp((g.W - 24) / std::max(1.0, text_width(subtitle, 1.0)), 8.0, 12.0);
        y += fs + 6;
        g.text(g.W / 2, y, subtitle, "text-anchor=\"middle\" font-size=\"" + num(fs) + "\" fill=\"" + std::string(muted) + "\"");
    }
    return y + 8;
}

enum class swatch { box, line_marker, line, marker };

struct legend_entry {
    std::string label;
    std::string colour;
    swatch kind = swatch::box;
    std::size_t shape = 0;
};

/// Legend rows between x0 and x1 starting at y_top (each row centred, wrapping as needed).
/// Returns its height. With `draw` false only measures.
inline double draw_legend(svg& g, const std::vector<legend_entry>& items, double x0, double x1, double y_top, bool draw = true) {
    if (items.empty()) return 0;
    constexpr double fs = 12, gap = 6, spacing = 20, row_h = 20;
    auto sw_width = [](const legend_entry& e) { return e.kind == swatch::line_marker || e.kind == swatch::line ? 24.0 : 12.0; };
    std::vector<std::vector<std::size_t>> rows(1);
    std::vector<double> widths(1, 0.0);
    const double avail = x1 - x0;
    for (std::size_t i = 0; i < items.size(); ++i) {
        const double w = sw_width(items[i]) + gap + text_width(items[i].label, fs);
        if (!rows.back().empty() && widths.back() + spacing + w > avail) {
            rows.emplace_back();
            widths.push_back(0.0);
        }
        widths.back() += (rows.back().empty() ? 0 : spacing) + w;
        rows.back().push_back(i);
    }
    if (draw) {
        for (std::size_t r = 0; r < rows.size(); ++r) {
            double x = x0 + std::max(0.0, (avail - widths[r]) / 2);
            const double yc = y_top + static_cast<double>(r) * row_h + row_h / 2;
            for (std::size_t i : rows[r]) {
                const legend_entry& e = items[i];
                const double sw = sw_width(e);
                if (e.kind == swatch::box) {
                    g.rect(x, yc - 6, 12, 12, e.colour, "rx=\"2\"");
                } else if (e.kind == swatch::line_marker || e.kind == swatch::line) {
                    g.line(x, yc, x + sw, yc, e.colour, 2.2);
                    if (e.kind == swatch::line_marker) g.marker(e.shape, x + sw / 2, yc, 4, e.colour);
                } else {
                    g.marker(e.shape, x + sw / 2, yc, 4.5, e.colour);
                }
                g.text(x + sw + gap, yc + 4, e.label, "fill=\"" + std::string(ink) + "\"");
                x += sw + gap + text_width(e.label, fs) + spacing;
            }
        }
    }
    return static_cast<double>(rows.size()) * row_h;
}

/// Horizontal grid lines and y tick labels at `ticks` (mapped by `ymap`), left of x = L.
template <class Map>
void draw_y_axis(svg& g, const axis_ticks& ticks, Map ymap, double L, double R, double lo, double hi, bool zero_line = true) {
    for (double v : ticks.values) {
        if (v < lo - 1e-9 * std::abs(hi - lo) || v > hi + 1e-9 * std::abs(hi - lo)) continue;
        const double y = ymap(v);
        g.line(L, y, R, y, zero_line && v == 0 && !ticks.log ? axis : grid, 1);
        g.text(L - 8, y + 4, ticks.label(v), "text-anchor=\"end\" fill=\"" + std::string(muted) + "\"");
    }
}

/// Vertical grid lines and x tick labels under y = B.
template <class Map>
void draw_x_axis(svg& g, const axis_ticks& ticks, Map xmap, double T, double B, double lo, double hi) {
    for (double v : ticks.values) {
        if (v < lo - 1e-9 * std::abs(hi - lo) || v > hi + 1e-9 * std::abs(hi - lo)) continue;
        const double x = xmap(v);
        g.line(x, T, x, B, grid, 1);
        g.line(x, B, x, B + 4, axis, 1);
        g.text(x, B + 18, ticks.label(v), "text-anchor=\"middle\" fill=\"" + std::string(muted) + "\"");
    }
}

inline void draw_axis_labels(svg& g, const std::string& x_label, const std::string& y_label, double L, double R, double T,
                             double B, double x_label_y) {
    if (!x_label.empty())
        g.text((L + R) / 2, x_label_y, x_label, "text-anchor=\"middle\" font-size=\"13\" fill=\"" + std::string(ink) + "\"");
    if (!y_label.empty()) {
        const double x = 20, y = (T + B) / 2;
        g.text(x, y, y_label,
               "text-anchor=\"middle\" font-size=\"13\" fill=\"" + std::string(ink) + "\" transform=\"rotate(-90 " + num(x) +
                   " " + num(y) + ")\"");
    }
}

inline double max_label_width(const axis_ticks& t, double fs, double lo, double hi) {
    double w = 0;
    for (double v : t.values)
        if (v >= lo - 1e-9 * std::abs(hi - lo) && v <= hi + 1e-9 * std::abs(hi - lo)) w = std::max(w, text_width(t.label(v), fs));
    return w;
}

/// Ticks for an axis: automatic ranges snap to the ticks (snap) or keep the data range;
/// explicit limits are exact. Returns ticks; lo/hi become the axis range.
inline axis_ticks axis_range(double& lo, double& hi, std::optional<double> fix_lo, std::optional<double> fix_hi, bool snap,
                             bool log, bool integer_only, int target = 5) {
    if (fix_lo) lo = *fix_lo;
    if (fix_hi) hi = *fix_hi;
    if (log) {
        if (!(lo > 0) || !std::isfinite(lo)) lo = hi > 0 && std::isfinite(hi) ? hi / 10 : 1;
        if (!(hi > 0) || !std::isfinite(hi)) hi = lo * 10;
        if (lo > hi) std::swap(lo, hi);
        if (hi <= lo) hi = lo * 10;
        axis_ticks t = log_ticks(lo, hi);
        if (snap) {  // the nearest ticks enclosing the data (1, 2, 5 steps within two decades)
            if (!fix_lo) {
                double v = t.front();
                for (double x : t.values)
                    if (x <= lo * (1 + 1e-9)) v = x;
                lo = v;
            }
            if (!fix_hi) {
                double v = t.back();
                for (auto it = t.values.rbegin(); it != t.values.rend(); ++it)
                    if (*it >= hi * (1 - 1e-9)) v = *it;
                hi = v;
            }
        }
        return t;
    }
    if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
    if (lo > hi) std::swap(lo, hi);
    axis_ticks t = nice_ticks(lo, hi, target, integer_only);
    if (hi - lo <= 1e-12 * std::max(1.0, std::abs(lo))) {  // constant data: use the widened tick range
        if (!fix_lo) lo = t.front();
        if (!fix_hi) hi = t.back();
    } else if (snap) {
        if (!fix_lo) lo = t.front();
        if (!fix_hi) hi = t.back();
    }
    return t;
}

inline void check(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("depthlab::report: " + what);
}

}  // namespace detail

// ------------------------------------------------------------------------------------
// bar_chart
// ------------------------------------------------------------------------------------

/// Grouped bars: one group per category, one bar per series (legend above the plot),
/// optional error whiskers (value ± error) and value labels. Throws std::invalid_argument
/// when a series' values (or non-empty errors) do not match the categories.
inline std::string bar_chart(const std::vector<std::string>& categories, const std::vector<bar_series>& series,
                             const bar_chart_options& o = {}) {
    using namespace detail;
    for (const bar_series& s : series) {
        check(s.values.size() == categories.size(),
              "bar_chart: series '" + s.name + "' has " + std::to_string(s.values.size()) + " values for " +
                  std::to_string(categories.size()) + " categories");
        check(s.errors.empty() || s.errors.size() == s.values.size(),
              "bar_chart: series '" + s.name + "' has " + std::to_string(s.errors.size()) + " errors for " +
                  std::to_string(s.values.size()) + " values");
    }
    svg g(o.width, o.height, o.title);
    double top = draw_header(g, o.title, o.subtitle);

    // Data range (bars start at 0).
    double lo = 0, hi = 0;
    bool any = false;
    for (const bar_series& s : series)
        for (std::size_t i = 0; i < s.values.size(); ++i) {
            const double v = s.values[i];
            if (!finite(v)) continue;
            const double e = !s.errors.empty() && finite(s.errors[i]) ? std::abs(s.errors[i]) : 0;
            lo = std::min(lo, v - e);
            hi = std::max(hi, v + e);
            any = true;
        }
    if (!any || hi - lo <= 0) hi = lo + 1;
    if (o.show_values) {  // headroom for the labels above the tallest bars
        const double pad = 0.06 * (hi - lo);
        if (hi > 0) hi += pad;
        if (lo < 0) lo -= pad;
    }
    const axis_ticks yt = axis_range(lo, hi, o.y_min, o.y_max, true, false, false);

    // Legend.
    std::vector<legend_entry> legend;
    for (std::size_t k = 0; k < series.size(); ++k)
        if (!series[k].name.empty()) legend.push_back({series[k].name, series_colour(k), swatch::box, k});

    const double ytick_w = max_label_width(yt, 12, lo, hi);
    const double L = 16 + (o.y_label.empty() ? 0 : 20) + ytick_w + 10;
    const double R = o.width - 16;
    const double legend_h = draw_legend(g, legend, L, R, top, false);
    const double T = top + legend_h + (legend_h > 0 ? 10 : 4);

    // Category labels: horizontal, or rotated when any is wider than its slot.
    const std::size_t n = categories.size();
    const double slot = n ? (R - L) / static_cast<double>(n) : (R - L);
    double cat_w = 0;
    for (const std::string& c : categories) cat_w = std::max(cat_w, text_width(c, 12));
    const bool rotate = cat_w > slot - 6;
    constexpr double angle = 35.0;
    const double cat_h = rotate ? cat_w * std::sin(angle * std::numbers::pi / 180) + 16 : 16;
    const double B = o.height - 12 - (o.x_label.empty() ? 0 : 22) - cat_h - 8;
    check(B > T + 40, "bar_chart: the figure is too small for its labels (height " + num(o.height) + ")");

    draw_legend(g, legend, L, R, top);
    auto ymap = [&](double v) { return B - (v - lo) / (hi - lo) * (B - T); };
    draw_y_axis(g, yt, ymap, L, R, lo, hi);

    const std::size_t m = std::max<std::size_t>(series.size(), 1);
    const double group = slot * (m == 1 ? 0.6 : 0.78);
    const double bar_w = group / static_cast<double>(m);
    const double inner = std::min(2.0, bar_w * 0.1);  // gap between bars of one group
    const double y0 = ymap(std::clamp(0.0, lo, hi));
    for (std::size_t i = 0; i < n; ++i) {
        const double gx = L + slot * static_cast<double>(i) + (slot - group) / 2;
        for (std::size_t k = 0; k < series.size(); ++k) {
            const bar_series& s = series[k];
            const double v = s.values[i];
            const double x = gx + bar_w * static_cast<double>(k) + inner / 2;
            const double w = bar_w - inner;
            if (!finite(v)) {
                g.text(x + w / 2, y0 - 4, "n/a", "text-anchor=\"middle\" font-size=\"10\" fill=\"" + std::string(muted) + "\"");
                continue;
            }
            const double yv = ymap(std::clamp(v, lo, hi));
            g.s += "<rect x=\"" + num(x) + "\" y=\"" + num(std::min(yv, y0)) + "\" width=\"" + num(w) + "\" height=\"" +
                   num(std::abs(y0 - yv)) + "\" fill=\"" + series_colour(k) + "\"><title>" +
                   escape(s.name + " · " + categories[i] + ": " + format_number(v, 4)) + "</title></rect>";
            double label_y = yv;
            if (!s.errors.empty() && finite(s.errors[i])) {
                const double e = std::abs(s.errors[i]);
                const double ya = ymap(std::clamp(v - e, lo, hi)), yb = ymap(std::clamp(v + e, lo, hi));
                const double cx = x + w / 2, cap = std::min(8.0, w * 0.5) / 2;
                g.line(cx, ya, cx, yb, ink, 1.2);
                g.line(cx - cap, ya, cx + cap, ya, ink, 1.2);
                g.line(cx - cap, yb, cx + cap, yb, ink, 1.2);
                label_y = v >= 0 ? std::min(yv, yb) : std::max(yv, ya);
            }
            if (o.show_values) {
                const double fs = std::clamp(w / std::max(1.0, text_width(format_fixed(v, o.value_decimals), 1.0)), 8.0, 11.0);
                g.text(x + w / 2, v >= 0 ? label_y - 4 : label_y + fs + 2, format_fixed(v, o.value_decimals),
                       "text-anchor=\"middle\" font-size=\"" + num(fs) + "\" fill=\"" + std::string(ink) + "\"");
            }
        }
        const double cx = L + slot * (static_cast<double>(i) + 0.5);
        if (rotate)
            g.text(cx, B + 14, categories[i],
                   "text-anchor=\"end\" fill=\"" + std::string(ink) + "\" transform=\"rotate(-" + num(angle) + " " + num(cx) +
                       " " + num(B + 14) + ")\"");
        else
            g.text(cx, B + 18, categories[i], "text-anchor=\"middle\" fill=\"" + std::string(ink) + "\"");
    }
    g.line(L, y0, R, y0, axis, 1);
    draw_axis_labels(g, o.x_label, o.y_label, L, R, T, B, o.height - 14);
    return g.finish();
}

// ------------------------------------------------------------------------------------
// line_chart
// ------------------------------------------------------------------------------------

/// Several (x, y) series as lines (with markers unless markers = false); non-finite
/// points (and, with log_y, y <= 0) break the line. Legend above the plot. Throws
/// std::invalid_argument when a series' x and y differ in length.
inline std::string line_chart(const std::vector<line_series>& series, const line_chart_options& o = {}) {
    using namespace detail;
    for (const line_series& s : series)
        check(s.x.size() == s.y.size(), "line_chart: series '" + s.name + "' has " + std::to_string(s.x.size()) + " x and " +
                                            std::to_string(s.y.size()) + " y values");
    auto usable = [&](double x, double y) { return finite(x) && finite(y) && (!o.log_y || y > 0); };
    double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
    for (const line_series& s : series)
        for (std::size_t i = 0; i < s.x.size(); ++i)
            if (usable(s.x[i], s.y[i])) {
                xlo = std::min(xlo, s.x[i]), xhi = std::max(xhi, s.x[i]);
                ylo = std::min(ylo, s.y[i]), yhi = std::max(yhi, s.y[i]);
            }
    if (!(xlo <= xhi)) xlo = 0, xhi = 1;
    if (!(ylo <= yhi)) ylo = o.log_y ? 1 : 0, yhi = o.log_y ? 10 : 1;
    const axis_ticks xt = axis_range(xlo, xhi, o.x_min, o.x_max, false, false, o.integer_x, 6);
    const axis_ticks yt = axis_range(ylo, yhi, o.y_min, o.y_max, true, o.log_y, false);

    svg g(o.width, o.height, o.title);
    const double top = draw_header(g, o.title, o.subtitle);
    std::vector<legend_entry> legend;
    for (std::size_t k = 0; k < series.size(); ++k)
        if (!series[k].name.empty())
            legend.push_back({series[k].name, series_colour(k), o.markers ? swatch::line_marker : swatch::line, k});
    const double L = 16 + (o.y_label.empty() ? 0 : 20) + max_label_width(yt, 12, ylo, yhi) + 10;
    const double R = o.width - 16 - std::max(0.0, text_width(xt.label(xt.back()), 12) / 2 - 8);
    const double legend_h = draw_legend(g, legend, L, R, top, false);
    const double T = top + legend_h + (legend_h > 0 ? 10 : 4);
    const double B = o.height - 12 - (o.x_label.empty() ? 0 : 22) - 24;
    check(B > T + 40, "line_chart: the figure is too small for its labels (height " + num(o.height) + ")");
    draw_legend(g, legend, L, R, top);

    auto xmap = [&](double v) { return L + (v - xlo) / (xhi - xlo) * (R - L); };
    auto ymap = [&](double v) {
        if (o.log_y) return B - (std::log10(v) - std::log10(ylo)) / (std::log10(yhi) - std::log10(ylo)) * (B - T);
        return B - (v - ylo) / (yhi - ylo) * (B - T);
    };
    draw_x_axis(g, xt, xmap, T, B, xlo, xhi);
    draw_y_axis(g, yt, ymap, L, R, ylo, yhi);
    g.line(L, B, R, B, axis, 1);
    g.line(L, T, L, B, axis, 1);

    // Data, clipped to the plot area (explicit limits may cut it).
    g.s += "<defs><clipPath id=\"" + g.id + "-clip\"><rect x=\"" + num(L - 6) + "\" y=\"" + num(T - 6) + "\" width=\"" +
           num(R - L + 12) + "\" height=\"" + num(B - T + 12) + "\"/></clipPath></defs>";
    g.s += "<g clip-path=\"url(#" + g.id + "-clip)\">";
    for (std::size_t k = 0; k < series.size(); ++k) {
        const line_series& s = series[k];
        const std::string colour = series_colour(k);
        std::string d;
        std::vector<std::pair<double, double>> isolated, all;
        std::size_t run = 0;
        for (std::size_t i = 0; i <= s.x.size(); ++i) {
            const bool ok = i < s.x.size() && usable(s.x[i], s.y[i]);
            if (ok) {
                const double px = xmap(s.x[i]), py = ymap(s.y[i]);
                d += (run == 0 ? "M" : "L") + num(px) + " " + num(py);
                all.emplace_back(px, py);
                ++run;
            } else {
                if (run == 1) isolated.push_back(all.back());
                run = 0;
            }
        }
        if (!d.empty())
            g.s += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + colour +
                   "\" stroke-width=\"2.2\" stroke-linejoin=\"round\" stroke-linecap=\"round\"><title>" + escape(s.name) +
                   "</title></path>";
        const double r = all.size() > 60 ? 2.5 : 3.8;
        for (const auto& [px, py] : o.markers ? all : isolated) g.marker(k, px, py, r, colour);
    }
    g.s += "</g>";
    draw_axis_labels(g, o.x_label, o.y_label, L, R, T, B, o.height - 14);
    return g.finish();
}

// ------------------------------------------------------------------------------------
// heat_map
// ------------------------------------------------------------------------------------

/// A rows × columns grid of values mapped from lo (white) to hi (dark blue), clamped, with
/// row labels on the left, column labels underneath, a colour bar on the right and (with
/// show_values) the value in each cell. NaN cells are hatched grey and read "n/a". Throws
/// std::invalid_argument when the values do not match the labels.
inline std::string heat_map(const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels,
                            const std::vector<std::vector<double>>& values, const heat_map_options& o = {}) {
    using namespace detail;
    check(values.size() == row_labels.size(), "heat_map: " + std::to_string(values.size()) + " rows of values for " +
                                                  std::to_string(row_labels.size()) + " row labels");
    for (std::size_t r = 0; r < values.size(); ++r)
        check(values[r].size() == col_labels.size(), "heat_map: row " + std::to_string(r) + " has " +
                                                         std::to_string(values[r].size()) + " values for " +
                                                         std::to_string(col_labels.size()) + " column labels");
    check(o.hi > o.lo, "heat_map: hi must exceed lo");
    const std::size_t nr = row_labels.size(), nc = col_labels.size();
    bool any_nan = false;
    for (const auto& row : values)
        for (double v : row) any_nan = any_nan || !finite(v);

    // Horizontal layout: [pad | y label | row labels | grid | gap | colour bar + ticks + label | pad].
    double row_w = 0, col_w = 0;
    for (const std::string& s : row_labels) row_w = std::max(row_w, text_width(s, 12));
    for (const std::string& s : col_labels) col_w = std::max(col_w, text_width(s, 12));
    const axis_ticks ct = nice_ticks(o.lo, o.hi, 5);
    const double cb_tick_w = max_label_width(ct, 11, o.lo, o.hi);
    const double cb_w = 14, cb_block = 22 + cb_w + 6 + cb_tick_w + (o.value_label.empty() ? 0 : 24) +
                                       (any_nan ? std::max(0.0, text_width("n/a", 11) + 20 - cb_w - 6 - cb_tick_w) : 0);
    const double L = 16 + (o.y_label.empty() ? 0 : 22) + row_w + 10;
    const double avail = o.width - L - cb_block - 16;
    check(avail > 20 && nc > 0 && nr > 0, "heat_map: nothing to draw, or the figure is too narrow for its labels");
    const double cell_w = std::min(avail / static_cast<double>(nc), 96.0);
    const double cell_h = std::clamp(cell_w * 0.62, 26.0, 44.0);
    const bool rotate = col_w > cell_w - 4;
    constexpr double angle = 40.0;
    const double col_h = rotate ? col_w * std::sin(angle * std::numbers::pi / 180) + 16 : 18;

    // Vertical layout needs the header height: measure it with a throwaway drawing.
    svg probe(o.width, 100, "");
    const double top = draw_header(probe, o.title, o.subtitle) + 6;
    const double grid_h = cell_h * static_cast<double>(nr);
    const double cb_h = std::max(grid_h, 130.0);
    const double T = top, B = T + grid_h;
    const double H = T + std::max(grid_h + col_h + (o.x_label.empty() ? 0 : 22), cb_h + (any_nan ? 30 : 0)) + 18;
    const double grid_w = cell_w * static_cast<double>(nc);
    const double R = L + grid_w;

    svg g(o.width, H, o.title);
    draw_header(g, o.title, o.subtitle);
    const std::string hatch = g.id + "-na";
    const std::string grad = g.id + "-bar";
    g.s += "<defs>";
    if (any_nan)
        g.s += "<pattern id=\"" + hatch +
               "\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
               "<rect width=\"6\" height=\"6\" fill=\"#ececec\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" "
               "stroke=\"#b4b4b4\" stroke-width=\"2\"/></pattern>";
    g.s += "<linearGradient id=\"" + grad + "\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
    for (int i = 0; i <= 16; ++i)
        g.s += "<stop offset=\"" + num(i / 16.0) + "\" stop-color=\"" + sequential_colour(i / 16.0) + "\"/>";
    g.s += "</linearGradient></defs>";

    for (std::size_t r = 0; r < nr; ++r) {
        const double y = T + cell_h * static_cast<double>(r);
        g.text(L - 10, y + cell_h / 2 + 4, row_labels[r], "text-anchor=\"end\" fill=\"" + std::string(ink) + "\"");
        for (std::size_t c = 0; c < nc; ++c) {
            const double x = L + cell_w * static_cast<double>(c);
            const double v = values[r][c];
            const std::string tip = escape(row_labels[r] + " · " + col_labels[c] + ": " + format_number(v, 4));
            if (!finite(v)) {
                g.s += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(cell_w) + "\" height=\"" + num(cell_h) +
                       "\" fill=\"url(#" + hatch + ")\" stroke=\"#ffffff\" stroke-width=\"1.5\"><title>" + tip +
                       "</title></rect>";
                g.text(x + cell_w / 2, y + cell_h / 2 + 4, "n/a",
                       "text-anchor=\"middle\" font-size=\"11\" fill=\"" + std::string(muted) + "\"");
                continue;
            }
            const double t = (v - o.lo) / (o.hi - o.lo);
            const rgb fill = sequential_rgb(t);
            g.s += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(cell_w) + "\" height=\"" + num(cell_h) +
                   "\" fill=\"" + to_hex(fill) + "\" stroke=\"#ffffff\" stroke-width=\"1.5\"><title>" + tip + "</title></rect>";
            if (o.show_values) {
                const std::string txt = format_fixed(v, o.value_decimals);
                const double fs = std::clamp((cell_w - 6) / std::max(1.0, text_width(txt, 1.0)), 7.0, std::min(12.0, cell_h * 0.45));
                g.text(x + cell_w / 2, y + cell_h / 2 + fs * 0.35, txt,
                       "text-anchor=\"middle\" font-size=\"" + num(fs) + "\" fill=\"" +
                           (relative_luminance(fill) < 0.35 ? std::string("#ffffff") : std::string(ink)) + "\"");
            }
        }
    }
    g.rect(L, T, grid_w, grid_h, "none", "stroke=\"#d0d7de\" stroke-width=\"1\"");
    for (std::size_t c = 0; c < nc; ++c) {
        const double cx = L + cell_w * (static_cast<double>(c) + 0.5);
        if (rotate)
            g.text(cx, B + 14, col_labels[c],
                   "text-anchor=\"end\" fill=\"" + std::string(ink) + "\" transform=\"rotate(-" + num(angle) + " " + num(cx) +
                       " " + num(B + 14) + ")\"");
        else
            g.text(cx, B + 17, col_labels[c], "text-anchor=\"middle\" fill=\"" + std::string(ink) + "\"");
    }
    if (!o.x_label.empty())
        g.text((L + R) / 2, B + col_h + 18, o.x_label, "text-anchor=\"middle\" font-size=\"13\" fill=\"" + std::string(ink) + "\"");
    if (!o.y_label.empty()) {
        const double x = 20, y = (T + B) / 2;
        g.text(x, y, o.y_label,
               "text-anchor=\"middle\" font-size=\"13\" fill=\"" + std::string(ink) + "\" transform=\"rotate(-90 " + num(x) +
                   " " + num(y) + ")\"");
    }

    // Colour bar (the heat map's legend), with the n/a swatch under it when needed.
    const double cbx = R + 22, cbT = T, cbB = T + cb_h;
    g.rect(cbx, cbT, cb_w, cb_h, "url(#" + grad + ")", "stroke=\"#d0d7de\" stroke-width=\"1\"");
    for (double v : ct.values) {
        if (v < o.lo - 1e-12 || v > o.hi + 1e-12) continue;
        const double y = cbB - (v - o.lo) / (o.hi - o.lo) * cb_h;
        g.line(cbx + cb_w, y, cbx + cb_w + 4, y, axis, 1);
        g.text(cbx + cb_w + 7, y + 4, ct.label(v), "font-size=\"11\" fill=\"" + std::string(muted) + "\"");
    }
    if (!o.value_label.empty()) {
        const double x = cbx + cb_w + 7 + cb_tick_w + 14, y = (cbT + cbB) / 2;
        g.text(x, y, o.value_label,
               "text-anchor=\"middle\" font-size=\"12\" fill=\"" + std::string(ink) + "\" transform=\"rotate(90 " + num(x) +
                   " " + num(y) + ")\"");
    }
    if (any_nan) {
        g.rect(cbx, cbB + 12, cb_w, 12, "url(#" + hatch + ")", "stroke=\"#d0d7de\" stroke-width=\"1\"");
        g.text(cbx + cb_w + 7, cbB + 22, "n/a", "font-size=\"11\" fill=\"" + std::string(muted) + "\"");
    }
    return g.finish();
}

// ------------------------------------------------------------------------------------
// scatter
// ------------------------------------------------------------------------------------

/// Points (x, y) per series, each series with its own colour and marker shape, labels next
/// to the points (placed to avoid one another and the markers), an optional y = x line.
/// Points with a non-finite coordinate are skipped.
inline std::string scatter(const std::vector<scatter_series>& series, const scatter_options& o = {}) {
    using namespace detail;
    double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
    for (const scatter_series& s : series)
        for (const scatter_point& p : s.points)
            if (finite(p.x) && finite(p.y)) {
                xlo = std::min(xlo, p.x), xhi = std::max(xhi, p.x);
                ylo = std::min(ylo, p.y), yhi = std::max(yhi, p.y);
            }
    if (!(xlo <= xhi)) xlo = 0, xhi = 1;
    if (!(ylo <= yhi)) ylo = 0, yhi = 1;
    if (o.diagonal) {  // the same range on both axes, so that y = x is the diagonal
        xlo = ylo = std::min(xlo, ylo);
        xhi = yhi = std::max(xhi, yhi);
    }
    auto pad = [](double& lo, double& hi) {
        const double d = hi - lo > 0 ? (hi - lo) * 0.07 : std::max(1.0, std::abs(lo) * 0.1);
        lo -= d;
        hi += d;
    };
    pad(xlo, xhi);
    pad(ylo, yhi);
    const axis_ticks xt = axis_range(xlo, xhi, o.x_min, o.x_max, false, false, false, 6);
    const axis_ticks yt = axis_range(ylo, yhi, o.y_min, o.y_max, false, false, false);

    svg g(o.width, o.height, o.title);
    const double top = draw_header(g, o.title, o.subtitle);
    std::vector<legend_entry> legend;
    for (std::size_t k = 0; k < series.size(); ++k)
        if (!series[k].name.empty()) legend.push_back({series[k].name, series_colour(k), swatch::marker, k});
    const double L = 16 + (o.y_label.empty() ? 0 : 20) + max_label_width(yt, 12, ylo, yhi) + 10;
    const double R = o.width - 20;
    const double legend_h = draw_legend(g, legend, L, R, top, false);
    const double T = top + legend_h + (legend_h > 0 ? 10 : 4);
    const double B = o.height - 12 - (o.x_label.empty() ? 0 : 22) - 24;
    check(B > T + 40, "scatter: the figure is too small for its labels (height " + num(o.height) + ")");
    draw_legend(g, legend, L, R, top);

    auto xmap = [&](double v) { return L + (v - xlo) / (xhi - xlo) * (R - L); };
    auto ymap = [&](double v) { return B - (v - ylo) / (yhi - ylo) * (B - T); };
    draw_x_axis(g, xt, xmap, T, B, xlo, xhi);
    draw_y_axis(g, yt, ymap, L, R, ylo, yhi, false);
    g.rect(L, T, R - L, B - T, "none", "stroke=\"" + std::string(axis) + "\" stroke-width=\"1\"");

    g.s += "<defs><clipPath id=\"" + g.id + "-clip\"><rect x=\"" + num(L) + "\" y=\"" + num(T) + "\" width=\"" + num(R - L) +
           "\" height=\"" + num(B - T) + "\"/></clipPath></defs>";
    if (o.diagonal) {
        const double a = std::max(xlo, ylo), b = std::min(xhi, yhi);
        if (b > a)
            g.line(xmap(a), ymap(a), xmap(b), ymap(b), "#8c959f", 1.2,
                   "stroke-dasharray=\"5 4\" clip-path=\"url(#" + g.id + "-clip)\"");
    }

    // Markers first (labels avoid them), then labels.
    struct box {
        double x0, y0, x1, y1;
    };
    auto overlap = [](const box& a, const box& b) {
        const double w = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
        const double h = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
        return w > 0 && h > 0 ? w * h : 0.0;
    };
    struct placed_point {
        double x, y;
        std::string label;
    };
    std::vector<placed_point> pts;
    std::vector<box> obstacles;
    constexpr double r = 4.5;
    g.s += "<g clip-path=\"url(#" + g.id + "-clip)\">";
    for (std::size_t k = 0; k < series.size(); ++k)
        for (const scatter_point& p : series[k].points) {
            if (!finite(p.x) || !finite(p.y)) continue;
            const double px = xmap(p.x), py = ymap(p.y);
            g.marker(k, px, py, r, series_colour(k));
            pts.push_back({px, py, p.label});
            obstacles.push_back({px - r - 1, py - r - 1, px + r + 1, py + r + 1});
        }
    g.s += "</g>";
    // Whether a label box crosses the y = x line (its corners on both sides of it).
    auto crosses_diagonal = [&](const box& bx) {
        const double x1 = xmap(0), y1 = ymap(0), x2 = xmap(1), y2 = ymap(1);
        int sides = 0;
        for (const auto& [cx, cy] : {std::pair{bx.x0, bx.y0}, std::pair{bx.x1, bx.y0}, std::pair{bx.x0, bx.y1}, std::pair{bx.x1, bx.y1}})
            sides |= ((x2 - x1) * (cy - y1) - (y2 - y1) * (cx - x1)) > 0 ? 1 : 2;
        return sides == 3;
    };
    if (o.show_labels) {
        constexpr double fs = 11;
        const box plot{L, T - 6, R + 6, B};  // labels may reach a little past the frame
        for (const placed_point& p : pts) {
            if (p.label.empty()) continue;
            const double w = text_width(p.label, fs), h = fs + 2;
            // Candidates: right, left, above, below, then the diagonals, then farther out.
            struct cand {
                double dx, dy;
                int anchor;  // 0 start, 1 middle, 2 end
            };
            const double d = r + 4;
            const std::array<cand, 12> cands = {{{d, 4, 0},
                                                 {-d, 4, 2},
                                                 {0, -d - 2, 1},
                                                 {0, d + fs, 1},
                                                 {d - 2, -d, 0},
                                                 {-d + 2, -d, 2},
                                                 {d - 2, d + fs - 2, 0},
                                                 {-d + 2, d + fs - 2, 2},
                                                 {0, -d - fs - 4, 1},
                                                 {0, 2 * d + 2 * fs, 1},
                                                 {2 * d, 4, 0},
                                                 {-2 * d, 4, 2}}};
            double best = std::numeric_limits<double>::infinity();
            box best_box{};
            cand best_c{};
            for (std::size_t ci = 0; ci < cands.size(); ++ci) {
                const cand& c = cands[ci];
                const double x0 = p.x + c.dx - (c.anchor == 0 ? 0 : c.anchor == 1 ? w / 2 : w);
                const box bx{x0, p.y + c.dy - fs + 1, x0 + w, p.y + c.dy + 3};
                double score = 0;
                for (const box& ob : obstacles) score += overlap(bx, ob);
                if (o.diagonal && crosses_diagonal(bx)) score += 0.1 * w * h;  // readable, but avoid if possible
                if (ci >= 8) score += 0.2 * w * h;  // farther from its point: ambiguous
                score += (w * h - overlap(bx, plot)) * 4;  // outside the plot area
                if (score < best - 1e-9) best = score, best_box = bx, best_c = c;
                if (score == 0) break;
            }
            obstacles.push_back(best_box);
            g.text(p.x + best_c.dx, p.y + best_c.dy, p.label,
                   std::string("font-size=\"11\" fill=\"") + ink + "\" text-anchor=\"" +
                       (best_c.anchor == 0 ? "start" : best_c.anchor == 1 ? "middle" : "end") + "\"");
        }
    }
    draw_axis_labels(g, o.x_label, o.y_label, L, R, T, B, o.height - 14);
    return g.finish();
}

// ------------------------------------------------------------------------------------
// Files
// ------------------------------------------------------------------------------------

/// Writes `content` to `path` atomically (io/atomic_file.hpp: temporary file, fsync,
/// rename; a reader sees the old file or the new one). Throws io_error (a std::runtime_error)
/// naming the path; `path` is then untouched and no temporary is left.
inline void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
    io::write_file_atomically(path.string(), content, "depthlab::report: write");
}

// ------------------------------------------------------------------------------------
// html_page
// ------------------------------------------------------------------------------------

struct table_options {
    std::string caption{};                      // shown as "Table n. caption"
    int decimals = -1;                          // >= 0: cells that are numbers are reprinted with these decimals
    std::optional<std::size_t> highlight_column{};  // tinted column (e.g. "ours")
};

/// The page's built-in style sheet (system fonts; light; print-friendly).
inline constexpr const char* default_css = R"css(
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #ffffff; color: #1f2328;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", "DejaVu Sans", sans-serif;
  font-size: 16px; line-height: 1.55; -webkit-text-size-adjust: 100%; }
main { max-width: 960px; margin: 0 auto; padding: 36px 28px 24px; }
header.title { border-bottom: 2px solid #1f2328; padding-bottom: 12px; margin-bottom: 8px; }
h1 { font-size: 1.85rem; line-height: 1.2; margin: 0; font-weight: 650; letter-spacing: -0.01em; }
header.title p.subtitle { color: #57606a; margin: 6px 0 0; font-size: 1.05rem; }
h2 { font-size: 1.35rem; margin: 2.4rem 0 0.7rem; padding-bottom: 0.3rem; border-bottom: 1px solid #d0d7de; font-weight: 620; }
h3 { font-size: 1.1rem; margin: 1.6rem 0 0.5rem; font-weight: 620; }
p { margin: 0.65rem 0; }
nav.toc { margin: 14px 0 4px; font-size: 0.95rem; }
nav.toc ol { margin: 4px 0; padding-left: 1.4rem; columns: 2; column-gap: 2.5rem; }
nav.toc a { color: #0550ae; text-decoration: none; }
nav.toc a:hover { text-decoration: underline; }
.note { background: #fff8e6; border-left: 4px solid #e69f00; padding: 8px 12px; margin: 14px 0; border-radius: 0 6px 6px 0; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 6px; padding: 10px 12px; overflow-x: auto;
  font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "Liberation Mono", "DejaVu Sans Mono", monospace;
  font-size: 0.84rem; line-height: 1.45; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "Liberation Mono", "DejaVu Sans Mono", monospace; font-size: 0.88em; }
.table-wrap { overflow-x: auto; margin: 1rem 0 1.3rem; }
table { border-collapse: collapse; font-size: 0.92rem; font-variant-numeric: tabular-nums; }
.table-wrap .caption { color: #57606a; font-size: 0.9rem; padding-bottom: 6px; }
.caption b, figcaption b { color: #1f2328; }
th, td { padding: 5px 12px; text-align: left; vertical-align: top; }
thead th { border-bottom: 2px solid #1f2328; font-weight: 620; white-space: nowrap; }
tbody tr { border-bottom: 1px solid #e4e7eb; }
tbody tr:last-child { border-bottom: 1px solid #8c959f; }
tbody tr:nth-child(even) { background: #f9fafb; }
td.num, th.num { text-align: right; }
.hl { background: #e8f1fb; }
tbody tr:nth-child(even) .hl { background: #dde9f7; }
thead th.hl { background: #d6e6f7; }
table.kv th { font-weight: 600; color: #3d444d; white-space: nowrap; }
figure { margin: 1.4rem 0 1.8rem; }
figure svg { display: block; max-width: 100%; height: auto; margin: 0 auto; }
figcaption { color: #57606a; font-size: 0.9rem; margin-top: 6px; text-align: center; }
footer { max-width: 960px; margin: 2.5rem auto 0; padding: 12px 28px 32px; border-top: 1px solid #d0d7de; color: #57606a; font-size: 0.85rem; }
footer code { white-space: pre-wrap; word-break: break-all; color: #3d444d; }
@media print {
  body { font-size: 11pt; }
  main, footer { max-width: none; padding-left: 0; padding-right: 0; }
  nav.toc { display: none; }
  h2, h3 { break-after: avoid; page-break-after: avoid; }
  figure, .table-wrap, pre, .note { break-inside: avoid; page-break-inside: avoid; }
  pre { white-space: pre-wrap; word-break: break-word; }
  tbody tr:nth-child(even) { background: none; }
  a { color: inherit; text-decoration: none; }
}
)css";

/// One self-contained HTML page built block by block (in call order). Text arguments are
/// escaped; figure() takes SVG from the builders above (trusted, inserted as is).
class html_page {
public:
    explicit html_page(std::string title, std::string subtitle = {}) : title_(std::move(title)), subtitle_(std::move(subtitle)) {}

    /// A section heading (h2), listed in the contents when the page has three or more.
    html_page& section(std::string_view heading) {
        sections_.emplace_back(heading);
        const std::string id = "s" + std::to_string(sections_.size());
        blocks_.push_back("<h2 id=\"" + id + "\">" + escape(heading) + "</h2>");
        return *this;
    }
    /// A sub-heading (h3).
    html_page& subsection(std::string_view heading) {
        blocks_.push_back("<h3>" + escape(heading) + "</h3>");
        return *this;
    }
    /// A paragraph of plain text (escaped; blank lines start new paragraphs).
    html_page& paragraph(std::string_view text) {
        std::size_t start = 0;
        while (start <= text.size()) {
            std::size_t end = text.find("\n\n", start);
            if (end == std::string_view::npos) end = text.size();
            const std::string_view part = text.substr(start, end - start);
            if (part.find_first_not_of(" \t\n") != std::string_view::npos) blocks_.push_back("<p>" + escape(part) + "</p>");
            start = end + 2;
        }
        return *this;
    }
    /// A highlighted remark (e.g. "demo data", a caveat).
    html_page& note(std::string_view text) {
        blocks_.push_back("<p class=\"note\">" + escape(text) + "</p>");
        return *this;
    }
    /// Preformatted text (logs, command lines, configurations), escaped.
    html_page& preformatted(std::string_view text) {
        blocks_.push_back("<pre>" + escape(text) + "</pre>");
        return *this;
    }
    /// A two-column key–value table (settings, summary numbers).
    html_page& key_values(const std::vector<std::pair<std::string, std::string>>& rows, std::string_view caption = {}) {
        std::string h = "<div class=\"table-wrap\">" + caption_html(caption) + "<table class=\"kv\"><tbody>";
        for (const auto& [k, v] : rows) {
            h += "<tr><th scope=\"row\">" + escape(k) + "</th><td>" + escape(v) + "</td></tr>";
        }
        h += "</tbody></table></div>";
        blocks_.push_back(std::move(h));
        return *this;
    }
    /// A table: header and rows of strings. Cells that are numbers are right-aligned (and,
    /// with decimals >= 0, reprinted with that many decimals; NaN reads "n/a"). Short rows
    /// are padded; a row longer than a non-empty header throws std::invalid_argument.
    html_page& table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                     const table_options& opt = {}) {
        std::size_t ncol = header.size();
        for (const auto& r : rows) {
            detail::check(header.empty() || r.size() <= header.size(),
                          "html_page::table: a row has " + std::to_string(r.size()) + " cells for " +
                              std::to_string(header.size()) + " columns");
            ncol = std::max(ncol, r.size());
        }
        // A column is numeric when all its non-empty cells are.
        std::vector<bool> numeric(ncol, true);
        std::vector<bool> seen(ncol, false);
        for (const auto& r : rows)
            for (std::size_t c = 0; c < r.size(); ++c) {
                double x = 0;
                if (r[c].empty()) continue;
                seen[c] = true;
                if (!detail::parse_number(r[c], x)) numeric[c] = false;
            }
        for (std::size_t c = 0; c < ncol; ++c) numeric[c] = numeric[c] && seen[c];
        auto cls = [&](std::size_t c) {
            std::string k;
            if (numeric[c]) k = "num";
            if (opt.highlight_column && *opt.highlight_column == c) k += k.empty() ? "hl" : " hl";
            return k.empty() ? std::string() : " class=\"" + k + "\"";
        };
        std::string h = "<div class=\"table-wrap\">" + caption_html(opt.caption) + "<table>";
        if (!header.empty()) {
            h += "<thead><tr>";
            for (std::size_t c = 0; c < header.size(); ++c) h += "<th" + cls(c) + ">" + escape(header[c]) + "</th>";
            h += "</tr></thead>";
        }
        h += "<tbody>";
        for (const auto& r : rows) {
            h += "<tr>";
            for (std::size_t c = 0; c < ncol; ++c) {
                std::string cell = c < r.size() ? r[c] : std::string();
                double x = 0;
                if (opt.decimals >= 0 && detail::parse_number(cell, x)) cell = format_fixed(x, opt.decimals);
                h += "<td" + cls(c) + ">" + escape(cell) + "</td>";
            }
            h += "</tr>";
        }
        h += "</tbody></table></div>";
        blocks_.push_back(std::move(h));
        return *this;
    }
    /// A figure: SVG markup from bar_chart/line_chart/heat_map/scatter (inserted as is),
    /// numbered, with an optional caption.
    html_page& figure(std::string svg_markup, std::string_view caption = {}) {
        ++figures_;
        std::string h = "<figure>" + std::move(svg_markup);
        h += "<figcaption><b>Figure " + std::to_string(figures_) + ".</b>";
        if (!caption.empty()) h += " " + escape(caption);
        h += "</figcaption></figure>";
        blocks_.push_back(std::move(h));
        return *this;
    }
    /// Trusted HTML inserted as is (not escaped). Keep it well-formed.
    html_page& raw_html(std::string html) {
        blocks_.push_back(std::move(html));
        return *this;
    }
    /// Where the results come from (command line, git commit, ...), shown in the footer.
    html_page& provenance(std::string text) {
        provenance_ = std::move(text);
        return *this;
    }

    /// The whole document. It is also well-formed XML (void elements self-closed).
    [[nodiscard]] std::string html(std::chrono::system_clock::time_point generated = std::chrono::system_clock::now()) const {
        std::string h;
        h.reserve(16384);
        h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n"
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\" />\n"
             "<meta name=\"generator\" content=\"depthlab report\" />\n<title>" +
             escape(title_) + "</title>\n<style>" + default_css + "</style>\n</head>\n<body>\n<main>\n<header class=\"title\"><h1>" +
             escape(title_) + "</h1>";
        if (!subtitle_.empty()) h += "<p class=\"subtitle\">" + escape(subtitle_) + "</p>";
        h += "</header>\n";
        if (sections_.size() >= 3) {
            h += "<nav class=\"toc\"><b>Contents</b><ol>";
            for (std::size_t i = 0; i < sections_.size(); ++i)
                h += "<li><a href=\"#s" + std::to_string(i + 1) + "\">" + escape(sections_[i]) + "</a></li>";
            h += "</ol></nav>\n";
        }
        for (const std::string& b : blocks_) {
            h += b;
            h += '\n';
        }
        h += "</main>\n<footer>Generated " + escape(utc_time(generated));
        if (!provenance_.empty()) h += " from <code>" + escape(provenance_) + "</code>";
        h += "</footer>\n</body>\n</html>\n";
        return h;
    }

    /// Writes the page atomically (write_file_atomically); throws std::runtime_error.
    void write(const std::filesystem::path& path) const { write_file_atomically(path, html()); }

    [[nodiscard]] const std::string& title() const { return title_; }

    /// "2025-06-01 14:03:12 UTC"
    static std::string utc_time(std::chrono::system_clock::time_point t) {
        using namespace std::chrono;
        const auto secs = floor<seconds>(t);
        const auto day = floor<days>(secs);
        const year_month_day ymd{day};
        const hh_mm_ss hms{secs - day};
        char buf[48];
        std::snprintf(buf, sizeof buf, "%04d-%02u-%02u %02d:%02d:%02d UTC", static_cast<int>(ymd.year()),
                      static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), static_cast<int>(hms.hours().count()),
                      static_cast<int>(hms.minutes().count()), static_cast<int>(hms.seconds().count()));
        return buf;
    }

private:
    std::string caption_html(std::string_view caption) {
        if (caption.empty()) return {};
        ++tables_;
        return "<div class=\"caption\"><b>Table " + std::to_string(tables_) + ".</b> " + escape(caption) + "</div>";
    }

    std::string title_, subtitle_, provenance_;
    std::vector<std::string> sections_;
    std::vector<std::string> blocks_;
    int figures_ = 0, tables_ = 0;
};

}  // namespace depthlab::report
