#pragma once
// The ALBERT pretraining data (data/albert_data.hpp), part 2: one example from a chunk of a
// document (segments A and B, sentence order), n-gram whole-word masking, and chunking.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <type_traits>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/backend/cpu/cpu.hpp"
#include "depthlab/data/token_batch.hpp"

#include "depthlab/data/albert_corpus.hpp"

namespace depthlab::data {

// ------------------------------------------------------------------------------ examples

/// One sequence [CLS] A [SEP] B [SEP] with its masking.
struct albert_example {
    std::vector<std::int64_t> ids;       // after masking
    std::vector<std::int64_t> segments;  // 0 for [CLS] A [SEP], 1 for B [SEP]
    std::vector<std::uint8_t> categories;
    std::vector<std::int64_t> mlm_positions;  // in-sequence positions, ascending
    std::vector<std::int64_t> mlm_labels;     // original ids at those positions
    std::int64_t sop_label = 0;               // 1: swapped (or B from another document)
    bool random_next = false;                 // B came from another document
    index_t a_length = 0, b_length = 0;       // tokens in A and B (after truncation)
    [[nodiscard]] index_t length() const { return static_cast<index_t>(ids.size()); }
};

/// Counters for tests and logs (accumulated when a pointer is passed).
struct masking_stats {
    std::array<std::int64_t, 17> ngram_drawn{};     // n drawn from p(n), before any fallback
    std::array<std::int64_t, 17> ngram_accepted{};  // n (in words) of the n-grams masked
    std::int64_t sequences = 0, tokens = 0, predictions = 0;
    std::int64_t to_mask = 0, to_random = 0, kept = 0;
    std::int64_t swapped = 0, random_next = 0;
};

/// A chunk of consecutive sentences of one document: the material of one example.
struct albert_chunk {
    std::int32_t doc = 0, first = 0, count = 0, target = 0;
};

namespace detail {
inline std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
/// Uniform integer in [lo, hi] (Python's randint).
inline std::int64_t randint(Generator& g, std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(g.below(static_cast<std::uint64_t>(hi - lo + 1)));
}
}  // namespace detail

/// Masks `ex.ids` in place (ALBERT's create_masked_lm_predictions, see the file comment)
/// and fills mlm_positions, mlm_labels and categories. Expects ids and segments set.
inline void mask_example(albert_example& ex, const albert_data_config& cfg, Generator& gen, masking_stats* stats = nullptr) {
    const special_ids& sp = cfg.specials;
    const auto L = static_cast<std::size_t>(ex.length());
    ex.categories.assign(L, static_cast<std::uint8_t>(token_category::unmasked));
    ex.mlm_positions.clear();
    ex.mlm_labels.clear();
    if (L > 0 && ex.ids[0] == sp.cls) ex.categories[0] = static_cast<std::uint8_t>(token_category::cls);
    // Candidate words: groups of positions (flat positions + offsets).
    std::vector<std::int32_t> pos;
    std::vector<std::int32_t> word{0};
    pos.reserve(L);
    bool after_special = true;
    for (std::size_t i = 0; i < L; ++i) {
        const std::int64_t id = ex.ids[i];
        if (id == sp.cls || id == sp.sep || id == sp.pad) {
            if (id == sp.sep) ex.categories[i] = static_cast<std::uint8_t>(token_category::sep);
            after_special = true;
            continue;
        }
        const bool starts = after_special || static_cast<std::size_t>(id) >= cfg.word_start.size() ||
                            cfg.word_start[static_cast<std::size_t>(id)] != 0;  // no table (or an id past it): every token is a word
        if (starts && !pos.empty()) word.push_back(static_cast<std::int32_t>(pos.size()));
        pos.push_back(static_cast<std::int32_t>(i));
        after_special = false;
    }
    if (!pos.empty()) word.push_back(static_cast<std::int32_t>(pos.size()));
    const auto words = static_cast<std::int64_t>(word.size()) - 1;
    if (stats) {
        ++stats->sequences;
        stats->tokens += static_cast<std::int64_t>(L);
    }
    if (cfg.mask_prob == 0 || words <= 0) return;

    const auto num_to_predict = std::min<std::int64_t>(
        cfg.max_predictions, std::max<std::int64_t>(1, static_cast<std::int64_t>(std::nearbyint(static_cast<double>(L) * cfg.mask_prob))));
    // p(n) ∝ 1/n (or reversed), cumulative.
    const int N = cfg.max_ngram;
    std::array<double, 17> cum{};
    double total = 0;
    for (int n = 1; n <= N; ++n) total += 1.0 / (cfg.favor_shorter_ngram ? n : N + 1 - n);
    double acc = 0;
    for (int n = 1; n <= N; ++n) cum[n] = (acc += 1.0 / (cfg.favor_shorter_ngram ? n : N + 1 - n) / total);

    std::vector<std::int32_t> order(static_cast<std::size_t>(words));
    for (std::int64_t i = 0; i < words; ++i) order[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
    for (std::int64_t i = words - 1; i > 0; --i)  // Fisher-Yates
        std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(gen.below(static_cast<std::uint64_t>(i + 1)))]);

