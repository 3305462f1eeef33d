// ALBERT pretraining data (depthlab/data/albert_data.hpp): masking statistics, n-gram
// lengths, 80/10/10, special tokens, sentence order, categories, determinism and resume,
// padding; the id-file reader and the word-start rule.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "depthlab/data/albert_data.hpp"

using namespace depthlab;
using namespace depthlab::data;

namespace {

constexpr std::int64_t kVocab = 1000;

/// Random documents: 1..max_sentences sentences of 1..max_words ids in [5, vocab).
corpus random_corpus(std::uint64_t seed, int docs, int max_sentences = 20, int max_words = 40) {
    Generator g(seed);
    corpus c;
    for (int d = 0; d < docs; ++d) {
        std::vector<std::vector<std::int32_t>> doc(1 + g.below(static_cast<std::uint64_t>(max_sentences)));
        for (auto& s : doc) {
            s.resize(1 + g.below(static_cast<std::uint64_t>(max_words)));
            for (auto& t : s) t = static_cast<std::int32_t>(5 + g.below(kVocab - 5));
        }
        c.add_document(doc);
    }
    return c;
}

/// Documents whose tokens say where they come from: sentence j of document d is made of
/// the id 5 + 64 * d + j (j < 64).
corpus labelled_corpus(int docs, std::uint64_t seed) {
    Generator g(seed);
    corpus c;
    for (int d = 0; d < docs; ++d) {
        std::vector<std::vector<std::int64_t>> doc(1 + g.below(40));
        for (std::size_t j = 0; j < doc.size(); ++j) doc[j].assign(1 + g.below(30), 5 + 64 * d + static_cast<std::int64_t>(j));
        c.add_document(doc);
    }
    return c;
}

albert_data_config base_config(std::int64_t vocab = kVocab) {
    albert_data_config c;
    c.vocab = vocab;
    return c;
}

/// The example's ids before masking.
std::vector<std::int64_t> original_ids(const albert_example& e) {
    std::vector<std::int64_t> ids = e.ids;
    for (std::size_t k = 0; k < e.mlm_positions.size(); ++k) ids[static_cast<std::size_t>(e.mlm_positions[k])] = e.mlm_labels[k];
    return ids;
}

bool same_batch(const albert_batch& a, const albert_batch& b) {
    return a.tokens.batch == b.tokens.batch && a.tokens.length == b.tokens.length && a.tokens.ids == b.tokens.ids &&
           a.tokens.segments == b.tokens.segments && a.tokens.lengths == b.tokens.lengths && a.mlm_positions == b.mlm_positions &&
           a.mlm_labels == b.mlm_labels && a.sop_labels == b.sop_labels && a.token_category == b.token_category;
}

}  // namespace

TEST_CASE("albert data: masking rate, prediction cap and 80/10/10 on a large synthetic corpus") {
    for (const double p : {0.15, 0.20}) {
        CAPTURE(p);
        albert_data_config cfg = base_config();
        cfg.mask_prob = p;
        cfg.max_predictions = p > 0.16 ? 26 : 20;  // round(128 * 0.2) = 26: the cap must not bind
        albert_sampler s(random_corpus(1, 400), cfg, 42);
        masking_stats st;
        std::int64_t over_cap = 0;
        for (int i = 0; i < 40; ++i) {
            const albert_batch b = s.next(64, &st);
            for (index_t r = 0; r < b.size(); ++r) {
                const auto n = std::count_if(b.mlm_positions.begin(), b.mlm_positions.end(),
                                             [&](std::int64_t q) { return q / b.tokens.length == r; });
                over_cap += n > cfg.max_predictions;
            }
        }
        CHECK(over_cap == 0);
        REQUIRE(st.sequences == 2560);
        const double rate = static_cast<double>(st.predictions) / static_cast<double>(st.tokens);
        CHECK(std::abs(rate - p) < 0.01);
        const double pred = static_cast<double>(st.predictions);
        CHECK(std::abs(st.to_mask / pred - 0.8) < 0.01);
        CHECK(std::abs(st.to_random / pred - 0.1) < 0.01);
        CHECK(std::abs(st.kept / pred - 0.1) < 0.01);
    }
    SUBCASE("num_to_predict = min(max_predictions, max(1, round_half_even(length * mask_prob)))") {
        albert_data_config cfg = base_config();
        albert_sampler s(random_corpus(12, 300), cfg, 8);
        int exact = 0, over = 0;
        for (index_t i = 0; i < s.epoch_size(); ++i) {
            const albert_example e = s.example(i);
            const auto expected = std::min<index_t>(20, std::max<index_t>(1, static_cast<index_t>(std::nearbyint(e.length() * 0.15))));
            const auto n = static_cast<index_t>(e.mlm_positions.size());
            exact += n == expected;
            over += n > expected;
        }
        CHECK(over == 0);
        CHECK(exact >= s.epoch_size() * 99 / 100);
    }
    SUBCASE("the 20-prediction cap binds for 20% at length 128") {
        albert_data_config cfg = base_config();
        cfg.mask_prob = 0.2;
        cfg.short_seq_prob = 0;
        albert_sampler s(random_corpus(2, 100, 40, 40), cfg, 3);
        for (int i = 0; i < 10; ++i) {
            const albert_batch b = s.next(32);
            for (index_t r = 0; r < b.size(); ++r) {
                const auto n = std::count_if(b.mlm_positions.begin(), b.mlm_positions.end(),
                                             [&](std::int64_t q) { return q / b.tokens.length == r; });
                CHECK(n <= 20);
                if (b.tokens.lengths[static_cast<std::size_t>(r)] == 128) CHECK(n == 20);
            }
        }
    }
}

