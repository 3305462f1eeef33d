#pragma once
// The ALBERT pretraining data (data/albert_data.hpp), part 1: special ids, token categories,
// the data config, the id corpus (read_id_corpus) and the sentencepiece vocabulary with its
// word starts (whole-word masking).
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
    /// false (ALBERT): a document's chunk boundaries fall after the same sentences every epoch
    /// (unless short_seq_prob redraws its target), so SOP sees the same sentence pairs again
    /// and again. true (a depthlab deviation, albert_act --chunk-jitter): each epoch the
    /// document's first chunk gets its own target, uniform in [1, target], which moves every
    /// later boundary; no text is dropped, only regrouped.
    bool chunk_jitter = false;
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

/// A fingerprint of a vocabulary (its pieces in id order; FNV-1a, 64 bits, as 16 hex digits):
/// equal for the same tokenizer read from spm.model or spm.vocab, different for another one
/// even of the same size. A checkpoint records it so that a program pairing the checkpoint
/// with a tokenizer can refuse the wrong one instead of reading ids into the wrong embeddings.
[[nodiscard]] inline std::string vocabulary_fingerprint(std::span<const std::string> pieces) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    const auto mix = [&](unsigned char c) { h = (h ^ c) * 0x100000001b3ull; };
    for (const std::string& p : pieces) {
        for (const char c : p) mix(static_cast<unsigned char>(c));
        mix(0);  // (a separator no piece holds)
    }
    std::string hex(16, '0');
    for (int i = 15; i >= 0; --i, h >>= 4) hex[static_cast<std::size_t>(i)] = "0123456789abcdef"[h & 15];
    return hex;
}

}  // namespace depthlab::data
