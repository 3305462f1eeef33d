#pragma once
// BLEU as sacreBLEU 2.x (checked against 2.6.0) computes it by default
// (`sacrebleu.metrics.BLEU()`):
//   * tokenisation '13a' (mteval-v13a.pl): the line is right-stripped, `<skipped>` and
//     `-\n` removed, `\n` -> ' ', `&quot; &amp; &lt; &gt;` unescaped (in that order); then
//     every ASCII symbol except `' , . -` (i.e. { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * +
//     : ; < = > ? @ /) is split off; `.` and `,` are split off unless both neighbours are
//     digits ("1,000.5" stays, "end." splits); `-` is split off after a digit; whitespace
//     (Python's definition) is collapsed. Case is kept.
//   * n-grams of order 1..4; a hypothesis n-gram's count is clipped by the largest count of
//     that n-gram in any one reference; corpus statistics are sums over segments.
//   * brevity penalty exp(1 - r/c) when c < r (1 otherwise, 0 when c = 0), with r the sum
//     over segments of the reference length closest to the hypothesis length (on a tie the
//     shorter reference).
//   * smoothing 'exp' (mteval's: the k-th order with no match gets precision
//     1 / (2^k * total)), for the corpus score too; effective order off.
//   * an empty reference string is a reference of length 0, as in sacreBLEU >= 2.2: it
//     counts in `nrefs`, it can be the closest reference length (`sentence_bleu("a b",
//     {"a b c d", ""})` is 100: the lengths 4 and 0 are both 2 away and the shorter wins),
//     and a corpus whose references are all empty scores 0. With `empty_refs =
//     empty_reference::absent` an empty string stands for sacreBLEU's `None` instead (see
//     `empty_reference`).
// Not supported: sacreBLEU's lowercase option and the other tokenizers (zh, intl, ...);
// `tokenize = false` is sacreBLEU's tokenize='none'.
// `sentence_bleu` matches `sacrebleu.sentence_bleu` (smoothing 'exp', effective order on).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/metrics/text.hpp"
#include "depthlab/version.hpp"

