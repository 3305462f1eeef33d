#pragma once
// Synthetic sequence-to-sequence data for smoke tests and examples: reverse a random
// sequence. Ids: 0 = PAD, 1 = BOS, 2 = EOS, 3..vocab-1 = symbols.
#include <cstdint>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/data/token_batch.hpp"

namespace depthlab::data {

struct seq2seq_batch {
    token_batch src, tgt_in;         // tgt_in = BOS + target
    std::vector<std::int64_t> tgt_out;   // target + EOS, -100 at padding (ignored by the loss)
    [[nodiscard]] std::int64_t target_tokens() const {
        std::int64_t n = 0;
        for (auto t : tgt_out) n += t >= 0;
        return n;
    }
};

/// B sequences of length 2..max_len of symbols 3..vocab-1, and their reversals.
inline seq2seq_batch reverse_task_batch(Generator& gen, index_t B, index_t max_len, index_t vocab) {
    DEPTHLAB_CHECK(max_len >= 2 && vocab >= 4, usage_error, "reverse_task_batch: needs max_len >= 2 and vocab >= 4");
    seq2seq_batch r;
    const index_t Ts = max_len, Tt = max_len + 1;
    r.src = {B, Ts, std::vector<std::int64_t>(B * Ts, 0), std::vector<std::int64_t>(B * Ts, 0), {}};
    r.tgt_in = {B, Tt, std::vector<std::int64_t>(B * Tt, 0), std::vector<std::int64_t>(B * Tt, 0), {}};
    r.tgt_out.assign(static_cast<std::size_t>(B * Tt), -100);
    for (index_t b = 0; b < B; ++b) {
        const index_t len = 2 + static_cast<index_t>(gen.below(static_cast<std::uint64_t>(max_len - 1)));
        std::vector<std::int64_t> s(static_cast<std::size_t>(len));
        for (auto& t : s) t = 3 + static_cast<std::int64_t>(gen.below(static_cast<std::uint64_t>(vocab - 3)));
        for (index_t t = 0; t < len; ++t) r.src.ids[b * Ts + t] = s[t];
        r.src.lengths.push_back(len);
        r.tgt_in.ids[b * Tt] = 1;
        for (index_t t = 0; t < len; ++t) {
            r.tgt_in.ids[b * Tt + t + 1] = s[len - 1 - t];
            r.tgt_out[b * Tt + t] = s[len - 1 - t];
        }
        r.tgt_out[b * Tt + len] = 2;
        r.tgt_in.lengths.push_back(len + 1);
    }
    return r;
}

}  // namespace depthlab::data
