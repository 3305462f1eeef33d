#pragma once
// Report sections of the component-value study (analysis/component_value.hpp): heat maps
// of each score by module type and layer, the tables behind them, the rank agreement of
// the two scores, the paper's findings checked on the run, pruning curves and rewinding.
// Any metric: its name (e.g. "BLEU", "accuracy") labels every axis, column and sentence.
//
//   report::html_page page("The value of Transformer components", "...");
//   report::contribution_section(page, contrib, {.metric = "BLEU"});
//   report::criticality_section(page, crit, kopt, {.metric = "BLEU"});
//   report::findings_section(page, contrib, crit, cfg.encoder_layers, cfg.decoder_layers);
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "depthlab/analysis/component_value.hpp"
#include "depthlab/analysis/pipeline.hpp"
#include "depthlab/analysis/study.hpp"
#include "depthlab/report/html.hpp"
#include "depthlab/train/progress.hpp"
#include "depthlab/train/translation.hpp"

namespace depthlab::report {

/// How the sections name the metric and what it was measured on.
struct study_labels {
    std::string metric = "metric";  // "BLEU", "accuracy", ...
    std::string measured_on{};      // e.g. "200 test sentences" (chart subtitles)
    bool post_ln = true;            // how an ablated sub-layer behaves (the contribution text)
};

/// A type × layer heat map of per-module values (analysis::by_type_and_layer).
inline std::string type_layer_heat_map(const analysis::type_layer_grid& g, const heat_map_options& o) {
    return heat_map(g.types, g.layers, g.values, o);
}

namespace detail {
inline std::string fixed(double v, int decimals = 2) { return format_fixed(v, decimals); }
}  // namespace detail
/// A module's layer as every output numbers it: from 0, as the CSVs and the parameter names
/// ("decoder.layers.0"); "all" for a module every layer shares (a tied stack).
inline std::string layer_label(int layer) { return layer < 0 ? std::string("all") : std::to_string(layer); }

/// A (step, value) series (train::metrics_log::series) as a line of a line_chart.
inline line_series step_series(std::string name, const std::vector<std::pair<std::int64_t, double>>& points) {
    line_series s{std::move(name), {}, {}};
    for (const auto& [step, v] : points) {
        s.x.push_back(static_cast<double>(step));
        s.y.push_back(v);
    }
    return s;
}

/// "Contribution scores": the definition, the heat map of the score and of the unclipped
/// drop (where the clip saturates, it still orders the modules) and the table.
inline void contribution_section(html_page& page, const analysis::contribution_result& c, const study_labels& l) {
    using detail::fixed;
    page.section("Contribution scores");
    const std::string removal =
        c.ablation == nn::ablation_kind::mean
            ? "Ablation kind: mean. Module n's residual branch outputs its mean over the reference batches (per position and feature) instead of its output"
        : c.ablation == nn::ablation_kind::resample
            ? "Ablation kind: resample. Module n's residual branch outputs what it computes for another sentence of the same batch (the next one, cyclically)"
            : std::string("Ablation kind: zero. Module n is removed (its residual branch outputs zero; the sub-layer's LayerNorm still normalises the residual path, ") +
                  (l.post_ln ? "y = LN(x), since the model is post-LN)" : "y = x, since the model is pre-LN)");
    page.paragraph(removal + ", and the analysis metric is measured again: d_n = clip(" + l.metric + "_base − " + l.metric + "_without_n, 0, C), C = " +
                   fixed(c.clip, 3) + ", score = d_n / max_m d_m.");
    page.figure(type_layer_heat_map(analysis::by_type_and_layer(analysis::values_of(c)),
                                    {.title = "Contribution score (darker = more important)",
                                     .subtitle = "one module removed at a time (" + std::string(nn::to_string(c.ablation)) + " ablation) · " + l.metric + " drop, clipped at C, normalised",
                                     .x_label = "layer",
                                     .y_label = "module",
                                     .value_label = "contribution"}),
                "Contribution score per module type and layer.");
    const auto raw = analysis::by_type_and_layer(analysis::unclipped_values_of(c));
    page.figure(type_layer_heat_map(raw, {.title = "Unclipped " + l.metric + " drop when the module is removed",
                                          .subtitle = "base − " + l.metric + " without the module (the contribution score clips this at C = " +
                                                      fixed(c.clip, 2) + ")",
                                          .x_label = "layer",
                                          .y_label = "module",
                                          .value_label = l.metric + " drop",
                                          .lo = 0.0,
                                          .hi = std::max(raw.max(), 1e-9),
                                          .value_decimals = 1}),
                "The raw drop behind the contribution score: where the clip saturates, this still orders the modules "
                "(pruning and rewinding break ties of the score with it).");
    std::vector<std::vector<std::string>> rows;
    for (const auto& e : c.modules)
        rows.push_back({e.name, e.type, layer_label(e.layer), fixed(e.metric_without), fixed(e.drop, 3), fixed(e.score, 3)});
    page.table({"module", "type", "layer", l.metric + " without", "drop d_n", "score"}, rows, {.caption = "Contribution (baseline " + fixed(c.base) + ")"});
}

/// "Criticality scores": the definition with the search used, the heat map and the table.
inline void criticality_section(html_page& page, const analysis::criticality_result& k, const analysis::criticality_options& o,
                                const study_labels& l) {
    using detail::fixed;
    const std::string search = analysis::to_string(o.method);
    page.section("Criticality scores");
    page.paragraph("Module n alone is moved back towards its initial weights, θ_n(α) = (1 − α)θ_n⁰ + αθ_nᶠ; the criticality is the smallest α "
                   "whose " + l.metric + " stays within ε = " + fixed(o.epsilon, 2) + " of the baseline (search: " + search +
                   (o.method == analysis::search_method::grid ? ", α ∈ {0, 1/" + std::to_string(o.grid_steps) + ", …, 1}, first passing α"
                                                               : ", tolerance " + fixed(o.tolerance, 3) + ", assumes " + l.metric + " monotone in α") +
                   "). The LayerNorm of the sub-layer moves with it. Every α tried is in criticality_trace.csv.");
    page.figure(type_layer_heat_map(analysis::by_type_and_layer(analysis::values_of(k)),
                                    {.title = "Criticality score α (darker = more important)",
                                     .subtitle = "smallest α with " + l.metric + " ≥ baseline − " + fixed(o.epsilon, 2) + " · " + search,
                                     .x_label = "layer",
                                     .y_label = "module",
                                     .value_label = "criticality α"}),
                "Criticality per module type and layer.");
    std::vector<std::vector<std::string>> rows;
    for (const auto& e : k.modules)
        rows.push_back({e.name, e.type, layer_label(e.layer), fixed(e.alpha, 3), fixed(e.metric_at_alpha), std::to_string(e.trace.size()),
                        e.found ? "" : "none passed"});
    page.table({"module", "type", "layer", "α", l.metric + " at α", "evaluations", "note"}, rows,
               {.caption = "Criticality (" + search + ", ε = " + fixed(o.epsilon, 2) + ")"});
}

/// Contribution rank against criticality rank, encoder and decoder modules apart.
inline void rank_agreement_figure(html_page& page, const analysis::contribution_result& c, const analysis::criticality_result& k) {
    const double rho = analysis::rank_correlation(c, k);
    std::vector<scatter_series> sc(2);
    sc[0].name = "encoder";
    sc[1].name = "decoder";
    const auto rc = analysis::average_ranks(c.scores());
    const auto rk = analysis::average_ranks(k.scores());
    std::map<std::string, double> crit_rank;  // modules matched by name, as rank_correlation does
    for (std::size_t i = 0; i < k.modules.size(); ++i) crit_rank[k.modules[i].name] = rk[i];
    for (std::size_t i = 0; i < c.modules.size(); ++i) {
        const auto& m = c.modules[i];
        sc[m.type[0] == 'E' ? 0 : 1].points.push_back({rc[i], crit_rank.at(m.name), m.type + layer_label(m.layer)});
    }
    page.figure(scatter(sc, {.title = "Contribution rank vs criticality rank",
                             .subtitle = "Spearman ρ = " + (std::isnan(rho) ? std::string("n/a") : detail::fixed(rho, 3)),
                             .x_label = "contribution rank (1 = least important)",
                             .y_label = "criticality rank",
                             .diagonal = true}),
                "Rank agreement of the two scores (average ranks for ties); the dashed line is y = x.");
}

/// "Findings next to the paper's": each claim of Wang & Tu on each score; equal group
/// means are reported as tied, not as an order.
inline void findings_section(html_page& page, const analysis::contribution_result& c, const analysis::criticality_result& k, int encoder_layers,
                             int decoder_layers) {
    page.section("Findings next to the paper's");
    page.paragraph("Wang & Tu (2020) trained Transformer-base on WMT14 En–De and found, with both scores: the decoder self-attention "
                   "(D:SA) modules are the least important and the decoder feed-forward (D:FF) modules the most; modules in lower encoder "
                   "layers and in upper decoder layers matter more than the others; upper decoder–encoder attention (D:EA) modules matter "
                   "more than lower ones; less dropout and more training data leave fewer unimportant modules. Removing the 3–4 least "
                   "important modules costs little, and rewinding them to their initial weights and fine-tuning the whole model "
                   "gives a model slightly better than the original. The table checks each claim on this run (mean score per group; "
                   "'lower' and 'upper' are the bottom and top half of the layers; 'tied': the compared means are equal, e.g. scores "
                   "saturated at the clip, so the run cannot say).");
    std::vector<std::vector<std::string>> rows;
    for (const auto& v : {analysis::values_of(c), analysis::values_of(k)})
        for (const auto& f : analysis::wang_tu_findings(v, encoder_layers, decoder_layers)) rows.push_back({v.name, f.claim, f.ours, analysis::to_string(f.result)});
    page.table({"score", "paper's finding", "this run", "holds?"}, rows, {.caption = "The paper's findings, checked on this run"});
}

/// "Pruning": the metric after removing the k least important modules by each score.
inline void pruning_section(html_page& page, const analysis::pruning_result& by_contribution, const analysis::pruning_result& by_criticality,
                            const study_labels& l) {
    using detail::fixed;
    page.section("Pruning");
    auto series = [](const char* name, const analysis::pruning_result& r) {
        line_series s{name, {}, {}};
        for (const auto& p : r.curve) {
            s.x.push_back(p.k);
            s.y.push_back(p.metric);
        }
        return s;
    };
    page.figure(line_chart({series("by contribution", by_contribution), series("by criticality", by_criticality)},
                           {.title = l.metric + " after removing the k least important modules",
                            .subtitle = l.measured_on,
                            .x_label = "modules removed k",
                            .y_label = l.metric,
                            .y_min = 0.0,
                            .integer_x = true}),
                "Pruning curves: the k least important modules (by each score; ties broken by the unclipped " + l.metric +
                    " drop) switched off together.");
    std::vector<std::vector<std::string>> rows;
    const std::size_t n = std::min(by_contribution.curve.size(), by_criticality.curve.size());
    for (std::size_t i = 0; i < n; ++i) {
        const auto& a = by_contribution.curve[i];
        const auto& b = by_criticality.curve[i];
        rows.push_back({std::to_string(a.k), a.modules_removed.empty() ? "" : a.modules_removed.back(),
                        fixed(100.0 * static_cast<double>(a.parameters_removed) / static_cast<double>(std::max<index_t>(by_contribution.total_parameters, 1)), 1),
                        fixed(a.metric), b.modules_removed.empty() ? "" : b.modules_removed.back(), fixed(b.metric)});
    }
    page.table({"k", "k-th removed (contribution)", "% parameters removed", l.metric, "k-th removed (criticality)", l.metric}, rows,
               {.caption = "Pruning (" + std::to_string(by_contribution.total_parameters) + " parameters in all)"});
}

/// "Rewinding": the metric after rewinding the k least important modules and fine-tuning.
inline void rewinding_section(html_page& page, const std::vector<analysis::rewinding_point>& points, double base, const std::string& how,
                              const study_labels& l) {
    using detail::fixed;
    page.section("Rewinding");
    page.paragraph(how);
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : points) {
        std::string mods;
        for (const auto& m : p.modules) mods += (mods.empty() ? "" : ", ") + m;
        rows.push_back({std::to_string(p.k), mods.empty() ? "(none)" : mods, fixed(p.metric_before_finetune), fixed(p.metric_after_finetune),
                        fixed(p.metric_after_finetune - base)});
    }
    page.table({"k", "modules rewound", l.metric + " after rewinding", l.metric + " after fine-tuning", "vs baseline"}, rows,
               {.caption = "Rewinding + fine-tuning (baseline " + fixed(base) + ")"});
}

