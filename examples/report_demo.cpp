// Writes a sample report (every block and figure kind of depthlab/report/html.hpp) filled
// with made-up but plausible numbers, to see what the study reports will look like.
//   report_demo [out.html]      (default: report_demo.html)
// Render it with scripts/check-report out.html.
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include <depthlab/report/html.hpp>

namespace report = depthlab::report;

int main(int argc, char** argv) {
    const std::string out = argc > 1 ? argv[1] : "report_demo.html";
    const double nan = std::numeric_limits<double>::quiet_NaN();
    try {
        report::html_page page("depthlab report demo", "Every figure and table kind, filled with made-up numbers");
        page.note("DEMO DATA: every number on this page is invented to show the layout. Nothing here is a result.");

        // --- Study A: halting ------------------------------------------------------
        page.section("ACT-ALBERT: iterations per token category");
        page.paragraph("Mean number of iterations N + R per token category at the end of pretraining, "
                       "N_max = 12 and tau = 5e-4, next to Simoulin & Crabbé (2021), Table 1 (dev set). "
                       "Whiskers: one standard deviation over tokens (demo data).");
        const std::vector<std::string> cats = {"all", "unmasked", "[MASK]\u2192[MASK]", "[MASK]\u2192original", "[CLS]", "[SEP]"};
        const std::vector<double> ours = {6.8, 6.1, 10.2, 7.7, 11.6, 7.1};
        const std::vector<double> ours_sd = {1.9, 1.7, 1.3, 1.8, 0.6, 2.2};
        const std::vector<double> paper = {7.1, 6.5, 10.9, 7.4, 12.0, 7.6};
        page.figure(report::bar_chart(cats, {{"ours (demo data)", ours, ours_sd}, {"paper", paper, {}}},
                                      {.title = "Mean iterations per token category",
                                       .subtitle = "demo data \u00b7 N_max = 12, \u03c4 = 5e-4",
                                       .x_label = "token category",
                                       .y_label = "mean iterations",
                                       .y_min = 0.0,
                                       .y_max = 12.0,
                                       .show_values = true}),
                    "Mean iterations per token category, ours vs the paper (demo data).");
        std::vector<std::vector<std::string>> rows;
        for (std::size_t i = 0; i < cats.size(); ++i)
            rows.push_back({cats[i], std::to_string(ours[i]), std::to_string(paper[i]), std::to_string(ours[i] - paper[i])});
        page.table({"category", "ours", "paper", "difference"}, rows,
                   {.caption = "Mean iterations (demo data); the highlighted column is ours.", .decimals = 1, .highlight_column = 1});

        page.section("ACT-ALBERT: convergence to a fixed point");
        std::vector<report::line_series> cosine;
        const std::vector<std::string> groups = {"all", "[MASK]", "not [MASK]", "[CLS]", "[SEP]"};
        const double rate[] = {0.45, 0.30, 0.50, 0.35, 0.65};
        for (std::size_t k = 0; k < groups.size(); ++k) {
            report::line_series s{groups[k], {}, {}};
            for (int n = 2; n <= 12; ++n) {
                double c = 1.0 - 0.55 * std::exp(-rate[k] * (n - 2));
                if (groups[k] == "[CLS]") c -= 0.12 * std::cos(1.9 * n) * std::exp(-0.25 * n);  // oscillates, then settles
                s.x.push_back(n);
                s.y.push_back(groups[k] == "[SEP]" && n == 7 ? nan : c);  // a missing point: the line breaks
            }
            cosine.push_back(std::move(s));
        }
        page.figure(report::line_chart(cosine, {.title = "Cosine similarity between consecutive states",
                                                .subtitle = "demo data \u00b7 cos(s\u207f\u207b\u00b9, s\u207f), mean per category",
                                                .x_label = "iteration n",
                                                .y_label = "cosine similarity",
                                                .y_max = 1.0,
                                                .integer_x = true}),
                    "Tokens converge to a fixed point; [SEP] has a missing point at n = 7 (a NaN gap).");

        std::vector<report::line_series> loss(2);
        loss[0].name = "train";
        loss[1].name = "dev";
        for (int step = 0; step <= 20000; step += 250) {
            const double l = 1.9 + 8.5 * std::exp(-step / 1800.0) + 0.08 * std::sin(step / 300.0);
            loss[0].x.push_back(step);
            loss[0].y.push_back(step >= 6000 && step < 7000 ? nan : l);  // a logging gap
            if (step % 1000 == 0) {
                loss[1].x.push_back(step);
                loss[1].y.push_back(l + 0.15);
            }
        }
        page.figure(report::line_chart(loss, {.title = "Pretraining loss (MLM + SOP + ponder)",
                                              .subtitle = "demo data \u00b7 log scale",
                                              .x_label = "step",
                                              .y_label = "loss",
                                              .log_y = true,
                                              .markers = false}),
                    "Training curve on a log scale; the train series has a logging gap at steps 6000\u20137000.");

        // --- Study B: component value ----------------------------------------------
        page.section("Transformer components: contribution scores");
        const std::vector<std::string> modules = {"E:SA", "E:FF", "D:SA", "D:EA", "D:FF"};
        const std::vector<std::string> layers = {"1", "2", "3", "4", "5", "6"};
        const std::vector<std::vector<double>> contribution = {{1.00, 0.71, 0.52, 0.40, 0.33, 0.30},
                                                               {0.86, 0.64, 0.47, 0.35, 0.31, 0.26},
                                                               {0.05, 0.02, 0.08, nan, 0.04, 0.11},
                                                               {0.18, 0.22, 0.35, 0.48, 0.61, 0.77},
                                                               {0.44, 0.52, 0.60, 0.69, 0.83, 0.97}};
        page.figure(report::heat_map(modules, layers, contribution,
                                     {.title = "Contribution score per module (darker = more important)",
                                      .subtitle = "demo data \u00b7 one module removed at a time, BLEU drop normalised",
                                      .x_label = "layer",
                                      .y_label = "module type",
                                      .value_label = "contribution"}),
                    "Contribution scores; D:SA layer 4 was not evaluated (n/a).");

        std::vector<report::scatter_series> ranks(2);
        ranks[0].name = "encoder modules";
        ranks[1].name = "decoder modules";
        int rank = 1;
        for (std::size_t m = 0; m < modules.size(); ++m)
            for (std::size_t l = 0; l < layers.size(); ++l, ++rank) {
                // Criticality rank: the contribution rank plus a deterministic wobble.
                const double wobble = std::round(3.5 * std::sin(2.3 * rank + 0.7 * m));
                const double crit = std::clamp(rank + wobble, 1.0, 30.0);
                ranks[m < 2 ? 0 : 1].points.push_back({static_cast<double>(rank), crit, modules[m] + layers[l]});
            }
        page.figure(report::scatter(ranks, {.title = "Contribution rank vs criticality rank",
                                            .subtitle = "demo data \u00b7 Spearman \u03c1 = 0.91",
                                            .x_label = "contribution rank",
                                            .y_label = "criticality rank",
                                            .height = 520,
                                            .diagonal = true}),
                    "Each point is one module; the dashed line is y = x.");

        page.section("Run details");
        page.key_values({{"model", "ALBERT-small (demo)"}, {"N_max", "12"}, {"tau", "5e-4"}, {"steps", "20000"},
                         {"tokens/s", "41230"}},
                        "Settings (demo data)");
        page.preformatted("report_demo\n  --nmax 12 --tau 5e-4   # flags <shown> & escaped");
        page.provenance("examples/report_demo (demo data, no git commit)");
        page.write(out);
        std::printf("wrote %s\n", out.c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "report_demo: %s\n", e.what());
        return 1;
    }
    return 0;
}