    std::vector<std::uint8_t> covered(L, 0);
    const double keep_given_not_mask =
        cfg.mask_token_prob >= 1 ? 0.0 : std::max(0.0, 1 - cfg.mask_token_prob - cfg.random_token_prob) / (1 - cfg.mask_token_prob);
    std::int64_t masked = 0;
    for (const std::int32_t start : order) {
        if (masked >= num_to_predict) break;
        const double u = gen.uniform();
        int n = 1;
        while (n < N && u >= cum[n]) ++n;
        if (stats) ++stats->ngram_drawn[static_cast<std::size_t>(n)];
        n = static_cast<int>(std::min<std::int64_t>(n, words - start));  // ALBERT's slice at the end
        auto span_tokens = [&](int m) { return word[static_cast<std::size_t>(start + m)] - word[static_cast<std::size_t>(start)]; };
        while (n > 1 && masked + span_tokens(n) > num_to_predict) --n;
        if (masked + span_tokens(n) > num_to_predict) continue;
        const std::int32_t b = word[static_cast<std::size_t>(start)], e = word[static_cast<std::size_t>(start + n)];
        bool overlap = false;
        for (std::int32_t k = b; k < e && !overlap; ++k) overlap = covered[static_cast<std::size_t>(pos[static_cast<std::size_t>(k)])] != 0;
        if (overlap) continue;
        if (stats) ++stats->ngram_accepted[static_cast<std::size_t>(n)];
        for (std::int32_t k = b; k < e; ++k) {
            const auto i = static_cast<std::size_t>(pos[static_cast<std::size_t>(k)]);
            covered[i] = 1;
            ex.mlm_positions.push_back(static_cast<std::int64_t>(i));
            token_category c;
            if (gen.uniform() < cfg.mask_token_prob) {
                c = token_category::mask_to_mask;
            } else if (gen.uniform() < keep_given_not_mask) {
                c = token_category::mask_to_original;
            } else {
                c = token_category::mask_to_random;
            }
            ex.categories[i] = static_cast<std::uint8_t>(c);
            ++masked;
        }
    }
    std::sort(ex.mlm_positions.begin(), ex.mlm_positions.end());
    ex.mlm_labels.resize(ex.mlm_positions.size());
    for (std::size_t k = 0; k < ex.mlm_positions.size(); ++k) {
        const auto i = static_cast<std::size_t>(ex.mlm_positions[k]);
        ex.mlm_labels[k] = ex.ids[i];
        switch (static_cast<token_category>(ex.categories[i])) {
            case token_category::mask_to_mask: ex.ids[i] = sp.mask; break;
            case token_category::mask_to_random: ex.ids[i] = cfg.random_min + detail::randint(gen, 0, cfg.vocab - cfg.random_min - 1); break;
            default: break;
        }
    }
    if (stats) {
        stats->predictions += static_cast<std::int64_t>(ex.mlm_positions.size());
        for (const auto p : ex.mlm_positions) {
            const auto c = static_cast<token_category>(ex.categories[static_cast<std::size_t>(p)]);
            stats->to_mask += c == token_category::mask_to_mask;
            stats->to_random += c == token_category::mask_to_random;
            stats->kept += c == token_category::mask_to_original;
        }
    }
}