/// Scores of every attention head (component_value --granularity head): the head's attention
/// sub-layer and index, and named score vectors in the same order.
struct head_scores {
    std::vector<std::string> sublayer;
    std::vector<int> head;
    std::vector<std::pair<std::string, std::vector<double>>> scores;  // ("contribution", ...), ...
    nn::ablation_kind ablation = nn::ablation_kind::zero;             // what a switched-off head output (contribution, pruning)
};

/// "Attention heads": one heat map per score, a row per attention sub-layer, a column per
/// head; a score outside [0, 1] (the gradient importance) is drawn on [0, its maximum].
inline void heads_section(html_page& page, const head_scores& h) {
    page.section("Attention heads");
    const std::string off = h.ablation == nn::ablation_kind::mean       ? "replaced by its mean over the reference batches"
                            : h.ablation == nn::ablation_kind::resample ? "replaced by its output for the next sentence of the batch"
                                                                        : "set to zero";
    page.paragraph("Each head is scored as the sub-layers are: contribution (" + std::string(nn::to_string(h.ablation)) + " ablation: its output " + off +
                   " before the output projection), "
                   "criticality (its rows of W_q, W_k, W_v and columns of W_o moved towards θ⁰) and Michel et al.'s gradient importance "
                   "(Σ |∂L/∂ξ_h| of a gate ξ_h = 1 on its output, over teacher-forced training batches).");
    std::vector<std::string> rows;
    int heads = 0;
    for (std::size_t i = 0; i < h.sublayer.size(); ++i) {
        if (rows.empty() || rows.back() != h.sublayer[i]) rows.push_back(h.sublayer[i]);
        heads = std::max(heads, h.head[i] + 1);
    }
    std::vector<std::string> cols;
    for (int k = 0; k < heads; ++k) cols.push_back("head " + std::to_string(k));
    for (const auto& [name, score] : h.scores) {
        std::vector<std::vector<double>> grid(rows.size(), std::vector<double>(static_cast<std::size_t>(heads), std::numeric_limits<double>::quiet_NaN()));
        double top = 0;
        for (std::size_t i = 0; i < score.size() && i < h.sublayer.size(); ++i) {
            const auto r = static_cast<std::size_t>(std::find(rows.begin(), rows.end(), h.sublayer[i]) - rows.begin());
            grid[r][static_cast<std::size_t>(h.head[i])] = score[i];
            if (std::isfinite(score[i])) top = std::max(top, score[i]);
        }
        page.figure(heat_map(rows, cols, grid,
                             {.title = "Head " + name + " (darker = more important)", .x_label = "head", .y_label = "attention sub-layer",
                              .value_label = name, .lo = 0, .hi = top > 1 ? top : 1.0}),
                    "Head " + name + " per attention sub-layer and head.");
    }
}

