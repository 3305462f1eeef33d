#pragma once
// ALBERT pretraining batches (masked LM + sentence-order prediction) from tokenised
// documents. Works on token ids only: no tokenizer is needed (scripts/train-tokenizer writes
// the corpus as id files, read_id_corpus reads them; depthlab/data/tokenizer.hpp is the
// opt-in sentencepiece wrapper).
//
// Semantics follow google-research/albert create_pretraining_data.py (the code behind
// Simoulin & Crabbé 2021), with the static "dupe_factor" copies replaced by fresh draws
// every epoch (dynamic masking):
//  * Chunking (per document, per epoch): target = max_len - 3, or with probability
//    short_seq_prob (0.1) a uniform length in [2, max_len - 3] — drawn once per document, as
//    in ALBERT. Sentences are appended to a chunk until its length reaches the target or the
//    document ends.
//  * Segments: A = the first a_end sentences of the chunk (a_end uniform in [1, count-1]),
//    B = the rest. With probability swap_prob (0.5) A and B are swapped (SOP label 1).
//    A one-sentence chunk cannot be split into sentences; single_sentence_policy says what
//    happens (ALBERT: B = sentences from a random other document, label 1).
//    The pair is truncated to max_len - 3 tokens by repeatedly removing a token, from the
//    front or the back with probability 1/2, of the longer segment (ALBERT's
//    truncate_seq_pair). Sequence: [CLS] A [SEP] B [SEP], segments 0 up to the first [SEP]
//    included, 1 after.
//  * Masking: candidates are words (a token with word_start[id] == 0 joins the previous
//    word: whole-word masking, ALBERT's default) or single tokens when word_start is
//    empty; [CLS], [SEP] and [PAD] are never candidates, and a word never spans a [SEP].
//    num_to_predict = min(max_predictions, max(1, round_half_even(len * mask_prob))) with len
//    counting [CLS] and both [SEP]. Candidate start positions are visited in random order;
//    at each one n is drawn with p(n) ∝ 1/n (n ≤ max_ngram = 3; reversed when
//    favor_shorter_ngram is false) and clipped to the words left in the sequence (ALBERT's
//    slicing); if the n words would exceed num_to_predict, n-1, n-2, ... are tried; the
//    n-gram is skipped when it overlaps one already chosen. N-grams may span the middle
//    [SEP] (they are runs of consecutive candidates, as in ALBERT). Each chosen token:
//    [MASK] with p 0.8, else kept with p 0.1/0.2, else a random id in [random_min, vocab)
//    (ALBERT draws from the whole vocabulary, specials included; depthlab never inserts a
//    special token).
//    Note: with max_len 128 and max_predictions 20 the cap binds above mask_prob ≈ 0.16;
//    the thesis' 20% needs max_predictions >= 26 (round(128 * 0.2)).
//  * Order: every epoch, the documents are shuffled, chunked, and (shuffle_instances) the
//    chunks are shuffled globally (ALBERT shuffles all instances). Instance i of epoch e is
//    drawn from its own Philox stream (seed, e, i): any instance can be rebuilt on its own,
//    and the sampler's whole state is {seed, epoch, position} (sampler_state).
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
// cpu.hpp first: autodiff/ops.hpp (via models.hpp) uses row_broadcast from it without
// including it.
#include "depthlab/backend/cpu/cpu.hpp"
#include "depthlab/nn/models.hpp"  // nn::token_batch

