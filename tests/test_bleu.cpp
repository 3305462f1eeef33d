// BLEU and chrF (depthlab/metrics): hand-worked cases and the values of
// tests/fixtures/bleu.json (scripts/make_bleu_fixture.py; see there for where they come from).
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <depthlab/metrics/bleu.hpp>
#include <depthlab/metrics/chrf.hpp>
#include <depthlab/metrics/bootstrap.hpp>

using namespace depthlab::metrics;
using strings = std::vector<std::string>;

namespace {
bleu_score bleu1(const std::string& hyp, const std::string& ref, const bleu_options& o = {}) {
    const strings h{hyp}, r{ref};
    return corpus_bleu(h, r, o);
}
}  // namespace

TEST_CASE("BLEU 13a tokenisation") {
    CHECK(tokenize_13a("Hello, world!") == "Hello , world !");
    // ',' and '.' stay between digits; '-' splits after a digit only; '$' is a symbol.
    CHECK(tokenize_13a("I paid $1,000.50 for 2-3 tickets.") == "I paid $ 1,000.50 for 2 - 3 tickets .");
    // A '.' with a digit on one side only: split by the rule for the other side.
    CHECK(tokenize_13a("Na.1 1.a a.b 1,2 a,1") == "Na . 1 1 . a a . b 1,2 a , 1");
    CHECK(tokenize_13a("3.14, 2,5") == "3.14 , 2,5");
    // Apostrophes and hyphens between letters are kept.
    CHECK(tokenize_13a("Don't stop-believing, e.g. now.") == "Don't stop-believing , e . g . now .");
    // SGML entities are unescaped first, then the symbols are split off.
    CHECK(tokenize_13a("He said &quot;hi&quot; &amp; left &lt;now&gt;.") == "He said \" hi \" & left < now > .");
    CHECK(tokenize_13a("a<skipped>b c-\nd e\nf") == "ab cd e f");
    // Python's whitespace: tab, no-break space, em space; non-ASCII punctuation is a letter to 13a.
    CHECK(tokenize_13a("  spaces\tand\u00a0nbsp\u2003x  ") == "spaces and nbsp x");
    CHECK(tokenize_13a("Über „Zitat“ – ja…") == "Über „Zitat“ – ja…");
    CHECK(tokenize_13a("...") == ". . .");
    CHECK(tokenize_13a("") == "");
}

TEST_CASE("BLEU: identical sentences score 100") {
    const auto s = bleu1("the quick brown fox jumps over the lazy dog", "the quick brown fox jumps over the lazy dog");
    CHECK(s.score == doctest::Approx(100.0).epsilon(1e-12));
    for (double p : s.precisions) CHECK(p == doctest::Approx(100.0));
    CHECK(s.bp == 1.0);
    CHECK(s.sys_len == 9);
    CHECK(s.ref_len == 9);
}

TEST_CASE("BLEU: a worked example") {
    // hyp "the cat sat on the mat", ref "the cat is on the mat" (6 tokens each, BP = 1)
    // 1-grams: the x2, cat, on, mat match; sat does not      -> 5/6
    // 2-grams: the cat, on the, the mat of 5                 -> 3/5
    // 3-grams: on the mat of 4                               -> 1/4
    // 4-grams: none of 3 -> exp smoothing: 1 / (2 * 3)        -> 1/6
    // BLEU = (5/6 * 3/5 * 1/4 * 1/6)^(1/4) = (1/48)^(1/4) = 0.379918...
    const auto s = bleu1("the cat sat on the mat", "the cat is on the mat");
    CHECK(s.counts == std::vector<std::int64_t>{5, 3, 1, 0});
    CHECK(s.totals == std::vector<std::int64_t>{6, 5, 4, 3});
    CHECK(s.precisions[0] == doctest::Approx(100.0 * 5 / 6));
    CHECK(s.precisions[1] == doctest::Approx(60.0));
    CHECK(s.precisions[2] == doctest::Approx(25.0));
    CHECK(s.precisions[3] == doctest::Approx(100.0 / 6));
    CHECK(s.score == doctest::Approx(100.0 * std::pow(1.0 / 48, 0.25)).epsilon(1e-12));
    CHECK(s.format() == "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:depthlab-" +
                            std::string(depthlab::version_string()) +
                            " = 37.99 83.3/60.0/25.0/16.7 (BP = 1.000 ratio = 1.000 hyp_len = 6 ref_len = 6)");
    CHECK(s.format(2, false) == "BLEU = 37.99 83.3/60.0/25.0/16.7 (BP = 1.000 ratio = 1.000 hyp_len = 6 ref_len = 6)");
}

