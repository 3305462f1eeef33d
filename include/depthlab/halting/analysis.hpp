#pragma once
// Aggregations of the ACT-ALBERT study: mean iterations and remainders per token category
// (the paper's halting table) and the fixed-point trace — the mean cosine similarity between
// successive states per category and iteration. Categories: all, unmasked, [MASK]→[MASK],
// [MASK]→random, [MASK]→original, [CLS], [SEP] (padding excluded), plus any caller label.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "depthlab/autodiff/ops.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/data/albert_data.hpp"
#include "depthlab/halting/act.hpp"
#include "depthlab/halting/act_albert.hpp"
#include "depthlab/io/csv.hpp"
#include "depthlab/nn/classification.hpp"
#include "depthlab/nn/snapshot.hpp"

namespace depthlab::halting {

/// The categories of the paper's table, in its order ("all" first).
inline const std::vector<std::string>& halting_categories() {
    static const std::vector<std::string> c{"all", "unmasked", "mask_to_mask", "mask_to_random", "mask_to_original", "cls", "sep"};
    return c;
}

class halting_stats {
public:
    struct cell {
        std::int64_t count = 0;
        double iterations = 0, remainder = 0;
    };
    struct trace_cell {
        std::int64_t count = 0;
        double cosine = 0;
    };

    /// Adds a batch: category of every flat position (data::token_category values) and the
    /// record; `labels` (optional, same length) adds caller-defined groups ("label:<x>").
    void add(const halting_record& rec, const std::vector<std::uint8_t>& category, const std::vector<std::string>* labels = nullptr) {
        const std::size_t n = rec.N.size();
        DEPTHLAB_CHECK(category.size() == n && (!labels || labels->size() == n), shape_error, "halting_stats::add: ", n,
                       " tokens, ", category.size(), " categories", labels ? detail::cat(", ", labels->size(), " labels") : std::string());
        for (std::size_t i = 0; i < n; ++i) {
            const auto c = static_cast<data::token_category>(category[i]);
            if (c == data::token_category::pad) continue;
            DEPTHLAB_CHECK(rec.N[i] > 0, error, "halting_stats::add: a real token (position ", i, ") has N = 0 — lengths and categories disagree");
            const std::string name = data::to_string(c);
            add_token("all", rec, i);
            add_token(name, rec, i);
            if (labels && !(*labels)[i].empty()) add_token("label:" + (*labels)[i], rec, i);
        }
        flops_ += rec.flops;
    }
    /// The encoder forwards' matrix-product FLOPs per real token (halting_record::flops over
    /// every batch added); NaN before any token.
    [[nodiscard]] double flops_per_token() const {
        const std::int64_t n = count("all");
        return n == 0 ? NAN : static_cast<double>(flops_) / static_cast<double>(n);
    }
    [[nodiscard]] const std::map<std::string, cell>& table() const { return table_; }
    [[nodiscard]] const std::map<std::string, std::vector<trace_cell>>& trace() const { return trace_; }
    [[nodiscard]] double mean_iterations(const std::string& category = "all") const {
        auto it = table_.find(category);
        return it == table_.end() || it->second.count == 0 ? NAN : it->second.iterations / static_cast<double>(it->second.count);
    }
    [[nodiscard]] double mean_remainder(const std::string& category = "all") const {
        auto it = table_.find(category);
        return it == table_.end() || it->second.count == 0 ? NAN : it->second.remainder / static_cast<double>(it->second.count);
    }
    [[nodiscard]] std::int64_t count(const std::string& category = "all") const {
        auto it = table_.find(category);
        return it == table_.end() ? 0 : it->second.count;
    }
    /// Mean cosine at iteration n (1-based) for a category; NaN when no token ran then.
    [[nodiscard]] double mean_cosine(const std::string& category, int n) const {
        auto it = trace_.find(category);
        if (it == trace_.end() || n < 1 || n > static_cast<int>(it->second.size())) return NAN;
        const auto& c = it->second[static_cast<std::size_t>(n - 1)];
        return c.count ? c.cosine / static_cast<double>(c.count) : NAN;
    }
    [[nodiscard]] int max_iteration() const {
        int m = 0;
        for (auto& [k, v] : trace_) m = std::max(m, static_cast<int>(v.size()));
        return m;
    }
    void clear() {
        table_.clear();
        trace_.clear();
    }