namespace depthlab::data {

/// Ids of the special tokens. The defaults are the ids scripts/train-tokenizer reserves.
struct special_ids {
    std::int64_t pad = 0, unk = 1, cls = 2, sep = 3, mask = 4;
};

/// What each position of a batch is, for the per-category halting analyses.
enum class token_category : std::uint8_t {
    pad = 0,
    unmasked = 1,          // a real token that was not chosen for prediction
    mask_to_mask = 2,      // chosen, replaced by [MASK]
    mask_to_random = 3,    // chosen, replaced by a random token (which may equal the original)
    mask_to_original = 4,  // chosen, kept
    cls = 5,
    sep = 6,
};
inline constexpr int token_category_count = 7;
[[nodiscard]] inline const char* to_string(token_category c) {
    switch (c) {
        case token_category::pad: return "pad";
        case token_category::unmasked: return "unmasked";
        case token_category::mask_to_mask: return "mask_to_mask";
        case token_category::mask_to_random: return "mask_to_random";
        case token_category::mask_to_original: return "mask_to_original";
        case token_category::cls: return "cls";
        case token_category::sep: return "sep";
    }
    return "?";
}

/// What to do with a chunk of a single sentence (a document's last sentence, a short
/// document, or a sentence longer than the target length).
enum class single_sentence_policy {
    random_document,  // ALBERT's code: B = sentences of a random other document, label 1
    split,            // split the sentence at a uniform token boundary, then swap as usual
    skip,             // drop the chunk
};

struct albert_data_config {
    index_t max_len = 128;
    double mask_prob = 0.15;       // the thesis uses 0.20 (raise max_predictions with it)
    index_t max_predictions = 20;
    int max_ngram = 3;
    bool favor_shorter_ngram = true;  // p(n) ∝ 1/n; false: the reverse order (ALBERT flag)
    double mask_token_prob = 0.8;     // chosen token -> [MASK]
    double random_token_prob = 0.1;   // chosen token -> random id; the rest are kept
    double short_seq_prob = 0.1;
    double swap_prob = 0.5;
    single_sentence_policy single_sentence = single_sentence_policy::random_document;
    special_ids specials{};
    std::int64_t vocab = 0;       // required: every id of the corpus is < vocab
    std::int64_t random_min = 5;  // random replacements are drawn from [random_min, vocab)
    /// Per id: 1 if the token starts a word (whole-word masking); empty: every token is a
    /// word. See word_start_table().
    std::vector<std::uint8_t> word_start;
    bool pad_to_max_len = false;    // false: batches are padded to their longest sequence
    bool shuffle_instances = true;  // false: chunks come document by document (documents still shuffled)

    void validate() const {
        DEPTHLAB_CHECK(max_len >= 5, usage_error, "albert_data_config: max_len ", max_len, " < 5");
        DEPTHLAB_CHECK(mask_prob >= 0 && mask_prob <= 1, usage_error, "albert_data_config: mask_prob ", mask_prob, " not in [0, 1]");
        DEPTHLAB_CHECK(max_predictions >= 0, usage_error, "albert_data_config: max_predictions ", max_predictions, " < 0");
        DEPTHLAB_CHECK(max_ngram >= 1 && max_ngram <= 16, usage_error, "albert_data_config: max_ngram ", max_ngram, " not in [1, 16]");
        DEPTHLAB_CHECK(mask_token_prob >= 0 && random_token_prob >= 0 && mask_token_prob + random_token_prob <= 1 + 1e-12,
                       usage_error, "albert_data_config: mask_token_prob ", mask_token_prob, " + random_token_prob ",
                       random_token_prob, " must be probabilities summing to at most 1");
        DEPTHLAB_CHECK(short_seq_prob >= 0 && short_seq_prob <= 1, usage_error, "albert_data_config: short_seq_prob ", short_seq_prob, " not in [0, 1]");
        DEPTHLAB_CHECK(swap_prob >= 0 && swap_prob <= 1, usage_error, "albert_data_config: swap_prob ", swap_prob, " not in [0, 1]");
        DEPTHLAB_CHECK(vocab > 0, usage_error, "albert_data_config: vocab must be set (got ", vocab, ")");
        DEPTHLAB_CHECK(random_token_prob == 0 || (random_min >= 0 && random_min < vocab), usage_error,
                       "albert_data_config: random replacements need 0 <= random_min (", random_min, ") < vocab (", vocab, ")");
        DEPTHLAB_CHECK(word_start.empty() || static_cast<std::int64_t>(word_start.size()) >= vocab, usage_error,
                       "albert_data_config: word_start has ", word_start.size(), " entries for a vocabulary of ", vocab);
    }
};

// ------------------------------------------------------------------------------ corpus

/// Tokenised documents, stored flat: documents -> sentences -> int32 ids. Empty sentences
/// and empty documents are dropped (as ALBERT does).
class corpus {
public:
    corpus() = default;
    template <class Int>
    explicit corpus(const std::vector<std::vector<std::vector<Int>>>& documents) {
        for (const auto& d : documents) add_document(d);
    }

