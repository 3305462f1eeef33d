#pragma once
// Language-model data: an id corpus (read_id_corpus: sentences, documents) as one token stream
// — each document's sentences in order, each document closed by a separator id, as GPT-2's
// <|endoftext|> — cut into sequences of a fixed length; the last sequence may be shorter.
// Sequences do not overlap: a sequence of n tokens gives n − 1 next-token predictions.
//
//     data::lm_sequences train(data::read_id_corpus("train.ids"), /*length=*/128, /*separator=*/3);
//     data::lm_sampler sampler(train, /*seed=*/1);
//     data::token_batch b = sampler.next(32);          // shuffled sequences, epoch after epoch
//     data::token_batch d = dev.batch(0, 32);          // sequences 0..31 in order (evaluation)
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/data/albert_corpus.hpp"  // corpus, read_id_corpus
#include "depthlab/data/albert_data.hpp"    // sampler_state
#include "depthlab/data/token_batch.hpp"

namespace depthlab::data {

class lm_sequences {
public:
    /// `length` >= 2 tokens per sequence; `separator` closes every document.
    lm_sequences(const corpus& c, index_t length, std::int64_t separator) : length_(length) {
        DEPTHLAB_CHECK(length >= 2, usage_error, "lm_sequences: sequence length ", length, " < 2 (a sequence predicts its tokens after the first)");
        DEPTHLAB_CHECK(separator >= 0, usage_error, "lm_sequences: separator id ", separator, " < 0");
        for (index_t d = 0; d < c.documents(); ++d) {
            for (index_t s = 0; s < c.document_sentences(d); ++s) {
                const auto ids = c.sentence(d, s);
                stream_.insert(stream_.end(), ids.begin(), ids.end());
            }
            stream_.push_back(separator);
        }
        max_id_ = std::max<std::int64_t>(c.max_id(), separator);
        const auto n = static_cast<index_t>(stream_.size());
        count_ = n / length + (n % length >= 2 ? 1 : 0);
        DEPTHLAB_CHECK(count_ > 0, usage_error, "lm_sequences: a corpus of ", n, " tokens (separators included) holds no sequence of >= 2 tokens");
    }
    [[nodiscard]] index_t size() const { return count_; }
    [[nodiscard]] index_t length() const { return length_; }
    [[nodiscard]] index_t tokens() const { return static_cast<index_t>(stream_.size()); }
    /// Largest id in the stream, the separator included.
    [[nodiscard]] std::int64_t max_id() const { return max_id_; }
    /// Tokens of sequence i.
    [[nodiscard]] std::pair<index_t, index_t> range(index_t i) const {
        DEPTHLAB_CHECK(i >= 0 && i < count_, index_error, "lm_sequences: sequence ", i, " of ", count_);
        const index_t begin = i * length_;
        return {begin, std::min(begin + length_, tokens())};
    }
    /// The sequences `which` as a batch, right-padded with id 0 to the longest.
    [[nodiscard]] token_batch gather(const std::vector<index_t>& which) const {
        DEPTHLAB_CHECK(!which.empty(), usage_error, "lm_sequences: an empty batch");
        token_batch b;
        b.batch = static_cast<index_t>(which.size());
        for (index_t i : which) {
            const auto [lo, hi] = range(i);
            b.lengths.push_back(hi - lo);
            b.length = std::max(b.length, hi - lo);
        }
        b.ids.assign(static_cast<std::size_t>(b.batch * b.length), 0);
        b.segments.assign(b.ids.size(), 0);
        for (index_t r = 0; r < b.batch; ++r) {
            const auto [lo, hi] = range(which[static_cast<std::size_t>(r)]);
            std::copy(stream_.begin() + lo, stream_.begin() + hi, b.ids.begin() + r * b.length);
        }
        return b;
    }
    /// Sequences first .. first + count − 1 (clipped to the end), in order.
    [[nodiscard]] token_batch batch(index_t first, index_t count) const {
        std::vector<index_t> which;
        for (index_t i = first; i < std::min(first + count, count_); ++i) which.push_back(i);
        return gather(which);
    }

private:
    std::vector<std::int64_t> stream_;
    index_t length_, count_ = 0;
    std::int64_t max_id_ = -1;
};

/// Endless shuffled batches of sequences: every epoch a new permutation, a function of (seed,
/// epoch); state()/set_state() checkpoint and resume it (train::checkpointer::track).
class lm_sampler {
public:
    lm_sampler(const lm_sequences& data, std::uint64_t seed) : data_(&data), seed_(seed) { start_epoch(0); }
    [[nodiscard]] token_batch next(index_t batch_size) {
        DEPTHLAB_CHECK(batch_size > 0, usage_error, "lm_sampler::next: batch size ", batch_size);
        std::vector<index_t> which;
        while (static_cast<index_t>(which.size()) < batch_size) {
            if (position_ >= order_.size()) start_epoch(epoch_ + 1);
            which.push_back(order_[position_++]);
        }
        return data_->gather(which);
    }
    [[nodiscard]] index_t epoch_size() const { return data_->size(); }
    [[nodiscard]] sampler_state state() const { return {seed_, epoch_, position_}; }
    void set_state(const sampler_state& s) {
        seed_ = s.seed;
        start_epoch(s.epoch);
        DEPTHLAB_CHECK(s.position <= order_.size(), index_error, "lm_sampler::set_state: position ", s.position, " > epoch size ", order_.size());
        position_ = s.position;
    }

private:
    void start_epoch(std::uint64_t e) {
        epoch_ = e;
        position_ = 0;
        Generator g(detail::splitmix64(detail::splitmix64(seed_) ^ e));
        order_.resize(static_cast<std::size_t>(data_->size()));
        for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<index_t>(i);
        for (std::size_t i = order_.size(); i-- > 1;) std::swap(order_[i], order_[g.below(i + 1)]);
    }
    const lm_sequences* data_;
    std::uint64_t seed_, epoch_ = 0, position_ = 0;
    std::vector<index_t> order_;
};

}  // namespace depthlab::data