namespace depthlab::metrics {

/// A range of references: anything iterable whose elements convert to std::string_view
/// (but not a single string).
template <class R>
concept reference_range = !std::is_convertible_v<const R&, std::string_view> && requires(const R& r) {
    { std::string_view(*std::begin(r)) };
    std::end(r);
};

/// What an empty reference string is (BLEU and chrF).
enum class empty_reference {
    /// A reference with no tokens / characters (sacreBLEU >= 2.2 with "").
    zero_length,
    /// No reference: the segment has one reference fewer (sacreBLEU's `None`, and what
    /// sacreBLEU < 2.2 did with ""). Reference streams hold one string per segment, so
    /// this is how a corpus with a varying number of references per segment is written
    /// (signature `nrefs:var`); a segment left with no reference at all is an error.
    absent,
};

namespace detail {
/// Whether `ref` takes part in scoring under `mode`.
[[nodiscard]] inline bool is_reference(std::string_view ref, empty_reference mode) {
    return !(ref.empty() && mode == empty_reference::absent);
}

/// The references of a segment that count under `mode` (its `nrefs`).
template <reference_range Refs>
[[nodiscard]] std::size_t count_references(const Refs& refs, empty_reference mode) {
    std::size_t k = 0;
    for (const auto& r : refs) k += is_reference(std::string_view(r), mode);
    return k;
}
}  // namespace detail

/// The 13a tokeniser of mteval-v13a.pl / sacreBLEU; returns the tokens joined by ' '.
[[nodiscard]] inline std::string tokenize_13a(std::string_view line) {
    std::string s(rstrip_whitespace(line));
    detail::replace_all(s, "<skipped>", "");
    detail::replace_all(s, "-\n", "");
    detail::replace_all(s, "\n", " ");
    detail::replace_all(s, "&quot;", "\"");
    detail::replace_all(s, "&amp;", "&");
    detail::replace_all(s, "&lt;", "<");
    detail::replace_all(s, "&gt;", ">");
    s = " " + s + " ";

    // The four substitutions are regexes applied left to right without overlap (as
    // Python's re.sub does). They only test ASCII bytes, and a UTF-8 multi-byte sequence
    // never contains one, so working on bytes gives the same result as on code points.
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    auto symbol = [](char c) {  // [\{-\~\[-\` -\&\(-\+\:-\@\/]
        const auto u = static_cast<unsigned char>(c);
        return (u >= 0x7B && u <= 0x7E) || (u >= 0x5B && u <= 0x60) || (u >= 0x20 && u <= 0x26) ||
               (u >= 0x28 && u <= 0x2B) || (u >= 0x3A && u <= 0x40) || u == 0x2F;
    };
    auto dot_comma = [](char c) { return c == '.' || c == ','; };

    std::string t;  // ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> ' \1 '
    t.reserve(s.size() * 2);
    for (char c : s) {
        if (symbol(c)) { t += ' '; t += c; t += ' '; } else t += c;
    }
    s.clear();  // ([^0-9])([\.,]) -> '\1 \2 '
    for (std::size_t i = 0; i < t.size();) {
        if (i + 1 < t.size() && !digit(t[i]) && dot_comma(t[i + 1])) {
            s += t[i]; s += ' '; s += t[i + 1]; s += ' ';
            i += 2;
        } else s += t[i++];
    }
    t.clear();  // ([\.,])([^0-9]) -> ' \1 \2'
    for (std::size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && dot_comma(s[i]) && !digit(s[i + 1])) {
            t += ' '; t += s[i]; t += ' '; t += s[i + 1];
            i += 2;
        } else t += s[i++];
    }
    s.clear();  // ([0-9])(-) -> '\1 \2 '
    for (std::size_t i = 0; i < t.size();) {
        if (i + 1 < t.size() && digit(t[i]) && t[i + 1] == '-') {
            s += t[i]; s += " - ";
            i += 2;
        } else s += t[i++];
    }
    std::string out;
    for (auto w : split_whitespace(s)) {
        if (!out.empty()) out += ' ';
        out += w;
    }
    return out;
}

enum class bleu_smooth { none, floor, add_k, exp };

struct bleu_options {
    bleu_smooth smooth = bleu_smooth::exp;
    double smooth_value = -1;      ///< < 0: sacreBLEU's default (floor 0.1, add-k 1)
    bool effective_order = false;  ///< stop at the first order with no hypothesis n-gram
    int max_ngram_order = 4;
    bool tokenize = true;          ///< '13a'; false = sacreBLEU's tokenize='none'
    empty_reference empty_refs = empty_reference::zero_length;
};

/// Options of `sacrebleu.sentence_bleu` (exp smoothing, effective order).
[[nodiscard]] inline bleu_options sentence_bleu_options() {
    bleu_options o;
    o.effective_order = true;
    return o;
}

/// Sufficient statistics of BLEU; they add up over segments (and over corpora).
struct bleu_stats {
    std::int64_t sys_len = 0, ref_len = 0;
    std::vector<std::int64_t> correct, total;  // per order 1..N
    explicit bleu_stats(int order = 4) : correct(static_cast<std::size_t>(order), 0), total(static_cast<std::size_t>(order), 0) {}
    bleu_stats& operator+=(const bleu_stats& o) {
        DEPTHLAB_CHECK(o.correct.size() == correct.size(), usage_error, "bleu_stats: adding statistics of order ",
                       o.correct.size(), " to order ", correct.size());
        sys_len += o.sys_len;
        ref_len += o.ref_len;
        for (std::size_t i = 0; i < correct.size(); ++i) {
            correct[i] += o.correct[i];
            total[i] += o.total[i];
        }
        return *this;
    }
};