    template <class Int>
    void add_document(const std::vector<std::vector<Int>>& sentences) {
        end_document();
        for (const auto& s : sentences) push_sentence(std::span<const Int>(s));
        end_document();
    }
    /// Streaming: append a sentence to the open document (it is closed by end_document()).
    template <class Int>
    void push_sentence(std::span<const Int> ids) {
        if (ids.empty()) return;
        for (Int id : ids) {
            DEPTHLAB_CHECK(id >= 0 && static_cast<std::int64_t>(id) <= std::numeric_limits<std::int32_t>::max(), index_error,
                           "corpus: token id ", static_cast<std::int64_t>(id), " out of range [0, 2^31)");
            ids_.push_back(static_cast<std::int32_t>(id));
            max_id_ = std::max<std::int64_t>(max_id_, id);
        }
        sentence_start_.push_back(static_cast<std::int64_t>(ids_.size()));
    }
    void end_document() {
        const auto s = static_cast<std::int64_t>(sentence_start_.size()) - 1;
        if (s > document_start_.back()) document_start_.push_back(s);
    }

    [[nodiscard]] index_t documents() const { return static_cast<index_t>(document_start_.size()) - 1; }
    /// Sentences in closed documents.
    [[nodiscard]] index_t sentences() const { return document_start_.back(); }
    [[nodiscard]] index_t tokens() const { return sentence_start_[static_cast<std::size_t>(sentences())]; }
    [[nodiscard]] index_t document_sentences(index_t d) const {
        check_doc(d);
        return document_start_[d + 1] - document_start_[d];
    }
    [[nodiscard]] std::span<const std::int32_t> sentence(index_t d, index_t s) const {
        check_doc(d);
        DEPTHLAB_CHECK(s >= 0 && s < document_start_[d + 1] - document_start_[d], index_error, "corpus: sentence ", s,
                       " of document ", d, " (which has ", document_start_[d + 1] - document_start_[d], ")");
        const index_t g = document_start_[d] + s;
        return {ids_.data() + sentence_start_[g], static_cast<std::size_t>(sentence_start_[g + 1] - sentence_start_[g])};
    }
    [[nodiscard]] index_t sentence_length(index_t d, index_t s) const { return static_cast<index_t>(sentence(d, s).size()); }
    /// Largest id seen (-1 when empty).
    [[nodiscard]] std::int64_t max_id() const { return max_id_; }

private:
    void check_doc(index_t d) const {
        DEPTHLAB_CHECK(d >= 0 && d < documents(), index_error, "corpus: document ", d, " of ", documents());
    }
    std::vector<std::int32_t> ids_;
    std::vector<std::int64_t> sentence_start_{0};  // token offsets, one more than sentences
    std::vector<std::int64_t> document_start_{0};  // sentence offsets, one more than documents
    std::int64_t max_id_ = -1;
};

/// Reads an id file: one sentence per line as whitespace-separated non-negative integers, a
/// blank line between documents (spm_encode --output_format=id on the text files does it;
/// scripts/train-tokenizer writes .data/english/{train,dev}.ids).
[[nodiscard]] inline corpus read_id_corpus(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    DEPTHLAB_CHECK(in.good(), io_error, "read_id_corpus: cannot open '", path, "'");
    corpus c;
    std::string line;
    std::vector<std::int32_t> ids;
    std::int64_t line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        ids.clear();
        const char* p = line.data();
        const char* end = p + line.size();
        while (true) {
            while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
            if (p == end) break;
            std::int32_t v = 0;
            const auto [next, ec] = std::from_chars(p, end, v);
            DEPTHLAB_CHECK(ec == std::errc{} && v >= 0 && (next == end || *next == ' ' || *next == '\t' || *next == '\r'), io_error,
                           "read_id_corpus: '", path, "' line ", line_no, ": expected non-negative integer ids, got '",
                           std::string_view(p, static_cast<std::size_t>(std::min<std::ptrdiff_t>(end - p, 20))), "'");
            ids.push_back(v);
            p = next;
        }
        if (ids.empty()) c.end_document();
        else c.push_sentence(std::span<const std::int32_t>(ids));
    }
    DEPTHLAB_CHECK(!in.bad(), io_error, "read_id_corpus: read error in '", path, "'");
    c.end_document();
    return c;
}

