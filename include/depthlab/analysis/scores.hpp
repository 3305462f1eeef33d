#pragma once
// The component-value analyses themselves: options, results, contribution, criticality,
// pruning and rewinding. The conventions (metric direction, determinism, what removing a
// module means, tied models) are at the top of analysis/component_value.hpp.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "depthlab/autodiff/variable.hpp"
#include "depthlab/io/csv.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/nn/module.hpp"
#include "depthlab/nn/snapshot.hpp"
#include "depthlab/nn/transformer.hpp"
#include "depthlab/train/progress.hpp"
#include "depthlab/analysis/modules.hpp"
#include "depthlab/metrics/bootstrap.hpp"

namespace depthlab::analysis {

// ============================================================================ options

/// What a progress callback receives before each step of a long analysis.
struct progress_event {
    std::string stage;           // "contribution", "criticality", "pruning", "rewinding"
    std::size_t index = 0;       // 1-based step about to run
    std::size_t total = 0;       // number of steps
    std::string module;          // the module (or the last module removed) of the step
    std::size_t evaluations = 0; // metric evaluations so far (this analysis)
    double elapsed_s = 0;
    double eta_s = -1;           // -1 until one step has finished
};

using metric_fn = std::function<double()>;
using progress_fn = std::function<void(const progress_event&)>;

struct run_options {
    progress_fn progress{};       // called before each step (may be empty)
    bool print_progress = false;  // one stderr line per step: "contribution: module 3 of 30 (name), 3 evaluations, elapsed 1.2s, ETA 11.0s"
    bool no_grad = true;          // run the metric inside depthlab::no_grad
};

struct contribution_options {
    /// C = clip_fraction · |base| (the paper: BLEU_base / 10). |base| so that a negative
    /// metric (a negated loss) still gets a non-negative C; with base = 0, C = 0 and every
    /// score is 0 (the result says so) — set `clip` then.
    double clip_fraction = 0.1;
    std::optional<double> clip{}; // absolute C, overrides clip_fraction; +inf: no clipping
    std::optional<double> base{}; // the baseline metric when already known (saves one evaluation)
    nn::ablation_kind ablation = nn::ablation_kind::zero;  // what a removed module outputs (nn::ablation_kind)
    run_options run{};
};

enum class search_method { grid, bisection };
inline const char* to_string(search_method m) { return m == search_method::grid ? "grid" : "bisection"; }

struct criticality_options {
    double epsilon = 0.5;          // metric(α) passes when >= base − epsilon (paper: 0.5 BLEU)
    search_method method = search_method::grid;
    int grid_steps = 10;           // grid α ∈ {0, 1/k, ..., 1}, k = grid_steps
    bool grid_full_scan = false;   // evaluate every grid α (a full curve) instead of stopping at the first pass
    double tolerance = 1e-2;       // bisection stops when the bracket is this narrow ...
    int max_evaluations = 20;      // ... or after this many evaluations for the module (α = 0 included)
    bool check_final = true;       // refuse to start unless the model holds θᶠ exactly
    std::optional<double> base{};  // the baseline metric when already known
    run_options run{};
};

// ============================================================================ results

struct contribution_entry {
    std::string name, type;
    int layer = -1;
    double metric_without = 0;  // metric with this module switched off
    double drop = 0;            // d_n = clip(base − metric_without, 0, C); a NaN metric counts as the full drop C
    double score = 0;           // d_n / max_m d_m ∈ [0, 1]
};
struct contribution_result {
    nn::ablation_kind ablation = nn::ablation_kind::zero;  // how the modules were removed
    double base = 0;             // metric of the full model
    double clip = 0;             // C used
    double max_drop = 0;         // max_m d_m
    bool all_zero = false;       // max_m d_m == 0: no module matters at this C; every score is 0 (no division)
    std::size_t evaluations = 0; // metric calls, the baseline included
    std::vector<contribution_entry> modules;
    [[nodiscard]] std::vector<double> scores() const {
        std::vector<double> s;
        for (const auto& m : modules) s.push_back(m.score);
        return s;
    }
};

struct criticality_entry {
    std::string name, type;
    int layer = -1;
    double alpha = 1;              // criticality: smallest passing α found (1 when none passed)
    double metric_at_alpha = 0;    // metric at that α (bisection: the baseline when α = 1 was never left)
    std::string search;            // "grid" or "bisection"
    bool found = true;             // false: no grid α passed, not even α = 1 (a non-deterministic metric?)
    std::vector<std::pair<double, double>> trace;  // every (α, metric) evaluated, in order
};
struct criticality_result {
    double base = 0, epsilon = 0;
    std::size_t evaluations = 0;   // metric calls, the baseline included
    std::vector<criticality_entry> modules;
    /// The criticality scores (α): higher = more important.
    [[nodiscard]] std::vector<double> scores() const {
        std::vector<double> s;
        for (const auto& m : modules) s.push_back(m.alpha);
        return s;
    }
};

struct pruning_point {
    int k = 0;                                 // modules removed
    std::vector<std::string> modules_removed;  // the k least important, in removal order
    index_t parameters_removed = 0;            // parameter values they stop using
    double metric = 0;
};
struct pruning_result {
    index_t total_parameters = 0;
    std::size_t evaluations = 0;
    std::vector<pruning_point> curve;  // k = 0..K; k = 0 is the full model (the baseline)
};

struct rewinding_point {
    int k = 0;                         // modules rewound to θ⁰
    std::vector<std::string> modules;  // which (the k least important)
    double metric_before_finetune = 0;
    double metric_after_finetune = 0;
};

// ============================================================================ internals

namespace detail {

/// need_eval: the analysis evaluates the metric on the model as it is, so a model in training
/// mode (dropout drawing new masks at every evaluation) would make its scores noise.
// What an analysis moves of a module's parameters: nothing, those under its prefix
// (rewinding), or those its own interpolate function moves when it has one (criticality).
enum class parameters_needed { none, prefix, prefix_or_interpolation };
inline void check_modules(const std::vector<module_ref>& modules, const char* what, bool need_ablate, parameters_needed need_prefix,
                          bool need_eval = true) {
    DEPTHLAB_CHECK(!modules.empty(), usage_error, what, ": no modules");
    DEPTHLAB_CHECK(!need_eval || !modules.front().training || !modules.front().training(), usage_error, what,
                   ": the model is in training mode (dropout on: every evaluation would draw new masks, and the scores would be noise); "
                   "call model.eval() first");
    std::unordered_set<std::string> seen;
    for (const auto& m : modules) {
        DEPTHLAB_CHECK(!m.name.empty(), usage_error, what, ": a module has an empty name");
        DEPTHLAB_CHECK(seen.insert(m.name).second, usage_error, what, ": module name '", m.name, "' appears twice");
        DEPTHLAB_CHECK(!need_ablate || static_cast<bool>(m.ablate), usage_error, what, ": module '", m.name, "' has no ablate function");
        DEPTHLAB_CHECK(need_prefix == parameters_needed::none || !m.prefix.empty() ||
                           (need_prefix == parameters_needed::prefix_or_interpolation && m.interpolate),
                       usage_error, what,
                       ": module '", m.name, "' has no parameter prefix");
    }
}

/// Counts metric calls, wraps them in no_grad, reports progress with an ETA.
class evaluator {
public:
    evaluator(const metric_fn& f, const run_options& o, std::string stage, const char* unit = "module")
        : f_(f), o_(o), stage_(std::move(stage)), unit_(unit), start_(clock::now()) {
        DEPTHLAB_CHECK(static_cast<bool>(f_), usage_error, stage_, ": no metric callback");
    }
    double operator()() {
        ++count_;
        if (o_.no_grad) {
            no_grad g;
            return f_();
        }
        return f_();
    }
    /// Before step i (0-based) of n.
    void step(std::size_t i, std::size_t n, const std::string& module) {
        if (!o_.progress && !o_.print_progress) return;
        const double elapsed = std::chrono::duration<double>(clock::now() - start_).count();
        progress_event e{stage_, i + 1, n, module, count_, elapsed, i > 0 ? elapsed / static_cast<double>(i) * static_cast<double>(n - i) : -1};
        if (o_.progress) o_.progress(e);
        if (o_.print_progress) {
            // (no line may start with the word `module`: nvcc reads it as a C++20 module declaration)
            std::fprintf(stderr, "%s: %s %zu of %zu (%s), %zu evaluations, elapsed %s, ETA %s\n", stage_.c_str(), unit_, e.index, e.total,
                         e.module.c_str(), e.evaluations, train::format_duration(elapsed).c_str(),
                         e.eta_s < 0 ? "?" : train::format_duration(e.eta_s).c_str());
            std::fflush(stderr);
        }
    }
    [[nodiscard]] std::size_t count() const { return count_; }

private:
    using clock = std::chrono::steady_clock;
    const metric_fn& f_;
    const run_options& o_;
    std::string stage_;
    const char* unit_;
    clock::time_point start_;
    std::size_t count_ = 0;
};

inline void check_options(const contribution_options& opts) {
    DEPTHLAB_CHECK(opts.clip_fraction >= 0, usage_error, "contribution: clip_fraction ", opts.clip_fraction, " < 0");
    DEPTHLAB_CHECK(!opts.clip || *opts.clip >= 0, usage_error, "contribution: clip ", *opts.clip, " < 0");
}
inline void check_options(const criticality_options& opts) {
    DEPTHLAB_CHECK(opts.grid_steps >= 1, usage_error, "criticality: grid_steps ", opts.grid_steps, " < 1");
    DEPTHLAB_CHECK(opts.tolerance > 0, usage_error, "criticality: tolerance ", opts.tolerance, " <= 0");
    DEPTHLAB_CHECK(opts.max_evaluations >= 1, usage_error, "criticality: max_evaluations ", opts.max_evaluations, " < 1");
    DEPTHLAB_CHECK(opts.epsilon >= 0, usage_error, "criticality: epsilon ", opts.epsilon, " < 0");
}

/// max_drop, all_zero and every score from the drops (score_n = d_n / max_m d_m).
inline void score_contributions(contribution_result& r) {
    r.max_drop = 0;
    for (const auto& e : r.modules) r.max_drop = std::max(r.max_drop, e.drop);
    r.all_zero = !(r.max_drop > 0);
    for (auto& e : r.modules)
        e.score = r.all_zero ? 0.0 : std::isinf(r.max_drop) ? (std::isinf(e.drop) ? 1.0 : 0.0) : e.drop / r.max_drop;
}

template <class T, class B>
void check_holds(const nn::Module<T, B>& model, const nn::Snapshot<T, B>& snap, const char* what) {
    for (auto& [name, p] : model.named_parameters())
        DEPTHLAB_CHECK(p.value().to_vector() == snap.at(name).to_vector(), usage_error, what, ": the model does not hold θᶠ (parameter '", name,
                       "' differs from the final snapshot); pass the snapshots in the order (initial, final)");
}

}  // namespace detail

// ============================================================================ contribution

/// Contribution score of every module (see the top of the file). Each module is switched
/// off for one evaluation and on again, even when the metric throws.
inline contribution_result contribution(const std::vector<module_ref>& modules, const metric_fn& metric, const contribution_options& opts = {}) {
    detail::check_modules(modules, "contribution", true, detail::parameters_needed::none);
    detail::check_options(opts);
    for (const auto& m : modules) check_ablation(m, opts.ablation);  // (before the baseline: a refusal costs no evaluation)
    detail::evaluator eval(metric, opts.run, "contribution");
    contribution_result r;
    r.ablation = opts.ablation;
    r.base = opts.base ? *opts.base : eval();
    DEPTHLAB_CHECK(!std::isnan(r.base), numeric_error, "contribution: the baseline metric is NaN");
    r.clip = opts.clip ? *opts.clip : opts.clip_fraction * std::abs(r.base);
    for (std::size_t i = 0; i < modules.size(); ++i) {
        const module_ref& m = modules[i];
        eval.step(i, modules.size(), m.name);
        double v;
        {
            scoped_ablation off(m, opts.ablation);
            v = eval();
        }
        const double d = std::isnan(v) ? r.clip : std::clamp(r.base - v, 0.0, r.clip);
        r.modules.push_back({m.name, m.type, m.layer, v, d, 0.0});
    }
    detail::score_contributions(r);
    r.evaluations = eval.count();
    return r;
}

/// Contribution of default_modules(model).
template <class Model>
    requires std::derived_from<Model, nn::Module<typename Model::value_type, typename Model::backend_type>>
contribution_result contribution(Model& model, const metric_fn& metric, const contribution_options& opts = {}) {
    return contribution(default_modules(model), metric, opts);
}

// ============================================================================ criticality

/// Criticality of every module (see the top of the file). `initial` = θ⁰, `final_` = θᶠ;
/// the model must hold θᶠ (checked unless opts.check_final is false). Only the parameters
/// under the module's prefix move; θᶠ is written back after each module, also on exceptions.
///  grid:      α = 0, 1/k, ..., 1 in increasing order; the first passing α (all of them with
///             grid_full_scan). α = 1 is evaluated like any other grid point.
///  bisection: assumes metric(α) monotone. Evaluates α = 0 (passes: criticality 0); else
///             brackets [lo fails, hi passes] starting from hi = 1 — θᶠ, whose metric is the
///             baseline, not re-evaluated — and halves until hi − lo <= tolerance or
///             max_evaluations; reports hi.
template <class T, class B>
criticality_result criticality(nn::Module<T, B>& model, const std::vector<module_ref>& modules, const nn::Snapshot<T, B>& initial,
                               const nn::Snapshot<T, B>& final_, const metric_fn& metric, const criticality_options& opts = {}) {
    detail::check_modules(modules, "criticality", false, detail::parameters_needed::prefix_or_interpolation);
    detail::check_options(opts);
    if (opts.check_final) detail::check_holds(model, final_, "criticality");
    detail::evaluator eval(metric, opts.run, "criticality");
    criticality_result r;
    r.epsilon = opts.epsilon;
    r.base = opts.base ? *opts.base : eval();
    DEPTHLAB_CHECK(!std::isnan(r.base), numeric_error, "criticality: the baseline metric is NaN");
    const double threshold = r.base - opts.epsilon;
    auto passes = [&](double v) { return v >= threshold; };  // NaN never passes
    for (std::size_t i = 0; i < modules.size(); ++i) {
        const module_ref& m = modules[i];
        eval.step(i, modules.size(), m.name);
        criticality_entry e{m.name, m.type, m.layer, 1.0, r.base, to_string(opts.method), true, {}};
        // the module's own interpolation, else the parameters under its prefix; θᶠ back at the end
        scoped_module_interpolation interp(m.interpolate ? m.interpolate : interpolation_by_prefix(model, m.prefix, initial, final_));
        auto at = [&](double alpha) {
            interp.set(alpha);
            const double v = eval();
            e.trace.emplace_back(alpha, v);
            return v;
        };
        if (opts.method == search_method::grid) {
            e.found = false;
            for (int j = 0; j <= opts.grid_steps; ++j) {
                const double alpha = j == opts.grid_steps ? 1.0 : static_cast<double>(j) / opts.grid_steps;
                const double v = at(alpha);
                if (!e.found && passes(v)) {
                    e.found = true;
                    e.alpha = alpha;
                    e.metric_at_alpha = v;
                    if (!opts.grid_full_scan) break;
                }
            }
            if (!e.found) {
                e.alpha = 1.0;
                e.metric_at_alpha = e.trace.back().second;
            }
        } else {
            const double v0 = at(0.0);
            if (passes(v0)) {
                e.alpha = 0.0;
                e.metric_at_alpha = v0;
            } else {
                double lo = 0.0, hi = 1.0, hi_metric = r.base;
                int n = 1;
                while (hi - lo > opts.tolerance && n < opts.max_evaluations) {
                    const double mid = 0.5 * (lo + hi);
                    const double v = at(mid);
                    ++n;
                    if (passes(v)) {
                        hi = mid;
                        hi_metric = v;
                    } else {
                        lo = mid;
                    }
                }
                e.alpha = hi;
                e.metric_at_alpha = hi_metric;
            }
        }
        r.modules.push_back(std::move(e));
    }
    r.evaluations = eval.count();
    return r;
}

/// A score with its bootstrap percentile interval over the items of the evaluation set.
struct score_interval {
    double score = 0, lo = 0, hi = 0;
};

/// The bootstrap interval of a criticality score (entry `e` of a criticality_result with
/// tolerance ε) over the n items (sentences, sequences) its metric averages: on each resample,
/// base_on(drawn) scores the full model and metric_on(j, drawn) the module's j-th evaluation
/// (e.trace[j]) on the drawn items, and the resample's score is the smallest traced α whose
/// metric passes (≥ base − ε). When none does, it is 1 (θᶠ, the full model, always passes):
/// an upper bound, since the α between the trace's last and 1 were never evaluated; a
/// bisection's trace is the path it took on the whole set. Both functions come from the
/// caller, who kept each evaluation's per-item results.
template <class BaseOn, class MetricOn>
score_interval criticality_interval(const criticality_entry& e, double epsilon, std::size_t n, BaseOn&& base_on, MetricOn&& metric_on,
                                    const metrics::paired_bootstrap_options& o = {}) {
    DEPTHLAB_CHECK(!e.trace.empty(), usage_error, "criticality_interval: module '", e.name, "' has no evaluations in its trace");
    const auto score_on = [&](std::span<const std::size_t> drawn) {
        const double threshold = base_on(drawn) - epsilon;
        double alpha = 1.0;
        for (std::size_t j = 0; j < e.trace.size(); ++j)
            if (e.trace[j].first < alpha && metric_on(j, drawn) >= threshold) alpha = e.trace[j].first;
        return alpha;
    };
    std::vector<double> values = metrics::bootstrap_values(n, score_on, o, "criticality_interval");
    score_interval r{.score = e.alpha};
    std::tie(r.lo, r.hi) = metrics::percentile_interval(values, o.confidence);
    return r;
}

/// criticality_interval with corpus BLEU as the metric: `base` the full model's hypotheses,
/// traced[j] those of the module's j-th evaluation (e.trace[j]), refs the references.
inline score_interval criticality_interval_bleu(const criticality_entry& e, double epsilon, std::span<const std::string> base,
                                                const std::vector<std::vector<std::string>>& traced, std::span<const std::string> refs,
                                                const metrics::paired_bootstrap_options& o = {}) {
    DEPTHLAB_CHECK(traced.size() == e.trace.size(), shape_error, "criticality_interval_bleu: ", traced.size(), " evaluations' hypotheses for '", e.name,
                   "', whose trace has ", e.trace.size());
    const auto full = metrics::sentence_bleu_stats(base, refs, o.bleu);
    std::vector<std::vector<metrics::bleu_stats>> at;
    for (const auto& h : traced) at.push_back(metrics::sentence_bleu_stats(h, refs, o.bleu));
    return criticality_interval(
        e, epsilon, refs.size(), [&](std::span<const std::size_t> drawn) { return metrics::corpus_bleu_of(full, drawn, o.bleu); },
        [&](std::size_t j, std::span<const std::size_t> drawn) { return metrics::corpus_bleu_of(at[j], drawn, o.bleu); }, o);
}

/// Criticality of default_modules(model).
template <class Model>
    requires std::derived_from<Model, nn::Module<typename Model::value_type, typename Model::backend_type>>
criticality_result criticality(Model& model, const nn::Snapshot<typename Model::value_type, typename Model::backend_type>& initial,
                               const nn::Snapshot<typename Model::value_type, typename Model::backend_type>& final_, const metric_fn& metric,
                               const criticality_options& opts = {}) {
    nn::Module<typename Model::value_type, typename Model::backend_type>& base = model;
    return criticality(base, default_modules(model), initial, final_, metric, opts);
}

// ============================================================================ ranking, pruning, rewinding

/// Indices of `modules` from least to most important (ascending score; ties broken by
/// name, std::string order). `importance` is aligned with `modules` (e.g. result.scores()).
inline std::vector<std::size_t> least_important_first(const std::vector<module_ref>& modules, const std::vector<double>& importance) {
    DEPTHLAB_CHECK(modules.size() == importance.size(), shape_error, "ranking: ", modules.size(), " modules but ", importance.size(),
                   " scores");
    for (std::size_t i = 0; i < importance.size(); ++i)
        DEPTHLAB_CHECK(!std::isnan(importance[i]), numeric_error, "ranking: the score of '", modules[i].name, "' is NaN");
    std::vector<std::size_t> idx(modules.size());
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
        if (importance[a] != importance[b]) return importance[a] < importance[b];
        return modules[a].name < modules[b].name;
    });
    return idx;
}