struct bleu_score {
    double score = 0;                  ///< 0..100
    std::vector<double> precisions;    ///< per order, in percent (smoothed as sacreBLEU reports them)
    std::vector<std::int64_t> counts;  ///< matched n-grams per order
    std::vector<std::int64_t> totals;  ///< hypothesis n-grams per order
    double bp = 0;
    std::int64_t sys_len = 0, ref_len = 0;
    int nrefs = 1;  ///< references per segment; -1 when it varies ("var")
    bleu_options options;

    [[nodiscard]] double ratio() const { return ref_len ? static_cast<double>(sys_len) / static_cast<double>(ref_len) : 0.0; }

    /// sacreBLEU's signature, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:depthlab-0.1.0".
    [[nodiscard]] std::string signature() const {
        std::string smooth;
        char buf[32];
        switch (options.smooth) {
            case bleu_smooth::none: smooth = "none"; break;
            case bleu_smooth::exp: smooth = "exp"; break;
            case bleu_smooth::floor:
                std::snprintf(buf, sizeof buf, "floor[%.2f]", options.smooth_value < 0 ? 0.1 : options.smooth_value);
                smooth = buf;
                break;
            case bleu_smooth::add_k:
                std::snprintf(buf, sizeof buf, "add-k[%.2f]", options.smooth_value < 0 ? 1.0 : options.smooth_value);
                smooth = buf;
                break;
        }
        return "nrefs:" + (nrefs < 0 ? std::string("var") : std::to_string(nrefs)) + "|case:mixed|eff:" +
               (options.effective_order ? "yes" : "no") + "|tok:" + (options.tokenize ? "13a" : "none") +
               "|smooth:" + smooth + "|version:depthlab-" + version_string();
    }

    /// sacreBLEU's score line: "BLEU|<signature> = 25.00 60.0/40.0/25.0/16.7 (BP = 1.000
    /// ratio = 1.000 hyp_len = 5 ref_len = 5)"; without the "|<signature>" part when
    /// `with_signature` is false.
    [[nodiscard]] std::string format(int width = 2, bool with_signature = true) const {
        std::string out = with_signature ? "BLEU|" + signature() : "BLEU";
        char buf[128];
        std::snprintf(buf, sizeof buf, " = %.*f ", width, score);
        out += buf;
        for (std::size_t i = 0; i < precisions.size(); ++i) {
            std::snprintf(buf, sizeof buf, "%s%.1f", i ? "/" : "", precisions[i]);
            out += buf;
        }
        std::snprintf(buf, sizeof buf, " (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)", bp, ratio(),
                      static_cast<long long>(sys_len), static_cast<long long>(ref_len));
        return out + buf;
    }
};