/// A curve of metrics.jsonl (train::metrics_log) for the report.
struct curve_spec {
    std::string key{}, legend{}, title{}, subtitle{}, y_label{}, caption{};
    std::optional<double> y_min{};
    bool markers = true;
};

/// One model of the iso-FLOP comparison: the full model, it pruned by a score, or a shallower
/// model trained apart; its cost per token and its metric.
struct iso_flop_row {
    std::string model;           // "full", "pruned by contribution", "trained with 1 fewer decoder layer", ...
    int modules_removed = 0;     // modules it lacks against the full model
    double flops_per_token = 0;  // products that ran, per target token
    double metric = 0;
};

/// Everything the study's report shows, in its order; see component_value_report.
struct component_value_run {
    std::string title{}, subtitle{};
    std::string note{};                                              // a warning on top (e.g. a weak baseline); empty: none
    std::vector<std::pair<std::string, std::string>> baseline{};    // the "Baseline" key-values
    std::string baseline_caption{};
    train::metrics_log log{};                                        // training curves come from it
    std::vector<curve_spec> curves{};
    const analysis::study_result* study = nullptr;                   // analysis::run_component_value_study; null: no analyses
    int encoder_layers = 0, decoder_layers = 0;
    std::string pruning_note{};                                      // e.g. a shallower model trained for comparison
    std::optional<analysis::smaller_model> smaller{};                // that model, for the pruning findings; none: n/a
    std::vector<iso_flop_row> iso_flop{};                            // empty: no iso-FLOP table
    std::string rewinding_how{};                                     // how the modules were rewound and fine-tuned
    std::vector<std::pair<std::string, std::string>> run_details{};  // "Where the time went"
    std::string command{}, provenance{};
    study_labels labels{};
    const head_scores* heads = nullptr;                              // --granularity head; null: no head section
};

