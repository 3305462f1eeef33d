// libFuzzer harness: BLEU and chrF, with their tokenisers, on arbitrary (often invalid)
// UTF-8. Lines are sentences; a tab separates a hypothesis from its references. Scores
// must be finite and within [0, 100], and nothing may crash.
#include <cmath>

#include <depthlab/metrics/bleu.hpp>
#include <depthlab/metrics/chrf.hpp>

#include "fuzz_input.hpp"

using namespace depthlab;

namespace {
void check(double score, const char* what) {
    if (!std::isfinite(score) || score < 0 || score > 100 + 1e-9) fuzz::fail(what);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    std::vector<std::string> hyps, refs;
    while (!in.empty()) {
        auto [line, rest] = fuzz::split_once(in, "\n");
        in = rest;
        const auto [hyp, ref] = fuzz::split_once(line, "\t");
        hyps.emplace_back(hyp);
        refs.emplace_back(ref);
    }
    try {
        (void)metrics::tokenize_13a(std::string_view(reinterpret_cast<const char*>(data), size));
        if (!hyps.empty()) {
            check(metrics::corpus_bleu(hyps, refs).score, "corpus BLEU out of range");
            check(metrics::corpus_chrf(hyps, refs).score, "corpus chrF out of range");
            check(metrics::sentence_bleu(hyps[0], std::span<const std::string>(refs)).score, "sentence BLEU out of range");
            check(metrics::sentence_chrf(hyps[0], std::span<const std::string>(refs)).score, "sentence chrF out of range");
        }
    } catch (const depthlab::error&) {
    }
    return 0;
}
