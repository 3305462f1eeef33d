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
//    document ends. With chunk_jitter (not ALBERT's; off by default) the first chunk of each
//    document closes at its own uniform target in [1, target] every epoch, so the later
//    boundaries, and the sentence pairs SOP sees, change from epoch to epoch.
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
//
// Parts: data/albert_corpus.hpp (ids, categories, config, corpus, vocabulary),
// data/albert_examples.hpp (examples, masking, chunks); here: batches, the data folder and the sampler.
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

#include "depthlab/autodiff/profiler.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/backend/cpu/cpu.hpp"
#include "depthlab/data/token_batch.hpp"

#include "depthlab/data/albert_examples.hpp"

namespace depthlab::data {

// ------------------------------------------------------------------------------ batches

/// A batch of ALBERT pretraining examples.
struct albert_batch {
    token_batch tokens;                   // ids (masked), segments, lengths; padding id 0
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
        albert_batch b = collate(ex, cfg_.pad_to_max_len ? cfg_.max_len : 0, cfg_.specials.pad);
        profile_mark("data: albert_sampler::next");
        return b;
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
