#pragma once
// heat_map (depthlab/report): a rows x columns grid of values on the sequential colour
// map, with row and column labels, a colour bar and hatched "n/a" cells; its options
// (heat_map_options). Returns standalone SVG markup for html_page::figure.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <string>
#include <vector>

#include "depthlab/report/scales.hpp"
#include "depthlab/report/svg.hpp"
#include "depthlab/report/text.hpp"

namespace depthlab::report {

struct heat_map_options {
    std::string title{}, subtitle{}, x_label{}, y_label{};
    double width = 720;      // the height follows from the number of rows
    std::string value_label{};  // the colour bar's label, e.g. "importance"
    double lo = 0, hi = 1;    // values map from lo (white) to hi (dark blue), clamped
    bool show_values = true;  // print the value in each cell
    int value_decimals = 2;
};

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

}  // namespace depthlab::report