/// Pruning curve: for k = 0..max_k, the k least important modules switched off together
/// (each replaced as `ablation` says), the metric and the parameters they stop using. Every
/// module is switched on again at the end, also on exceptions. k = 0 evaluates the full model.
template <class T, class B>
pruning_result pruning_curve(const nn::Module<T, B>& model, const std::vector<module_ref>& modules, const std::vector<double>& importance,
                             const metric_fn& metric, int max_k, const run_options& run = {}, nn::ablation_kind ablation = nn::ablation_kind::zero) {
    detail::check_modules(modules, "pruning", true, detail::parameters_needed::none);
    for (const auto& m : modules) check_ablation(m, ablation);
    DEPTHLAB_CHECK(max_k >= 0 && static_cast<std::size_t>(max_k) <= modules.size(), usage_error, "pruning: max_k ", max_k, " outside [0, ",
                   modules.size(), "]");
    const auto order = least_important_first(modules, importance);
    detail::evaluator eval(metric, run, "pruning", "step");
    pruning_result r;
    r.total_parameters = model.parameter_count();
    scoped_ablation off;
    std::vector<const module_ref*> removed;
    pruning_point pt;
    for (int k = 0; k <= max_k; ++k) {
        if (k > 0) {
            const module_ref& m = modules[order[static_cast<std::size_t>(k - 1)]];
            off.add(m, ablation);
            removed.push_back(&m);
            pt.modules_removed.push_back(m.name);
        }
        eval.step(static_cast<std::size_t>(k), static_cast<std::size_t>(max_k) + 1, removed.empty() ? std::string("none") : removed.back()->name);
        pt.k = k;
        pt.parameters_removed = parameters_removed(model, removed);
        pt.metric = eval();
        r.curve.push_back(pt);
    }
    off.restore();
    r.evaluations = eval.count();
    return r;
}

