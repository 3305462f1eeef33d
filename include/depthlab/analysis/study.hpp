#pragma once
// What a study does around the analyses of analysis/component_value.hpp: count and time
// its metric, rank the modules with a tie-break, group the scores by type and layer, and
// check the findings of Wang & Tu (2020) on them — free of any metric or data set.
//
// * Ties. A clipped score saturates (contribution clips each drop at C = base/10: on a
//   strong model most modules score 1.00), so rankings break ties with the unclipped drop
//   (importance_ranks), and group comparisons say "tied" when the means are equal instead
//   of printing an arbitrary order and verdict.
// * Unclipped drops: base − metric without the module (contribution) and base − metric at
//   α = 0 (criticality); neither is clipped, both are in the units of the metric.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "depthlab/analysis/component_value.hpp"
#include "depthlab/core/error.hpp"

namespace depthlab::analysis {

/// A metric that counts its calls and their time; copies share the counts, so it can be
/// passed as a metric_fn to every analysis and read afterwards.
class timed_metric {
public:
    explicit timed_metric(metric_fn f) : s_(std::make_shared<state>(state{std::move(f), 0, 0})) {
        DEPTHLAB_CHECK(static_cast<bool>(s_->f), usage_error, "timed_metric: empty metric");
    }
    double operator()() const {
        const auto t0 = std::chrono::steady_clock::now();
        const double v = s_->f();
        s_->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++s_->calls;
        return v;
    }
    [[nodiscard]] std::size_t calls() const { return s_->calls; }
    [[nodiscard]] double seconds() const { return s_->seconds; }

private:
    struct state {
        metric_fn f;
        std::size_t calls;
        double seconds;
    };
    std::shared_ptr<state> s_;
};

/// Seconds per phase: lap(name) returns the time since construction or the previous lap
/// and records it under name; phases() lists them in order; elapsed() is the time since
/// construction.
class stopwatch {
public:
    [[nodiscard]] double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
    double lap(const std::string& name = {}) {
        const auto now = std::chrono::steady_clock::now();
        const double s = std::chrono::duration<double>(now - last_).count();
        last_ = now;
        if (!name.empty()) phases_.emplace_back(name, s);
        return s;
    }
    [[nodiscard]] const std::vector<std::pair<std::string, double>>& phases() const { return phases_; }

private:
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
    std::vector<std::pair<std::string, double>> phases_;
};

/// The module types of an encoder–decoder Transformer, in the paper's order.
inline const std::vector<std::string>& encoder_decoder_types() {
    static const std::vector<std::string> types = {"E:SA", "E:FF", "D:SA", "D:EA", "D:FF"};
    return types;
}

/// Rank positions 0..n-1 by `score` ascending (least important first), ties broken by
/// `tie` ascending, then by position; pass the result to pruning_curve / rewinding_curve.
inline std::vector<double> rank_with_ties(const std::vector<double>& score, const std::vector<double>& tie) {
    DEPTHLAB_CHECK(score.size() == tie.size(), shape_error, "rank_with_ties: ", score.size(), " scores but ", tie.size(), " tie-breakers");
    for (std::size_t i = 0; i < score.size(); ++i)
        DEPTHLAB_CHECK(!std::isnan(score[i]) && !std::isnan(tie[i]), numeric_error, "rank_with_ties: NaN at position ", i);
    std::vector<std::size_t> idx(score.size());
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
        if (score[a] != score[b]) return score[a] < score[b];
        return tie[a] < tie[b];
    });
    std::vector<double> pos(score.size());
    for (std::size_t i = 0; i < idx.size(); ++i) pos[idx[i]] = static_cast<double>(i);
    return pos;
}

/// base − metric without the module, per module (contribution order). Not clipped.
inline std::vector<double> unclipped_drops(const contribution_result& r) {
    std::vector<double> d;
    for (const auto& e : r.modules) d.push_back(r.base - e.metric_without);
    return d;
}
/// base − metric at α = 0 (the module at its initial weights), per module; 0 when the
/// search never evaluated α = 0 (bisection that stopped early).
inline std::vector<double> drops_at_initial(const criticality_result& r) {
    std::vector<double> d;
    for (const auto& e : r.modules) {
        double v = 0;
        for (const auto& [alpha, metric] : e.trace)
            if (alpha == 0) {
                v = r.base - metric;
                break;
            }
        d.push_back(v);
    }
    return d;
}
/// Rankings for pruning and rewinding: the score, ties broken by the unclipped drop.
inline std::vector<double> importance_ranks(const contribution_result& r) { return rank_with_ties(r.scores(), unclipped_drops(r)); }
inline std::vector<double> importance_ranks(const criticality_result& r) { return rank_with_ties(r.scores(), drops_at_initial(r)); }