TEST_CASE("BLEU: clipping and exp smoothing of several empty orders") {
    // hyp "the" x7 against "the cat is on the mat": "the" is clipped to 2 -> p1 = 2/7;
    // no 2-, 3-, 4-gram matches: p2 = 1/(2*6), p3 = 1/(4*5), p4 = 1/(8*4).
    const auto s = bleu1("the the the the the the the", "the cat is on the mat");
    CHECK(s.counts == std::vector<std::int64_t>{2, 0, 0, 0});
    CHECK(s.precisions[1] == doctest::Approx(100.0 / 12));
    CHECK(s.precisions[2] == doctest::Approx(100.0 / 20));
    CHECK(s.precisions[3] == doctest::Approx(100.0 / 32));
    CHECK(s.score == doctest::Approx(std::pow(100.0 * 2 / 7 * 100.0 / 12 * 100.0 / 20 * 100.0 / 32, 0.25)));
    CHECK(s.bp == 1.0);  // 7 >= 6
}

TEST_CASE("BLEU: brevity penalty") {
    // hyp = the first 5 of the 6 reference tokens: every n-gram matches, BP = exp(1 - 6/5).
    const auto s = bleu1("the cat sat on the", "the cat sat on the mat");
    CHECK(s.bp == doctest::Approx(std::exp(-0.2)));
    CHECK(s.score == doctest::Approx(100.0 * std::exp(-0.2)));
    CHECK(s.ratio() == doctest::Approx(5.0 / 6));
    // Two tokens: no 3-gram, so order 3 and 4 have precision 0 and the corpus score is 0;
    // sentence BLEU (effective order) uses orders 1-2 only: 100 * exp(1 - 6/2).
    CHECK(bleu1("the cat", "the cat sat on the mat").score == 0.0);
    const strings refs{"the cat sat on the mat"};
    CHECK(sentence_bleu("the cat", refs).score == doctest::Approx(100.0 * std::exp(-2.0)));
    // An empty hypothesis: BP = 0, score 0.
    const auto e = bleu1("", "the cat");
    CHECK(e.bp == 0.0);
    CHECK(e.score == 0.0);
}

TEST_CASE("BLEU: no match scores 0") {
    const auto s = bleu1("a b c d", "w x y z");
    CHECK(s.score == 0.0);
    for (double p : s.precisions) CHECK(p == 0.0);
    CHECK(s.bp == 1.0);
}

TEST_CASE("BLEU: multiple references") {
    // refs "the cat is on the mat" and "a cat sat on the mat"; the clip count of an n-gram
    // is its largest count in any one reference.
    // 1-grams 6/6; 2-grams 5/5 (cat sat, sat on from ref 2); 3-grams: cat sat on, sat on the,
    // on the mat -> 3/4; 4-grams: cat sat on the, sat on the mat -> 2/3.
    // BLEU = (1 * 1 * 3/4 * 2/3)^(1/4) = 0.5^(1/4)
    const strings hyps{"the cat sat on the mat"};
    const std::vector<strings> refs{{"the cat is on the mat"}, {"a cat sat on the mat"}};
    const auto s = corpus_bleu(hyps, refs);
    CHECK(s.counts == std::vector<std::int64_t>{6, 5, 3, 2});
    CHECK(s.score == doctest::Approx(100.0 * std::pow(0.5, 0.25)));
    CHECK(s.nrefs == 2);
    // Closest reference length; on a tie the shorter one: hyp of 5 tokens, refs of 4 and 6.
    const strings h5{"a b c d e"};
    const std::vector<strings> r46{{"a b c d"}, {"a b c d e f"}};
    CHECK(corpus_bleu(h5, r46).ref_len == 4);
    const std::vector<strings> r64{{"a b c d e f"}, {"a b c d"}};
    CHECK(corpus_bleu(h5, r64).ref_len == 4);
    // An empty reference is a reference of length 0 (sacreBLEU >= 2.2): it counts in nrefs
    // and its length can be the closest (hyp "x y": 2 away from both 4 and 0, the shorter wins).
    const strings h2{"a b c d e", "x y"};
    const std::vector<strings> var{{"a b c d e", "x y z w"}, {"a b c d", ""}};
    const auto z = corpus_bleu(h2, var);
    CHECK(z.nrefs == 2);
    CHECK(z.ref_len == 5 + 0);
    // With empty_reference::absent it is no reference: the segment has fewer (nrefs:var).
    bleu_options absent;
    absent.empty_refs = empty_reference::absent;
    const auto v = corpus_bleu(h2, var, absent);
    CHECK(v.nrefs == -1);
    CHECK(v.ref_len == 5 + 4);
    CHECK(v.signature().starts_with("nrefs:var|"));
}

