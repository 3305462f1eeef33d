#pragma once
// Incremental decoding for Seq2SeqTransformer: greedy search and beam search, batched over
// sentences, with a key/value cache.
//
//   model.eval();
//   const auto hyps = nn::generate(model, src, {.beam = 4});   // src: a padded token_batch
//   // hyps[b].tokens: the output of sentence b (no BOS, no EOS), hyps[b].score: its log-prob
//
// The cache (decoder_state): per decoder layer, the self-attention [K | V] of every
// position generated so far, (rows, capacity, 2D), and the cross-attention [K | V] of the
// encoder memory, (rows, Ts, 2D), projected ONCE per source. Each step feeds one token per
// row and costs O(rows · t) attention instead of re-running the decoder over the prefix; the
// logits equal those of the full decoder on the same prefix (tests/test_decoding.cpp).
// Rows are selected / reordered by gathering (select_rows): beam search reorders its beams
// that way, and both searches drop the rows of finished sentences, so a batch gets cheaper
// as its sentences finish.
//
// Conventions:
//  * Everything runs under depthlab::no_grad; the model must be in eval mode (dropout off;
//    usage_error otherwise).
//  * Length limit per sentence: at most max_len_a · (source length, EOS included) +
//    max_len_b output tokens, EOS included (fairseq's max_len_a / max_len_b), and never
//    more than model.cfg.max_len (position limit). At the last position allowed both
//    searches force EOS (as fairseq does): the hypothesis then has limit − 1 tokens, its
//    score includes log p(EOS), and hypothesis::finished is false.
//  * Greedy: argmax at every step (ties: the lowest id); a sentence ends at its first EOS.
//  * Beam search (fairseq's search): every step, each sentence takes its 2·beam best
//    candidates (over beam × vocabulary, by accumulated log-probability; ties: lowest
//    beam, then lowest id); candidates ending in EOS among the best `beam` are finished
//    hypotheses, the best `beam` others continue. A sentence is done when it has `beam`
//    finished hypotheses; the answer is the finished one with the best normalised score.
//    Normalisation (length_penalty): score / lp(len), len = output tokens + EOS,
//      gnmt:  lp = ((5 + len) / 6)^alpha    (Wu et al. 2016; the Transformer paper's beam 4, α 0.6: the default)
//      power: lp = len^alpha                (fairseq's --lenpen; α = 1 is plain length normalisation)
//      none:  lp = 1                        (raw log-probability)
//    Beam size 1 gives exactly the greedy output.
//  * hypothesis::score is the raw log-probability of the output tokens and the EOS when
//    there is one (before normalisation); normalised_score the value the beam ranked by.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "depthlab/backend/elementwise.hpp"
#include "depthlab/autodiff/ops.hpp"
#include "depthlab/nn/models.hpp"