/// The score from summed statistics (sacreBLEU's BLEU.compute_bleu).
[[nodiscard]] inline bleu_score compute_bleu(const bleu_stats& st, const bleu_options& o = {}) {
    const int N = o.max_ngram_order;
    DEPTHLAB_CHECK(N >= 1 && static_cast<std::size_t>(N) == st.correct.size(), usage_error,
                   "compute_bleu: statistics of order ", st.correct.size(), " but max_ngram_order ", N);
    bleu_score r;
    r.options = o;
    r.counts = st.correct;
    r.totals = st.total;
    r.sys_len = st.sys_len;
    r.ref_len = st.ref_len;
    r.precisions.assign(static_cast<std::size_t>(N), 0.0);
    if (st.sys_len < st.ref_len)
        r.bp = st.sys_len > 0 ? std::exp(1.0 - static_cast<double>(st.ref_len) / static_cast<double>(st.sys_len)) : 0.0;
    else
        r.bp = 1.0;
    if (std::all_of(st.correct.begin(), st.correct.end(), [](std::int64_t c) { return c == 0; })) return r;

    const double value = o.smooth_value >= 0 ? o.smooth_value : (o.smooth == bleu_smooth::floor ? 0.1 : 1.0);
    double smooth_mteval = 1.0;
    int eff_order = N;
    for (int n = 1; n <= N; ++n) {
        double correct = static_cast<double>(st.correct[n - 1]), total = static_cast<double>(st.total[n - 1]);
        if (o.smooth == bleu_smooth::add_k && n > 1) {
            correct += value;
            total += value;
        }
        if (total == 0) break;
        if (o.effective_order) eff_order = n;
        if (correct == 0) {
            if (o.smooth == bleu_smooth::exp) {
                smooth_mteval *= 2;
                r.precisions[n - 1] = 100.0 / (smooth_mteval * total);
            } else if (o.smooth == bleu_smooth::floor) {
                r.precisions[n - 1] = 100.0 * value / total;
            }
        } else {
            r.precisions[n - 1] = 100.0 * correct / total;
        }
    }
    double log_sum = 0;  // sacreBLEU's my_log: log(0) is taken as -9999999999
    for (int n = 0; n < eff_order; ++n) log_sum += r.precisions[n] == 0.0 ? -9999999999.0 : std::log(r.precisions[n]);
    r.score = r.bp * std::exp(log_sum / eff_order);
    return r;
}

/// Accumulates BLEU statistics segment by segment (for evaluation loops); `score()` any time.
class bleu_accumulator {
public:
    explicit bleu_accumulator(bleu_options o = {}) : opt_(o), stats_(o.max_ngram_order) {
        DEPTHLAB_CHECK(o.max_ngram_order >= 1, usage_error, "bleu: max_ngram_order must be >= 1, got ", o.max_ngram_order);
    }

    /// Statistics of one segment against its references (see `empty_reference` for "").
    template <reference_range Refs>
    [[nodiscard]] bleu_stats segment_stats(std::string_view hyp, const Refs& refs) const {
        const std::size_t N = static_cast<std::size_t>(opt_.max_ngram_order);
        std::vector<std::unordered_map<std::string, std::int64_t>> ref_max(N);
        std::vector<std::int64_t> ref_lens;
        for (const auto& ref_any : refs) {
            const std::string_view ref(ref_any);
            if (!detail::is_reference(ref, opt_.empty_refs)) continue;
            std::vector<std::unordered_map<std::string, std::int64_t>> counts(N);
            ref_lens.push_back(count_ngrams(preprocess(ref), counts));
            for (std::size_t n = 0; n < N; ++n)
                for (auto& [g, c] : counts[n]) {
                    auto& m = ref_max[n][g];
                    m = std::max(m, c);
                }
        }
        DEPTHLAB_CHECK(!ref_lens.empty(), usage_error, "bleu: a segment has no reference",
                       opt_.empty_refs == empty_reference::absent ? " (empty ones are absent)" : "");
        std::vector<std::unordered_map<std::string, std::int64_t>> hyp_counts(N);
        const std::int64_t hyp_len = count_ngrams(preprocess(hyp), hyp_counts);
        std::int64_t closest_diff = -1, closest_len = -1;
        for (auto len : ref_lens) {
            const std::int64_t diff = len > hyp_len ? len - hyp_len : hyp_len - len;
            if (closest_diff == -1 || diff < closest_diff) {
                closest_diff = diff;
                closest_len = len;
            } else if (diff == closest_diff && len < closest_len) {
                closest_len = len;
            }
        }
        bleu_stats st(opt_.max_ngram_order);
        st.sys_len = hyp_len;
        st.ref_len = closest_len;
        for (std::size_t n = 0; n < N; ++n)
            for (auto& [g, c] : hyp_counts[n]) {
                st.total[n] += c;
                if (auto it = ref_max[n].find(g); it != ref_max[n].end()) st.correct[n] += std::min(c, it->second);
            }
        return st;
    }

