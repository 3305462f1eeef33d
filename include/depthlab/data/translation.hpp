#pragma once
// Translation data: aligned text files, and batches of token ids made by token count with
// length bucketing. No tokenizer here: the batcher works on ids (encode the text with the
// sentencepiece model of scripts/train-translation-tokenizer, e.g. `spm_encode
// --output_format=id`, which `read_id_lines` reads).
//
// Ids follow that model: pad = 0, unk = 1, bos = 2, eos = 3 (configurable). A pair (x, y)
// becomes src = x (+ EOS if `src_eos`), tgt_in = BOS + y, tgt_out = y + EOS; padding is
// pad_id in src/tgt_in and -100 in tgt_out (ignored by the loss).
//
// Batching per epoch, all randomness from the depthlab::Generator passed in:
//   1. shuffle the pairs;
//   2. cut the shuffled list into windows of `window` pairs (0: one window) and sort each
//      window by length (stable, so pairs of equal length stay in shuffled order);
//   3. cut each sorted window greedily into batches whose padded size
//      B * max(Ts, Tt) (Ts, Tt: the longest source / target in the batch, BOS/EOS
//      included) stays <= max_tokens (and B <= max_sentences when that is > 0);
//   4. shuffle the batches.
// Each kept pair is in exactly one batch per epoch. Pairs longer than max_len (source or
// target, BOS/EOS included), alone larger than max_tokens, or with an empty source (and
// no source EOS) are dropped at construction and counted in `dropped()`.
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "depthlab/autodiff/profiler.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/core/rng.hpp"
// synthetic.hpp (seq2seq_batch) pulls in the model headers, which need the backend first.
#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/cpu/cpu.hpp"
#include "depthlab/data/synthetic.hpp"
#include "depthlab/metrics/text.hpp"

namespace depthlab::data {

/// Where `line` stops being UTF-8 text: the byte offset of its first NUL byte or invalid
/// UTF-8 sequence, or npos when it is text.
[[nodiscard]] inline std::size_t first_non_text_byte(std::string_view line) {
    for (std::size_t i = 0, len = 0; i < line.size(); i += len) {
        if (line[i] == '\0') return i;
        const char32_t c = metrics::detail::decode_utf8(line, i, len);
        if (c == 0xFFFD && len == 1) return i;  // (a real U+FFFD is 3 bytes long)
    }
    return std::string_view::npos;
}

/// Lines of a UTF-8 text file (a trailing carriage return is removed; a final newline adds no
/// line). A NUL byte or invalid UTF-8 is an io_error naming the file, line and byte: a binary
/// or wrongly encoded file would otherwise be tokenised into garbage without a word.
[[nodiscard]] inline std::vector<std::string> read_lines(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    DEPTHLAB_CHECK(f.good(), io_error, "read_lines: cannot open ", path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(f, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (const std::size_t at = first_non_text_byte(line); at != std::string_view::npos) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(line[at])));
            throw io_error(depthlab::detail::cat(path, ":", lines.size() + 1, ": byte ", at + 1, " (", hex, ") is ",
                                                 line[at] == '\0' ? "a NUL byte" : "not valid UTF-8", ": not UTF-8 text (a binary file, or another encoding?)"));
        }
        lines.push_back(std::move(line));
    }
    DEPTHLAB_CHECK(f.eof(), io_error, "read_lines: error reading ", path);
    return lines;
}

/// Lines of space-separated non-negative integer ids (`spm_encode --output_format=id`).
[[nodiscard]] inline std::vector<std::vector<std::int64_t>> read_id_lines(const std::string& path) {
    std::vector<std::vector<std::int64_t>> out;
    std::size_t lineno = 0;
    for (const auto& line : read_lines(path)) {
        ++lineno;
        std::vector<std::int64_t> ids;
        std::int64_t v = 0;
        bool in_number = false;
        for (char c : line) {
            if (c >= '0' && c <= '9') {
                DEPTHLAB_CHECK(v <= (INT64_MAX - 9) / 10, io_error, "read_id_lines: ", path, ":", lineno, ": id too large");
                v = v * 10 + (c - '0');
                in_number = true;
            } else if (c == ' ' || c == '\t') {
                if (in_number) ids.push_back(v);
                v = 0;
                in_number = false;
            } else {
                DEPTHLAB_CHECK(false, io_error, "read_id_lines: ", path, ":", lineno, ": unexpected character '", c, "'");
            }
        }
        if (in_number) ids.push_back(v);
        out.push_back(std::move(ids));
    }
    return out;
}