namespace depthlab::nn {

enum class length_penalty { none, power, gnmt };
inline const char* to_string(length_penalty p) {
    switch (p) {
        case length_penalty::none: return "none";
        case length_penalty::power: return "power";
        default: return "gnmt";
    }
}

struct search_options {
    int beam = 1;                   // 1: greedy
    length_penalty penalty = length_penalty::gnmt;
    double alpha = 0.6;             // exponent of the length penalty
    double max_len_a = 1.5;         // output limit: a · source length + b tokens (EOS included)
    index_t max_len_b = 10;
    std::int64_t bos_id = 2, eos_id = 3;  // the translation sentencepiece model's ids
};

struct hypothesis {
    std::vector<std::int64_t> tokens;  // without BOS and EOS
    double score = 0;                  // log-probability of tokens (+ EOS when finished by EOS)
    double normalised_score = 0;       // score / lp(len) (beam search); = score for greedy
    bool finished = false;             // chose EOS itself (false: EOS forced by the length limit)
};

/// The length normaliser lp(len) of the options.
inline double length_normaliser(const search_options& o, index_t len) {
    const double l = static_cast<double>(std::max<index_t>(len, 1));
    switch (o.penalty) {
        case length_penalty::none: return 1.0;
        case length_penalty::power: return std::pow(l, o.alpha);
        default: return std::pow((5.0 + l) / 6.0, o.alpha);
    }
}

/// Output limit of one sentence (EOS included): min(a · src_len + b, model max_len).
inline index_t output_limit(const search_options& o, index_t src_len, index_t model_max_len) {
    const auto lim = static_cast<index_t>(std::floor(o.max_len_a * static_cast<double>(src_len))) + o.max_len_b;
    return std::clamp<index_t>(lim, 1, model_max_len);
}

/// The decoder's incremental state for `rows` hypotheses: the self-attention cache of
/// every layer and the projected encoder memory. Row r of the initial state belongs to
/// source sentence r / copies.
///
/// Memory: per layer two (rows, capacity, 2D) self-attention buffers (the second receives
/// the rows select_rows keeps; both are allocated once) and the projected memory,
/// (rows, Ts, 2D). The memory is gathered only when the rows' sentences change (a
/// sentence dropped), not when beams of one sentence are reordered: those rows hold the
/// same memory.
template <class T, class B = backend::cpu>
class decoder_state {
public:
    /// memory: (B_src, Ts, D) from model.encode(src); src_lengths: B_src real lengths;
    /// copies: rows per sentence (the beam size); capacity: positions to hold (<= max_len).
    decoder_state(const Seq2SeqTransformer<T, B>& model, const Var<T, B>& memory, const std::vector<index_t>& src_lengths, index_t copies,
                  index_t capacity)
        : model_(&model), capacity_(capacity) {
        const Shape& sm = memory.shape();
        const index_t D = model.cfg.layer.dim;
        DEPTHLAB_CHECK(!grad_enabled(), usage_error, "decoder_state: incremental decoding is inference only (use depthlab::no_grad)");
        DEPTHLAB_CHECK(sm.rank() == 3 && sm[2] == D && static_cast<index_t>(src_lengths.size()) == sm[0], shape_error, "decoder_state: memory ",
                       sm, " for ", src_lengths.size(), " source lengths (expected (B, Ts, ", D, "))");
        DEPTHLAB_CHECK(copies >= 1 && capacity >= 1 && capacity <= model.cfg.max_len, usage_error, "decoder_state: copies ", copies,
                       " and capacity ", capacity, " (need >= 1 and capacity <= max_len ", model.cfg.max_len, ")");
        const index_t Bs = sm[0], Ts = sm[1];
        rows_ = Bs * copies;
        std::vector<std::int64_t> expand(static_cast<std::size_t>(rows_));
        std::vector<index_t> lengths(static_cast<std::size_t>(rows_));
        for (index_t r = 0; r < rows_; ++r) {
            expand[r] = r / copies;
            lengths[r] = src_lengths[r / copies];
        }
        sentence_ = expand;
        const auto expand_ids = depthlab::detail::upload_ids<B>(expand);
        memory_mask_ = key_padding_mask<T, B>(lengths, Ts);
        const int L = model.decoder->depth;
        for (int l = 0; l < L; ++l) {
            const auto& layer = model.decoder->layer(l);
            // an ablated cross-attention is never called: no projection needed
            const bool runs = layer.cross_attention.enabled || layer.cross_attention.ablation == ablation_kind::resample;
            Tensor<T, B> kv = runs ? layer.cross_attention.branch.project_memory(memory) : Tensor<T, B>::zeros({Bs, Ts, 2 * D});
            memory_kv_.push_back(copies == 1 ? kv : gather(kv, expand_ids));
            // positions are written before they are read: no need to clear
            buffers_.push_back({Tensor<T, B>::empty({rows_, capacity_, 2 * D}), Tensor<T, B>::empty({rows_, capacity_, 2 * D})});
            self_kv_.push_back(buffers_.back()[0]);
        }
    }

    [[nodiscard]] index_t rows() const { return rows_; }
    /// Positions fed so far (the next step feeds position length()).
    [[nodiscard]] index_t length() const { return length_; }
    [[nodiscard]] index_t capacity() const { return capacity_; }
    /// The source sentence of each row.
    [[nodiscard]] const std::vector<std::int64_t>& row_sentences() const { return sentence_; }