TEST_CASE("BLEU: accumulation, options and errors") {
    const strings hyps{"the cat sat on the mat", "a b c d e"}, refs{"the cat is on the mat", "a b c d e f"};
    bleu_accumulator acc;
    for (std::size_t i = 0; i < hyps.size(); ++i) acc.add(hyps[i], refs[i]);
    const auto a = acc.score(), c = corpus_bleu(hyps, refs);
    CHECK(a.score == c.score);
    CHECK(a.sys_len == 11);
    CHECK(a.ref_len == 12);
    bleu_stats st = acc.segment_stats(hyps[0], strings{refs[0]});
    st += acc.segment_stats(hyps[1], strings{refs[1]});
    CHECK(compute_bleu(st).score == c.score);

    bleu_options none;
    none.smooth = bleu_smooth::none;
    CHECK(bleu1("the cat sat on the mat", "the cat is on the mat", none).score == 0.0);  // p4 = 0
    bleu_options floor;
    floor.smooth = bleu_smooth::floor;  // p4 = 0.1 / 3
    CHECK(bleu1("the cat sat on the mat", "the cat is on the mat", floor).precisions[3] == doctest::Approx(100.0 * 0.1 / 3));
    CHECK(bleu1("a b", "a b", floor).signature().find("smooth:floor[0.10]") != std::string::npos);
    bleu_options raw;
    raw.tokenize = false;  // tokenize='none': "mat." is one token
    CHECK(bleu1("the cat sat on the mat.", "the cat sat on the mat .", raw).counts[0] == 5);
    CHECK(bleu1("the cat sat on the mat.", "the cat sat on the mat .").counts[0] == 7);

    const strings one{"a"}, two{"a", "b"};
    CHECK_THROWS_AS((void)corpus_bleu(two, one), depthlab::usage_error);
    const strings empty_ref{""};
    CHECK(corpus_bleu(one, empty_ref).score == 0.0);
    bleu_options absent;
    absent.empty_refs = empty_reference::absent;
    CHECK_THROWS_AS((void)corpus_bleu(one, empty_ref, absent), depthlab::usage_error);
}

TEST_CASE("chrF: worked examples") {
    const strings ab{"ab"};
    CHECK(sentence_chrf("ab", ab).score == doctest::Approx(100.0));
    CHECK(sentence_chrf("a b", ab).score == doctest::Approx(100.0));  // whitespace is removed
    // "abc" vs "abd": 1-grams 2/3, 2-grams 1/2, 3-grams 0/1; orders 4-6 have no n-grams and
    // do not count. P = R = (2/3 + 1/2 + 0) / 3 = 7/18, so F2 = 5PR / (4P + R) = 7/18.
    const strings abd{"abd"};
    const auto s = sentence_chrf("abc", abd);
    CHECK(s.score == doctest::Approx(100.0 * 7 / 18));
    CHECK(s.format(2, false) == "chrF2 = 38.89");
    CHECK(s.signature().starts_with("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:depthlab-"));
    const strings xyz{"xyz"};
    CHECK(sentence_chrf("abc", xyz).score == 0.0);
    // Characters are code points: "ä" is one 1-gram.
    const strings u{"äb"};
    CHECK(sentence_chrf("äc", u).stats[0] == 2);
}

