#pragma once
// The analyses of a decoder-only language model (nn::GPT2) with perplexity as the metric:
//
//     auto blocks = analysis::layer_modules(lm);                   // "decoder.0", ... : whole blocks
//     auto ppl = analysis::perplexity(lm, dev, {.batch = 16});     // exp(mean next-token NLL)
//     auto bi = analysis::block_influence(lm, dev, {.batch = 16});  // ShortGPT's BI per block
//
// * layer_modules groups the sub-layers of each layer into one module (name "decoder.3",
//   type "D:block"): contribution, criticality and pruning take blocks unchanged. Removing a
//   pre-LN block switches both its sub-layers off, so the block is the identity — the layer
//   removal of ShortGPT and LLM-Drop. Only the zero ablation kind applies to a group.
// * block_influence (Men et al. 2024, "ShortGPT"): BI_i = 1 − E_t cos(x_i,t, x_i+1,t), the
//   mean over every real token t (padding excluded) of the cosine between block i's input and
//   output hidden states. High BI: the block changes its input a lot.
// * The analyses want "higher is better": perplexity_metric returns −perplexity.
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "depthlab/analysis/modules.hpp"
#include "depthlab/analysis/scores.hpp"  // metric_fn
#include "depthlab/data/language_model.hpp"
#include "depthlab/nn/language_model.hpp"