/// Resets the parameters of the listed modules to θ⁰ (everything under their prefixes,
/// LayerNorm included); the rest of the model is untouched.
template <class T, class B>
void rewind(nn::Module<T, B>& model, const std::vector<const module_ref*>& modules, const nn::Snapshot<T, B>& initial) {
    for (const module_ref* m : modules) {
        DEPTHLAB_CHECK(!m->prefix.empty(), usage_error, "rewind: module '", m->name, "' has no parameter prefix");
        initial.restore(model, m->prefix);
    }
}

namespace detail {
template <class T, class B>
rewinding_point rewind_once(nn::Module<T, B>& model, const std::vector<module_ref>& modules, const std::vector<std::size_t>& order, int k,
                            const nn::Snapshot<T, B>& initial, evaluator& eval, const std::function<void()>& finetune) {
    DEPTHLAB_CHECK(k >= 0 && static_cast<std::size_t>(k) <= modules.size(), usage_error, "rewinding: k ", k, " outside [0, ", modules.size(), "]");
    std::vector<const module_ref*> chosen;
    rewinding_point pt;
    pt.k = k;
    for (int i = 0; i < k; ++i) {
        chosen.push_back(&modules[order[static_cast<std::size_t>(i)]]);
        pt.modules.push_back(chosen.back()->name);
    }
    rewind(model, chosen, initial);
    pt.metric_before_finetune = eval();
    if (finetune) finetune();
    pt.metric_after_finetune = eval();
    return pt;
}
}  // namespace detail