TEST_CASE("BLEU and chrF agree with the fixture") {
    std::ifstream f(std::string(DEPTHLAB_FIXTURE_DIR) + "/bleu.json");
    REQUIRE(f.good());
    const auto j = nlohmann::json::parse(f);
    INFO("generator: " << j["generator"].get<std::string>());
    for (const auto& t : j["tokenize_13a"]) {
        INFO("13a input: " << t[0].get<std::string>());
        CHECK(tokenize_13a(t[0].get<std::string>()) == t[1].get<std::string>());
    }
    for (const auto& c : j["cases"]) {
        INFO("case " << c["name"].get<std::string>());
        const auto hyps = c["hyps"].get<strings>();
        // A null reference is sacreBLEU's None (absent): "" with empty_reference::absent.
        std::vector<strings> refs;
        bool absent = false;
        for (const auto& stream : c["refs"]) {
            refs.emplace_back();
            for (const auto& r : stream) {
                absent = absent || r.is_null();
                refs.back().push_back(r.is_null() ? std::string() : r.get<std::string>());
            }
        }
        const auto empty_refs = absent ? empty_reference::absent : empty_reference::zero_length;
        bleu_options bo;
        bo.empty_refs = empty_refs;
        chrf_options co, pp, b3;
        co.empty_refs = pp.empty_refs = b3.empty_refs = empty_refs;
        pp.word_order = 2;
        b3.beta = 3;
        bleu_options sbo = sentence_bleu_options();
        sbo.empty_refs = empty_refs;

        const auto b = corpus_bleu(hyps, refs, bo);
        const auto& e = c["bleu"];
        CHECK(b.score == doctest::Approx(e["score"].get<double>()).epsilon(1e-12));
        CHECK(b.bp == doctest::Approx(e["bp"].get<double>()).epsilon(1e-12));
        CHECK(b.sys_len == e["sys_len"].get<std::int64_t>());
        CHECK(b.ref_len == e["ref_len"].get<std::int64_t>());
        CHECK(b.counts == e["counts"].get<std::vector<std::int64_t>>());
        CHECK(b.totals == e["totals"].get<std::vector<std::int64_t>>());
        for (int n = 0; n < 4; ++n) CHECK(b.precisions[n] == doctest::Approx(e["precisions"][n].get<double>()).epsilon(1e-12));
        CHECK(b.nrefs == c["nrefs"].get<int>());
        // chrF takes no libm function, so it is bit for bit sacreBLEU's (which also decides
        // which of two equal-looking references a segment takes).
        const auto cf = corpus_chrf(hyps, refs, co);
        CHECK(cf.score == c["chrf"].get<double>());
        CHECK(cf.nrefs == c["nrefs"].get<int>());
        CHECK(corpus_chrf(hyps, refs, pp).score == c["chrf_pp"].get<double>());
        CHECK(corpus_chrf(hyps, refs, b3).score == c["chrf_beta3"].get<double>());
        for (std::size_t i = 0; i < hyps.size(); ++i) {
            strings r;
            for (const auto& s : refs) r.push_back(s[i]);
            INFO("segment " << i);
            CHECK(sentence_bleu(hyps[i], r, sbo).score == doctest::Approx(c["sentence_bleu"][i].get<double>()).epsilon(1e-12));
            CHECK(sentence_chrf(hyps[i], r, co).score == c["sentence_chrf"][i].get<double>());
        }
    }
}

TEST_CASE("chrF reference ties and empty references as sacreBLEU 2.6.0 scores them") {
    // Expected values: sacrebleu 2.6.0, CHRF().corpus_score / sacrebleu.sentence_bleu.
    // Both references of segment 0 score 20.833333333333336 there, so the first ("ac") is
    // taken; a score rounded differently prefers "bacba" and gives 37.65.
    const strings hyps{"aabb", "abc"};
    const std::vector<strings> refs{{"ac", "abc"}, {"bacba", "abc"}};
    const auto c = corpus_chrf(hyps, refs);
    CHECK(c.score == 78.2888684452622);
    CHECK(c.format(2, false) == "chrF2 = 78.29");
    chrf_accumulator acc;
    const auto st = acc.segment_stats("aabb", strings{"ac", "bacba"});
    CHECK(st == acc.segment_stats("aabb", strings{"ac"}));
    CHECK(chrf_f_score(st, {}) == chrf_f_score(acc.segment_stats("aabb", strings{"bacba"}), {}));

    // "" is a zero-length reference: 0 and 4 are both 2 away from the hypothesis length 2,
    // and the shorter wins, so there is no brevity penalty (sacreBLEU: 100.00000000000004).
    const strings two{"a b c d", ""};
    const auto s = sentence_bleu("a b", two);
    CHECK(s.score == doctest::Approx(100.00000000000004).epsilon(1e-12));
    CHECK(s.ref_len == 0);
    CHECK(s.nrefs == 2);
    // As an absent reference (sacreBLEU's None; sacreBLEU < 2.2 treated "" so):
    // BP = exp(1 - 4/2), sacreBLEU gives 36.78794411714425 for {"a b c d", None}.
    bleu_options absent = sentence_bleu_options();
    absent.empty_refs = empty_reference::absent;
    CHECK(sentence_bleu("a b", two, absent).score == doctest::Approx(36.78794411714425).epsilon(1e-12));

    // Only empty references: every score is 0, not an error; "absent" leaves none: an error.
    const strings h{"a b", ""}, e{"", ""};
    CHECK(corpus_bleu(h, e).score == 0.0);
    CHECK(corpus_chrf(h, e).score == 0.0);
    CHECK(sentence_chrf("a b", strings{""}).score == 0.0);
    chrf_options chrf_absent;
    chrf_absent.empty_refs = empty_reference::absent;
    bleu_options bleu_absent;
    bleu_absent.empty_refs = empty_reference::absent;
    CHECK_THROWS_AS((void)corpus_chrf(h, e, chrf_absent), depthlab::usage_error);
    CHECK_THROWS_AS((void)corpus_bleu(h, e, bleu_absent), depthlab::usage_error);
}

