#pragma once
// chrF as sacreBLEU 2.x (checked against 2.6.0) computes it by default
// (`sacrebleu.metrics.CHRF()`: chrF2 with character order 6, word order 0, beta 2, case
// kept, whitespace removed, no eps smoothing), and chrF++ with word_order = 2.
//   * whitespace (Python's definition) is deleted, then character (code point) n-grams of
//     order 1..6 are counted; per order the statistics are [hypothesis n-grams, reference
//     n-grams, matches] (hypothesis n-grams count 0 when the reference has none of that
//     order); matches are clipped counts.
//   * word n-grams (chrF++): words split at whitespace, one ASCII punctuation character
//     split off the end (else the start) of each word longer than one character.
//   * with several references a segment takes the statistics of the reference with the
//     best sentence-level score (the first on a tie); corpus statistics are sums.
//   * score: precision and recall averaged over the orders with hypothesis and reference
//     n-grams ("effective order"), then F_beta = (1+b^2) P R / (b^2 P + R), times 100 --
//     evaluated in exactly sacreBLEU's order, since that score also picks the reference:
//     two references with mathematically equal scores are a tie only if both round alike
//     (`corpus_chrf({"aabb", "abc"}, {{"ac", "abc"}, {"bacba", "abc"}})` is 78.29 with
//     "ac" taken for the first segment; another rounding takes "bacba" and gives 37.65).
//   * an empty reference string is a reference with no n-grams, as in sacreBLEU >= 2.2
//     (it scores 0 and counts in `nrefs`), unless `empty_refs = empty_reference::absent`
//     (see bleu.hpp).
// Not supported: sacreBLEU's lowercase option.
#include <array>
#include <cstdint>
#include <cstdio>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/metrics/bleu.hpp"
#include "depthlab/metrics/text.hpp"
#include "depthlab/version.hpp"

namespace depthlab::metrics {

struct chrf_options {
    int char_order = 6;
    int word_order = 0;  ///< 2 for chrF++
    double beta = 2;
    bool whitespace = false;     ///< keep whitespace in the character n-grams
    bool eps_smoothing = false;  ///< chrF++.py / Moses / NLTK style smoothing instead of effective order
    empty_reference empty_refs = empty_reference::zero_length;
};

struct chrf_score {
    double score = 0;  ///< 0..100
    int nrefs = 1;     ///< -1 when it varies
    chrf_options options;
    std::vector<std::int64_t> stats;  ///< [hyp, ref, match] per order (char orders first)

    [[nodiscard]] std::string name() const {
        char buf[32];
        std::snprintf(buf, sizeof buf, "chrF%g", options.beta);
        return buf + std::string(static_cast<std::size_t>(options.word_order), '+');
    }
    /// e.g. "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:depthlab-0.1.0"
    [[nodiscard]] std::string signature() const {
        return "nrefs:" + (nrefs < 0 ? std::string("var") : std::to_string(nrefs)) + "|case:mixed|eff:" +
               (options.eps_smoothing ? "no" : "yes") + "|nc:" + std::to_string(options.char_order) +
               "|nw:" + std::to_string(options.word_order) + "|space:" + (options.whitespace ? "yes" : "no") +
               "|version:depthlab-" + version_string();
    }
    /// sacreBLEU's score line, e.g. "chrF2|<signature> = 45.67".
    [[nodiscard]] std::string format(int width = 2, bool with_signature = true) const {
        char buf[64];
        std::snprintf(buf, sizeof buf, " = %.*f", width, score);
        return (with_signature ? name() + "|" + signature() : name()) + buf;
    }
};

namespace detail {
/// factor * p + r with the product rounded before the sum, as Python evaluates it. A
/// fused multiply-add (an FMA target with clang's default -ffp-contract=on, or GCC's
/// -ffp-contract=fast in GNU mode) rounds once and changes the last bit whenever the
/// product is inexact, e.g. for beta 3; the volatile store keeps the two roundings.
[[nodiscard]] inline double unfused_multiply_add(double factor, double p, double r) {
    const volatile double product = factor * p;
    return product + r;
}
}  // namespace detail

/// The chrF score from [hyp, ref, match] statistics (sacreBLEU's CHRF._compute_f_score).
[[nodiscard]] inline double chrf_f_score(std::span<const std::int64_t> stats, const chrf_options& o) {
    const int order = o.char_order + o.word_order;
    DEPTHLAB_CHECK(stats.size() == static_cast<std::size_t>(3 * order), usage_error, "chrf: ", stats.size(),
                   " statistics for ", order, " orders");
    constexpr double eps = 1e-16;
    const double factor = o.beta * o.beta;
    double score = 0, avg_prec = 0, avg_rec = 0;
    int effective_order = 0;
    for (int i = 0; i < order; ++i) {
        const auto n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
        const double prec = n_hyp > 0 ? static_cast<double>(n_match) / static_cast<double>(n_hyp) : eps;
        const double rec = n_ref > 0 ? static_cast<double>(n_match) / static_cast<double>(n_ref) : eps;
        const double denom = detail::unfused_multiply_add(factor, prec, rec);
        score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
        if (n_hyp > 0 && n_ref > 0) {
            avg_prec += prec;
            avg_rec += rec;
            ++effective_order;
        }
    }
    if (o.eps_smoothing) return 100 * score / order;
    if (effective_order == 0) return 0.0;
    avg_prec /= effective_order;
    avg_rec /= effective_order;
    if (avg_prec + avg_rec == 0) return 0.0;
    // Bit for bit sacreBLEU's rounding (see the header comment): no reordered or fused form.
    double f = (1 + factor) * avg_prec * avg_rec;
    f /= detail::unfused_multiply_add(factor, avg_prec, avg_rec);
    return 100 * f;
}

class chrf_accumulator {
public:
    explicit chrf_accumulator(chrf_options o = {}) : opt_(o), stats_(static_cast<std::size_t>(3 * (o.char_order + o.word_order)), 0) {
        DEPTHLAB_CHECK(o.char_order >= 0 && o.word_order >= 0 && o.char_order + o.word_order >= 1, usage_error,
                       "chrf: orders must be >= 0 and not both 0");
    }