    /// Feeds one token per row at position length() and returns the logits of the next
    /// token, (rows, V).
    Tensor<T, B> step(std::span<const std::int64_t> ids) {
        DEPTHLAB_CHECK(static_cast<index_t>(ids.size()) == rows_, shape_error, "decoder_state::step: ", ids.size(), " ids for ", rows_, " rows");
        DEPTHLAB_CHECK(length_ < capacity_, usage_error, "decoder_state::step: the cache is full (", capacity_, " positions)");
        DEPTHLAB_CHECK(!grad_enabled(), usage_error, "decoder_state::step: incremental decoding is inference only (use depthlab::no_grad)");
        Var<T, B> y = model_->embed_target_at(ids, length_);
        const std::vector<std::int64_t> resample_from = resampling() ? resample_rows() : std::vector<std::int64_t>{};
        for (int l = 0; l < model_->decoder->depth; ++l)
            y = model_->decoder->layer(l).step(y, self_kv_[static_cast<std::size_t>(l)], memory_kv_[static_cast<std::size_t>(l)], memory_mask_,
                                               length_, resample_from);
        ++length_;
        const Tensor<T, B> logits = model_->output_logits(y).value();
        return logits.reshape({rows_, logits.dim(2)});
    }

    /// Keeps the given rows, in that order (new row i = old row keep[i]; repeats allowed, at
    /// most as many rows as at construction): beam reordering and dropping finished
    /// sentences. Copies only the filled positions of the cache.
    void select_rows(std::span<const std::int64_t> keep) {
        for (auto r : keep) DEPTHLAB_CHECK(r >= 0 && r < rows_, index_error, "decoder_state::select_rows: row ", r, " of ", rows_);
        const auto n = static_cast<index_t>(keep.size());
        DEPTHLAB_CHECK(n <= buffers_.front()[0].dim(0), usage_error, "decoder_state::select_rows: ", n, " rows, more than the ",
                       buffers_.front()[0].dim(0), " allocated");
        const auto keep_ids = depthlab::detail::upload_ids<B>(keep);
        std::vector<std::int64_t> sentence(static_cast<std::size_t>(n));
        for (index_t i = 0; i < n; ++i) sentence[static_cast<std::size_t>(i)] = sentence_[static_cast<std::size_t>(keep[static_cast<std::size_t>(i)])];
        if (sentence != sentence_) {  // rows now belong to other sentences: move the memory too
            for (auto& kv : memory_kv_) kv = gather(kv, keep_ids);
            memory_mask_ = gather(memory_mask_, keep_ids);
            sentence_ = std::move(sentence);
        }
        for (std::size_t l = 0; l < self_kv_.size(); ++l) {
            Tensor<T, B>& kv = self_kv_[l];
            auto& [a, b] = buffers_[l];
            Tensor<T, B>& spare = kv.shares_storage(a) ? b : a;
            Tensor<T, B> fresh = spare.slice(0, 0, n);  // contiguous: the leading rows of the buffer
            if (length_ > 0) {  // one gather of the filled positions of every kept row
                const index_t row = kv.numel() / kv.dim(0);
                primitives<B>::gather_rows_strided(n, length_ * kv.dim(2), row, row, kv.data(), kv.dim(0), keep_ids.data(), fresh.data());
            }
            kv = fresh;
        }
        rows_ = n;
    }

    /// The rows a resample-ablated decoder sub-layer takes its output from at this step: row
    /// r of sentence s takes the row of the same rank among the rows of the next sentence
    /// still decoded (cyclically, in sentence order); a sentence decoded alone takes its own.
    [[nodiscard]] std::vector<std::int64_t> resample_rows() const {
        std::vector<std::int64_t> sentences(sentence_);
        std::sort(sentences.begin(), sentences.end());
        sentences.erase(std::unique(sentences.begin(), sentences.end()), sentences.end());
        std::vector<std::vector<std::int64_t>> rows_of(sentences.size());
        const auto slot = [&](std::int64_t s) { return static_cast<std::size_t>(std::lower_bound(sentences.begin(), sentences.end(), s) - sentences.begin()); };
        for (index_t r = 0; r < rows_; ++r) rows_of[slot(sentence_[static_cast<std::size_t>(r)])].push_back(r);
        std::vector<std::int64_t> from(static_cast<std::size_t>(rows_));
        std::vector<std::size_t> rank(sentences.size(), 0);
        for (index_t r = 0; r < rows_; ++r) {
            const std::size_t i = slot(sentence_[static_cast<std::size_t>(r)]);
            const auto& next = rows_of[(i + 1) % sentences.size()];
            from[static_cast<std::size_t>(r)] = next[rank[i]++ % next.size()];
        }
        return from;
    }

private:
    // whether a decoder sub-layer or head is switched off with the resample kind (the row map
    // is only built then)
    [[nodiscard]] bool resampling() const {
        for (int l = 0; l < model_->decoder->depth; ++l) {
            const auto& layer = model_->decoder->layer(l);
            const residual_base* subs[] = {&layer.self_attention, &layer.cross_attention, &layer.feed_forward};
            for (const residual_base* r : subs)
                if (!r->enabled && r->ablation == ablation_kind::resample) return true;
            if (layer.self_attention.branch.resamples_heads() || layer.cross_attention.branch.resamples_heads()) return true;
        }
        return false;
    }
    static Tensor<T, B> gather(const Tensor<T, B>& t, const Tensor<std::int64_t, B>& idx) {
        Shape s = t.shape();
        const index_t cols = t.numel() / std::max<index_t>(s[0], 1);
        s[0] = idx.numel();
        auto out = Tensor<T, B>::empty(s);
        const auto src = t.contiguous();
        primitives<B>::gather_rows(s[0], cols, src.data(), t.dim(0), idx.data(), out.data());
        return out;
    }

