#pragma once
// bar_chart (depthlab/report): grouped bars, one group per category and one bar per
// series, with optional error whiskers and value labels; its data (bar_series) and
// options (bar_chart_options). Returns standalone SVG markup for html_page::figure.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "depthlab/report/scales.hpp"
#include "depthlab/report/svg.hpp"
#include "depthlab/report/text.hpp"

namespace depthlab::report {

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

}  // namespace depthlab::report