    /// Statistics of one segment: those of its best reference (the first of equal scores).
    template <reference_range Refs>
    [[nodiscard]] std::vector<std::int64_t> segment_stats(std::string_view hyp, const Refs& refs) const {
        ngrams h;
        extract(hyp, h);
        std::vector<std::int64_t> best;
        double best_f = -1.0;
        bool any = false;
        for (const auto& ref_any : refs) {
            const std::string_view ref(ref_any);
            if (!detail::is_reference(ref, opt_.empty_refs)) continue;
            any = true;
            ngrams r;
            extract(ref, r);
            std::vector<std::int64_t> st;
            st.reserve(stats_.size());
            for (std::size_t n = 0; n < h.counts.size(); ++n) {
                std::int64_t hyp_count = 0, match = 0, ref_count = 0;
                for (const auto& [g, c] : h.counts[n]) {
                    hyp_count += c;
                    if (auto it = r.counts[n].find(g); it != r.counts[n].end()) match += std::min(c, it->second);
                }
                for (const auto& [g, c] : r.counts[n]) ref_count += c;
                st.push_back(r.counts[n].empty() ? 0 : hyp_count);
                st.push_back(ref_count);
                st.push_back(match);
            }
            const double f = chrf_f_score(st, opt_);
            if (f > best_f) {
                best_f = f;
                best = std::move(st);
            }
        }
        DEPTHLAB_CHECK(any, usage_error, "chrf: a segment has no reference",
                       opt_.empty_refs == empty_reference::absent ? " (empty ones are absent)" : "");
        return best;
    }

    template <reference_range Refs>
    void add(std::string_view hyp, const Refs& refs) {
        const auto st = segment_stats(hyp, refs);
        for (std::size_t i = 0; i < st.size(); ++i) stats_[i] += st[i];
        nrefs_.insert(detail::count_references(refs, opt_.empty_refs));
    }
    void add(std::string_view hyp, std::string_view ref) { add(hyp, std::array<std::string_view, 1>{ref}); }

    [[nodiscard]] chrf_score score() const {
        chrf_score r;
        r.score = chrf_f_score(stats_, opt_);
        r.nrefs = nrefs_.size() == 1 ? static_cast<int>(*nrefs_.begin()) : (nrefs_.empty() ? 1 : -1);
        r.options = opt_;
        r.stats = stats_;
        return r;
    }

private:
    // The n-gram keys are string_views into `text` / `words` storage kept alongside.
    struct ngrams {
        std::string text;
        std::vector<std::string> word_grams;  // owns word n-gram keys
        std::vector<std::unordered_map<std::string_view, std::int64_t>> counts;
        ngrams() = default;
        ngrams(const ngrams&) = delete;  // the views point into this object's strings
        ngrams& operator=(const ngrams&) = delete;
    };