    const Seq2SeqTransformer<T, B>* model_;
    index_t capacity_, rows_ = 0, length_ = 0;
    std::vector<Tensor<T, B>> self_kv_, memory_kv_;
    std::vector<std::array<Tensor<T, B>, 2>> buffers_;  // per layer: the self-attention cache and its spare
    std::vector<std::int64_t> sentence_;                // row -> source sentence
    Tensor<T, B> memory_mask_;
};

namespace detail {
template <class T, class B>
void check_search(const Seq2SeqTransformer<T, B>& model, const token_batch& src, const search_options& o, const char* what) {
    DEPTHLAB_CHECK(!model.is_training(), usage_error, what, ": call model.eval() first (decoding with dropout on)");
    DEPTHLAB_CHECK(o.beam >= 1, usage_error, what, ": beam ", o.beam, " < 1");
    DEPTHLAB_CHECK(o.max_len_a >= 0 && o.max_len_b >= 0 && (o.max_len_a > 0 || o.max_len_b > 0), usage_error, what,
                   ": the output limit max_len_a · len + max_len_b must be positive");
    DEPTHLAB_CHECK(src.batch >= 1 && static_cast<index_t>(src.lengths.size()) == src.batch, shape_error, what, ": a source batch of ", src.batch,
                   " sequences with ", src.lengths.size(), " lengths");
    const index_t V = model.cfg.tgt_vocab;
    DEPTHLAB_CHECK(o.bos_id >= 0 && o.bos_id < V && o.eos_id >= 0 && o.eos_id < V, index_error, what, ": BOS ", o.bos_id, " / EOS ", o.eos_id,
                   " outside the vocabulary [0, ", V, ")");
}
}  // namespace detail

/// Greedy search over a batch; `memory` = model.encode(src) (pass it to reuse an encoder
/// output). One hypothesis per source sentence, in batch order.
template <class T, class B>
std::vector<hypothesis> greedy_search(const Seq2SeqTransformer<T, B>& model, const Var<T, B>& memory, const token_batch& src,
                                      const search_options& o = {}) {
    detail::check_search(model, src, o, "greedy_search");
    no_grad guard;
    const index_t Bn = src.batch, V = model.cfg.tgt_vocab;
    std::vector<index_t> limit(static_cast<std::size_t>(Bn));
    index_t cap = 1;
    for (index_t b = 0; b < Bn; ++b) cap = std::max(cap, limit[b] = output_limit(o, src.lengths[b], model.cfg.max_len));
    decoder_state<T, B> st(model, memory, src.lengths, 1, cap);
    std::vector<hypothesis> out(static_cast<std::size_t>(Bn));
    std::vector<std::int64_t> live(static_cast<std::size_t>(Bn));  // row -> sentence
    for (index_t b = 0; b < Bn; ++b) live[b] = b;
    std::vector<std::int64_t> ids(static_cast<std::size_t>(Bn), o.bos_id);
    for (index_t t = 0; !live.empty(); ++t) {
        const Tensor<T, B> logits = st.step(ids);
        // each row's choice made where the logits are: {first maximum, its log-probability,
        // EOS's}, 3 numbers a row read back instead of the vocabulary's logits
        const auto rows = static_cast<index_t>(live.size());
        auto picked = Tensor<double, B>::empty({rows, 3});
        primitives<B>::greedy_pick(rows, V, logits.contiguous().data(), o.eos_id, picked.data());
        const std::vector<double> pick = picked.to_vector();
        std::vector<std::int64_t> keep, next_live, next_ids;
        for (std::size_t r = 0; r < live.size(); ++r) {
            hypothesis& h = out[static_cast<std::size_t>(live[r])];
            if (t + 1 >= limit[static_cast<std::size_t>(live[r])]) {  // the last position allowed: EOS forced
                h.score += pick[3 * r + 2];
                continue;
            }
            const auto best = static_cast<std::int64_t>(pick[3 * r]);  // the first maximum
            h.score += pick[3 * r + 1];
            if (best == o.eos_id) {
                h.finished = true;
                continue;
            }
            h.tokens.push_back(best);
            keep.push_back(static_cast<std::int64_t>(r));
            next_live.push_back(live[r]);
            next_ids.push_back(best);
        }
        if (next_live.empty()) break;
        if (next_live.size() != live.size()) st.select_rows(keep);
        live = std::move(next_live);
        ids = std::move(next_ids);
    }
    for (auto& h : out) h.normalised_score = h.score;
    return out;
}

/// Beam search over a batch (see the top of the file); `memory` = model.encode(src).
template <class T, class B>
std::vector<hypothesis> beam_search(const Seq2SeqTransformer<T, B>& model, const Var<T, B>& memory, const token_batch& src,
                                    const search_options& o = {}) {
    detail::check_search(model, src, o, "beam_search");
    no_grad guard;
    const index_t Bn = src.batch, V = model.cfg.tgt_vocab, K = o.beam;
    const double ninf = -std::numeric_limits<double>::infinity();
    struct beam_entry {
        std::vector<std::int64_t> tokens;
        double score = 0;
    };
    struct sentence {
        index_t index = 0, limit = 0;
        std::vector<beam_entry> beams;      // K live hypotheses (rows of the state, in order)
        std::vector<hypothesis> finished;
    };
    index_t cap = 1;
    std::vector<sentence> live;
    for (index_t b = 0; b < Bn; ++b) {
        sentence s;
        s.index = b;
        s.limit = output_limit(o, src.lengths[b], model.cfg.max_len);
        cap = std::max(cap, s.limit);
        s.beams.resize(static_cast<std::size_t>(K));
        for (index_t k = 1; k < K; ++k) s.beams[static_cast<std::size_t>(k)].score = ninf;  // step 0: one real beam, no duplicates
        live.push_back(std::move(s));
    }
    decoder_state<T, B> st(model, memory, src.lengths, K, cap);
    std::vector<hypothesis> out(static_cast<std::size_t>(Bn));
    std::vector<std::int64_t> ids(static_cast<std::size_t>(Bn * K), o.bos_id);
    struct cand {
        double score;
        index_t beam;
        std::int64_t token;
    };
    const auto better = [](const cand& a, const cand& b) { return elementwise::beam_before(a.score, a.beam, a.token, b.score, b.beam, b.token); };
    // a sentence's 2K best candidates over K × V are among its beams' 2K best each (within a
    // beam the order is that of the beam's own candidates): each row's are chosen where the
    // logits are, 2·(2K) + 1 numbers a row read back instead of V
    const index_t take = std::min<index_t>(2 * K, V);
    std::vector<cand> cands;
    std::vector<double> bases;
    for (index_t t = 0; !live.empty(); ++t) {
        const Tensor<T, B> logits = st.step(ids);
        bases.clear();
        for (const sentence& s : live)
            for (const beam_entry& e : s.beams) bases.push_back(e.score);
        const auto rows = static_cast<index_t>(bases.size());
        const auto base = Tensor<double, B>::from({rows}, bases);
        auto picked = Tensor<double, B>::empty({rows, 2 * take + 1});
        primitives<B>::beam_pick(rows, V, logits.contiguous().data(), base.data(), take, o.eos_id, picked.data());
        const std::vector<double> P = picked.to_vector();
        std::vector<sentence> next_live;
        std::vector<std::int64_t> keep, next_ids;
        for (std::size_t si = 0; si < live.size(); ++si) {
            sentence& s = live[si];
            const bool last = t + 1 >= s.limit;  // the last position allowed: only EOS
            cands.clear();
            for (index_t k = 0; k < K; ++k) {
                if (s.beams[static_cast<std::size_t>(k)].score == ninf) continue;
                const double* row = P.data() + (static_cast<index_t>(si) * K + k) * (2 * take + 1);
                if (last) {
                    cands.push_back({row[2 * take], k, o.eos_id});
                    continue;
                }
                for (index_t c = 0; c < take; ++c) cands.push_back({row[2 * c], k, static_cast<std::int64_t>(row[2 * c + 1])});
            }
            const std::size_t take_best = std::min(cands.size(), static_cast<std::size_t>(2 * K));
            std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(take_best), cands.end(), better);
            std::vector<beam_entry> next;
            for (std::size_t c = 0; c < take_best && static_cast<index_t>(next.size()) < K; ++c) {
                const cand& cd = cands[c];
                const beam_entry& from = s.beams[static_cast<std::size_t>(cd.beam)];
                if (cd.token == o.eos_id) {
                    if (c < static_cast<std::size_t>(K) && static_cast<index_t>(s.finished.size()) < K) {
                        hypothesis h;
                        h.tokens = from.tokens;
                        h.score = cd.score;
                        h.finished = !last;
                        h.normalised_score = cd.score / length_normaliser(o, static_cast<index_t>(h.tokens.size()) + 1);
                        s.finished.push_back(std::move(h));
                    }
                    continue;
                }
                beam_entry e{from.tokens, cd.score};
                e.tokens.push_back(cd.token);
                next.push_back(std::move(e));
                keep.push_back(static_cast<std::int64_t>(static_cast<index_t>(si) * K + cd.beam));
            }
            const bool done = static_cast<index_t>(s.finished.size()) >= K || next.empty();
            if (done) {
                // undo the rows this sentence queued
                keep.resize(keep.size() - next.size());
                const auto best = std::max_element(s.finished.begin(), s.finished.end(), [](const hypothesis& a, const hypothesis& b) {
                    return a.normalised_score < b.normalised_score;  // first best on ties
                });
                if (best != s.finished.end()) out[static_cast<std::size_t>(s.index)] = *best;
                continue;
            }
            while (static_cast<index_t>(next.size()) < K) {  // fewer live candidates than beams: pad with dead beams
                next.push_back({next.front().tokens, ninf});
                keep.push_back(keep.back());
            }
            for (const auto& e : next) next_ids.push_back(e.tokens.back());
            s.beams = std::move(next);
            next_live.push_back(std::move(s));
        }
        if (next_live.empty()) break;
        st.select_rows(keep);
        live = std::move(next_live);
        ids = std::move(next_ids);
    }
    return out;
}

