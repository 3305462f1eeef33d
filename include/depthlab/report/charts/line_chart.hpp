#pragma once
// line_chart (depthlab/report): (x, y) series as lines with per-series markers, linear
// or log10 y axis, gaps at missing values; its data (line_series) and options
// (line_chart_options). Returns standalone SVG markup for html_page::figure.
#include <algorithm>
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

}  // namespace depthlab::report
