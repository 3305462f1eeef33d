// The opt-in sentencepiece wrapper (depthlab/data/tokenizer.hpp). Needs the sentencepiece
// library, so it is a separate test program: link with `pkg-config --libs sentencepiece`
// (or depthlab::sentencepiece from cmake/sentencepiece.cmake). Trains nothing: it loads
// tests/fixtures/spm_tiny.model, made from tests/fixtures/english_sample.txt by
//   cd tests/fixtures &&
//   ../../scripts/train-tokenizer --input english_sample.txt --vocab 300 --out spm_tiny
//       --normalization identity --no-encode
// (then spm_tiny.vocab and spm_tiny.train.log deleted).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "depthlab/data/tokenizer.hpp"

#ifndef DEPTHLAB_FIXTURE_DIR
#define DEPTHLAB_FIXTURE_DIR "tests/fixtures"
#endif

using namespace depthlab;
using namespace depthlab::data;

namespace {
const std::string kModel = std::string(DEPTHLAB_FIXTURE_DIR) + "/spm_tiny.model";
const std::string kSample = std::string(DEPTHLAB_FIXTURE_DIR) + "/english_sample.txt";

std::vector<std::string> sample_lines() {
    std::ifstream in(kSample);
    REQUIRE(in.good());
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) lines.push_back(line);
    return lines;
}
}  // namespace

TEST_CASE("tokenizer: special ids and vocabulary of the committed tiny model") {
    const tokenizer tok(kModel);
    CHECK(tok.vocab_size() == 300);
    const special_ids s = tok.special_ids();
    CHECK(s.pad == 0);
    CHECK(s.unk == 1);
    CHECK(s.cls == 2);
    CHECK(s.sep == 3);
    CHECK(s.mask == 4);
    CHECK(tok.piece(2) == "[CLS]");
    CHECK(tok.id("[MASK]") == 4);
    CHECK_THROWS_WITH_AS((void)tok.id("[NOPE]"), doctest::Contains("[NOPE]"), index_error);
    CHECK_THROWS_AS((void)tok.piece(300), index_error);

    const albert_data_config c = tok.albert_config();
    CHECK(c.vocab == 300);
    CHECK(c.random_min == 5);
    REQUIRE(c.word_start.size() == 300);
    for (int id = 0; id < 5; ++id) CHECK(c.word_start[static_cast<std::size_t>(id)] == 1);
    CHECK(c.word_start[static_cast<std::size_t>(tok.id("\xE2\x96\x81The"))] == 1);
    CHECK_NOTHROW(c.validate());
}

TEST_CASE("tokenizer: encode/decode round trips") {
    const tokenizer tok(kModel);
    const auto lines = sample_lines();
    REQUIRE(lines.size() == 200);
    int mismatches = 0, unknown = 0;
    for (const auto& line : lines) {
        const auto ids = tok.encode(line);
        for (const auto id : ids) unknown += id == 1;
        mismatches += tok.decode(ids) != line;
    }
    CHECK(mismatches == 0);
    CHECK(unknown == 0);  // character_coverage 1.0: every character of the sample is known

    // int64 ids (what batches hold) decode the same way; [PAD] decodes to nothing.
    const auto ids = tok.encode("The jury said it.");
    std::vector<std::int64_t> wide(ids.begin(), ids.end());
    wide.push_back(0);
    CHECK(tok.decode(wide) == "The jury said it.");
    CHECK_THROWS_AS((void)tok.decode(std::vector<std::int64_t>{5, 300}), index_error);

    // The user-defined symbols are matched in text; unseen characters are [UNK].
    const auto m = tok.encode("the [MASK] said");
    CHECK(std::find(m.begin(), m.end(), 4) != m.end());
    const auto u = tok.encode("\xE2\x82\xAC");  // €
    CHECK(std::find(u.begin(), u.end(), 1) != u.end());
    CHECK(tok.encode_pieces("The jury").front() == "\xE2\x96\x81The");
}

TEST_CASE("tokenizer: files to corpora, and ALBERT batches from them") {
    const tokenizer tok(kModel);
    const corpus c = tok.encode_file(kSample);
    CHECK(c.documents() == 4);
    CHECK(c.sentences() == 200);
    CHECK(c.document_sentences(0) == 50);
    CHECK(tok.decode(c.sentence(0, 0)) == sample_lines().front());

    albert_data_config cfg = tok.albert_config();
    cfg.max_len = 64;
    albert_sampler s(c, cfg, 1);
    const albert_batch b = s.next(8);
    CHECK(b.size() == 8);
    CHECK(b.tokens.ids[0] == 2);
    CHECK(b.predictions() > 0);
}

TEST_CASE("tokenizer: missing or corrupt models are io_errors naming the path") {
    CHECK_THROWS_WITH_AS(tokenizer("no/such/dir/spm.model"), doctest::Contains("no/such/dir/spm.model"), io_error);
    const std::string bad = "depthlab_test_corrupt_spm.model";
    {
        std::ofstream out(bad, std::ios::binary);
        out << "this is not a sentencepiece model";
    }
    CHECK_THROWS_WITH_AS(tokenizer{bad}, doctest::Contains(bad.c_str()), io_error);
    std::remove(bad.c_str());
    CHECK_THROWS_WITH_AS(tokenizer{std::string(DEPTHLAB_FIXTURE_DIR)}, doctest::Contains(DEPTHLAB_FIXTURE_DIR), io_error);  // a directory
    CHECK_THROWS_WITH_AS((void)tokenizer(kModel).encode_file("no/such/missing.txt"), doctest::Contains("missing.txt"), io_error);
}