struct parallel_text {
    std::vector<std::string> src, tgt;
    [[nodiscard]] std::size_t size() const { return src.size(); }
};

/// Two aligned files (line i of one translates line i of the other).
[[nodiscard]] inline parallel_text load_parallel(const std::string& src_path, const std::string& tgt_path) {
    parallel_text p{read_lines(src_path), read_lines(tgt_path)};
    DEPTHLAB_CHECK(p.src.size() == p.tgt.size(), io_error, "load_parallel: ", src_path, " has ", p.src.size(),
                   " lines but ", tgt_path, " has ", p.tgt.size());
    return p;
}

/// `dir/split.src_lang` and `dir/split.tgt_lang`, as scripts/fetch-translation writes
/// them (dir = .data/translation, split = train|dev|test|mt). English->German by default.
[[nodiscard]] inline parallel_text load_translation_split(const std::string& dir, const std::string& split,
                                                          const std::string& src_lang = "en",
                                                          const std::string& tgt_lang = "de") {
    return load_parallel(dir + "/" + split + "." + src_lang, dir + "/" + split + "." + tgt_lang);
}

/// What a translation data folder says about itself (its meta.json, as written by
/// scripts/prepare-parallel and scripts/fetch-translation): the language pair, used as file
/// extensions, and a description of the corpus. Without meta.json: en -> de, no description.
struct translation_corpus_info {
    std::string src = "en", tgt = "de";
    std::string source;  // e.g. "Debian trans-de-en 1.9-6 (Ding, GPL-2+)"; empty when unknown
    bool from_meta = false;
};
[[nodiscard]] inline translation_corpus_info read_translation_meta(const std::string& dir) {
    translation_corpus_info info;
    const std::string path = dir + "/meta.json";
    std::ifstream in(path);
    if (!in.is_open()) return info;
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    DEPTHLAB_CHECK(j.is_object(), io_error, "read_translation_meta: ", path, " is not a JSON object");
    auto text = [&](const char* key, std::string& out) {
        if (!j.contains(key)) return;
        DEPTHLAB_CHECK(j[key].is_string() && !j[key].get<std::string>().empty(), io_error, "read_translation_meta: ", path, ": '", key,
                       "' is not a non-empty string");
        out = j[key].get<std::string>();
    };
    text("src", info.src);
    text("tgt", info.tgt);
    text("source", info.source);
    DEPTHLAB_CHECK(info.src != info.tgt, io_error, "read_translation_meta: ", path, ": src and tgt are both '", info.src, "'");
    info.from_meta = true;
    return info;
}

/// One sentence pair as token ids, without BOS/EOS.
struct token_pair {
    std::vector<std::int64_t> src, tgt;
};

/// Every pair of `text` as token ids (encode: text -> ids), the whole list `repeat` times
/// (a corpus weighted up against a second one).
template <class Encode>
[[nodiscard]] std::vector<token_pair> encode_pairs(const parallel_text& text, Encode&& encode, std::size_t repeat = 1) {
    DEPTHLAB_CHECK(repeat >= 1, usage_error, "encode_pairs: repeat ", repeat, " < 1");
    std::vector<token_pair> pairs;
    pairs.reserve(text.size() * repeat);
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto a = encode(text.src[i]);
        const auto b = encode(text.tgt[i]);
        pairs.push_back({{a.begin(), a.end()}, {b.begin(), b.end()}});
    }
    const std::size_t n = pairs.size();
    for (std::size_t r = 1; r < repeat; ++r)
        for (std::size_t i = 0; i < n; ++i) pairs.push_back(pairs[i]);
    return pairs;
}