    /// halting.csv: category, count, mean_iterations, mean_remainder (the paper's categories
    /// first, then caller labels).
    void write_halting_csv(const std::string& path) const { halting_table().write(path); }
    [[nodiscard]] io::csv_writer halting_table() const {
        io::csv_writer csv({"category", "count", "mean_iterations", "mean_remainder"});
        for (const auto& name : ordered_names()) csv.row(name, count(name), mean_iterations(name), mean_remainder(name));
        return csv;
    }
    /// fixed_point.csv: category, iteration, mean_cosine (rows only where tokens ran).
    void write_fixed_point_csv(const std::string& path) const { fixed_point_table().write(path); }
    [[nodiscard]] io::csv_writer fixed_point_table() const {
        io::csv_writer csv({"category", "iteration", "mean_cosine"});
        for (const auto& name : ordered_names())
            for (int n = 1; n <= max_iteration(); ++n) {
                const double c = mean_cosine(name, n);
                if (!std::isnan(c)) csv.row(name, n, c);
            }
        return csv;
    }
    [[nodiscard]] std::vector<std::string> ordered_names() const {
        std::vector<std::string> names;
        for (const auto& c : halting_categories())
            if (table_.count(c)) names.push_back(c);
        for (const auto& [k, v] : table_)
            if (k.rfind("label:", 0) == 0) names.push_back(k);
        return names;
    }

private:
    void add_token(const std::string& name, const halting_record& rec, std::size_t i) {
        cell& c = table_[name];
        ++c.count;
        c.iterations += rec.N[i];
        c.remainder += rec.R[i];
        auto& tr = trace_[name];
        if (tr.size() < rec.cosine.size()) tr.resize(rec.cosine.size());
        for (std::size_t n = 0; n < rec.cosine.size(); ++n) {
            const double v = rec.cosine[n][i];
            if (std::isnan(v)) continue;
            ++tr[n].count;
            tr[n].cosine += v;
        }
    }
    std::map<std::string, cell> table_;
    std::int64_t flops_ = 0;
    std::map<std::string, std::vector<trace_cell>> trace_;
};

/// Mean iterations over the real tokens of a record (padding has N = 0).
inline double mean_iterations(const halting_record& rec) {
    double n = 0, c = 0;
    for (const int t : rec.N)
        if (t > 0) {
            n += t;
            ++c;
        }
    return n / std::max(c, 1.0);
}

/// The matrix-product FLOPs per token of one dense iteration of an encoder layer over
/// sequences of `length` tokens: the four D×D projections and the feed-forward (2·(4D² +
/// 2·D·F)), scores and mix over `length` keys (4·length·D), the halting unit (2·D). What a
/// fixed-depth model pays per layer, so flops_per_token() / this is the fixed depth of equal
/// compute.
inline double dense_iteration_flops_per_token(const nn::transformer_config& layer, index_t length) {
    const auto D = static_cast<double>(layer.dim), F = static_cast<double>(layer.ff_dim);
    return 2 * (4 * D * D + 2 * D * F) + 4 * static_cast<double>(length) * D + 2 * D;
}

/// A dev evaluation of an ALBERT-style model (encode / mlm_logits / sop_logits): MLM and SOP
/// accuracy (%) and loss, and the halting table of every token.
struct albert_eval {
    double mlm_acc = 0, sop_acc = 0, mlm_loss = 0, sop_loss = 0;
    halting_stats stats;
};
template <class Model>
albert_eval evaluate_albert(const Model& model, data::albert_sampler& dev, std::int64_t batches, std::int64_t batch_size) {
    DEPTHLAB_CHECK(batches > 0 && batch_size > 0, usage_error, "evaluate_albert: batches ", batches, " and batch_size ", batch_size,
                   " must be positive");
    albert_eval r;
    no_grad guard;
    nn::accuracy_count mlm_acc, sop_acc;
    for (std::int64_t i = 0; i < batches; ++i) {
        const auto b = dev.next(batch_size);
        const auto enc = model.encode(b.tokens);
        const auto mlm = model.mlm_logits(enc.hidden, b.mlm_positions);
        const auto sop = model.sop_logits(enc.hidden);
        using T = typename std::remove_cvref_t<decltype(mlm.value())>::value_type;  // averaged in the model's precision
        r.mlm_loss += cross_entropy(mlm, b.mlm_labels).value().item() / static_cast<T>(batches);
        r.sop_loss += cross_entropy(sop, b.sop_labels).value().item() / static_cast<T>(batches);
        mlm_acc += nn::accuracy(mlm, b.mlm_labels);
        sop_acc += nn::accuracy(sop, b.sop_labels);
        r.stats.add(enc.record, b.token_category);
    }
    r.mlm_acc = mlm_acc.percent();
    r.sop_acc = sop_acc.percent();
    return r;
}

/// The weights of `model` run at fixed depth N for each N of `depths` (every token N
/// iterations of the tied layer, whose last state is the output: the `fixed` policy), each
/// evaluated with evaluate_albert on `batches` batches of a fresh dev() sampler, so that every
/// depth sees the same batches as an evaluation of `model` on dev(). With the FLOPs per token
/// of each, it places adaptive depth among fixed depths of the same weights.
template <class T, class B, class Policy>
std::vector<albert_eval> evaluate_at_fixed_depths(const ActAlbert<T, B, Policy>& model, const std::vector<int>& depths,
                                                  const std::function<data::albert_sampler()>& dev, std::int64_t batches, std::int64_t batch_size) {
    DEPTHLAB_CHECK(!depths.empty() && static_cast<bool>(dev), usage_error, "evaluate_at_fixed_depths: ", depths.size(), " depths and ",
                   dev ? "a" : "no", " dev sampler");
    act_options opt = model.encoder->opt;
    opt.min_iterations = 0;
    opt.max_iterations = 1;
    for (const int n : depths) {
        DEPTHLAB_CHECK(n >= 1, usage_error, "evaluate_at_fixed_depths: depth ", n, " (at least 1)");
        opt.max_iterations = std::max(opt.max_iterations, n);
    }
    ActAlbert<T, B, fixed> same(model.cfg, opt);
    nn::Snapshot<T, B>(model).restore(same);
    same.eval();
    std::vector<albert_eval> out;
    for (const int n : depths) {
        same.encoder->opt.max_iterations = n;
        data::albert_sampler sampler = dev();
        out.push_back(evaluate_albert(same, sampler, batches, batch_size));
    }
    return out;
}

/// One row of the iso-FLOP comparison of adaptive and fixed depth (albert_act's iso_flop.csv).
struct depth_comparison {
    std::string model;            // "adaptive (act)", "same weights, fixed depth", "trained at fixed depth"
    double iterations = 0;        // mean iterations per token
    double flops_per_token = 0;   // encoder products that ran, per token
    double mlm_acc = 0, sop_acc = 0, mlm_loss = 0;
};
inline depth_comparison compare_depth(std::string model, const albert_eval& ev) {
    return {.model = std::move(model), .iterations = ev.stats.mean_iterations("all"), .flops_per_token = ev.stats.flops_per_token(),
            .mlm_acc = ev.mlm_acc, .sop_acc = ev.sop_acc, .mlm_loss = ev.mlm_loss};
}

/// The metrics log's record of a dev evaluation: dev_mlm_acc, dev_sop_acc, dev_mlm_loss,
/// dev_mean_N and dev_halting (mean iterations per category, the paper's first).
inline nlohmann::ordered_json to_json(const albert_eval& ev) {
    nlohmann::ordered_json j;
    j["dev_mlm_acc"] = ev.mlm_acc;
    j["dev_sop_acc"] = ev.sop_acc;
    j["dev_mlm_loss"] = ev.mlm_loss;
    j["dev_mean_N"] = ev.stats.mean_iterations("all");
    j["dev_encoder_flops_per_token"] = ev.stats.flops_per_token();
    for (const auto& c : ev.stats.ordered_names()) j["dev_halting"][c] = ev.stats.mean_iterations(c);
    return j;
}

/// A dev evaluation in one progress line: accuracies and the mean iterations of the
/// categories the paper's finding is about.
inline std::string summary(const albert_eval& ev) {
    char line[256];
    const auto n = [&](const char* c) { return ev.stats.mean_iterations(c); };
    std::snprintf(line, sizeof line, "MLM acc %.1f%%  SOP acc %.1f%%  mean N: all %.2f unmasked %.2f [MASK]->[MASK] %.2f [CLS] %.2f [SEP] %.2f",
                  ev.mlm_acc, ev.sop_acc, n("all"), n("unmasked"), n("mask_to_mask"), n("cls"), n("sep"));
    return line;
}

/// Watches the mean iterations of training batches for a halting collapse: every token halting
/// at its first iteration, where R = 1 and no gradient reaches the halting unit, so the model
/// cannot leave it. check() returns the warning (with remedies) when a collapse begins, and
/// nothing while it lasts or after it ends, so a log gets one line per collapse.
class collapse_watch {
public:
    static constexpr double threshold = 1.05;  // mean iterations below this: collapsed
    [[nodiscard]] std::string check(double mean_iterations) {
        const bool collapsed = mean_iterations < threshold;
        const bool begins = collapsed && !collapsed_;
        collapsed_ = collapsed;
        if (!begins) return {};
        char line[320];
        std::snprintf(line, sizeof line,
                      "warning: halting collapse — mean iterations %.3f: every token halts at the first iteration, and with R = 1 no gradient "
                      "reaches the halting unit. Remedies: --tau-warmup (longer), --halting-bias -2, --min-iters 2, a smaller --tau.",
                      mean_iterations);
        return line;
    }

private:
    bool collapsed_ = false;
};

/// Simoulin & Crabbé (2021), dev set at the end of pretraining (../shared/papers.md §A.1):
/// mean iterations per category and MLM/SOP accuracy (%) for N_max 6, 12, 24.
struct paper_halting_row {
    int n_max;
    double tau, all, unmasked, mask_mask, mask_orig, cls, sep, mlm, sop;
};
/// The paper's row with the N_max closest to n_max.
inline const paper_halting_row& paper_row_for(int n_max) {
    static const paper_halting_row rows[] = {{6, 1e-3, 3.8, 3.5, 5.8, 4.0, 6.0, 2.5, 55.4, 80.9},
                                             {12, 5e-4, 7.1, 6.5, 10.9, 7.4, 12.0, 7.6, 57.1, 83.9},
                                             {24, 2.5e-4, 10.0, 9.2, 16.0, 10.5, 22.5, 8.4, 57.4, 84.3}};
    const paper_halting_row* best = &rows[0];
    for (const auto& r : rows)
        if (std::abs(r.n_max - n_max) < std::abs(best->n_max - n_max)) best = &r;
    return *best;
}

}  // namespace depthlab::halting