/// The page: baseline and curves, contribution, criticality, rank agreement, the paper's
/// findings, pruning, rewinding, run details. Sections whose results are absent are left out.
inline html_page component_value_report(const component_value_run& r) {
    using detail::fixed;
    html_page page(r.title, r.subtitle);
    if (!r.note.empty()) page.note(r.note);
    page.section("Baseline");
    page.key_values(r.baseline, r.baseline_caption);
    for (const auto& c : r.curves)
        if (const auto points = r.log.series(c.key); !points.empty())
            page.figure(line_chart({step_series(c.legend, points)},
                                   {.title = c.title, .subtitle = c.subtitle, .x_label = "step", .y_label = c.y_label, .y_min = c.y_min, .markers = c.markers}),
                        c.caption);
    if (const analysis::study_result* st = r.study) {
        contribution_section(page, st->contribution, r.labels);
        criticality_section(page, st->criticality, st->criticality_options, r.labels);
        rank_agreement_figure(page, st->contribution, st->criticality);
        findings_section(page, st->contribution, st->criticality, r.encoder_layers, r.decoder_layers);
        if (r.heads) heads_section(page, *r.heads);
        if (st->complete) {
            pruning_section(page, st->pruning_by_contribution, st->pruning_by_criticality, r.labels);
            if (!r.pruning_note.empty()) page.paragraph(r.pruning_note);
            if (!r.iso_flop.empty()) {
                std::vector<std::vector<std::string>> rows;
                for (const auto& m : r.iso_flop)
                    rows.push_back({m.model, std::to_string(m.modules_removed), fixed(m.flops_per_token / 1e6, 3), fixed(m.metric)});
                page.table({"model", "modules removed", "MFLOP per target token", r.labels.metric}, rows,
                           {.caption = "Iso-FLOP: the products a teacher-forced forward runs per target token (a removed module runs none), "
                                       "and the metric on " + r.labels.measured_on});
            }
            if (!st->rewinding.empty()) rewinding_section(page, st->rewinding, st->contribution.base, r.rewinding_how, r.labels);
            std::vector<std::vector<std::string>> rows;
            for (const auto& f : analysis::pruning_findings(st->pruning_by_contribution, st->pruning_by_criticality, st->rewinding,
                                                            st->contribution.base, r.labels.metric, r.smaller ? &*r.smaller : nullptr))
                rows.push_back({f.claim, f.ours, analysis::to_string(f.result)});
            page.table({"paper's finding", "this run", "holds?"}, rows, {.caption = "The paper's findings on pruning and rewinding, checked on this run"});
        }
    }
    page.section("Run details");
    page.key_values(r.run_details, "Where the time went");
    if (!r.command.empty()) page.preformatted(r.command);
    if (!r.provenance.empty()) page.provenance(r.provenance);
    return page;
}