/// One value per module, with where the module sits: the input of the group statistics.
struct module_values {
    std::string name;  // "contribution", "criticality", "unclipped drop", ...
    struct entry {
        std::string module, type;
        int layer = -1;
        double value = 0;
    };
    std::vector<entry> entries;
};
inline module_values values_of(const contribution_result& r) {
    module_values v{"contribution", {}};
    for (const auto& e : r.modules) v.entries.push_back({e.name, e.type, e.layer, e.score});
    return v;
}
inline module_values values_of(const criticality_result& r) {
    module_values v{"criticality", {}};
    for (const auto& e : r.modules) v.entries.push_back({e.name, e.type, e.layer, e.alpha});
    return v;
}
inline module_values unclipped_values_of(const contribution_result& r) {
    module_values v{"unclipped drop", {}};
    const auto d = unclipped_drops(r);
    for (std::size_t i = 0; i < r.modules.size(); ++i) v.entries.push_back({r.modules[i].name, r.modules[i].type, r.modules[i].layer, d[i]});
    return v;
}

/// Mean value of the modules `pick(type, layer)` selects; NaN when it selects none.
inline double group_mean(const module_values& v, const std::function<bool(const std::string& type, int layer)>& pick) {
    double s = 0;
    int n = 0;
    for (const auto& e : v.entries)
        if (pick(e.type, e.layer)) {
            s += e.value;
            ++n;
        }
    return n ? s / n : std::numeric_limits<double>::quiet_NaN();
}

/// Values laid out as types (rows) × layers (columns); NaN where no module sits (a
/// decoder-only type in an encoder row, layers beyond a shorter stack, shared modules).
struct type_layer_grid {
    std::vector<std::string> types, layers;  // row labels; column labels "0".."L-1" (layers count from 0, as the CSVs and parameter names)
    std::vector<std::vector<double>> values; // [type][layer]
    [[nodiscard]] double max() const {
        double m = -std::numeric_limits<double>::infinity();
        for (const auto& row : values)
            for (double x : row)
                if (!std::isnan(x)) m = std::max(m, x);
        return m;
    }
};
inline type_layer_grid by_type_and_layer(const module_values& v, const std::vector<std::string>& types = encoder_decoder_types()) {
    int L = 0;
    for (const auto& e : v.entries) L = std::max(L, e.layer + 1);
    type_layer_grid g;
    g.types = types;
    for (int l = 0; l < L; ++l) g.layers.push_back(std::to_string(l));
    g.values.assign(types.size(), std::vector<double>(static_cast<std::size_t>(L), std::numeric_limits<double>::quiet_NaN()));
    for (const auto& e : v.entries) {
        const auto t = static_cast<std::size_t>(std::find(types.begin(), types.end(), e.type) - types.begin());
        if (t < types.size() && e.layer >= 0) g.values[t][static_cast<std::size_t>(e.layer)] = e.value;
    }
    return g;
}

// ---- the paper's findings --------------------------------------------------------------

enum class verdict { holds, fails, tied, no_data };
inline const char* to_string(verdict v) {
    switch (v) {
        case verdict::holds: return "yes";
        case verdict::fails: return "no";
        case verdict::tied: return "tied";
        default: return "n/a";
    }
}

struct finding {
    std::string claim;    // the paper's finding
    std::string ours;     // the numbers behind the verdict on this run
    verdict result = verdict::no_data;
};

namespace detail {
inline std::string fixed2(double v) {
    if (std::isnan(v)) return "n/a";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}
/// a > b: holds; a == b: tied; NaN: no data.
inline verdict greater(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return verdict::no_data;
    return a > b ? verdict::holds : a == b ? verdict::tied : verdict::fails;
}
}  // namespace detail