/// ALBERT's rule for a sentencepiece piece starting a word (_is_start_piece_sp): it starts
/// with "▁" or "<", is a single punctuation character, or contains a character that is
/// neither an ASCII letter nor ASCII punctuation (a digit, a non-ASCII character, ...).
[[nodiscard]] inline bool is_word_start_piece(std::string_view piece) {
    constexpr std::string_view punct = "!\"#$%&'()*+,-./:;?@[\\]^_`{|}~";
    if (piece.starts_with("\xE2\x96\x81") || piece.starts_with("<")) return true;
    if (piece.size() == 1 && punct.find(piece[0]) != std::string_view::npos) return true;
    for (const char ch : piece) {
        const auto u = static_cast<unsigned char>(ch);
        const bool letter = (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
        if (!letter && punct.find(ch) == std::string_view::npos) return true;
    }
    return false;
}
/// Per id, whether the piece starts a word; the special tokens count as word starts.
[[nodiscard]] inline std::vector<std::uint8_t> word_start_table(std::span<const std::string> pieces, const special_ids& sp = {}) {
    std::vector<std::uint8_t> t(pieces.size());
    for (std::size_t i = 0; i < pieces.size(); ++i) t[i] = is_word_start_piece(pieces[i]) ? 1 : 0;
    for (const std::int64_t id : {sp.pad, sp.unk, sp.cls, sp.sep, sp.mask})
        if (id >= 0 && static_cast<std::size_t>(id) < t.size()) t[static_cast<std::size_t>(id)] = 1;
    return t;
}
/// The pieces of a sentencepiece .vocab file (`piece<TAB>score` per line, line i = id i).
[[nodiscard]] inline std::vector<std::string> read_spm_vocab(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    DEPTHLAB_CHECK(in.good(), io_error, "read_spm_vocab: cannot open '", path, "'");
    std::vector<std::string> pieces;
    std::string line;
    while (std::getline(in, line)) {
        const auto tab = line.find('\t');
        DEPTHLAB_CHECK(tab != std::string::npos && tab > 0, io_error, "read_spm_vocab: '", path, "' line ", pieces.size() + 1,
                       " is not 'piece<TAB>score'");
        pieces.push_back(line.substr(0, tab));
    }
    DEPTHLAB_CHECK(!pieces.empty(), io_error, "read_spm_vocab: '", path, "' is empty");
    return pieces;
}

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
        const index_t n = data.document_sentences(d);
        index_t first = 0, length = 0;
        for (index_t i = 0; i < n; ++i) {
            length += data.sentence_length(d, i);
            if (i == n - 1 || length >= target) {
                const index_t count = i - first + 1;
                const bool drop = count == 1 && (cfg.single_sentence == single_sentence_policy::skip ||
                                                 (cfg.single_sentence == single_sentence_policy::split && length < 2));
                if (!drop)
                    out.push_back({static_cast<std::int32_t>(d), static_cast<std::int32_t>(first), static_cast<std::int32_t>(count),
                                   static_cast<std::int32_t>(target)});
                first = i + 1;
                length = 0;
            }
        }
    }
    return out;
}

// ------------------------------------------------------------------------------ batches

/// A batch of ALBERT pretraining examples.
struct albert_batch {
    nn::token_batch tokens;                   // ids (masked), segments, lengths; padding id 0
    std::vector<std::int64_t> mlm_positions;  // flat b * T + t, ascending
    std::vector<std::int64_t> mlm_labels;     // original ids at mlm_positions
    std::vector<std::int64_t> sop_labels;     // (B): 1 = swapped / not in order
    std::vector<std::uint8_t> token_category; // (B * T) values of data::token_category
    [[nodiscard]] index_t size() const { return tokens.batch; }
    [[nodiscard]] index_t predictions() const { return static_cast<index_t>(mlm_positions.size()); }
    [[nodiscard]] data::token_category category(index_t b, index_t t) const {
        return static_cast<data::token_category>(token_category[static_cast<std::size_t>(b * tokens.length + t)]);
    }
};

