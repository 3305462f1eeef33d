#pragma once
// Scales for depthlab/report figures: colours (the Okabe–Ito series palette, the
// sequential white-to-dark-blue map of heat maps, WCAG luminance for legible cell text),
// axis ticks (nice_ticks: round 1/2/5 steps; log_ticks: decades) and detail::axis_range,
// which turns a data range and optional explicit limits into an axis range and its ticks.
// Standard library only.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "depthlab/report/text.hpp"

namespace depthlab::report {

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

namespace detail {

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

}  // namespace detail

}  // namespace depthlab::report
