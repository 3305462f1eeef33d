#pragma once
// Report sections of the ACT-ALBERT study (halting/analysis.hpp): the halting table beside
// the paper's, bars per token category, the fixed-point curves and the training curves of
// metrics.jsonl ("mlm", "sop", "mean_N", "dev_mean_N").
//
//   report::html_page page = report::act_albert_report({.title = ..., .setup = {...}, .eval = ev, .n_max = 6, .steps = n, .log = log});
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "depthlab/halting/analysis.hpp"
#include "depthlab/report/component_value.hpp"  // step_series
#include "depthlab/report/html.hpp"
#include "depthlab/train/progress.hpp"

namespace depthlab::report {

struct act_albert_run {
    std::string title = "ACT-ALBERT: how many iterations does each token use?", subtitle{};
    std::vector<std::pair<std::string, std::string>> setup{};  // the "Setup" key-values
    const halting::albert_eval* eval = nullptr;               // the final dev evaluation
    int n_max = 6;                                             // picks the paper's row
    std::int64_t steps = 0;
    train::metrics_log log{};
    std::vector<halting::depth_comparison> iso_flop{};         // adaptive and fixed depths on the same dev batches; empty: no table
    std::string outputs{}, provenance{};
};

/// The display names of halting_categories(), in its order.
inline const std::vector<std::string>& halting_category_labels() {
    static const std::vector<std::string> l{"all", "unmasked", "[MASK]→[MASK]", "[MASK]→random", "[MASK]→original", "[CLS]", "[SEP]"};
    return l;
}

inline html_page act_albert_report(const act_albert_run& r) {
    DEPTHLAB_CHECK(r.eval != nullptr, usage_error, "act_albert_report: no evaluation");
    const auto& ev = *r.eval;
    const auto& p = halting::paper_row_for(r.n_max);
    const auto fixed = [](double v, int d = 2) { return format_fixed(v, d); };
    html_page page(r.title, r.subtitle);
    page.section("Setup");
    page.key_values(r.setup, "run");

    page.section("Mean iterations per token category (dev)");
    const auto& cats = halting::halting_categories();
    const auto& labels = halting_category_labels();
    const std::vector<double> paper_vals{p.all, p.unmasked, p.mask_mask, NAN, p.mask_orig, p.cls, p.sep};
    std::vector<std::vector<std::string>> rows;
    std::vector<double> ours;
    for (std::size_t i = 0; i < cats.size(); ++i) {
        ours.push_back(ev.stats.mean_iterations(cats[i]));
        rows.push_back({labels[i], std::to_string(ev.stats.count(cats[i])), fixed(ours.back()), fixed(ev.stats.mean_remainder(cats[i]), 3),
                        std::isnan(paper_vals[i]) ? "—" : fixed(paper_vals[i], 1)});
    }
    rows.push_back({"MLM accuracy (%)", "", fixed(ev.mlm_acc, 1), "", fixed(p.mlm, 1)});
    rows.push_back({"SOP accuracy (%)", "", fixed(ev.sop_acc, 1), "", fixed(p.sop, 1)});
    page.table({"category", "tokens", "mean N (ours)", "mean R", "paper (N_max " + std::to_string(p.n_max) + ")"}, rows,
               {.caption = "Ours after " + std::to_string(r.steps) +
                           " steps vs the paper at the end of pretraining (its model is far larger and trained far longer)",
                .decimals = -1,
                .highlight_column = 2});
    page.figure(bar_chart(labels, {{"ours", ours, {}}, {"paper", paper_vals, {}}}, {.title = "Mean iterations per token category", .y_label = "iterations"}),
                "The paper's shape: [CLS] iterates most, masked tokens more than unmasked ones.");

    page.section("Fixed point: cosine similarity of successive states");
    std::vector<line_series> series;
    for (std::size_t i = 0; i < cats.size(); ++i) {
        if (cats[i] == "mask_to_random" || cats[i] == "mask_to_original") continue;
        line_series s{labels[i], {}, {}};
        for (int n = 1; n <= ev.stats.max_iteration(); ++n) {
            s.x.push_back(n);
            s.y.push_back(ev.stats.mean_cosine(cats[i], n));
        }
        series.push_back(s);
    }
    page.figure(line_chart(series, {.title = "cos(s^{n-1}, s^n) per category", .x_label = "iteration n", .y_label = "mean cosine", .integer_x = true}),
                "Averaged over the tokens still running at iteration n. The paper: tokens converge; unmasked and [SEP] faster "
                "than [MASK]; [CLS] oscillates before settling.");

    if (!r.iso_flop.empty()) {
        page.section("Iso-FLOP: adaptive or fixed depth");
        std::vector<std::vector<std::string>> iso;
        const auto& first = r.iso_flop.front();  // this run's model
        line_series same{"same weights, fixed depth", {}, {}}, here{first.model, {first.flops_per_token / 1e6}, {first.mlm_acc}};
        for (const auto& m : r.iso_flop) {
            iso.push_back({m.model, fixed(m.iterations), fixed(m.flops_per_token / 1e6, 3), fixed(m.mlm_acc, 1), fixed(m.sop_acc, 1), fixed(m.mlm_loss, 3)});
            if (m.model == same.name) {
                same.x.push_back(m.flops_per_token / 1e6);
                same.y.push_back(m.mlm_acc);
            }
        }
        page.table({"model", "mean iterations", "MFLOP per token", "MLM accuracy (%)", "SOP accuracy (%)", "MLM loss"}, iso,
                   {.caption = "The same dev batches for every row; FLOPs are the encoder's products that ran. \"Same weights, fixed depth\": this "
                               "model's tied layer run N times for every token, its last state the output; \"trained at fixed depth\": a model "
                               "trained apart with --policy fixed (--fixed-checkpoint).",
                    .decimals = -1});
        if (!same.x.empty())
            page.figure(line_chart({same, here}, {.title = "MLM accuracy against encoder FLOPs per token", .x_label = "MFLOP per token", .y_label = "MLM accuracy (%)"}),
                        "Adaptive depth beats fixed depth where its point lies above the fixed-depth line at the same FLOPs.");
    }

    page.section("Training");
    page.figure(line_chart({step_series("MLM loss", r.log.series("mlm")), step_series("SOP loss", r.log.series("sop"))},
                           {.title = "Losses", .x_label = "step", .y_label = "loss"}),
                "");
    page.figure(line_chart({step_series("train mean N", r.log.series("mean_N")), step_series("dev mean N", r.log.series("dev_mean_N"))},
                           {.title = "Mean iterations over training (collapse shows as a fall to 1)", .x_label = "step", .y_label = "iterations"}),
                "");
    if (!r.outputs.empty()) page.paragraph(r.outputs);
    if (!r.provenance.empty()) page.provenance(r.provenance);
    return page;
}

}  // namespace depthlab::report