TEST_CASE("albert data: n-gram lengths follow p(n) ∝ 1/n") {
    albert_data_config cfg = base_config();
    albert_sampler s(random_corpus(3, 400), cfg, 5);
    masking_stats st;
    for (int i = 0; i < 40; ++i) (void)s.next(64, &st);
    const double expected[4] = {0, 6.0 / 11, 3.0 / 11, 2.0 / 11};
    double drawn = 0, accepted = 0;
    for (int n = 1; n <= 3; ++n) {
        drawn += static_cast<double>(st.ngram_drawn[static_cast<std::size_t>(n)]);
        accepted += static_cast<double>(st.ngram_accepted[static_cast<std::size_t>(n)]);
    }
    CHECK(st.ngram_drawn[4] == 0);
    CHECK(st.ngram_accepted[4] == 0);
    double chi2 = 0;
    for (int n = 1; n <= 3; ++n) {
        const double e = drawn * expected[n];
        const double o = static_cast<double>(st.ngram_drawn[static_cast<std::size_t>(n)]);
        chi2 += (o - e) * (o - e) / e;
    }
    CAPTURE(chi2);
    CHECK(chi2 < 13.8);  // 2 degrees of freedom, p = 0.001
    // The masked n-grams: overlaps and the prediction cap reject long ones more often, so
    // the shares tilt towards n = 1 but keep the order of p(n).
    const double a1 = st.ngram_accepted[1] / accepted, a2 = st.ngram_accepted[2] / accepted, a3 = st.ngram_accepted[3] / accepted;
    CAPTURE(a1);
    CAPTURE(a2);
    CAPTURE(a3);
    CHECK(a1 > a2);
    CHECK(a2 > a3);
    CHECK(std::abs(a1 - 6.0 / 11) < 0.1);
    CHECK(std::abs(a2 - 3.0 / 11) < 0.05);
    CHECK(std::abs(a3 - 2.0 / 11) < 0.07);
    SUBCASE("favor_shorter_ngram = false reverses p(n)") {
        albert_data_config c2 = base_config();
        c2.favor_shorter_ngram = false;
        albert_sampler s2(random_corpus(3, 100), c2, 5);
        masking_stats st2;
        for (int i = 0; i < 10; ++i) (void)s2.next(64, &st2);
        CHECK(st2.ngram_drawn[3] > st2.ngram_drawn[2]);
        CHECK(st2.ngram_drawn[2] > st2.ngram_drawn[1]);
    }
}

