#pragma once
// scatter (depthlab/report): points per series with their own colour and marker shape,
// point labels placed to avoid one another, an optional y = x reference line; its data
// (scatter_point, scatter_series) and options (scatter_options). Returns standalone SVG
// markup for html_page::figure.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "depthlab/report/scales.hpp"
#include "depthlab/report/svg.hpp"
#include "depthlab/report/text.hpp"

namespace depthlab::report {

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

}  // namespace depthlab::report