/// A translation data folder read and tokenised: the splits as text, the training pairs as
/// ids (the main corpus `main_repeat` times, then the second corpus when asked for).
struct translation_corpus {
    translation_corpus_info info;
    parallel_text train, dev, test;
    std::vector<token_pair> train_pairs;
    std::size_t second_pairs = 0;  // pairs of the second corpus among train_pairs
    /// What is usable but weak, one line each, naming the files (a split smaller than
    /// translation_corpus_options' thresholds, pairs blank on a side): for the program to print.
    std::vector<std::string> warnings;
};
struct translation_corpus_options {
    std::string src_lang{}, tgt_lang{};  // empty: meta.json's (else en, de)
    std::string second_corpus{};         // e.g. "mt": also <second>.{src,tgt} for training; empty: none
    std::size_t main_repeat = 1;     // with a second corpus: the main pairs this many times per epoch
    std::size_t dev_limit = 0;       // > 0: only the first dev_limit dev pairs
    std::size_t small_train = 1000;  // fewer training pairs than this: a warning (a model that overfits, scores that mean little)
    std::size_t small_eval = 50;     // fewer dev or test pairs than this: a warning (BLEU on a handful of sentences is noise)
};
template <class Encode>
[[nodiscard]] translation_corpus load_translation_corpus(const std::string& dir, Encode&& encode, const translation_corpus_options& o = {}) {
    translation_corpus c;
    c.info = read_translation_meta(dir);
    if (!o.src_lang.empty()) c.info.src = o.src_lang;
    if (!o.tgt_lang.empty()) c.info.tgt = o.tgt_lang;
    // A split that holds no sentence pair with text on both sides cannot give a result (an
    // empty test set scores nothing; blank training pairs teach nothing): refused here, before
    // any training, naming its files.
    const auto load = [&](const std::string& split) {
        parallel_text p = load_translation_split(dir, split, c.info.src, c.info.tgt);
        const auto blank = [](const std::string& line) { return line.find_first_not_of(" \t\r\f\v") == std::string::npos; };
        std::size_t usable = 0;
        for (std::size_t i = 0; i < p.size(); ++i) usable += !blank(p.src[i]) && !blank(p.tgt[i]);
        const std::string files = dir + "/" + split + "." + c.info.src + " and " + dir + "/" + split + "." + c.info.tgt;
        DEPTHLAB_CHECK(usable > 0, io_error, "translation corpus: ", files,
                       p.size() == 0 ? " are empty" : " hold no pair with text on both sides (" + std::to_string(p.size()) + " blank)",
                       ": a split must hold sentences");
        if (usable < p.size())
            c.warnings.push_back(depthlab::detail::cat(files, ": ", p.size() - usable, " of ", p.size(), " pairs are blank on a side"));
        const bool scored = split == "dev" || split == "test";
        const std::size_t small = scored ? o.small_eval : o.small_train;
        if (usable < small)
            c.warnings.push_back(depthlab::detail::cat(files, ": only ", usable, " sentence pair", usable == 1 ? "" : "s", " (fewer than ", small,
                                                       scored ? ": its scores are noise)" : ": the model will overfit)"));
        return p;
    };
    c.train = load("train");
    c.dev = load("dev");
    c.test = load("test");
    if (o.dev_limit > 0 && c.dev.size() > o.dev_limit) {
        c.dev.src.resize(o.dev_limit);
        c.dev.tgt.resize(o.dev_limit);
    }
    c.train_pairs = encode_pairs(c.train, encode, o.second_corpus.empty() ? 1 : o.main_repeat);
    if (!o.second_corpus.empty()) {
        auto second = encode_pairs(load(o.second_corpus), encode);
        c.second_pairs = second.size();
        for (auto& p : second) c.train_pairs.push_back(std::move(p));
    }
    return c;
}

struct translation_batching {
    index_t max_tokens = 4096;   ///< padded tokens per batch: B * max(Ts, Tt)
    index_t max_sentences = 0;   ///< > 0: at most this many pairs per batch
    index_t max_len = 256;       ///< longest source / target kept (BOS/EOS included)
    index_t window = 0;          ///< pairs sorted together (0: the whole epoch)
    std::int64_t pad_id = 0, bos_id = 2, eos_id = 3;
    bool src_eos = true;         ///< append EOS to the source
};

class translation_batcher {
public:
    translation_batcher(std::vector<token_pair> pairs, translation_batching cfg) : cfg_(cfg) {
        DEPTHLAB_CHECK(cfg.max_tokens >= 1 && cfg.max_len >= 1 && cfg.window >= 0 && cfg.max_sentences >= 0, usage_error,
                       "translation_batcher: max_tokens, max_len must be >= 1 and window, max_sentences >= 0");
        DEPTHLAB_CHECK(cfg.pad_id >= 0 && cfg.bos_id >= 0 && cfg.eos_id >= 0, usage_error,
                       "translation_batcher: special ids must be >= 0");
        pairs_.reserve(pairs.size());
        for (auto& p : pairs) {
            const index_t ls = src_len(p), lt = tgt_len(p);
            if (ls == 0 || ls > cfg.max_len || lt > cfg.max_len || std::max(ls, lt) > cfg.max_tokens) {
                ++dropped_;
                continue;
            }
            for (auto id : p.src) DEPTHLAB_CHECK(id >= 0, index_error, "translation_batcher: negative id ", id);
            for (auto id : p.tgt) DEPTHLAB_CHECK(id >= 0, index_error, "translation_batcher: negative id ", id);
            pairs_.push_back(std::move(p));
        }
    }