/// Wang & Tu's findings checked on one score (values_of(contribution or criticality)):
/// the least and the most important module type, lower vs upper encoder and decoder
/// layers, lower vs upper D:EA. "Lower" and "upper" are the bottom and top half of the
/// layers (the middle layer of an odd stack in neither).
inline std::vector<finding> wang_tu_findings(const module_values& v, int encoder_layers, int decoder_layers) {
    std::vector<finding> out;
    std::vector<std::pair<double, std::string>> means;
    for (const auto& t : encoder_decoder_types()) {
        const double m = group_mean(v, [&](const std::string& ty, int) { return ty == t; });
        if (!std::isnan(m)) means.emplace_back(m, t);
    }
    std::stable_sort(means.begin(), means.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::string order;
    for (std::size_t i = 0; i < means.size(); ++i)
        order += (i == 0 ? "" : means[i].first == means[i - 1].first ? " = " : " < ") + means[i].second + " " + detail::fixed2(means[i].first);
    auto extreme = [&](const std::string& type, bool lowest) {
        if (means.empty()) return verdict::no_data;
        const double target = lowest ? means.front().first : means.back().first;
        const auto it = std::find_if(means.begin(), means.end(), [&](const auto& m) { return m.second == type; });
        if (it == means.end()) return verdict::no_data;
        if (it->first != target) return verdict::fails;
        const auto sharing = std::count_if(means.begin(), means.end(), [&](const auto& m) { return m.first == target; });
        return sharing > 1 ? verdict::tied : verdict::holds;
    };
    out.push_back({"D:SA is the least important module type (lowest mean score)", order, extreme("D:SA", true)});
    std::string highest;  // every type that shares the highest mean
    for (auto it = means.rbegin(); it != means.rend() && it->first == means.back().first; ++it)
        highest += (highest.empty() ? "" : " = ") + it->second + " " + detail::fixed2(it->first);
    out.push_back({"D:FF is the most important module type (highest mean score)", means.empty() ? "n/a" : "highest: " + highest,
                   extreme("D:FF", false)});
    auto halves = [&](const std::string& claim, const std::function<bool(const std::string&)>& type_ok, int layers, bool upper_wins) {
        const int h = layers / 2;
        const double low = group_mean(v, [&](const std::string& t, int l) { return type_ok(t) && l < h; });
        const double high = group_mean(v, [&](const std::string& t, int l) { return type_ok(t) && l >= layers - h; });
        out.push_back({claim, "bottom " + std::to_string(h) + ": " + detail::fixed2(low) + " vs top " + std::to_string(h) + ": " + detail::fixed2(high),
                       upper_wins ? detail::greater(high, low) : detail::greater(low, high)});
    };
    halves("lower encoder modules matter more than upper ones", [](const std::string& t) { return t[0] == 'E'; }, encoder_layers, false);
    halves("upper decoder modules matter more than lower ones", [](const std::string& t) { return t[0] == 'D'; }, decoder_layers, true);
    halves("upper D:EA matter more than lower D:EA", [](const std::string& t) { return t == "D:EA"; }, decoder_layers, true);
    return out;
}

/// A model made smaller another way than pruning (e.g. trained with fewer decoder layers), to
/// compare pruning with: its metric and how many modules it has fewer than the full model
/// (a decoder layer is three: D:SA, D:EA, D:FF).
struct smaller_model {
    double metric = std::numeric_limits<double>::quiet_NaN();
    int modules_fewer = 0;
    std::string what;  // e.g. "1 fewer decoder layer"
};

/// Wang & Tu's findings on pruning and rewinding, checked on one run: removing the k least
/// important modules costs less than `tolerance` of the metric (by each score's ranking); a
/// pruned model beats a smaller model of the same module count (when one was trained);
/// rewinding the least important modules to θ⁰ and fine-tuning reaches the baseline again.
/// `base` is the full model's metric; a finding without the numbers it needs is "n/a".
inline std::vector<finding> pruning_findings(const pruning_result& by_contribution, const pruning_result& by_criticality,
                                             const std::vector<rewinding_point>& rewinding, double base, const std::string& metric,
                                             const smaller_model* smaller = nullptr, int k = 3, double tolerance = 0.5) {
    std::vector<finding> out;
    const auto at = [](const pruning_result& r, int kk) {
        for (const auto& p : r.curve)
            if (p.k == kk) return p.metric;
        return std::numeric_limits<double>::quiet_NaN();
    };
    for (const auto& [name, curve] : {std::pair<const char*, const pruning_result*>{"contribution", &by_contribution},
                                      std::pair<const char*, const pruning_result*>{"criticality", &by_criticality}}) {
        const double pruned = at(*curve, k), cost = base - pruned;
        out.push_back({"pruning the " + std::to_string(k) + " least important modules (by " + name + ") costs less than " +
                           detail::fixed2(tolerance) + " " + metric,
                       std::isnan(pruned) ? "no pruning curve to k = " + std::to_string(k)
                                          : detail::fixed2(base) + " -> " + detail::fixed2(pruned) + " (cost " + detail::fixed2(cost) + ")",
                       std::isnan(pruned) ? verdict::no_data : cost < tolerance ? verdict::holds : verdict::fails});
    }
    if (smaller && smaller->modules_fewer > 0) {
        const double pruned = at(by_contribution, smaller->modules_fewer), pruned_k = at(by_criticality, smaller->modules_fewer);
        const double best = std::isnan(pruned) ? pruned_k : std::isnan(pruned_k) ? pruned : std::max(pruned, pruned_k);
        out.push_back({"a pruned model beats a smaller one with as many modules (" + smaller->what + ")",
                       "pruned " + std::to_string(smaller->modules_fewer) + " modules: " + detail::fixed2(pruned) + " (by contribution), " +
                           detail::fixed2(pruned_k) + " (by criticality); smaller model: " + detail::fixed2(smaller->metric),
                       detail::greater(best, smaller->metric)});
    } else {
        out.push_back({"a pruned model beats a smaller one with as many modules", "no smaller model was trained (component_value --shallow-checkpoint)",
                       verdict::no_data});
    }
    std::string after;
    verdict rewound = verdict::no_data;
    for (const auto& p : rewinding) {
        if (p.k <= 0) continue;
        after += (after.empty() ? "" : ", ") + ("k = " + std::to_string(p.k) + ": " + detail::fixed2(p.metric_after_finetune));
        if (p.metric_after_finetune < base) rewound = verdict::fails;
        else if (rewound == verdict::no_data) rewound = verdict::holds;
    }
    out.push_back({"rewinding the least important modules to their initial values and fine-tuning reaches the baseline",
                   after.empty() ? "no rewinding with k > 0 ran" : after + " against the baseline " + detail::fixed2(base), rewound});
    return out;
}

}  // namespace depthlab::analysis