/// Greedy (beam = 1) or beam search; `memory` = model.encode(src).
template <class T, class B>
std::vector<hypothesis> generate(const Seq2SeqTransformer<T, B>& model, const Var<T, B>& memory, const token_batch& src,
                                 const search_options& o = {}) {
    return o.beam == 1 ? greedy_search(model, memory, src, o) : beam_search(model, memory, src, o);
}
/// The same, encoding the source first.
template <class T, class B>
std::vector<hypothesis> generate(const Seq2SeqTransformer<T, B>& model, const token_batch& src, const search_options& o = {}) {
    detail::check_search(model, src, o, "generate");
    no_grad guard;
    return generate(model, model.encode(src), src, o);
}

/// A padded source batch from id sequences (EOS appended when eos_id >= 0, pad_id after).
inline token_batch make_source_batch(const std::vector<std::vector<std::int64_t>>& sources, std::int64_t eos_id = 3, std::int64_t pad_id = 0) {
    token_batch b;
    b.batch = static_cast<index_t>(sources.size());
    for (const auto& s : sources) b.length = std::max(b.length, static_cast<index_t>(s.size()) + (eos_id >= 0 ? 1 : 0));
    b.ids.assign(static_cast<std::size_t>(b.batch * b.length), pad_id);
    b.segments.assign(b.ids.size(), 0);
    for (index_t i = 0; i < b.batch; ++i) {
        const auto& s = sources[static_cast<std::size_t>(i)];
        std::copy(s.begin(), s.end(), b.ids.begin() + i * b.length);
        if (eos_id >= 0) b.ids[static_cast<std::size_t>(i * b.length) + s.size()] = eos_id;
        b.lengths.push_back(static_cast<index_t>(s.size()) + (eos_id >= 0 ? 1 : 0));
    }
    return b;
}

}  // namespace depthlab::nn
