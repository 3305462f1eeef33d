#pragma once
// Paired bootstrap resampling for the BLEU difference of two systems on the same test
// sentences (Koehn 2004; sacreBLEU's --paired-bs): is "A scores 0.4 BLEU above B" more than
// the luck of which sentences are in the test set? The same for the perplexity of two language
// models (or one model with and without a module) on the same sequences.
//
//   const auto d = metrics::paired_bootstrap_bleu(hyps_a, hyps_b, refs);   // {.resamples = 1000}
//   std::printf("%+.2f BLEU [%.2f, %.2f] %s\n", d.delta, d.lo, d.hi, d.verdict());
//
// Each resample draws n sentence indices with replacement (the same indices for both
// systems: the pairing), adds the drawn sentences' BLEU statistics and scores both corpora.
// The interval is the percentile interval of the resampled differences; it excludes zero
// when one system is better at that confidence. The draws come from depthlab's counter RNG
// (Generator(seed)), so a result is reproducible, not sacreBLEU's numpy stream.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/metrics/bleu.hpp"

namespace depthlab::metrics {

struct paired_bootstrap_options {
    int resamples = 1000;      // sacreBLEU's default
    double confidence = 0.95;  // the interval's coverage
    std::uint64_t seed = 12345;
    bleu_options bleu{};       // corpus BLEU as scored everywhere else (13a, exp smoothing)
};

struct paired_difference {
    double a = 0, b = 0;     // corpus BLEU of each system on the whole set
    double delta = 0;        // a − b
    double lo = 0, hi = 0;   // the percentile interval of the resampled a − b
    double p_value = 1;      // two-sided: 2 · the smaller share of resamples on either side of 0 (at most 1)
    int resamples = 0;
    double confidence = 0;
    /// The interval excludes zero.
    [[nodiscard]] bool significant() const { return lo > 0 || hi < 0; }
    /// "A better", "B better" or "tied" (the interval holds zero).
    [[nodiscard]] const char* verdict() const { return lo > 0 ? "A better" : hi < 0 ? "B better" : "tied"; }
};

/// The resampling loop: stat(drawn) on o.resamples resamples of n items, in draw order
/// (`drawn`: n item indices drawn with replacement from Generator(o.seed)).
template <class Statistic>
[[nodiscard]] std::vector<double> bootstrap_values(std::size_t n, Statistic&& stat, const paired_bootstrap_options& o, const char* what) {
    DEPTHLAB_CHECK(n >= 1, usage_error, what, ": no items to resample");
    DEPTHLAB_CHECK(o.resamples >= 1, usage_error, what, ": resamples ", o.resamples, " < 1");
    DEPTHLAB_CHECK(o.confidence > 0 && o.confidence < 1, usage_error, what, ": confidence ", o.confidence, " outside (0, 1)");
    Generator gen(o.seed);
    std::vector<double> values(static_cast<std::size_t>(o.resamples));
    std::vector<std::size_t> drawn(n);
    for (auto& v : values) {
        for (auto& i : drawn) i = static_cast<std::size_t>((static_cast<std::uint64_t>(gen.next_u32()) * n) >> 32);  // uniform in [0, n)
        v = stat(std::span<const std::size_t>(drawn));
    }
    return values;
}

/// Items 0, ..., n − 1: the whole set, scored as a resample is.
[[nodiscard]] inline std::vector<std::size_t> every_item(std::size_t n) {
    std::vector<std::size_t> all(n);
    std::iota(all.begin(), all.end(), std::size_t{0});
    return all;
}

/// The percentile interval of resampled values at `confidence` (the values end up sorted):
/// the (1 − confidence)/2 and (1 + confidence)/2 quantiles, linear between order statistics.
[[nodiscard]] inline std::pair<double, double> percentile_interval(std::vector<double>& values, double confidence) {
    DEPTHLAB_CHECK(!values.empty(), usage_error, "percentile_interval: no values");
    std::sort(values.begin(), values.end());
    const auto at = [&](double q) {
        const double pos = q * static_cast<double>(values.size() - 1);
        const auto i = static_cast<std::size_t>(pos);
        const double f = pos - static_cast<double>(i);
        return i + 1 < values.size() ? values[i] * (1 - f) + values[i + 1] * f : values[i];
    };
    const double tail = (1 - confidence) / 2;
    return {at(tail), at(1 - tail)};
}

/// The paired bootstrap itself: `a`, `b` the two systems' scores on all n items; score(drawn)
/// returns both systems' scores on a resample (`drawn`: n item indices, with repeats).
template <class Score>
[[nodiscard]] paired_difference paired_bootstrap(std::size_t n, double a, double b, Score&& score, const paired_bootstrap_options& o, const char* what) {
    std::vector<double> deltas = bootstrap_values(
        n,
        [&](std::span<const std::size_t> drawn) {
            const auto [ra, rb] = score(drawn);
            return ra - rb;
        },
        o, what);
    paired_difference r;
    r.a = a;
    r.b = b;
    r.delta = a - b;
    r.resamples = o.resamples;
    r.confidence = o.confidence;
    std::size_t below = 0, above = 0;
    for (const double d : deltas) {
        below += d <= 0;
        above += d >= 0;
    }
    std::tie(r.lo, r.hi) = percentile_interval(deltas, o.confidence);
    r.p_value = std::min(1.0, 2.0 * static_cast<double>(std::min(below, above)) / static_cast<double>(o.resamples));
    return r;
}

/// Each sentence's BLEU statistics (hyps[i] against refs[i]), for corpus BLEU of any resample
/// (corpus_bleu_of).
[[nodiscard]] inline std::vector<bleu_stats> sentence_bleu_stats(std::span<const std::string> hyps, std::span<const std::string> refs,
                                                                 const bleu_options& o = {}) {
    DEPTHLAB_CHECK(hyps.size() == refs.size(), shape_error, "sentence_bleu_stats: ", hyps.size(), " hypotheses for ", refs.size(), " references");
    const bleu_accumulator scorer(o);
    std::vector<bleu_stats> out;
    out.reserve(hyps.size());
    for (std::size_t i = 0; i < hyps.size(); ++i) {
        const std::array<std::string_view, 1> ref{refs[i]};
        out.push_back(scorer.segment_stats(hyps[i], ref));
    }
    return out;
}
/// Corpus BLEU of the sentences `items` (repeats count again) from their statistics.
[[nodiscard]] inline double corpus_bleu_of(const std::vector<bleu_stats>& stats, std::span<const std::size_t> items, const bleu_options& o = {}) {
    bleu_stats total(o.max_ngram_order);
    for (const std::size_t i : items) total += stats[i];
    return compute_bleu(total, o).score;
}

/// Paired bootstrap of BLEU(a) − BLEU(b) over the sentences; refs[i] is sentence i's reference.
[[nodiscard]] inline paired_difference paired_bootstrap_bleu(std::span<const std::string> a, std::span<const std::string> b,
                                                            std::span<const std::string> refs, const paired_bootstrap_options& o = {}) {
    const std::size_t n = refs.size();
    DEPTHLAB_CHECK(a.size() == n && b.size() == n, shape_error, "paired_bootstrap_bleu: ", a.size(), " and ", b.size(), " hypotheses for ", n,
                   " references");
    DEPTHLAB_CHECK(n >= 1, usage_error, "paired_bootstrap_bleu: no sentences");
    const std::vector<bleu_stats> sa = sentence_bleu_stats(a, refs, o.bleu), sb = sentence_bleu_stats(b, refs, o.bleu);
    const auto both = [&](std::span<const std::size_t> items) { return std::pair{corpus_bleu_of(sa, items, o.bleu), corpus_bleu_of(sb, items, o.bleu)}; };
    const auto [whole_a, whole_b] = both(every_item(n));
    return paired_bootstrap(n, whole_a, whole_b, both, o, "paired_bootstrap_bleu");
}

/// The perplexity exp(Σ nll / Σ tokens) of the sequences `items` (repeats count again), from
/// each sequence's summed negative log-likelihood and predicted tokens; 1 without tokens.
[[nodiscard]] inline double perplexity_of(std::span<const double> nll, std::span<const std::int64_t> tokens, std::span<const std::size_t> items) {
    double s = 0, t = 0;
    for (const std::size_t i : items) s += nll[i], t += static_cast<double>(tokens[i]);
    return t > 0 ? std::exp(s / t) : 1.0;
}

/// Paired bootstrap of perplexity(a) − perplexity(b) over the sequences of a language-model
/// evaluation: nll_a[i], nll_b[i] the summed negative log-likelihoods of sequence i under each
/// system, tokens[i] its predicted tokens; perplexity = exp(Σ nll / Σ tokens) of a resample.
[[nodiscard]] inline paired_difference paired_bootstrap_perplexity(std::span<const double> nll_a, std::span<const double> nll_b,
                                                                  std::span<const std::int64_t> tokens, const paired_bootstrap_options& o = {}) {
    const std::size_t n = tokens.size();
    DEPTHLAB_CHECK(nll_a.size() == n && nll_b.size() == n, shape_error, "paired_bootstrap_perplexity: ", nll_a.size(), " and ", nll_b.size(),
                   " sequence losses for ", n, " token counts");
    const auto perplexities = [&](std::span<const std::size_t> items) { return std::pair{perplexity_of(nll_a, tokens, items), perplexity_of(nll_b, tokens, items)}; };
    const auto [a, b] = perplexities(every_item(n));
    return paired_bootstrap(n, a, b, perplexities, o, "paired_bootstrap_perplexity");
}

}  // namespace depthlab::metrics