    [[nodiscard]] std::size_t size() const { return pairs_.size(); }
    [[nodiscard]] std::size_t dropped() const { return dropped_; }
    [[nodiscard]] const token_pair& pair(std::size_t i) const { return pairs_[i]; }
    [[nodiscard]] const translation_batching& config() const { return cfg_; }

    /// Padded length of the source (EOS included when src_eos) and of tgt_in / tgt_out.
    [[nodiscard]] index_t src_len(const token_pair& p) const { return static_cast<index_t>(p.src.size()) + (cfg_.src_eos ? 1 : 0); }
    [[nodiscard]] static index_t tgt_len(const token_pair& p) { return static_cast<index_t>(p.tgt.size()) + 1; }

    /// One epoch's batches as lists of pair indices (into the kept pairs); advances `gen`.
    [[nodiscard]] std::vector<std::vector<std::size_t>> epoch_plan(Generator& gen) const {
        std::vector<std::size_t> order(pairs_.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        shuffle(order, gen);
        const std::size_t W = cfg_.window > 0 ? static_cast<std::size_t>(cfg_.window) : std::max<std::size_t>(order.size(), 1);
        std::vector<std::vector<std::size_t>> batches;
        for (std::size_t w0 = 0; w0 < order.size(); w0 += W) {
            const auto first = order.begin() + static_cast<std::ptrdiff_t>(w0);
            const auto last = order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), w0 + W));
            std::stable_sort(first, last, [&](std::size_t a, std::size_t b) {
                const index_t ka = std::max(src_len(pairs_[a]), tgt_len(pairs_[a]));
                const index_t kb = std::max(src_len(pairs_[b]), tgt_len(pairs_[b]));
                return ka != kb ? ka < kb : src_len(pairs_[a]) < src_len(pairs_[b]);
            });
            std::vector<std::size_t> cur;
            index_t ts = 0, tt = 0;
            for (auto it = first; it != last; ++it) {
                const index_t ns = std::max(ts, src_len(pairs_[*it])), nt = std::max(tt, tgt_len(pairs_[*it]));
                const auto n = static_cast<index_t>(cur.size()) + 1;
                const bool fits = n * std::max(ns, nt) <= cfg_.max_tokens && (cfg_.max_sentences == 0 || n <= cfg_.max_sentences);
                if (!fits) {
                    batches.push_back(std::move(cur));
                    cur.clear();
                    ts = src_len(pairs_[*it]);
                    tt = tgt_len(pairs_[*it]);
                } else {
                    ts = ns;
                    tt = nt;
                }
                cur.push_back(*it);
            }
            if (!cur.empty()) batches.push_back(std::move(cur));
        }
        shuffle(batches, gen);
        return batches;
    }

    /// The padded batch of the given pairs.
    [[nodiscard]] seq2seq_batch make_batch(const std::vector<std::size_t>& idx) const {
        DEPTHLAB_CHECK(!idx.empty(), usage_error, "translation_batcher::make_batch: no pairs");
        const auto B = static_cast<index_t>(idx.size());
        index_t Ts = 0, Tt = 0;
        for (auto i : idx) {
            DEPTHLAB_CHECK(i < pairs_.size(), index_error, "translation_batcher::make_batch: pair ", i, " of ", pairs_.size());
            Ts = std::max(Ts, src_len(pairs_[i]));
            Tt = std::max(Tt, tgt_len(pairs_[i]));
        }
        seq2seq_batch r;
        r.src = {B, Ts, std::vector<std::int64_t>(static_cast<std::size_t>(B * Ts), cfg_.pad_id),
                 std::vector<std::int64_t>(static_cast<std::size_t>(B * Ts), 0), {}};
        r.tgt_in = {B, Tt, std::vector<std::int64_t>(static_cast<std::size_t>(B * Tt), cfg_.pad_id),
                    std::vector<std::int64_t>(static_cast<std::size_t>(B * Tt), 0), {}};
        r.tgt_out.assign(static_cast<std::size_t>(B * Tt), -100);
        for (index_t b = 0; b < B; ++b) {
            const token_pair& p = pairs_[idx[static_cast<std::size_t>(b)]];
            auto* s = r.src.ids.data() + b * Ts;
            std::copy(p.src.begin(), p.src.end(), s);
            if (cfg_.src_eos) s[p.src.size()] = cfg_.eos_id;
            r.src.lengths.push_back(src_len(p));
            auto* ti = r.tgt_in.ids.data() + b * Tt;
            auto* to = r.tgt_out.data() + b * Tt;
            ti[0] = cfg_.bos_id;
            std::copy(p.tgt.begin(), p.tgt.end(), ti + 1);
            std::copy(p.tgt.begin(), p.tgt.end(), to);
            to[p.tgt.size()] = cfg_.eos_id;
            r.tgt_in.lengths.push_back(tgt_len(p));
        }
        return r;
    }

    /// All of one epoch's batches (convenience; `epoch_plan` + `make_batch` make them lazily).
    [[nodiscard]] std::vector<seq2seq_batch> epoch(Generator& gen) const {
        std::vector<seq2seq_batch> out;
        for (const auto& b : epoch_plan(gen)) out.push_back(make_batch(b));
        return out;
    }