    void extract(std::string_view line, ngrams& g) const {
        g.text = opt_.whitespace ? std::string(line) : remove_whitespace(line);
        const auto off = code_point_offsets(g.text);
        const std::size_t C = off.size() - 1;  // code points
        g.counts.resize(static_cast<std::size_t>(opt_.char_order + opt_.word_order));
        const std::string_view text(g.text);
        for (std::size_t n = 1; n <= static_cast<std::size_t>(opt_.char_order); ++n)
            for (std::size_t i = 0; i + n <= C; ++i) ++g.counts[n - 1][text.substr(off[i], off[i + n] - off[i])];
        if (opt_.word_order > 0) {
            const auto words = split_punctuation(line);
            for (std::size_t n = 1; n <= static_cast<std::size_t>(opt_.word_order); ++n)
                for (std::size_t i = 0; i + n <= words.size(); ++i) {
                    std::string key(words[i]);
                    for (std::size_t k = 1; k < n; ++k) {
                        key += ' ';
                        key += words[i + k];
                    }
                    g.word_grams.push_back(std::move(key));
                }
            g.word_grams.shrink_to_fit();  // no reallocation after the views are taken
            std::size_t idx = 0;
            for (std::size_t n = 1; n <= static_cast<std::size_t>(opt_.word_order); ++n)
                for (std::size_t i = 0; i + n <= words.size(); ++i)
                    ++g.counts[static_cast<std::size_t>(opt_.char_order) + n - 1][std::string_view(g.word_grams[idx++])];
        }
    }

    // sacreBLEU's _remove_punctuation: split one ASCII punctuation character off the end
    // (else the start) of every word longer than one character.
    static std::vector<std::string_view> split_punctuation(std::string_view line) {
        constexpr std::string_view puncts = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
        std::vector<std::string_view> out;
        for (auto w : split_whitespace(line)) {
            if (code_point_offsets(w).size() - 1 == 1) {
                out.push_back(w);
            } else if (puncts.find(w.back()) != std::string_view::npos) {
                out.push_back(w.substr(0, w.size() - 1));
                out.push_back(w.substr(w.size() - 1));
            } else if (puncts.find(w.front()) != std::string_view::npos) {
                out.push_back(w.substr(0, 1));
                out.push_back(w.substr(1));
            } else {
                out.push_back(w);
            }
        }
        return out;
    }

    chrf_options opt_;
    std::vector<std::int64_t> stats_;
    std::set<std::size_t> nrefs_;
};

/// Corpus chrF; `ref_streams[k][i]` is the k-th reference of segment i.
[[nodiscard]] inline chrf_score corpus_chrf(std::span<const std::string> hyps,
                                            std::span<const std::vector<std::string>> ref_streams,
                                            const chrf_options& o = {}) {
    DEPTHLAB_CHECK(!ref_streams.empty(), usage_error, "corpus_chrf: no reference stream");
    for (std::size_t k = 0; k < ref_streams.size(); ++k)
        DEPTHLAB_CHECK(ref_streams[k].size() == hyps.size(), usage_error, "corpus_chrf: ", hyps.size(),
                       " hypotheses but reference stream ", k, " has ", ref_streams[k].size(), " segments");
    chrf_accumulator acc(o);
    std::vector<std::string_view> refs(ref_streams.size());
    for (std::size_t i = 0; i < hyps.size(); ++i) {
        for (std::size_t k = 0; k < ref_streams.size(); ++k) refs[k] = ref_streams[k][i];
        acc.add(hyps[i], refs);
    }
    return acc.score();
}

[[nodiscard]] inline chrf_score corpus_chrf(std::span<const std::string> hyps, std::span<const std::string> refs,
                                            const chrf_options& o = {}) {
    const std::vector<std::vector<std::string>> streams{std::vector<std::string>(refs.begin(), refs.end())};
    return corpus_chrf(hyps, std::span<const std::vector<std::string>>(streams), o);
}

[[nodiscard]] inline chrf_score sentence_chrf(std::string_view hyp, std::span<const std::string> refs,
                                              const chrf_options& o = {}) {
    chrf_accumulator acc(o);
    acc.add(hyp, refs);
    return acc.score();
}

}  // namespace depthlab::metrics