/// Pads the examples into a batch of length `length` (0: the longest example). Padding:
/// id `pad`, segment 0, category pad.
[[nodiscard]] inline albert_batch collate(std::span<const albert_example> examples, index_t length = 0, std::int64_t pad = 0) {
    albert_batch r;
    const auto B = static_cast<index_t>(examples.size());
    index_t T = 0;
    for (const auto& e : examples) T = std::max(T, e.length());
    DEPTHLAB_CHECK(length == 0 || length >= T, shape_error, "collate: length ", length, " < longest example ", T);
    if (length > 0) T = length;
    r.tokens.batch = B;
    r.tokens.length = T;
    r.tokens.ids.assign(static_cast<std::size_t>(B * T), pad);
    r.tokens.segments.assign(static_cast<std::size_t>(B * T), 0);
    r.tokens.lengths.resize(static_cast<std::size_t>(B));
    r.token_category.assign(static_cast<std::size_t>(B * T), static_cast<std::uint8_t>(token_category::pad));
    r.sop_labels.resize(static_cast<std::size_t>(B));
    for (index_t b = 0; b < B; ++b) {
        const auto& e = examples[static_cast<std::size_t>(b)];
        const auto off = static_cast<std::ptrdiff_t>(b * T);
        std::copy(e.ids.begin(), e.ids.end(), r.tokens.ids.begin() + off);
        std::copy(e.segments.begin(), e.segments.end(), r.tokens.segments.begin() + off);
        std::copy(e.categories.begin(), e.categories.end(), r.token_category.begin() + off);
        r.tokens.lengths[static_cast<std::size_t>(b)] = e.length();
        r.sop_labels[static_cast<std::size_t>(b)] = e.sop_label;
        for (std::size_t k = 0; k < e.mlm_positions.size(); ++k) {
            r.mlm_positions.push_back(b * T + e.mlm_positions[k]);
            r.mlm_labels.push_back(e.mlm_labels[k]);
        }
    }
    return r;
}

/// A pretraining data folder (scripts/fetch-data english, scripts/train-tokenizer):
/// train.ids, dev.ids (read_id_corpus) and spm.vocab, whose pieces give the vocabulary size
/// and the word starts for whole-word masking. io_error names a missing file and the scripts
/// that make it.
struct albert_corpus {
    albert_data_config config;  // vocab and word_start filled in, the rest as passed
    corpus train, dev;
};
[[nodiscard]] inline albert_corpus load_albert_corpus(const std::string& dir, albert_data_config config) {
    for (const char* f : {"train.ids", "dev.ids", "spm.vocab"}) {
        const std::string path = dir + "/" + f;
        DEPTHLAB_CHECK(std::ifstream(path).good(), io_error, "load_albert_corpus: missing ", path,
                       " — run scripts/fetch-data english && scripts/train-tokenizer");
    }
    const auto pieces = read_spm_vocab(dir + "/spm.vocab");
    config.vocab = static_cast<std::int64_t>(pieces.size());
    config.word_start = word_start_table(pieces);
    return {std::move(config), read_id_corpus(dir + "/train.ids"), read_id_corpus(dir + "/dev.ids")};
}

/// Everything needed to resume a sampler exactly.
struct sampler_state {
    std::uint64_t seed = 0, epoch = 0, position = 0;
    bool operator==(const sampler_state&) const = default;
};
/// The fields of sampler_state by name (io::save_config / load_config, train::checkpointer::track).
template <class S, class F>
    requires std::same_as<std::remove_const_t<S>, sampler_state>
void config_fields(S& s, F&& f) {
    f("seed", s.seed);
    f("epoch", s.epoch);
    f("position", s.position);
}