private:
    template <class V>
    static void shuffle(V& v, Generator& gen) {  // Fisher-Yates
        for (std::size_t i = v.size(); i > 1; --i) {
            const auto j = static_cast<std::size_t>(gen.below(static_cast<std::uint64_t>(i)));
            std::swap(v[i - 1], v[j]);
        }
    }

    translation_batching cfg_;
    std::vector<token_pair> pairs_;
    std::size_t dropped_ = 0;
};

/// Where a translation_stream is: what a checkpoint stores to continue it exactly.
struct stream_state {
    std::uint64_t epoch_seed = 0, epoch_offset = 0;  // the generator's state when the current epoch was planned
    std::uint64_t next_batch = 0, epoch = 0;         // batches served in it; epochs begun (1 = the first)
    bool operator==(const stream_state&) const = default;
};
/// The fields of stream_state by name (io::save_config / load_config, train::checkpointer::track).
template <class S, class F>
    requires std::same_as<std::remove_const_t<S>, stream_state>
void config_fields(S& s, F&& f) {
    f("epoch_seed", s.epoch_seed);
    f("epoch_offset", s.epoch_offset);
    f("next_batch", s.next_batch);
    f("epoch", s.epoch);
}

/// An endless stream of training batches: epoch after epoch, each one in the order of
/// batcher.epoch_plan(generator). The batcher must outlive the stream.
class translation_stream {
public:
    translation_stream(const translation_batcher& batcher, std::uint64_t seed) : batcher_(&batcher), rng_(seed) {
        DEPTHLAB_CHECK(batcher.size() > 0, usage_error, "translation_stream: the batcher holds no sentence pairs");
    }
    [[nodiscard]] seq2seq_batch next() {
        if (next_ >= plan_.size()) new_epoch();
        seq2seq_batch b = batcher_->make_batch(plan_[next_++]);
        profile_mark("data: translation_stream::next");
        return b;
    }
    [[nodiscard]] std::uint64_t epoch() const { return epoch_; }
    [[nodiscard]] stream_state state() const { return {epoch_seed_, epoch_offset_, next_, epoch_}; }
    /// Continues from a state(): re-plans that epoch and skips the batches already served.
    /// Throws io_error when the state cannot be one of this stream's (e.g. another corpus).
    void set_state(const stream_state& s) {
        rng_.set_state(s.epoch_seed, s.epoch_offset);
        epoch_ = s.epoch > 0 ? s.epoch - 1 : 0;
        new_epoch();
        DEPTHLAB_CHECK(s.epoch > 0 && s.next_batch <= plan_.size(), io_error, "translation_stream: state (epoch ", s.epoch, ", batch ",
                       s.next_batch, ") does not fit this corpus (", plan_.size(), " batches per epoch)");
        next_ = static_cast<std::size_t>(s.next_batch);
    }

private:
    void new_epoch() {
        epoch_seed_ = rng_.seed();
        epoch_offset_ = rng_.offset();
        plan_ = batcher_->epoch_plan(rng_);
        next_ = 0;
        ++epoch_;
    }
    const translation_batcher* batcher_;
    Generator rng_;
    std::vector<std::vector<std::size_t>> plan_;
    std::size_t next_ = 0;
    std::uint64_t epoch_seed_ = 0, epoch_offset_ = 0, epoch_ = 0;
};

}  // namespace depthlab::data