/// A translation run of the study (examples/component_value) as translation_study_report
/// shows it: the model, how it was trained (or loaded), its baseline scores and where the
/// time went. Fields in the order a caller fills them.
struct translation_run {
    std::string src, tgt, corpus;  // the language pair; the corpus's name (may be empty)
    std::string model;             // nn::describe(config)
    int encoder_layers = 0, decoder_layers = 0;
    bool post_ln = true;
    std::int64_t parameters = 0, steps = 0;
    double train_seconds = 0;
    bool stopped_by_time = false;
    std::string checkpoint{};  // loaded from here instead of trained (empty: trained in this run)
    double tokens_per_s = 0;
    int threads = 1;
    train::translation_recipe recipe{};
    std::size_t test_sentences = 0, dev_sentences = 0, analysis_sentences = 0;
    double greedy_bleu = 0, beam_bleu = 0, chrf = 0, baseline_seconds = 0;  // test set; baseline_seconds: both decodings
    int beam = 1, analysis_beam = 1;
    double alpha = 0.6;         // GNMT length penalty
    double analysis_bleu = 0;   // the metric on the analysis sentences, unablated
    std::optional<train::shallow_comparison> shallow{};
    std::vector<iso_flop_row> iso_flop{};  // the full, pruned and shallower models' cost and BLEU
    std::string rank_by = "contribution";  // rewinding's ranking
    std::int64_t rewind_steps = 0;
    double finetune_lr = 0;
    std::size_t metric_calls = 0, encoder_runs = 0, encoder_reuses = 0;
    double metric_seconds = 0, total_seconds = 0;
    std::string command{}, provenance{};
    const head_scores* heads = nullptr;  // --granularity head; null: none
};

