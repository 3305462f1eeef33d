// Translation data (depthlab/data/translation.hpp): token-count batching with length
// bucketing, BOS/EOS and padding, determinism, file loading.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <depthlab/data/translation.hpp>

using namespace depthlab;
using namespace depthlab::data;

namespace {
// Pairs tagged by their index (src[0] = 1000 + i) so that every pair can be recognised in
// a batch; source length 1..40, target length within -4..+4 of it.
std::vector<token_pair> make_pairs(std::size_t n, std::uint64_t seed) {
    Generator g(seed);
    std::vector<token_pair> v(n);
    for (std::size_t i = 0; i < n; ++i) {
        // target lengths follow the source lengths loosely, as in real data
        const auto ls = 1 + g.below(40);
        const auto lt = std::max<std::uint64_t>(1, ls + g.below(9) - std::min<std::uint64_t>(ls, 4));
        v[i].src.push_back(1000 + static_cast<std::int64_t>(i));  // unique tag
        for (std::uint64_t k = 1; k < ls; ++k) v[i].src.push_back(4 + static_cast<std::int64_t>(g.below(500)));
        for (std::uint64_t k = 0; k < lt; ++k) v[i].tgt.push_back(4 + static_cast<std::int64_t>(g.below(500)));
    }
    return v;
}
}  // namespace

TEST_CASE("translation batcher: token budget, each pair once, padding") {
    const auto pairs = make_pairs(1500, 7);
    translation_batching cfg;
    cfg.max_tokens = 512;
    cfg.max_len = 40;  // drops the pairs with 40+ target tokens (+ BOS) or 40 source tokens (+ EOS)
    const translation_batcher tb(pairs, cfg);
    std::size_t expect_dropped = 0;
    for (const auto& p : pairs) expect_dropped += (p.src.size() + 1 > 40 || p.tgt.size() + 1 > 40);
    CHECK(tb.dropped() == expect_dropped);
    CHECK(tb.size() + tb.dropped() == pairs.size());

    Generator gen(42);
    for (int epoch = 0; epoch < 2; ++epoch) {
        std::map<std::int64_t, int> seen;
        std::size_t real_tokens = 0, padded = 0;
        for (const auto& b : tb.epoch(gen)) {
            const index_t B = b.src.batch, Ts = b.src.length, Tt = b.tgt_in.length;
            REQUIRE(B >= 1);
            CHECK(B * std::max(Ts, Tt) <= cfg.max_tokens);
            CHECK(b.tgt_in.batch == B);
            CHECK(b.src.ids.size() == static_cast<std::size_t>(B * Ts));
            CHECK(b.tgt_out.size() == static_cast<std::size_t>(B * Tt));
            CHECK(b.src.lengths.size() == static_cast<std::size_t>(B));
            index_t max_s = 0, max_t = 0;
            for (index_t r = 0; r < B; ++r) {
                const index_t ls = b.src.lengths[r], lt = b.tgt_in.lengths[r];
                max_s = std::max(max_s, ls);
                max_t = std::max(max_t, lt);
                ++seen[b.src.ids[r * Ts]];
                const token_pair& p = pairs[static_cast<std::size_t>(b.src.ids[r * Ts] - 1000)];
                REQUIRE(ls == static_cast<index_t>(p.src.size()) + 1);
                REQUIRE(lt == static_cast<index_t>(p.tgt.size()) + 1);
                for (index_t t = 0; t < Ts; ++t) {
                    const auto id = b.src.ids[r * Ts + t];
                    if (t < ls - 1) CHECK(id == p.src[t]);
                    else if (t == ls - 1) CHECK(id == cfg.eos_id);
                    else CHECK(id == cfg.pad_id);
                }
                CHECK(b.tgt_in.ids[r * Tt] == cfg.bos_id);
                for (index_t t = 0; t < Tt; ++t) {
                    const auto in = b.tgt_in.ids[r * Tt + t], out = b.tgt_out[r * Tt + t];
                    if (t < lt - 1) {
                        CHECK(out == p.tgt[t]);
                        CHECK(b.tgt_in.ids[r * Tt + t + 1] == p.tgt[t]);  // tgt_in is tgt_out shifted right
                    } else if (t == lt - 1) {
                        CHECK(out == cfg.eos_id);
                    } else {
                        CHECK(out == -100);
                        CHECK(in == cfg.pad_id);
                    }
                }
                real_tokens += static_cast<std::size_t>(lt);
            }
            CHECK(max_s == Ts);  // no all-padding column
            CHECK(max_t == Tt);
            CHECK(b.target_tokens() == std::accumulate(b.tgt_in.lengths.begin(), b.tgt_in.lengths.end(), std::int64_t{0}));
            padded += static_cast<std::size_t>(B * Tt);
        }
        CHECK(seen.size() == tb.size());
        for (const auto& [tag, count] : seen) CHECK(count == 1);
        // Length bucketing keeps the target padding small.
        CHECK(static_cast<double>(real_tokens) / static_cast<double>(padded) > 0.9);
    }
}

