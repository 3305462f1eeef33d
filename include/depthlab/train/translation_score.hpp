#pragma once
// A translation_set translated by an nn::translator and scored against its references (BLEU
// and chrF), decoded by one process or by the ranks of a communicator together: what a
// translation study measures at the baseline, after every ablation and interpolation step,
// and during training. It sits on the train floor because it joins the translator (nn/) with
// the metrics (metrics/) and the communicator (dist/), none of which needs the others.
//
//   nn::translator<float, B> trans(model, [&](auto ids) { return tok.decode(ids); });
//   const train::translation_score s = train::score(trans, test, {.beam = 4}, &comm);  // s.bleu
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "depthlab/dist/communicator.hpp"
#include "depthlab/dist/gather.hpp"
#include "depthlab/metrics/bleu.hpp"
#include "depthlab/metrics/chrf.hpp"
#include "depthlab/nn/translator.hpp"

namespace depthlab::train {

/// A translation_set translated and scored against its references.
struct translation_score {
    std::vector<std::string> hypotheses;  // detokenised, in the order of the references
    double bleu = 0;                      // corpus BLEU (sacreBLEU's defaults: 13a tokenisation, exponential smoothing)
    double chrf = 0;                      // corpus chrF (character 6-grams, beta 2)
    double seconds = 0;                   // decoding time
};

/// translator.translate(set, o), decoded by the ranks of `comm` together (batch b on rank
/// b mod W; every rank holds the same model) and gathered: every rank gets every hypothesis,
/// equal to translate() in one process.
template <class T, class B>
std::vector<std::string> translate(nn::translator<T, B>& translator, const nn::translation_set& set, const nn::search_options& o,
                                   dist::communicator& comm) {
    if (!comm.distributed()) return translator.translate(set, o);
    std::vector<std::string> mine;  // (index, hypothesis) pairs, flattened
    translator.for_each_hypothesis(
        set, o,
        [&](std::size_t i, const nn::hypothesis& h) {
            mine.push_back(std::to_string(i));
            mine.push_back(translator.detokenize(h));
        },
        nn::batch_shard{.rank = comm.rank(), .ranks = comm.size()});
    const std::vector<std::string> all = dist::all_gather_strings(comm, mine);
    std::vector<std::string> out(set.size());
    for (std::size_t k = 0; k + 1 < all.size(); k += 2) out[std::stoull(all[k])] = all[k + 1];
    return out;
}

/// The translation of `set` scored against set.references; with `comm`, decoded by its ranks
/// together.
template <class T, class B>
translation_score score(nn::translator<T, B>& translator, const nn::translation_set& set, const nn::search_options& o,
                        dist::communicator* comm = nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    translation_score s{comm ? translate(translator, set, o, *comm) : translator.translate(set, o)};
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    s.bleu = metrics::corpus_bleu(s.hypotheses, set.references).score;
    s.chrf = metrics::corpus_chrf(s.hypotheses, set.references).score;
    return s;
}

}  // namespace depthlab::train