TEST_CASE("albert data: specials are never masked, categories match the ids, padding is right") {
    albert_data_config cfg = base_config();
    albert_sampler s(random_corpus(4, 200), cfg, 9);
    const special_ids sp = cfg.specials;
    int bad = 0, batches = 0;
    for (int i = 0; i < 20; ++i, ++batches) {
        const albert_batch b = s.next(32);
        const index_t T = b.tokens.length;
        index_t longest = 0;
        std::set<std::int64_t> chosen(b.mlm_positions.begin(), b.mlm_positions.end());
        REQUIRE(chosen.size() == b.mlm_positions.size());
        REQUIRE(std::is_sorted(b.mlm_positions.begin(), b.mlm_positions.end()));
        REQUIRE(b.mlm_labels.size() == b.mlm_positions.size());
        std::vector<std::int64_t> label_at(static_cast<std::size_t>(b.size() * T), -1);
        for (std::size_t k = 0; k < b.mlm_positions.size(); ++k) label_at[static_cast<std::size_t>(b.mlm_positions[k])] = b.mlm_labels[k];
        for (index_t r = 0; r < b.size(); ++r) {
            const index_t L = b.tokens.lengths[static_cast<std::size_t>(r)];
            longest = std::max(longest, L);
            bad += L < 5 || L > cfg.max_len;
            index_t seps = 0, last_sep = -1, first_sep = -1;
            for (index_t t = 0; t < T; ++t) {
                const auto q = static_cast<std::size_t>(r * T + t);
                const std::int64_t id = b.tokens.ids[q], seg = b.tokens.segments[q];
                const auto cat = b.category(r, t);
                if (t >= L) {
                    bad += id != 0 || seg != 0 || cat != token_category::pad || label_at[q] != -1;
                    continue;
                }
                if (id == sp.sep) {
                    ++seps;
                    if (first_sep < 0) first_sep = t;
                    last_sep = t;
                }
                switch (cat) {
                    case token_category::pad: ++bad; break;
                    case token_category::cls: bad += t != 0 || id != sp.cls || seg != 0 || label_at[q] != -1; break;
                    case token_category::sep: bad += id != sp.sep || label_at[q] != -1; break;
                    case token_category::unmasked:
                        bad += label_at[q] != -1 || id == sp.cls || id == sp.sep || id == sp.pad || id == sp.mask;
                        break;
                    case token_category::mask_to_mask: bad += id != sp.mask || label_at[q] < cfg.random_min; break;
                    case token_category::mask_to_random:
                        bad += id < cfg.random_min || id >= cfg.vocab || label_at[q] < cfg.random_min;
                        break;
                    case token_category::mask_to_original: bad += id != label_at[q] || label_at[q] < cfg.random_min; break;
                }
                bad += seg != (first_sep >= 0 && t > first_sep ? 1 : 0);
            }
            bad += seps != 2 || last_sep != L - 1 || b.category(r, 0) != token_category::cls;
        }
        bad += T != longest;
    }
    CHECK(bad == 0);
    SUBCASE("pad_to_max_len") {
        albert_data_config c2 = cfg;
        c2.pad_to_max_len = true;
        albert_sampler s2(random_corpus(4, 50), c2, 9);
        CHECK(s2.next(8).tokens.length == 128);
    }
    SUBCASE("long documents fill the sequences") {
        albert_data_config c2 = cfg;
        c2.short_seq_prob = 0;
        albert_sampler s2(random_corpus(5, 50, 60, 30), c2, 1);
        int full = 0, n = 0;
        for (int i = 0; i < 10; ++i) {
            const albert_batch b = s2.next(32);
            for (const auto L : b.tokens.lengths) full += L == 128, ++n;
        }
        CHECK(full > n * 8 / 10);
    }
}

TEST_CASE("albert data: sentence order — labels balanced, segments really swapped") {
    const corpus c = labelled_corpus(100, 7);
    for (const auto policy : {single_sentence_policy::random_document, single_sentence_policy::split, single_sentence_policy::skip}) {
        CAPTURE(static_cast<int>(policy));
        albert_data_config cfg = base_config(64 * 100 + 5);
        cfg.single_sentence = policy;
        cfg.max_len = 64;
        albert_sampler s(c, cfg, 11);
        int swapped = 0, in_order = 0, random_next = 0, bad = 0, singles = 0;
        for (int epoch = 0; epoch < 3; ++epoch) {
            for (index_t i = 0; i < s.epoch_size(); ++i) {
                const albert_example e = s.example(i);
                const albert_chunk ch = s.chunks()[static_cast<std::size_t>(i)];
                const auto ids = original_ids(e);
                auto doc = [](std::int64_t id) { return (id - 5) / 64; };
                auto sent = [](std::int64_t id) { return (id - 5) % 64; };
                const auto a_begin = ids.begin() + 1, a_end = a_begin + e.a_length;
                const auto b_begin = a_end + 1, b_end = b_begin + e.b_length;
                bad += e.length() != e.a_length + e.b_length + 3;
                const auto [a_min, a_max] = std::minmax_element(a_begin, a_end);
                const auto [b_min, b_max] = std::minmax_element(b_begin, b_end);
                bad += doc(*a_min) != ch.doc || doc(*a_max) != ch.doc;
                if (ch.count == 1) {
                    ++singles;
                    bad += policy == single_sentence_policy::skip;
                    if (policy == single_sentence_policy::random_document) {
                        bad += !e.random_next || e.sop_label != 1 || doc(*b_min) == ch.doc || doc(*b_min) != doc(*b_max);
                        ++random_next;
                    } else {  // split: both halves of the same sentence
                        bad += e.random_next || *a_min != *b_max || *a_max != *b_min || *a_min != *a_max;
                        (e.sop_label ? swapped : in_order)++;
                    }
                    continue;
                }
                bad += e.random_next || doc(*b_min) != ch.doc || doc(*b_max) != ch.doc;
                if (e.sop_label == 0) {
                    bad += !(sent(*a_max) < sent(*b_min));
                    ++in_order;
                } else {
                    bad += !(sent(*b_max) < sent(*a_min));
                    ++swapped;
                }
                // The first sentence of A (in document order) opens the chunk, unless truncated away.
            }
            s.set_state({11, static_cast<std::uint64_t>(epoch + 1), 0});
        }
        CHECK(bad == 0);
        CHECK((singles > 0) == (policy != single_sentence_policy::skip));
        const double frac = static_cast<double>(swapped) / (swapped + in_order);
        CAPTURE(swapped);
        CAPTURE(in_order);
        CHECK(std::abs(frac - 0.5) < 0.04);
        if (policy != single_sentence_policy::random_document) CHECK(random_next == 0);
    }
}