/// Endless source of ALBERT batches over a corpus: every epoch shuffles the documents,
/// chunks them, shuffles the chunks, and builds each example from its own random stream.
/// Deterministic in (seed, epoch, position): state()/set_state() checkpoint and resume it.
class albert_sampler {
public:
    albert_sampler(corpus data, albert_data_config cfg, std::uint64_t seed)
        : data_(std::move(data)), cfg_(std::move(cfg)), seed_(seed) {
        cfg_.validate();
        DEPTHLAB_CHECK(data_.documents() > 0, usage_error, "albert_sampler: the corpus has no documents");
        DEPTHLAB_CHECK(data_.max_id() < cfg_.vocab, index_error, "albert_sampler: corpus id ", data_.max_id(), " >= vocab ", cfg_.vocab);
        start_epoch(0);
    }

    /// The next `batch_size` examples (continuing into the next epoch when this one ends).
    [[nodiscard]] albert_batch next(index_t batch_size, masking_stats* stats = nullptr) {
        DEPTHLAB_CHECK(batch_size > 0, usage_error, "albert_sampler::next: batch size ", batch_size);
        std::vector<albert_example> ex;
        ex.reserve(static_cast<std::size_t>(batch_size));
        while (static_cast<index_t>(ex.size()) < batch_size) {
            if (position_ >= chunks_.size()) start_epoch(epoch_ + 1);
            ex.push_back(example(static_cast<index_t>(position_++), stats));
        }
        return collate(ex, cfg_.pad_to_max_len ? cfg_.max_len : 0, cfg_.specials.pad);
    }
    /// Example `i` of the current epoch (pure: does not move the sampler).
    [[nodiscard]] albert_example example(index_t i, masking_stats* stats = nullptr) const {
        DEPTHLAB_CHECK(i >= 0 && i < epoch_size(), index_error, "albert_sampler::example: ", i, " of ", epoch_size());
        Generator g(instance_key_);
        g.set_state(instance_key_, static_cast<std::uint64_t>(i) << 32);
        return make_example(data_, chunks_[static_cast<std::size_t>(i)], cfg_, g, stats);
    }

    [[nodiscard]] index_t epoch_size() const { return static_cast<index_t>(chunks_.size()); }
    [[nodiscard]] index_t remaining() const { return epoch_size() - static_cast<index_t>(position_); }
    [[nodiscard]] std::uint64_t epoch() const { return epoch_; }
    [[nodiscard]] const std::vector<albert_chunk>& chunks() const { return chunks_; }
    [[nodiscard]] sampler_state state() const { return {seed_, epoch_, position_}; }
    void set_state(const sampler_state& s) {
        seed_ = s.seed;
        start_epoch(s.epoch);
        DEPTHLAB_CHECK(s.position <= chunks_.size(), index_error, "albert_sampler::set_state: position ", s.position, " > epoch size ",
                       chunks_.size());
        position_ = s.position;
    }
    [[nodiscard]] const corpus& data() const { return data_; }
    [[nodiscard]] const albert_data_config& config() const { return cfg_; }

private:
    void start_epoch(std::uint64_t e) {
        epoch_ = e;
        position_ = 0;
        const std::uint64_t key = detail::splitmix64(detail::splitmix64(seed_) ^ (e * 2 + 0));
        instance_key_ = detail::splitmix64(detail::splitmix64(seed_) ^ (e * 2 + 1));
        Generator g(key);
        std::vector<index_t> order(static_cast<std::size_t>(data_.documents()));
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<index_t>(i);
        for (std::size_t i = order.size(); i-- > 1;) std::swap(order[i], order[g.below(i + 1)]);
        chunks_ = make_chunks(data_, order, cfg_, g);
        DEPTHLAB_CHECK(!chunks_.empty(), usage_error, "albert_sampler: no example can be made from the corpus (all chunks skipped)");
        if (cfg_.shuffle_instances)
            for (std::size_t i = chunks_.size(); i-- > 1;) std::swap(chunks_[i], chunks_[g.below(i + 1)]);
    }

    corpus data_;
    albert_data_config cfg_;
    std::uint64_t seed_, epoch_ = 0, position_ = 0, instance_key_ = 0;
    std::vector<albert_chunk> chunks_;
};

}  // namespace depthlab::data
