#pragma once
// Component-value analyses (Wang & Tu, COLING 2020, "Rethinking the Value of Transformer
// Components"): how much each module of a trained model is worth, measured two ways, and
// what to do with the answer (prune, or rewind and fine-tune).
//
//   contribution  (hard)  switch module n off, measure the metric, switch it on again:
//                         d_n = clip(base − metric_without_n, 0, C), score_n = d_n / max_m d_m.
//   criticality   (soft)  move module n alone from its trained weights θᶠ towards its
//                         initial ones θ⁰: θ_n(α) = (1 − α)θ_n⁰ + αθ_nᶠ; the score is the
//                         smallest α ∈ [0, 1] with metric(α) >= base − ε (grid or bisection).
//   pruning               switch the k least important modules off together, k = 0..K.
//   rewinding             reset the k least important modules to θ⁰, fine-tune (the caller's
//                         callback), measure before and after.
//
// Works on any model built from depthlab modules: the metric is a callback and the modules
// are a list the caller may build by hand. default_modules(model) lists the residual
// sub-layers (nn::sublayers) with the paper's types.
//
// Conventions (read these before using the numbers):
//  * Metric direction: HIGHER IS BETTER (BLEU, accuracy). For a loss pass its negative
//    (`[&] { return -loss(); }`); then also set the clip C and ε in loss units.
//  * The metric must be deterministic: put the model in eval mode (dropout off) before
//    calling any analysis. Metric calls run inside depthlab::no_grad unless
//    run_options::no_grad is false (the fine-tuning callback never does).
//  * Every analysis leaves the model as it found it — all modules switched on, every
//    parameter at θᶠ — also when the metric (or an ablate function) throws: the changes are
//    held by RAII guards (scoped_ablation, scoped_interpolation). Analyses assume they start
//    with every module switched on. The exception: rewind_and_finetune() leaves the model
//    rewound and fine-tuned, by design.
//  * What "removing" a default module means: its residual branch outputs zero and the
//    residual path stays. In a post-LN layer the sub-layer's LayerNorm still runs
//    (y = LN(x)); in a pre-LN layer the sub-layer becomes the identity (y = x). So for
//    post-LN models the LayerNorm's parameters are not counted as removed by pruning
//    (module_ref::kept_prefixes); rewinding and criticality do move them (the LayerNorm
//    lives under the sub-layer's name).
//  * Tied models (one set of sub-layers named "encoder.shared.*"): a module is the shared
//    sub-layer, so removing or rewinding it acts on EVERY iteration; its layer is -1.
//  * Result vectors follow the order of the module list given.
//  * Like every depthlab header, include it after <depthlab/depthlab.hpp> (or through it).
//
// The analyses live in five headers, all included here:
//   analysis/modules.hpp  module_ref, default_modules, parameter counts, the RAII guards
//   analysis/heads.hpp    attention heads as modules, Michel et al.'s gradient importance
//   analysis/scores.hpp   options, results, contribution, criticality, pruning, rewinding
//   analysis/sharded.hpp  contribution and criticality with the modules split across ranks
//   analysis/tables.hpp   average ranks, Spearman, the CSV files
#include "depthlab/analysis/heads.hpp"
#include "depthlab/analysis/modules.hpp"
#include "depthlab/analysis/scores.hpp"
#include "depthlab/analysis/sharded.hpp"
#include "depthlab/analysis/tables.hpp"
