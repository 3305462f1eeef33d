// The decoder-only language model (nn::GPT2) and its analyses: language-model data (a stream of
// documents cut into sequences, a resumable sampler), next-token targets, perplexity against a
// hand computation from the logits, blocks as analysis modules (a removed pre-LN block is the
// identity), ShortGPT's block influence and contribution on a model with a planted dead block.
// (Parity with a PyTorch GPT-2 in HF's layout: test_interop.cpp.)
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "harness.hpp"

#include "depthlab/analysis/language_model.hpp"
#include "depthlab/analysis/scores.hpp"

using namespace depthlab;
using doctest::Approx;
using doctest::Contains;

namespace {

nn::gpt2_config tiny_lm(int depth = 3) {
    return {.vocab = 17, .positions = 12, .depth = depth,
            .layer = {.dim = 8, .heads = 2, .ff_dim = 16, .act = nn::activation::gelu, .dropout = 0.1, .attention_dropout = 0.1,
                      .norm_first = true, .ln_eps = 1e-5, .init = nn::init_scheme::bert}};
}

/// Three documents of sentences with ids 5.. ; separator 3.
data::corpus tiny_corpus() {
    data::corpus c;
    std::int32_t next = 5;
    for (int d = 0; d < 3; ++d) {
        for (int s = 0; s < 2 + d; ++s) {
            std::vector<std::int32_t> ids;
            for (int t = 0; t < 3; ++t) ids.push_back(5 + (next++ % 12));
            c.push_sentence(std::span<const std::int32_t>(ids));
        }
        c.end_document();
    }
    return c;
}

/// Makes block i output its input: every projection into the residual stream zero.
template <class T, class B>
void kill_block(nn::GPT2<T, B>& lm, int i) {
    auto& blk = lm.decoder->layer(i);
    for (auto* lin : {blk.self_attention.branch.out_proj, blk.feed_forward.branch.linear2}) {
        lin->weight.value().zero_();
        lin->bias.value().zero_();
    }
}

}  // namespace

TEST_CASE("language model data: documents closed by the separator, cut into sequences; the sampler resumes exactly") {
    const data::corpus c = tiny_corpus();  // 9 sentences of 3 ids + 3 separators = 30 tokens
    const data::lm_sequences seq(c, 8, 3);
    CHECK(seq.tokens() == 30);
    CHECK(seq.size() == 4);  // 8 + 8 + 8 + 6
    CHECK(seq.range(3) == std::pair<index_t, index_t>{24, 30});
    const data::token_batch b = seq.batch(2, 5);  // sequences 2 and 3 (clipped at the end)
    CHECK(b.batch == 2);
    CHECK(b.length == 8);
    CHECK(b.lengths == std::vector<index_t>{8, 6});
    CHECK(b.ids[8 + 5] == 3);                         // the last document's separator
    CHECK(b.ids[8 + 6] == 0);                         // padding
    CHECK(seq.batch(0, 1).ids[0] == c.sentence(0, 0)[0]);
    // next-token targets: the id after, -100 at each sequence's last real position and on padding
    const auto tgt = nn::next_token_targets(b);
    CHECK(tgt[0] == b.ids[1]);
    CHECK(tgt[7] == -100);
    CHECK(tgt[8 + 4] == 3);
    CHECK(tgt[8 + 5] == -100);
    CHECK(tgt[8 + 7] == -100);

    data::lm_sampler a(seq, 7), resumed(seq, 99);
    (void)a.next(3);  // into the second epoch
    resumed.set_state(a.state());
    for (int i = 0; i < 4; ++i) CHECK(a.next(3).ids == resumed.next(3).ids);
    CHECK_THROWS_AS(data::lm_sequences(c, 1, 3), usage_error);
    CHECK_THROWS_WITH_AS((void)seq.range(4), Contains("lm_sequences: sequence 4 of 4"), index_error);
}