/// Builds (segments, truncation, SOP) and masks the example of one chunk.
[[nodiscard]] inline albert_example make_example(const corpus& data, const albert_chunk& ch, const albert_data_config& cfg, Generator& gen,
                                                 masking_stats* stats = nullptr) {
    DEPTHLAB_CHECK(ch.count >= 1, usage_error, "make_example: empty chunk");
    const index_t max_tokens = cfg.max_len - 3;
    std::vector<std::int64_t> a, b;
    auto append = [&](std::vector<std::int64_t>& v, index_t d, index_t s) {
        const auto sent = data.sentence(d, s);
        v.insert(v.end(), sent.begin(), sent.end());
    };
    const index_t a_end = ch.count >= 2 ? detail::randint(gen, 1, ch.count - 1) : 1;
    for (index_t j = 0; j < a_end; ++j) append(a, ch.doc, ch.first + j);
    albert_example ex;
    if (ch.count == 1 && cfg.single_sentence == single_sentence_policy::random_document) {
        ex.random_next = true;
        ex.sop_label = 1;
        const index_t target_b = ch.target - static_cast<index_t>(a.size());
        index_t rd = ch.doc;
        for (int tries = 0; tries < 10; ++tries) {
            rd = detail::randint(gen, 0, data.documents() - 1);
            if (rd != ch.doc) break;
        }
        const index_t n = data.document_sentences(rd);
        for (index_t j = detail::randint(gen, 0, n - 1); j < n; ++j) {
            append(b, rd, j);
            if (static_cast<index_t>(b.size()) >= target_b) break;
        }
    } else {
        if (ch.count == 1) {  // split policy: cut the sentence in two
            DEPTHLAB_CHECK(a.size() >= 2, usage_error, "make_example: cannot split a one-token sentence");
            const auto cut = static_cast<std::size_t>(detail::randint(gen, 1, static_cast<std::int64_t>(a.size()) - 1));
            b.assign(a.begin() + static_cast<std::ptrdiff_t>(cut), a.end());
            a.resize(cut);
        } else {
            for (index_t j = a_end; j < ch.count; ++j) append(b, ch.doc, ch.first + j);
        }
        if (gen.uniform() < cfg.swap_prob) {
            std::swap(a, b);
            ex.sop_label = 1;
        }
    }
    // truncate_seq_pair: drop a token of the longer segment, from the front or the back.
    std::size_t a0 = 0, a1 = a.size(), b0 = 0, b1 = b.size();
    while (static_cast<index_t>((a1 - a0) + (b1 - b0)) > max_tokens) {
        const bool trunc_a = (a1 - a0) > (b1 - b0);
        std::size_t& lo = trunc_a ? a0 : b0;
        std::size_t& hi = trunc_a ? a1 : b1;
        if (gen.uniform() < 0.5) ++lo;
        else --hi;
    }
    DEPTHLAB_CHECK(a1 > a0 && b1 > b0, usage_error, "make_example: empty segment (chunk of document ", ch.doc, ")");
    ex.a_length = static_cast<index_t>(a1 - a0);
    ex.b_length = static_cast<index_t>(b1 - b0);
    const auto L = static_cast<std::size_t>(ex.a_length + ex.b_length + 3);
    ex.ids.reserve(L);
    ex.ids.push_back(cfg.specials.cls);
    ex.ids.insert(ex.ids.end(), a.begin() + static_cast<std::ptrdiff_t>(a0), a.begin() + static_cast<std::ptrdiff_t>(a1));
    ex.ids.push_back(cfg.specials.sep);
    ex.ids.insert(ex.ids.end(), b.begin() + static_cast<std::ptrdiff_t>(b0), b.begin() + static_cast<std::ptrdiff_t>(b1));
    ex.ids.push_back(cfg.specials.sep);
    ex.segments.assign(L, 1);
    std::fill(ex.segments.begin(), ex.segments.begin() + ex.a_length + 2, 0);
    if (stats) {
        stats->swapped += ex.sop_label == 1 && !ex.random_next;
        stats->random_next += ex.random_next;
    }
    mask_example(ex, cfg, gen, stats);
    return ex;
}

/// Splits every document (in `doc_order`) into chunks (ALBERT's loop; see the file comment).
/// One-sentence chunks are dropped under the skip policy, and under split when the sentence
/// has a single token.
[[nodiscard]] inline std::vector<albert_chunk> make_chunks(const corpus& data, std::span<const index_t> doc_order,
                                                           const albert_data_config& cfg, Generator& gen) {
    const index_t max_tokens = cfg.max_len - 3;
    std::vector<albert_chunk> out;
    out.reserve(static_cast<std::size_t>(data.tokens() / std::max<index_t>(1, max_tokens / 2) + data.documents()));
    for (const index_t d : doc_order) {
        index_t target = max_tokens;
        if (gen.uniform() < cfg.short_seq_prob) target = detail::randint(gen, 2, max_tokens);
        // chunk_jitter: the first chunk closes at its own target, shifting all later boundaries.
        index_t close_at = cfg.chunk_jitter ? detail::randint(gen, 1, target) : target;
        const index_t n = data.document_sentences(d);
        index_t first = 0, length = 0;
        for (index_t i = 0; i < n; ++i) {
            length += data.sentence_length(d, i);
            if (i == n - 1 || length >= close_at) {
                const index_t count = i - first + 1;
                const bool drop = count == 1 && (cfg.single_sentence == single_sentence_policy::skip ||
                                                 (cfg.single_sentence == single_sentence_policy::split && length < 2));
                if (!drop)
                    out.push_back({static_cast<std::int32_t>(d), static_cast<std::int32_t>(first), static_cast<std::int32_t>(count),
                                   static_cast<std::int32_t>(target)});
                first = i + 1;
                length = 0;
                close_at = target;
            }
        }
    }
    return out;
}

}  // namespace depthlab::data