namespace depthlab::analysis {

/// Every layer of `model` as one module: the sub-layers of default_modules(model) grouped by
/// the name of their layer ("decoder.3.self_attention" -> "decoder.3"), in model order; type
/// = the side of the sub-layers' paper type + ":block" ("D:block"). A tied stack's one layer
/// is one module. ablate switches every sub-layer of the layer; the kept prefixes (post-LN
/// norms) are those of its sub-layers.
template <class Model>
std::vector<module_ref> layer_modules(Model& model) {
    std::vector<module_ref> out;
    std::map<std::string, std::size_t> at;
    for (module_ref& sub : default_modules(model)) {
        const std::string layer = sub.name.substr(0, sub.name.rfind('.'));
        auto it = at.find(layer);
        if (it == at.end()) {
            it = at.emplace(layer, out.size()).first;
            module_ref m;
            m.name = m.prefix = layer;
            m.type = sub.type.substr(0, sub.type.find(':')) + ":block";
            m.layer = sub.layer;
            m.training = sub.training;
            out.push_back(std::move(m));
        }
        module_ref& m = out[it->second];
        m.kept_prefixes.insert(m.kept_prefixes.end(), sub.kept_prefixes.begin(), sub.kept_prefixes.end());
        m.ablate = [prev = std::move(m.ablate), one = std::move(sub.ablate)](bool off) {
            if (prev) prev(off);
            one(off);
        };
    }
    return out;
}

struct lm_eval_options {
    index_t batch = 16;        // sequences per forward
    index_t max_batches = 0;   // 0: every sequence
};

/// What an evaluation of a language model measured.
struct lm_eval {
    double nll = 0;              // mean next-token negative log-likelihood (nats)
    double perplexity = 0;       // exp(nll)
    std::int64_t tokens = 0;     // predicted tokens
    double flops_per_token = 0;  // products that ran (flop_scope) per predicted token
    std::vector<double> sequence_nll;            // per evaluated sequence, in order: its summed NLL ...
    std::vector<std::int64_t> sequence_tokens;   // ... and its predicted tokens (metrics::paired_bootstrap_perplexity)
};

namespace detail {
/// Calls f(batch) on the evaluation batches of `data`, in order.
template <class F>
void for_each_eval_batch(const data::lm_sequences& data, const lm_eval_options& o, F&& f) {
    DEPTHLAB_CHECK(o.batch > 0 && o.max_batches >= 0, usage_error, "lm evaluation: batch ", o.batch, ", max_batches ", o.max_batches);
    index_t n = 0;
    for (index_t first = 0; first < data.size() && (o.max_batches == 0 || n < o.max_batches); first += o.batch, ++n) f(data.batch(first, o.batch));
}
}  // namespace detail

/// Perplexity of `model` on `data` (eval mode is the caller's; runs under no_grad).
template <class T, class B>
lm_eval evaluate_lm(const nn::GPT2<T, B>& model, const data::lm_sequences& data, const lm_eval_options& o = {}) {
    DEPTHLAB_CHECK(data.max_id() < model.cfg.vocab, index_error, "evaluate_lm: the data holds id ", data.max_id(), ", outside the model's vocabulary of ",
                   model.cfg.vocab);
    const no_grad guard;
    const flop_scope flops;
    double sum = 0;
    lm_eval r;
    detail::for_each_eval_batch(data, o, [&](const data::token_batch& b) {
        const std::vector<std::int64_t> targets = nn::next_token_targets(b);
        const std::vector<T> rows = cross_entropy_rows(model.logits(b), std::span<const std::int64_t>(targets)).value().to_vector();  // (B*T,), 0 where ignored
        for (index_t s = 0; s < b.batch; ++s) {
            double nll = 0;
            for (index_t t = 0; t < b.length; ++t) nll += static_cast<double>(rows[static_cast<std::size_t>(s * b.length + t)]);
            r.sequence_nll.push_back(nll);
            r.sequence_tokens.push_back(b.lengths[static_cast<std::size_t>(s)] - 1);
            sum += nll;
            r.tokens += b.lengths[static_cast<std::size_t>(s)] - 1;
        }
    });
    DEPTHLAB_CHECK(r.tokens > 0, usage_error, "evaluate_lm: no token to predict in ", data.size(), " sequences");
    r.nll = sum / static_cast<double>(r.tokens);
    r.perplexity = std::exp(r.nll);
    r.flops_per_token = static_cast<double>(flops.flops()) / static_cast<double>(r.tokens);
    return r;
}

/// The analyses' metric: −perplexity on `data` (higher is better).
template <class T, class B>
metric_fn perplexity_metric(const nn::GPT2<T, B>& model, const data::lm_sequences& data, const lm_eval_options& o = {}) {
    return [&model, &data, o] { return -evaluate_lm(model, data, o).perplexity; };
}

/// ShortGPT's block influence of every block, over the real tokens of `data`.
template <class T, class B>
std::vector<double> block_influence(const nn::GPT2<T, B>& model, const data::lm_sequences& data, const lm_eval_options& o = {}) {
    const no_grad guard;
    const auto L = static_cast<std::size_t>(model.cfg.depth);
    const index_t D = model.cfg.layer.dim;
    std::vector<double> cos_sum(L, 0.0);
    std::int64_t tokens = 0;
    detail::for_each_eval_batch(data, o, [&](const data::token_batch& b) {
        (void)model.hidden(b, [&](int block, const Var<T, B>& in, const Var<T, B>& out) {
            const std::vector<T> x = in.value().contiguous().to_vector(), y = out.value().contiguous().to_vector();
            for (index_t s = 0; s < b.batch; ++s)
                for (index_t t = 0; t < b.lengths[static_cast<std::size_t>(s)]; ++t) {
                    const std::size_t at = static_cast<std::size_t>((s * b.length + t) * D);
                    double xy = 0, xx = 0, yy = 0;
                    for (index_t d = 0; d < D; ++d) {
                        const double u = x[at + static_cast<std::size_t>(d)], v = y[at + static_cast<std::size_t>(d)];
                        xy += u * v, xx += u * u, yy += v * v;
                    }
                    cos_sum[static_cast<std::size_t>(block)] += xx > 0 && yy > 0 ? xy / std::sqrt(xx * yy) : 1.0;
                }
        });
        for (index_t len : b.lengths) tokens += len;
    });
    std::vector<double> bi(L);
    for (std::size_t i = 0; i < L; ++i) bi[i] = 1.0 - cos_sum[i] / static_cast<double>(tokens);
    return bi;
}

/// criticality_interval with perplexity as the metric (−perplexity: higher is better): `full`
/// the full model's evaluation, traced[j] the module's j-th (e.trace[j]), each with its
/// per-sequence losses; epsilon in perplexity.
inline score_interval criticality_interval_lm(const criticality_entry& e, double epsilon, const lm_eval& full, const std::vector<lm_eval>& traced,
                                              const metrics::paired_bootstrap_options& o = {}) {
    DEPTHLAB_CHECK(traced.size() == e.trace.size(), shape_error, "criticality_interval_lm: ", traced.size(), " evaluations for '", e.name,
                   "', whose trace has ", e.trace.size());
    for (const auto& t : traced)
        DEPTHLAB_CHECK(t.sequence_nll.size() == full.sequence_nll.size(), shape_error, "criticality_interval_lm: an evaluation of ", t.sequence_nll.size(),
                       " sequences against the full model's ", full.sequence_nll.size());
    return criticality_interval(
        e, epsilon, full.sequence_nll.size(),
        [&](std::span<const std::size_t> drawn) { return -metrics::perplexity_of(full.sequence_nll, full.sequence_tokens, drawn); },
        [&](std::size_t j, std::span<const std::size_t> drawn) { return -metrics::perplexity_of(traced[j].sequence_nll, traced[j].sequence_tokens, drawn); }, o);
}

}  // namespace depthlab::analysis
