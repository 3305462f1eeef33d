#pragma once
// The whole component-value study of Wang & Tu (2020) in one call, in the paper's order:
// contribution → criticality → their rank agreement → pruning curves ranked by each score →
// rewinding + fine-tuning ranked by one of them. Programs that study a model (the
// translation example, a researcher's own model and metric) call this instead of wiring
// the analyses of analysis/component_value.hpp together by hand.
//
//     const auto study = analysis::run_component_value_study(comm, model, analysis::default_modules(model),
//                                                            theta0, thetaf, metric, finetune,
//                                                            {.prune_max_k = 8, .rewind_k = {0, 2, 4}, .out = "runs/x"});
//
// Under mpirun the contribution and criticality modules are split across the ranks (every
// rank must call); pruning and rewinding run on rank 0 alone, which also writes the CSVs and
// prints the summary lines. Other ranks return after criticality with `complete` false.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "depthlab/analysis/component_value.hpp"
#include "depthlab/analysis/study.hpp"
#include "depthlab/dist/communicator.hpp"
#include "depthlab/train/progress.hpp"

namespace depthlab::analysis {

struct study_options {
    contribution_options contribution{};  // .base and .run are set by the study; .ablation serves pruning too
    criticality_options criticality{};    // .base and .run are set by the study
    run_options run{};                    // progress of every analysis
    int prune_max_k = 8;                  // pruning curves for k = 0..min(prune_max_k, modules)
    bool rewind_by_criticality = false;   // rewinding removes the least critical (else: least contributing) modules
    std::vector<int> rewind_k{};          // k to rewind and fine-tune; empty: no rewinding
    std::string out{};                    // rank 0 writes the six CSV files here (created if needed); empty: none
    std::string metric_name = "metric";   // for the summary lines ("BLEU")
    bool print = true;                    // rank 0 prints one line per analysis (stdout)
};

/// What the study found, with the options it ran under (the report needs them).
struct study_result {
    double base = 0;                      // the metric of the full model
    contribution_result contribution;
    criticality_result criticality;
    analysis::criticality_options criticality_options{};  // as run (base included), for the report
    double spearman = std::numeric_limits<double>::quiet_NaN();  // contribution vs criticality (NaN: undefined)
    pruning_result pruning_by_contribution, pruning_by_criticality;
    std::vector<rewinding_point> rewinding;
    std::vector<std::pair<std::string, double>> phase_seconds;  // contribution, criticality, pruning, rewinding
    bool complete = false;                // false on ranks other than 0: they stop after criticality
    [[nodiscard]] double seconds() const {
        double s = 0;
        for (const auto& [name, t] : phase_seconds) s += t;
        return s;
    }
};

/// Runs the study on `model`, which must hold θᶠ (`final_`) and be in eval mode (the metric
/// must be deterministic). finetune(k) trains the rewound model (a fresh optimiser each
/// call); it is only called for the ks of options.rewind_k. The model ends at θᶠ in eval
/// mode with every module switched on, also when an analysis throws.
template <class T, class B>
study_result run_component_value_study(dist::communicator& comm, nn::Module<T, B>& model, const std::vector<module_ref>& modules,
                                       const nn::Snapshot<T, B>& initial, const nn::Snapshot<T, B>& final_, const metric_fn& metric,
                                       const std::function<void(int)>& finetune, study_options o) {
    DEPTHLAB_CHECK(!modules.empty(), usage_error, "component-value study: no modules to study");
    DEPTHLAB_CHECK(o.prune_max_k >= 0, usage_error, "component-value study: prune_max_k ", o.prune_max_k, " is negative");
    DEPTHLAB_CHECK(o.rewind_k.empty() || static_cast<bool>(finetune), usage_error, "component-value study: rewind_k given without a fine-tuning function");
    const bool root = comm.is_root(), say = root && o.print;
    const std::string& unit = o.metric_name;
    study_result r;
    stopwatch phase;
    r.base = o.contribution.base ? *o.contribution.base : o.criticality.base ? *o.criticality.base : metric();
    o.contribution.base = o.criticality.base = r.base;
    o.contribution.run = o.criticality.run = o.run;
    r.criticality_options = o.criticality;

    // each CSV is written as soon as its analysis ends: a later failure loses none of them
    const bool write = root && !o.out.empty();
    if (write) std::filesystem::create_directories(o.out);  // (before the first analysis, not after it)
    r.contribution = contribution(comm, modules, metric, o.contribution);
    const double s_contribution = phase.lap("contribution");
    if (write) write_csv(o.out + "/contribution.csv", r.contribution);
    if (say) {
        const auto drops = unclipped_drops(r.contribution);
        std::printf("contribution: %zu modules in %s; clip C = %.3f, largest drop %.3f %s (unclipped)%s\n", modules.size(),
                    train::format_duration(s_contribution).c_str(), r.contribution.clip, *std::max_element(drops.begin(), drops.end()), unit.c_str(),
                    r.contribution.all_zero ? " (ALL ZERO)" : "");
    }
    r.criticality = criticality(comm, model, modules, initial, final_, metric, o.criticality);
    const double s_criticality = phase.lap("criticality");
    r.spearman = rank_correlation(r.contribution, r.criticality);
    if (!root) {
        r.phase_seconds = phase.phases();
        return r;
    }
    if (write) {
        write_csv(o.out + "/criticality.csv", r.criticality);
        write_trace_csv(o.out + "/criticality_trace.csv", r.criticality);
    }
    if (say)
        std::printf("criticality (%s): %zu evaluations in %s\nSpearman rank correlation contribution vs criticality: %.3f\n",
                    to_string(o.criticality.method), r.criticality.evaluations, train::format_duration(s_criticality).c_str(), r.spearman);

    // pruning and rewinding rank by a score, ties broken by the unclipped drop
    const auto rank_c = importance_ranks(r.contribution), rank_k = importance_ranks(r.criticality);
    const int K = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(o.prune_max_k), modules.size()));
    r.pruning_by_contribution = pruning_curve(model, modules, rank_c, metric, K, o.run, o.contribution.ablation);
    r.pruning_by_criticality = pruning_curve(model, modules, rank_k, metric, K, o.run, o.contribution.ablation);
    phase.lap("pruning");
    if (write) {
        write_csv(o.out + "/pruning.csv", r.pruning_by_contribution);
        write_csv(o.out + "/pruning_criticality.csv", r.pruning_by_criticality);
    }
    if (!o.rewind_k.empty()) {
        struct back_to_eval {  // fine-tuning leaves the model in training mode
            nn::Module<T, B>& m;
            ~back_to_eval() { m.eval(); }
        } guard{model};
        r.rewinding = rewinding_curve(model, modules, o.rewind_by_criticality ? rank_k : rank_c, o.rewind_k, initial, final_, metric, finetune, o.run);
    }
    phase.lap("rewinding");
    r.phase_seconds = phase.phases();
    r.complete = true;
    if (write) write_csv(o.out + "/rewinding.csv", r.rewinding);
    return r;
}

}  // namespace depthlab::analysis