TEST_CASE("albert data: chunk_jitter regroups the sentences every epoch and drops none") {
    const corpus c = labelled_corpus(200, 13);
    // Fraction of epoch 1's chunks (document, first sentence) that epoch 0 also had, after
    // checking that each epoch's chunks tile every document exactly.
    auto shared_fraction = [&](bool jitter) {
        albert_data_config cfg = base_config(64 * 200 + 5);
        cfg.max_len = 64;
        cfg.short_seq_prob = 0;  // without jitter the boundaries are then the same every epoch
        cfg.chunk_jitter = jitter;
        albert_sampler s(c, cfg, 21);
        std::set<std::pair<std::int32_t, std::int32_t>> starts[2];
        for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
            s.set_state({21, epoch, 0});
            std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>> by_doc(static_cast<std::size_t>(c.documents()));
            for (const albert_chunk& ch : s.chunks()) {
                by_doc[static_cast<std::size_t>(ch.doc)].emplace_back(ch.first, ch.count);
                starts[epoch].emplace(ch.doc, ch.first);
            }
            for (index_t d = 0; d < c.documents(); ++d) {
                auto& v = by_doc[static_cast<std::size_t>(d)];
                std::sort(v.begin(), v.end());
                std::int32_t next = 0;
                for (const auto& [first, count] : v) {
                    CHECK(first == next);
                    next = first + count;
                }
                CHECK(next == c.document_sentences(d));
            }
        }
        std::size_t shared = 0;
        for (const auto& k : starts[1]) shared += starts[0].count(k);
        return static_cast<double>(shared) / static_cast<double>(starts[1].size());
    };
    const double plain = shared_fraction(false), jittered = shared_fraction(true);
    CAPTURE(plain);
    CAPTURE(jittered);
    CHECK(plain == 1.0);
    CHECK(jittered < 0.8);
}

TEST_CASE("albert data: deterministic from the seed, resumable from (seed, epoch, position)") {
    const corpus c = random_corpus(6, 40);
    const albert_data_config cfg = base_config();
    albert_sampler a(c, cfg, 123), b(c, cfg, 123), other(c, cfg, 124);
    for (int i = 0; i < 5; ++i) CHECK(same_batch(a.next(16), b.next(16)));
    albert_sampler fresh(c, cfg, 123);
    CHECK_FALSE(same_batch(fresh.next(16), other.next(16)));

    // Resume across epoch boundaries.
    albert_sampler run(c, cfg, 77);
    const index_t epoch = run.epoch_size();
    REQUIRE(epoch > 16);
    std::vector<albert_batch> expected;
    std::vector<sampler_state> states;
    for (int i = 0; i < 3 * epoch / 16 + 2; ++i) {
        states.push_back(run.state());
        expected.push_back(run.next(16));
    }
    CHECK(run.epoch() >= 2);
    for (std::size_t i = 0; i < states.size(); i += 3) {
        albert_sampler resumed(c, cfg, 0);
        resumed.set_state(states[i]);
        CHECK(same_batch(resumed.next(16), expected[i]));
    }
    // Epochs differ (documents reshuffled, fresh masks), examples are pure functions.
    albert_sampler e0(c, cfg, 77), e1(c, cfg, 77);
    e1.set_state({77, 1, 0});
    CHECK_FALSE(same_batch(e0.next(16), e1.next(16)));
    CHECK(e0.example(3).ids == albert_sampler(c, cfg, 77).example(3).ids);
    CHECK_THROWS_AS(e0.set_state({77, 0, static_cast<std::uint64_t>(e0.epoch_size()) + 1}), index_error);
}