/// Rewinds the k least important modules to θ⁰, measures, calls `finetune` (the caller's
/// training of the whole model; it runs with gradients on), measures again. The model is
/// LEFT rewound and fine-tuned (that is the point); if finetune throws, it is left
/// wherever finetune stopped.
template <class T, class B>
rewinding_point rewind_and_finetune(nn::Module<T, B>& model, const std::vector<module_ref>& modules, const std::vector<double>& importance,
                                    int k, const nn::Snapshot<T, B>& initial, const metric_fn& metric, const std::function<void()>& finetune,
                                    const run_options& run = {}) {
    detail::check_modules(modules, "rewinding", false, detail::parameters_needed::prefix, /*need_eval=*/false);
    const auto order = least_important_first(modules, importance);
    detail::evaluator eval(metric, run, "rewinding");
    return detail::rewind_once(model, modules, order, k, initial, eval, finetune);
}

/// rewind_and_finetune for each k in ks, each starting from θᶠ; finetune(k) is called with
/// the k being run (create a fresh optimiser in it: its state must not carry over from the
/// previous k). The model is set back to θᶠ at the end, also on exceptions.
template <class T, class B>
std::vector<rewinding_point> rewinding_curve(nn::Module<T, B>& model, const std::vector<module_ref>& modules, const std::vector<double>& importance,
                                             const std::vector<int>& ks, const nn::Snapshot<T, B>& initial, const nn::Snapshot<T, B>& final_,
                                             const metric_fn& metric, const std::function<void(int)>& finetune, const run_options& run = {}) {
    detail::check_modules(modules, "rewinding", false, detail::parameters_needed::prefix, /*need_eval=*/false);
    const auto order = least_important_first(modules, importance);
    struct restore_final {
        nn::Module<T, B>& m;
        const nn::Snapshot<T, B>& s;
        ~restore_final() {
            try {
                s.restore(m);
            } catch (...) {
            }
        }
    } guard{model, final_};
    detail::evaluator eval(metric, run, "rewinding", "step");
    std::vector<rewinding_point> out;
    for (std::size_t i = 0; i < ks.size(); ++i) {
        const int k = ks[i];
        eval.step(i, ks.size(), "k=" + std::to_string(k));
        final_.restore(model);
        out.push_back(detail::rewind_once(model, modules, order, k, initial, eval, [&] {
            if (finetune) finetune(k);
        }));
    }
    return out;
}

}  // namespace depthlab::analysis