/// The component-value report of a translation run: component_value_report with BLEU as
/// the metric, the model and its baseline, the training curves (loss, dev BLEU) of `log`.
inline html_page translation_study_report(const translation_run& r, const train::metrics_log& log, const analysis::study_result* study) {
    using detail::fixed;
    using train::format_duration;
    const std::string sentences = std::to_string(r.analysis_sentences) + " test sentences";
    char lr_text[32];
    std::snprintf(lr_text, sizeof lr_text, "%.2e", r.finetune_lr);
    std::vector<std::pair<std::string, std::string>> times{{"time: training", format_duration(r.train_seconds)},
                                                           {"time: baseline BLEU", format_duration(r.baseline_seconds)}};
    if (study)
        for (const auto& [name, seconds] : study->phase_seconds) times.emplace_back("time: " + name, format_duration(seconds));
    times.insert(times.end(), {{"metric evaluations", std::to_string(r.metric_calls) + ", " +
                                                          fixed(r.metric_seconds / static_cast<double>(std::max<std::size_t>(r.metric_calls, 1)), 2) +
                                                          " s each on average"},
                               {"encoder outputs reused",
                                std::to_string(r.encoder_reuses) + " of " + std::to_string(r.encoder_reuses + r.encoder_runs) + " translations"},
                               {"total", format_duration(r.total_seconds)}});
    std::string pruning_note;
    if (r.shallow)
        pruning_note = "A model with " + std::to_string(r.shallow->fewer_decoder_layers) + " fewer decoder layers (" +
                       std::to_string(r.shallow->parameters) + " parameters), trained with the same recipe for " + std::to_string(r.shallow->steps) +
                       " steps (the full model: " + std::to_string(r.steps) + "): BLEU " + fixed(r.shallow->bleu) + " on the analysis sentences.";
    const train::translation_recipe& t = r.recipe;
    return component_value_report({
        .title = "The value of Transformer components: " + r.src + "→" + r.tgt + (r.corpus.empty() ? "" : " (" + r.corpus + ")"),
        .subtitle = "Wang & Tu (COLING 2020) reproduced with depthlab · " + r.model,
        .note = r.analysis_bleu >= 10 || !study
                    ? ""
                    : "Baseline BLEU " + fixed(r.analysis_bleu) + " on the analysis sentences (test BLEU " + fixed(r.beam_bleu) +
                          "): a weak baseline. Every score below is a drop of at most C = " + fixed(study->contribution.clip, 3) +
                          " BLEU, close to the noise of " + sentences + "; read the heat maps as indicative, not as a replication.",
        .baseline = {{"model", r.model},
                     {"parameters", std::to_string(r.parameters)},
                     {"training", std::to_string(r.steps) + " steps in " + format_duration(r.train_seconds) +
                                      (r.checkpoint.empty() ? (r.stopped_by_time ? " (stopped by the time limit)" : "") : " (loaded from " + r.checkpoint + ")")},
                     {"training speed", fixed(r.tokens_per_s, 0) + " target tokens/s, " + std::to_string(r.threads) + " thread(s)"},
                     {"batch", std::to_string(t.max_tokens) + " padded tokens; Adam (0.9, 0.98), lr " + fixed(t.lr, 4) + ", inverse-sqrt warm-up " +
                                   std::to_string(t.warmup) + "; label smoothing " + fixed(t.label_smoothing, 2)},
                     {"test BLEU, greedy", fixed(r.greedy_bleu) + " (" + std::to_string(r.test_sentences) + " sentences)"},
                     {"test BLEU, beam " + std::to_string(r.beam), fixed(r.beam_bleu) + " (GNMT length penalty α " + fixed(r.alpha, 1) + ")"},
                     {"test chrF", fixed(r.chrf)},
                     {"analysis metric", "BLEU of " + (r.analysis_beam > 1 ? "beam " + std::to_string(r.analysis_beam) : std::string("greedy")) +
                                             " decoding on the first " + sentences + ": " + fixed(r.analysis_bleu)}},
        .baseline_caption = "Model and baseline (sacreBLEU-style corpus BLEU, 13a tokenisation, on detokenised output)",
        .log = log,
        .curves = {{"loss", "training loss (label-smoothed)", "Training loss", "", "loss",
                    "Label-smoothed cross-entropy per target token, averaged over each logging interval.", std::nullopt, false},
                   {"dev_bleu", "dev BLEU (greedy)", "Dev BLEU during training", std::to_string(r.dev_sentences) + " dev sentences, greedy decoding", "BLEU",
                    "Dev BLEU over training.", 0.0, true}},
        .study = study,
        .encoder_layers = r.encoder_layers,
        .decoder_layers = r.decoder_layers,
        .pruning_note = pruning_note,
        .smaller = r.shallow ? std::optional(analysis::smaller_model{.metric = r.shallow->bleu,
                                                                     .modules_fewer = 3 * r.shallow->fewer_decoder_layers,
                                                                     .what = std::to_string(r.shallow->fewer_decoder_layers) +
                                                                             " fewer decoder layer(s), trained apart"})
                             : std::nullopt,
        .iso_flop = r.iso_flop,
        .rewinding_how = "The k least important modules (by " + r.rank_by + ") are reset to θ⁰, then the whole model is fine-tuned for " +
                         std::to_string(r.rewind_steps) + " steps (fresh Adam, lr " + lr_text +
                         " after a short warm-up; same batches as training). k = 0 is the control: the same fine-tuning without rewinding.",
        .run_details = times,
        .command = r.command,
        .provenance = r.provenance,
        .labels = {.metric = "BLEU", .measured_on = sentences, .post_ln = r.post_ln},
        .heads = r.heads});
}

}  // namespace depthlab::report
