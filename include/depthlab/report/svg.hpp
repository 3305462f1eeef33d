#pragma once
// SVG primitives shared by the depthlab/report charts (charts/*.hpp): the palette of ink
// colours and the font stack, detail::svg (the document being built: text, line, rect,
// marker shapes, each string escaped), the header (title and subtitle), legends, axes
// with grid lines and tick labels, and axis labels. Every chart's options struct follows
// the convention below. Standard library only.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "depthlab/report/scales.hpp"
#include "depthlab/report/text.hpp"

namespace depthlab::report {

// ------------------------------------------------------------------------------------
// Figures: drawing helpers
// ------------------------------------------------------------------------------------
// Every options struct (charts/*.hpp) begins with the same fields in the same order
// (title, subtitle, x_label, y_label, width, height), so designated initialisers read the
// same everywhere:
//   report::line_chart(series, {.title = "Training loss", .x_label = "step", .log_y = true});
// width/height are the viewBox size in CSS px (the figure scales down to fit its page).

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

}  // namespace detail

}  // namespace depthlab::report