    /// Add one segment; `refs` is any range of string-like references.
    template <reference_range Refs>
    void add(std::string_view hyp, const Refs& refs) {
        stats_ += segment_stats(hyp, refs);
        nrefs_.insert(detail::count_references(refs, opt_.empty_refs));
    }
    void add(std::string_view hyp, std::string_view ref) { add(hyp, std::array<std::string_view, 1>{ref}); }

    [[nodiscard]] bleu_score score() const {
        bleu_score r = compute_bleu(stats_, opt_);
        r.nrefs = nrefs_.size() == 1 ? static_cast<int>(*nrefs_.begin()) : (nrefs_.empty() ? 1 : -1);
        return r;
    }
    [[nodiscard]] const bleu_stats& stats() const { return stats_; }
    [[nodiscard]] const bleu_options& options() const { return opt_; }

private:
    [[nodiscard]] std::string preprocess(std::string_view s) const {
        return opt_.tokenize ? tokenize_13a(s) : std::string(rstrip_whitespace(s));
    }
    // n-grams of a tokenised line, keyed by the tokens joined with ' ' (tokens hold no
    // whitespace, so the key is unambiguous); returns the token count.
    static std::int64_t count_ngrams(const std::string& line, std::vector<std::unordered_map<std::string, std::int64_t>>& out) {
        const auto tokens = split_whitespace(line);
        const std::size_t T = tokens.size();
        for (std::size_t n = 1; n <= out.size(); ++n)
            for (std::size_t i = 0; i + n <= T; ++i) {
                std::string key(tokens[i]);
                for (std::size_t k = 1; k < n; ++k) {
                    key += ' ';
                    key += tokens[i + k];
                }
                ++out[n - 1][key];
            }
        return static_cast<std::int64_t>(T);
    }

    bleu_options opt_;
    bleu_stats stats_;
    std::set<std::size_t> nrefs_;
};

/// Corpus BLEU. `ref_streams[k][i]` is the k-th reference of segment i (sacreBLEU's
/// layout: one list per reference set); every stream must have one entry per hypothesis
/// (where a segment has fewer references, "" with `empty_reference::absent`).
[[nodiscard]] inline bleu_score corpus_bleu(std::span<const std::string> hyps,
                                            std::span<const std::vector<std::string>> ref_streams,
                                            const bleu_options& o = {}) {
    DEPTHLAB_CHECK(!ref_streams.empty(), usage_error, "corpus_bleu: no reference stream");
    for (std::size_t k = 0; k < ref_streams.size(); ++k)
        DEPTHLAB_CHECK(ref_streams[k].size() == hyps.size(), usage_error, "corpus_bleu: ", hyps.size(),
                       " hypotheses but reference stream ", k, " has ", ref_streams[k].size(), " segments");
    bleu_accumulator acc(o);
    std::vector<std::string_view> refs(ref_streams.size());
    for (std::size_t i = 0; i < hyps.size(); ++i) {
        for (std::size_t k = 0; k < ref_streams.size(); ++k) refs[k] = ref_streams[k][i];
        acc.add(hyps[i], refs);
    }
    return acc.score();
}

/// Corpus BLEU against a single reference per segment.
[[nodiscard]] inline bleu_score corpus_bleu(std::span<const std::string> hyps, std::span<const std::string> refs,
                                            const bleu_options& o = {}) {
    const std::vector<std::vector<std::string>> streams{std::vector<std::string>(refs.begin(), refs.end())};
    return corpus_bleu(hyps, std::span<const std::vector<std::string>>(streams), o);
}

/// Sentence BLEU of one hypothesis against its references (`sacrebleu.sentence_bleu`).
[[nodiscard]] inline bleu_score sentence_bleu(std::string_view hyp, std::span<const std::string> refs,
                                              const bleu_options& o = sentence_bleu_options()) {
    bleu_accumulator acc(o);
    acc.add(hyp, refs);
    return acc.score();
}

}  // namespace depthlab::metrics