TEST_CASE("GPT2: perplexity equals exp of the mean next-token NLL from the logits; bad input is refused") {
    nn::GPT2<double> lm(tiny_lm(), 3);
    lm.eval();
    const data::corpus c = tiny_corpus();
    const data::lm_sequences seq(c, 8, 3);
    const data::token_batch b = seq.batch(0, 4);
    const std::vector<double> logits = lm.logits(b).value().to_vector();
    const auto tgt = nn::next_token_targets(b);
    double nll = 0;
    int n = 0;
    for (std::size_t row = 0; row < tgt.size(); ++row) {
        if (tgt[row] < 0) continue;
        const double* z = logits.data() + row * 17;
        double mx = z[0], s = 0;
        for (int v = 1; v < 17; ++v) mx = std::max(mx, z[v]);
        for (int v = 0; v < 17; ++v) s += std::exp(z[v] - mx);
        nll += mx + std::log(s) - z[tgt[row]];
        ++n;
    }
    const analysis::lm_eval ev = analysis::evaluate_lm(lm, seq, {.batch = 3});
    CHECK(ev.tokens == n);
    CHECK(ev.nll == Approx(nll / n).epsilon(1e-12));
    CHECK(ev.perplexity == Approx(std::exp(nll / n)).epsilon(1e-12));
    CHECK(ev.flops_per_token > 0);

    data::token_batch long_batch = seq.batch(0, 1);
    long_batch.length = 13;
    long_batch.ids.resize(13, 0);
    long_batch.lengths = {13};
    CHECK_THROWS_WITH_AS((void)lm.logits(long_batch), Contains("GPT2: sequence length 13 > positions 12"), shape_error);
    data::token_batch empty_row = seq.batch(0, 2);
    empty_row.lengths[1] = 0;
    CHECK_THROWS_WITH_AS((void)lm.logits(empty_row), Contains("GPT2: a sequence of length 0 in a batch of length 8"), shape_error);
    data::corpus big;
    big.add_document(std::vector<std::vector<std::int32_t>>{{5, 40, 6}});
    CHECK_THROWS_WITH_AS((void)analysis::evaluate_lm(lm, data::lm_sequences(big, 4, 3), {}), Contains("holds id 40, outside the model's vocabulary of 17"),
                         index_error);
    auto bad = tiny_lm();
    bad.layer.norm_first = false;
    CHECK_THROWS_WITH_AS(nn::GPT2<double>(bad, 1), Contains("GPT-2's blocks are pre-LN"), usage_error);
}

TEST_CASE("GPT2 blocks as analysis modules: a removed block is the identity; a dead block has no influence and no contribution") {
    nn::GPT2<double> lm(tiny_lm(3), 3);
    lm.eval();
    const data::corpus c = tiny_corpus();
    const data::lm_sequences seq(c, 8, 3);
    const data::token_batch b = seq.batch(0, 4);

    const auto blocks = analysis::layer_modules(lm);
    REQUIRE(blocks.size() == 3);
    CHECK(blocks[1].name == "decoder.1");
    CHECK(blocks[1].prefix == "decoder.1");
    CHECK(blocks[1].type == "D:block");
    CHECK(blocks[1].layer == 1);
    CHECK(blocks[1].kept_prefixes.empty());  // pre-LN: a removed block uses none of its parameters
    index_t under = 0;
    for (const auto& [name, p] : lm.named_parameters())
        if (nn::is_under(name, "decoder.1")) under += p.value().numel();
    CHECK(analysis::parameters_removed(lm, std::vector<analysis::module_ref>{blocks[1]}) == under);
    // block 1 off: block 2's input is block 0's output
    std::vector<Var<double>> outs;
    (void)lm.hidden(b, [&](int, const Var<double>&, const Var<double>& out) { outs.push_back(out); });
    blocks[1].ablate(true);
    std::vector<Var<double>> ins;
    (void)lm.hidden(b, [&](int, const Var<double>& in, const Var<double>&) { ins.push_back(in); });
    blocks[1].ablate(false);
    CHECK(ins[2].value().to_vector() == outs[0].value().to_vector());

    // a dead block: influence 0 (its output is its input), contribution 0 (perplexity unchanged)
    kill_block(lm, 2);
    const auto bi = analysis::block_influence(lm, seq, {.batch = 2});
    REQUIRE(bi.size() == 3);
    CHECK(std::abs(bi[2]) < 1e-12);
    CHECK(bi[0] > 1e-4);
    CHECK(bi[1] > 1e-4);
    const auto r = analysis::contribution(blocks, analysis::perplexity_metric(lm, seq, {.batch = 2}), {.clip = std::numeric_limits<double>::infinity()});
    CHECK(r.modules[2].drop == 0);
    CHECK(r.modules[2].score == 0);
    CHECK(r.base < 0);  // −perplexity
    // pruning counts what ran: FLOPs per token fall as blocks are removed
    const double full = analysis::evaluate_lm(lm, seq).flops_per_token;
    blocks[0].ablate(true);
    const double pruned = analysis::evaluate_lm(lm, seq).flops_per_token;
    blocks[0].ablate(false);
    CHECK(pruned < full);
}

TEST_CASE("layer_modules: an encoder-decoder's layers as modules, post-LN norms kept") {
    nn::Seq2SeqTransformer<double> model(depthlab_test::tiny_seq2seq(10, 8, 8, 2, 16), 5);
    const auto layers = analysis::layer_modules(model);
    REQUIRE(layers.size() == 4);
    CHECK(layers[0].name == "encoder.0");
    CHECK(layers[0].type == "E:block");
    CHECK(layers[3].name == "decoder.1");
    CHECK(layers[3].type == "D:block");
    CHECK(layers[3].kept_prefixes ==
          std::vector<std::string>{"decoder.1.self_attention.norm", "decoder.1.cross_attention.norm", "decoder.1.feed_forward.norm"});
    layers[3].ablate(true);
    for (const auto& [name, r] : nn::sublayers(model)) CHECK(r->enabled == !nn::is_under(name, "decoder.1"));
    layers[3].ablate(false);
    for (const auto& [name, r] : nn::sublayers(model)) CHECK(r->enabled);
}