TEST_CASE("BLEU and chrF: values published in sacreBLEU's own test suite") {
    // Expected values from sacreBLEU 2.x's test/test_bleu.py, test_sentence_bleu.py and
    // test_chrf.py (the tolerances are theirs).
    const strings hyps{"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."};
    const std::vector<strings> refs{{"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
                                    {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};
    CHECK(std::abs(corpus_bleu(hyps, refs).score - 48.530827) < 1e-6);
    bleu_options none_tok;
    none_tok.tokenize = false;
    CHECK(std::abs(corpus_bleu(hyps, refs, none_tok).score - 49.1919566) < 1e-6);
    bleu_options no_smooth;
    no_smooth.smooth = bleu_smooth::none;
    CHECK(std::abs(corpus_bleu(hyps, refs, no_smooth).score - 48.530827) < 1e-6);
    const strings empty_hyps{"", "", ""};
    CHECK(corpus_bleu(empty_hyps, refs).score == 0.0);

    // raw_corpus_bleu: tokenize none, floor smoothing, effective order.
    bleu_options raw;
    raw.tokenize = false;
    raw.smooth = bleu_smooth::floor;
    raw.smooth_value = 0.01;
    raw.effective_order = true;
    const auto st = bleu1("am I am a character sequence", "I am a symbol string sequence a a", raw);
    CHECK(st.counts == std::vector<std::int64_t>{4, 2, 1, 0});
    CHECK(st.totals == std::vector<std::int64_t>{6, 5, 4, 3});
    CHECK(std::abs(bleu1("test", "a test", raw).score / 100 - 0.3678794411714425) < 1e-8);
    CHECK(std::abs(bleu1("a test", "a test", raw).score / 100 - 1.0) < 1e-8);
    CHECK(std::abs(bleu1("a little test", "a test", raw).score / 100 - 0.03218297948685433) < 1e-8);
    bleu_stats s9;
    s9.correct = {9, 7, 5, 3};
    s9.total = {10, 8, 6, 4};
    s9.sys_len = s9.ref_len = 11;
    CHECK(std::abs(compute_bleu(s9, no_smooth).score / 100 - 0.8375922397) < 1e-8);

    // Sentence BLEU (effective order) with each smoothing.
    const std::string sys = "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;";
    const strings ref{"producţia de zahăr brut se exprimă în zahăr alb;"};
    auto sent = [&](bleu_smooth m, double v, bool tok = true) {
        bleu_options o = sentence_bleu_options();
        o.smooth = m;
        o.smooth_value = v;
        o.tokenize = tok;
        return sentence_bleu(sys, ref, o).score;
    };
    CHECK(std::abs(sent(bleu_smooth::exp, -1) - 8.493) < 1e-3);
    CHECK(sent(bleu_smooth::none, -1) == 0.0);
    CHECK(std::abs(sent(bleu_smooth::floor, -1) - 4.51688) < 1e-3);
    CHECK(std::abs(sent(bleu_smooth::floor, 0.5) - 10.10) < 1e-3);
    CHECK(std::abs(sent(bleu_smooth::add_k, -1) - 14.882) < 1e-3);
    CHECK(std::abs(sent(bleu_smooth::add_k, 2) - 21.389) < 1e-3);
    CHECK(std::abs(sent(bleu_smooth::exp, -1, false) - 7.347) < 1e-3);
    const strings ok{"okay thanks"};
    for (auto m : {bleu_smooth::exp, bleu_smooth::none, bleu_smooth::floor, bleu_smooth::add_k}) {
        bleu_options o = sentence_bleu_options();
        o.smooth = m;
        CHECK(sentence_bleu("this is a cat", ok, o).score == 0.0);
    }

    // chrF: sentence level with eps smoothing (beta 2) ...
    chrf_options eps;
    eps.eps_smoothing = true;
    const strings r1{"Nejvíce smutní jsme z toho, že musíme rozhodovat o tom, kdo bude žít a kdo zemře."};
    CHECK(std::abs(sentence_chrf("Co nás nejvíc trápí, protože lékaři si vybírají, kdo bude žít a kdo zemře.", r1, eps).score -
                   39.14078509) < 1e-4);
    const strings r2{"A někdy nemáme ani potřebný materiál, abychom jim pomohli, popsali lékaři."};
    CHECK(std::abs(sentence_chrf("Nebo prostě nemají vybavení, které by jim pomohlo, uvedli lékaři.", r2, eps).score -
                   31.22557079) < 1e-4);
    const strings r3{"Lapali po dechu a pak jejich život skončil - dřív, než skutečně mohl začít, připomněli."};
    CHECK(std::abs(sentence_chrf("Lapali po dechu, jejich životy skončily dřív, než skutečně začaly.", r3, eps).score -
                   57.15704367) < 1e-4);
    // ... and corpus level with beta 3: eps smoothing, effective order, whitespace kept.
    struct C { strings h, r; double eps, eff; };
    const std::vector<C> cases{
        {{"abcdefg"}, {"hijklmnop"}, 0.0, -1}, {{"a"}, {"b"}, 0.0, -1}, {{""}, {"b"}, 0.0, -1},
        {{""}, {"reference"}, 0.0, 0.0}, {{"aa"}, {"ab"}, 8.3333, 25.0}, {{"a", "b"}, {"a", "c"}, 8.3333, 50.0},
        {{"a"}, {"a"}, 16.6667, 100.0}, {{"a b c"}, {"a b c"}, 50.0, 100.0}, {{"a b c"}, {"abc"}, 50.0, 100.0},
        {{""}, {"c"}, -1, 0.0},
        {{" risk assessment must be made of those who are qualified and expertise in the sector - these are the scientists ."},
         {"risk assessment has to be undertaken by those who are qualified and expert in that area - that is the scientists ."},
         63.361730, -1},
        {{" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. "},
         {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."}, 64.1302698, -1},
        {{"Niemand hat die Absicht, eine Mauer zu errichten"}, {"Niemand hat die Absicht, eine Mauer zu errichten"}, 100.0, -1},
    };
    chrf_options b3eps, b3;
    b3eps.beta = b3.beta = 3;
    b3eps.eps_smoothing = true;
    for (const auto& c : cases) {
        INFO(c.h[0] << " | " << c.r[0]);
        if (c.eps >= 0) CHECK(std::abs(corpus_chrf(c.h, c.r, b3eps).score - c.eps) < 1e-4);
        if (c.eff >= 0) CHECK(std::abs(corpus_chrf(c.h, c.r, b3).score - c.eff) < 1e-4);
    }
    chrf_options ws = b3;
    ws.whitespace = true;
    const strings wh1{"Die Beziehung zwischen Obama und Netanjahu ist nicht gerade freundlich."},
        wr1{"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."};
    CHECK(std::abs(corpus_chrf(wh1, wr1, ws).score - 67.3481606) < 1e-4);
    const strings wh2{"risk assessment must be made of those who are qualified and expertise in the sector - these are the scientists ."},
        wr2{"risk assessment has to be undertaken by those who are qualified and expert in that area - that is the scientists ."};
    CHECK(std::abs(corpus_chrf(wh2, wr2, ws).score - 65.2414427) < 1e-4);
    CHECK(sentence_chrf("a", strings{"a"}, b3).name() == "chrF3");
}

// Paired bootstrap against cases whose answer is known: identical systems are tied with a
// zero-width interval around 0; a system that gets half the sentences wrong is excluded from
// zero; one changed sentence in 200 is within the noise; swapping the systems mirrors the
// interval (the same draws).
TEST_CASE("paired bootstrap: identical systems tie, a planted difference is excluded from zero, a tiny one is not") {
    strings refs, good, bad, nearly;
    const strings words = {"the", "cat", "sat", "on", "a", "mat", "while", "dogs", "ran", "far", "away", "today"};
    for (int i = 0; i < 200; ++i) {
        std::string s;
        for (int k = 0; k < 8; ++k) s += words[static_cast<std::size_t>((i * 7 + k * (i % 5 + 1)) % 12)] + (k < 7 ? " " : "");
        refs.push_back(s);
        good.push_back(s);
        bad.push_back(i % 2 ? s : "completely unrelated output");
        nearly.push_back(i == 17 ? s + " extra" : s);
    }
    const auto same = paired_bootstrap_bleu(good, good, refs);
    CHECK(same.delta == 0);
    CHECK(same.lo == 0);
    CHECK(same.hi == 0);
    CHECK(std::string(same.verdict()) == "tied");
    CHECK(!same.significant());
    CHECK(same.p_value == 1);

    const auto planted = paired_bootstrap_bleu(good, bad, refs, {.resamples = 300});
    CHECK(planted.a == doctest::Approx(100));
    CHECK(planted.delta > 10);
    CHECK(planted.lo > 0);
    CHECK(planted.lo <= planted.delta);
    CHECK(planted.hi >= planted.delta);
    CHECK(std::string(planted.verdict()) == "A better");
    CHECK(planted.p_value == 0);
    const auto mirrored = paired_bootstrap_bleu(bad, good, refs, {.resamples = 300});
    CHECK(mirrored.delta == doctest::Approx(-planted.delta));
    CHECK(mirrored.lo == doctest::Approx(-planted.hi));
    CHECK(mirrored.hi == doctest::Approx(-planted.lo));
    CHECK(std::string(mirrored.verdict()) == "B better");

    const auto tiny = paired_bootstrap_bleu(good, nearly, refs, {.resamples = 300});
    CHECK(tiny.delta > 0);
    CHECK(!tiny.significant());
    CHECK(tiny.p_value > 0.05);

    CHECK_THROWS_AS((void)paired_bootstrap_bleu(good, strings(good.begin(), good.end() - 1), refs), depthlab::shape_error);
    CHECK_THROWS_AS((void)paired_bootstrap_bleu(good, good, refs, {.resamples = 0}), depthlab::usage_error);
}

// The same for perplexity: identical losses tie at exactly 0; a model that loses 0.2 nats per
// token on every sequence is worse with the interval excluding 0 and the whole-set difference
// exp(m + 0.2) − exp(m); one sequence of 100 slightly worse is within the noise.
TEST_CASE("paired bootstrap of perplexity: identical losses tie, a planted rise is excluded from zero, a tiny one is not") {
    std::vector<double> base, worse, nearly;
    std::vector<std::int64_t> tokens;
    for (int i = 0; i < 100; ++i) {
        const std::int64_t n = 20 + i % 7;
        const double per_token = 4.0 + 0.5 * std::sin(i);
        tokens.push_back(n);
        base.push_back(per_token * static_cast<double>(n));
        worse.push_back((per_token + 0.2) * static_cast<double>(n));
        nearly.push_back(base.back() + (i == 40 ? 0.5 : 0.0));
    }
    const auto same = paired_bootstrap_perplexity(base, base, tokens);
    CHECK(same.delta == 0);
    CHECK(same.lo == 0);
    CHECK(same.hi == 0);
    CHECK(!same.significant());
    const auto rise = paired_bootstrap_perplexity(worse, base, tokens, {.resamples = 300});
    double nll = 0, count = 0;
    for (std::size_t i = 0; i < base.size(); ++i) nll += base[i], count += static_cast<double>(tokens[i]);
    CHECK(rise.delta == doctest::Approx(std::exp(nll / count + 0.2) - std::exp(nll / count)).epsilon(1e-12));
    CHECK(rise.lo > 0);
    CHECK(std::string(rise.verdict()) == "A better");  // (A: the first system; for perplexity "better" reads "higher")
    const auto tiny = paired_bootstrap_perplexity(nearly, base, tokens, {.resamples = 300});
    CHECK(tiny.delta > 0);
    CHECK(!tiny.significant());
    CHECK_THROWS_AS((void)paired_bootstrap_perplexity(base, std::vector<double>(99, 1.0), tokens), depthlab::shape_error);
}