TEST_CASE("albert data: whole-word masking masks whole words") {
    // Ids 5..499 start words, 500..999 continue them.
    albert_data_config cfg = base_config();
    cfg.word_start.assign(kVocab, 0);
    for (int i = 0; i < 500; ++i) cfg.word_start[static_cast<std::size_t>(i)] = 1;
    albert_sampler s(random_corpus(8, 200), cfg, 2);
    masking_stats st;
    int bad = 0;
    for (index_t i = 0; i < 400; ++i) {
        const albert_example e = s.example(i % s.epoch_size(), &st);
        const auto ids = original_ids(e);
        std::vector<char> chosen(ids.size(), 0);
        for (const auto p : e.mlm_positions) chosen[static_cast<std::size_t>(p)] = 1;
        // A word: a start (or the token after [CLS]/[SEP]) and the continuation tokens after it.
        for (std::size_t t = 1; t < ids.size(); ++t) {
            const bool special = ids[t] == cfg.specials.sep;
            const bool prev_special = ids[t - 1] == cfg.specials.cls || ids[t - 1] == cfg.specials.sep;
            if (!special && !prev_special && ids[t] >= 500) bad += chosen[t] != chosen[t - 1];
        }
        bad += static_cast<index_t>(e.mlm_positions.size()) > cfg.max_predictions;
    }
    CHECK(bad == 0);
    const double rate = static_cast<double>(st.predictions) / static_cast<double>(st.tokens);
    CAPTURE(rate);
    CHECK(std::abs(rate - 0.15) < 0.015);
}

TEST_CASE("albert data: configuration and corpus checks") {
    albert_data_config cfg;
    CHECK_THROWS_AS(cfg.validate(), usage_error);  // vocab unset
    cfg.vocab = 10;
    CHECK_THROWS_AS(albert_sampler(random_corpus(1, 3), cfg, 0), index_error);  // ids up to 999
    cfg.vocab = kVocab;
    CHECK_THROWS_AS(albert_sampler(corpus{}, cfg, 0), usage_error);
    cfg.max_len = 4;
    CHECK_THROWS_AS(cfg.validate(), usage_error);

    corpus c(std::vector<std::vector<std::vector<int>>>{{{7, 8}, {}, {9}}, {}, {{}}, {{10, 11, 12}}});
    CHECK(c.documents() == 2);
    CHECK(c.sentences() == 3);
    CHECK(c.tokens() == 6);
    CHECK(c.document_sentences(0) == 2);
    CHECK(c.sentence(1, 0).size() == 3);
    CHECK(c.max_id() == 12);
    CHECK_THROWS_AS((void)c.sentence(2, 0), index_error);
    CHECK_THROWS_AS(c.add_document(std::vector<std::vector<int>>{{-1}}), index_error);
}

TEST_CASE("albert data: id files and the word-start rule") {
    const std::string path = "depthlab_test_data_ids.txt";
    {
        std::ofstream out(path);
        out << "5 6 7\n8 9\n\n\n10\r\n 11  12 \n";
    }
    const corpus c = read_id_corpus(path);
    CHECK(c.documents() == 2);
    CHECK(c.sentences() == 4);
    CHECK(c.document_sentences(1) == 2);
    CHECK(std::vector<std::int32_t>(c.sentence(1, 1).begin(), c.sentence(1, 1).end()) == std::vector<std::int32_t>{11, 12});
    {
        std::ofstream out(path);
        out << "5 6\n7 x8\n";
    }
    CHECK_THROWS_WITH_AS((void)read_id_corpus(path), doctest::Contains("line 2"), io_error);
    std::remove(path.c_str());
    CHECK_THROWS_WITH_AS((void)read_id_corpus("no/such/file.ids"), doctest::Contains("no/such/file.ids"), io_error);

    CHECK(is_word_start_piece("\xE2\x96\x81the"));
    CHECK_FALSE(is_word_start_piece("ing"));
    CHECK_FALSE(is_word_start_piece("s."));
    CHECK(is_word_start_piece(","));
    CHECK(is_word_start_piece("12"));
    CHECK(is_word_start_piece("\xC3\xA9t\xC3\xA9"));
    CHECK(is_word_start_piece("<unk>"));
    const std::vector<std::string> pieces{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "\xE2\x96\x81" "a", "b"};
    CHECK(word_start_table(pieces) == std::vector<std::uint8_t>{1, 1, 1, 1, 1, 1, 0});
}