TEST_CASE("translation batcher: deterministic from the generator, windows, max_sentences") {
    const auto pairs = make_pairs(600, 3);
    translation_batching cfg;
    cfg.max_tokens = 300;
    cfg.window = 128;
    cfg.max_sentences = 16;
    cfg.src_eos = false;
    const translation_batcher tb(pairs, cfg);
    Generator g1(5), g2(5), g3(6);
    const auto p1 = tb.epoch_plan(g1), p2 = tb.epoch_plan(g2), p3 = tb.epoch_plan(g3);
    CHECK(p1 == p2);
    CHECK(p1 != p3);
    CHECK(g1.offset() == g2.offset());
    CHECK(tb.epoch_plan(g1) != p1);  // the next epoch differs
    std::vector<int> count(tb.size(), 0);
    for (const auto& b : p1) {
        CHECK(b.size() <= 16);
        index_t ts = 0, tt = 0;
        for (auto i : b) {
            ++count[i];
            ts = std::max(ts, tb.src_len(tb.pair(i)));
            tt = std::max(tt, tb.tgt_len(tb.pair(i)));
        }
        CHECK(static_cast<index_t>(b.size()) * std::max(ts, tt) <= 300);
        const auto batch = tb.make_batch(b);
        CHECK(batch.src.length == ts);  // no EOS on the source
        CHECK(batch.src.lengths[0] == static_cast<index_t>(tb.pair(b[0]).src.size()));
    }
    for (int c : count) CHECK(c == 1);
}

TEST_CASE("translation batcher: bad input") {
    std::vector<token_pair> pairs{{{5, 6}, {7}}, {{}, {8}}, {{5}, {-1}}};
    translation_batching cfg;
    cfg.src_eos = false;
    CHECK_THROWS_AS((void)translation_batcher(pairs, cfg), index_error);  // negative id
    pairs.pop_back();
    const translation_batcher tb(pairs, cfg);
    CHECK(tb.size() == 1);  // the empty source is dropped
    CHECK(tb.dropped() == 1);
    CHECK_THROWS_AS((void)tb.make_batch({}), usage_error);
    CHECK_THROWS_AS((void)tb.make_batch({3}), index_error);
    cfg.max_tokens = 0;
    CHECK_THROWS_AS((void)translation_batcher(pairs, cfg), usage_error);
}

TEST_CASE("translation files: aligned lines and id lines") {
    const auto dir = std::filesystem::temp_directory_path() / "depthlab_test_translation";
    std::filesystem::create_directories(dir);
    {
        std::ofstream(dir / "train.en") << "Can you spare a minute?\nHello.\r\n";
        std::ofstream(dir / "train.de") << "Haben Sie eine Minute Zeit?\nHallo.\n";
        std::ofstream(dir / "bad.en") << "one\ntwo\n";
        std::ofstream(dir / "bad.de") << "eins\n";
        std::ofstream(dir / "ids.txt") << "12 7 3\n\n5\n";
        std::ofstream(dir / "badids.txt") << "12 x\n";
    }
    const auto p = load_translation_split(dir.string(), "train");
    REQUIRE(p.size() == 2);
    CHECK(p.src[0] == "Can you spare a minute?");
    CHECK(p.tgt[0] == "Haben Sie eine Minute Zeit?");
    CHECK(p.src[1] == "Hello.");
    const auto r = load_translation_split(dir.string(), "train", "de", "en");
    CHECK(r.src[1] == "Hallo.");
    CHECK_THROWS_AS((void)load_translation_split(dir.string(), "bad"), io_error);
    CHECK_THROWS_AS((void)load_translation_split(dir.string(), "missing"), io_error);
    const auto ids = read_id_lines((dir / "ids.txt").string());
    CHECK(ids == std::vector<std::vector<std::int64_t>>{{12, 7, 3}, {}, {5}});
    CHECK_THROWS_AS((void)read_id_lines((dir / "badids.txt").string()), io_error);
    std::filesystem::remove_all(dir);
}
