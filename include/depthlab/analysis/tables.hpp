#pragma once
// Statistics and tables of component-value results: average ranks, Spearman correlation of
// the two scores, and the CSV files (through io::csv_writer), whose columns are a contract.
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
#include <sstream>
#include <string>
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
#include "depthlab/analysis/scores.hpp"

namespace depthlab::analysis {

// ============================================================================ statistics

/// Ranks 1..n of v (ascending); tied values get the average of their ranks.
inline std::vector<double> average_ranks(const std::vector<double>& v) {
    for (double x : v) DEPTHLAB_CHECK(!std::isnan(x), numeric_error, "average_ranks: NaN value");
    std::vector<std::size_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
    std::vector<double> rank(v.size());
    for (std::size_t i = 0; i < idx.size();) {
        std::size_t j = i;
        while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
        const double avg = 0.5 * static_cast<double>(i + j) + 1.0;
        for (std::size_t t = i; t <= j; ++t) rank[idx[t]] = avg;
        i = j + 1;
    }
    return rank;
}

/// Spearman rank correlation: Pearson correlation of the average ranks. NaN when either
/// side is constant (no ranking to compare); throws on size mismatch or fewer than 2 values.
inline double spearman(const std::vector<double>& a, const std::vector<double>& b) {
    DEPTHLAB_CHECK(a.size() == b.size(), shape_error, "spearman: ", a.size(), " vs ", b.size(), " values");
    DEPTHLAB_CHECK(a.size() >= 2, usage_error, "spearman: needs at least 2 values, got ", a.size());
    const auto ra = average_ranks(a), rb = average_ranks(b);
    const double mean = 0.5 * static_cast<double>(a.size() + 1);  // mean rank, ties included
    double sab = 0, saa = 0, sbb = 0;
    for (std::size_t i = 0; i < ra.size(); ++i) {
        sab += (ra[i] - mean) * (rb[i] - mean);
        saa += (ra[i] - mean) * (ra[i] - mean);
        sbb += (rb[i] - mean) * (rb[i] - mean);
    }
    if (saa == 0 || sbb == 0) return std::numeric_limits<double>::quiet_NaN();
    return sab / std::sqrt(saa * sbb);
}

/// Spearman between contribution and criticality scores, modules matched by name.
inline double rank_correlation(const contribution_result& c, const criticality_result& k) {
    std::unordered_map<std::string, double> alpha;
    for (const auto& e : k.modules) alpha.emplace(e.name, e.alpha);
    DEPTHLAB_CHECK(alpha.size() == c.modules.size(), usage_error, "rank_correlation: ", c.modules.size(), " contribution vs ", alpha.size(),
                   " criticality modules");
    std::vector<double> a, b;
    for (const auto& e : c.modules) {
        auto it = alpha.find(e.name);
        DEPTHLAB_CHECK(it != alpha.end(), usage_error, "rank_correlation: module '", e.name, "' has no criticality score");
        a.push_back(e.score);
        b.push_back(it->second);
    }
    return spearman(a, b);
}

// ============================================================================ CSV
// Column contracts (header line first, one row per module / k, "," separated, RFC 4180
// quoting, numbers in shortest round-trip form, "nan"/"inf"/"-inf" for non-finite values):
//   contribution.csv  module,type,layer,metric_without,score
//   criticality.csv   module,type,layer,alpha,metric_at_alpha,search
//   pruning.csv       k,modules_removed,parameters_removed,metric
//                     modules_removed: the k removed module names in removal order
//                     (least important first), joined by ';' (empty for k = 0).
//   rewinding.csv     k,modules,metric_before_finetune,metric_after_finetune
//                     modules: the k rewound module names, joined by ';'.
//   criticality_trace.csv  module,alpha,metric: every α tried, in the order tried.
// layer is -1 for a module shared by every layer (tied stacks). All through io::csv_writer.

namespace detail {
inline std::string join(const std::vector<std::string>& v, char sep = ';') {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) s += sep;
        s += v[i];
    }
    return s;
}
}  // namespace detail

inline io::csv_writer csv_table(const contribution_result& r) {
    // the kind in the header: metric_without (zero: the module removed), metric_without_mean, metric_without_resample
    const std::string without = r.ablation == nn::ablation_kind::zero ? "metric_without" : std::string("metric_without_") + nn::to_string(r.ablation);
    io::csv_writer csv({"module", "type", "layer", without, "score"});
    for (const auto& e : r.modules) csv.row(e.name, e.type, e.layer, e.metric_without, e.score);
    return csv;
}
inline io::csv_writer csv_table(const criticality_result& r) {
    io::csv_writer csv({"module", "type", "layer", "alpha", "metric_at_alpha", "search"});
    for (const auto& e : r.modules) csv.row(e.name, e.type, e.layer, e.alpha, e.metric_at_alpha, e.search);
    return csv;
}
inline io::csv_writer csv_table(const pruning_result& r) {
    io::csv_writer csv({"k", "modules_removed", "parameters_removed", "metric"});
    for (const auto& p : r.curve) csv.row(p.k, detail::join(p.modules_removed), p.parameters_removed, p.metric);
    return csv;
}
inline io::csv_writer csv_table(const std::vector<rewinding_point>& r) {
    io::csv_writer csv({"k", "modules", "metric_before_finetune", "metric_after_finetune"});
    for (const auto& p : r) csv.row(p.k, detail::join(p.modules), p.metric_before_finetune, p.metric_after_finetune);
    return csv;
}
/// criticality_trace.csv: every α the search tried, per module, in the order tried.
inline io::csv_writer trace_table(const criticality_result& r) {
    io::csv_writer csv({"module", "alpha", "metric"});
    for (const auto& e : r.modules)
        for (const auto& [alpha, metric] : e.trace) csv.row(e.name, alpha, metric);
    return csv;
}

/// The tables above to a stream, or to a file (contribution.csv, criticality.csv,
/// pruning.csv, rewinding.csv by convention) written atomically; io_error names the path.
template <class Result>
    requires requires(const Result& r) { csv_table(r); }
void write_csv(std::ostream& os, const Result& r) {
    csv_table(r).write(os);
}
template <class Result>
    requires requires(const Result& r) { csv_table(r); }
void write_csv(const std::string& path, const Result& r) {
    csv_table(r).write(path);
}
/// criticality_trace.csv (trace_table).
inline void write_trace_csv(const std::string& path, const criticality_result& r) { trace_table(r).write(path); }

}  // namespace depthlab::analysis
