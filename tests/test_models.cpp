// Models end to end: an encoder-decoder learns a synthetic task inside the suite, ALBERT's
// heads and depth, and in-memory snapshots (rewinding / interpolation of one module).
#include <algorithm>
#include <cmath>
#include <vector>

#include "harness.hpp"

using namespace depthlab;
using namespace depthlab::nn;
using doctest::Contains;

namespace {

/// Vocabulary 12, max_len 16, D=32, 4 heads, FF=64.
seq2seq_config tiny_seq2seq() { return depthlab_test::tiny_seq2seq(12, 16, 32, 4, 64); }

bool to_double_differs(const Var<double>& a, const Var<double>& b) {
    return depthlab_test::to_double(a.value()) != depthlab_test::to_double(b.value());
}

}  // namespace

TEST_CASE("an encoder-decoder learns to reverse sequences") {
    Seq2SeqTransformer<float> model(tiny_seq2seq(), 7);
    Generator gen(11);
    const double loss = depthlab_test::train_reverse_task(model, gen);
    MESSAGE("reverse task, smoothed loss after 600 steps: ", loss);
    CHECK(loss < 0.05);
    // greedy check on fresh data: every output position right
    model.eval();
    no_grad guard;
    const auto b = data::reverse_task_batch(gen, 64, 6, 12);
    const auto logits = model.decode(model.encode(b.src), b.src, b.tgt_in).value();
    int wrong = 0, total = 0;
    for (index_t i = 0; i < 64 * 7; ++i) {
        if (b.tgt_out[i] < 0) continue;
        index_t best = 0;
        for (index_t v = 1; v < 12; ++v)
            if (logits(i / 7, i % 7, v) > logits(i / 7, i % 7, best)) best = v;
        wrong += best != b.tgt_out[i];
        ++total;
    }
    CHECK(wrong <= total / 100);
}

TEST_CASE("ALBERT: tied stack, run deeper or shallower, heads on selected positions only") {
    albert_config c;
    c.vocab = 50;
    c.embed = 8;
    c.max_len = 12;
    c.depth = 3;
    c.layer.dim = 16;
    c.layer.heads = 2;
    c.layer.ff_dim = 32;
    c.layer.dropout = c.layer.attention_dropout = 0;
    Albert<double> tied_model(c, 1);
    Albert<double, backend::cpu, untied> untied_model(c, 1);
    const index_t layer_params = tied_model.encoder->parameter_count();
    CHECK(untied_model.encoder->parameter_count() == 3 * layer_params);
    CHECK(untied_model.parameter_count() - tied_model.parameter_count() == 2 * layer_params);
    token_batch b{2, 6, {2, 5, 7, 9, 3, 0, 2, 8, 8, 3, 0, 0}, {0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0}, {5, 4}};
    const auto h3 = tied_model.encode(b);
    const auto h5 = tied_model.encode(b, 5);  // deeper than configured: same weights
    CHECK(h3.shape() == Shape{2, 6, 16});
    CHECK(to_double_differs(h3, h5));
    const std::vector<std::int64_t> positions{1, 8};
    const auto logits = tied_model.mlm_logits(h3, positions);
    CHECK(logits.shape() == Shape{2, 50});
    CHECK(tied_model.sop_logits(h3).shape() == Shape{2, 2});
    // the MLM decoder is the token embedding: no separate output matrix
    for (auto& [name, p] : tied_model.named_parameters()) CHECK(p.shape() != Shape{50, 16});
}

TEST_CASE("snapshots: restore, and interpolate one module only") {
    Seq2SeqTransformer<double> model(tiny_seq2seq(), 3);
    const Snapshot<double> theta0(model);
    // "train": perturb every parameter
    for (auto& [name, p] : model.named_parameters())
        for (auto& v : std::span(p.value().data(), p.value().numel())) v += 0.5;
    const Snapshot<double> thetaf(model);
    const std::string module = "decoder.1.feed_forward";
    Snapshot<double>::interpolate(model, theta0, thetaf, 0.0, module);
    for (auto& named : model.named_parameters()) {
        const std::string& name = named.first;  // (not a structured binding: CHECK_MESSAGE captures it)
        const auto want = is_under(name, module) ? theta0.at(name).to_vector() : thetaf.at(name).to_vector();
        CHECK_MESSAGE(named.second.value().to_vector() == want, name);
    }
    Snapshot<double>::interpolate(model, theta0, thetaf, 0.25, module);
    const auto w = model.parameter(module + ".linear1.weight").value().to_vector();
    const auto w0 = theta0.at(module + ".linear1.weight").to_vector(), wf = thetaf.at(module + ".linear1.weight").to_vector();
    for (std::size_t i = 0; i < w.size(); ++i) CHECK(w[i] == doctest::Approx(0.75 * w0[i] + 0.25 * wf[i]));
    Snapshot<double>::interpolate(model, theta0, thetaf, 1.0, module);
    for (auto& [name, p] : model.named_parameters()) CHECK(p.value().to_vector() == thetaf.at(name).to_vector());
    theta0.restore(model);
    for (auto& [name, p] : model.named_parameters()) CHECK(p.value().to_vector() == theta0.at(name).to_vector());
    CHECK_THROWS_WITH_AS(Snapshot<double>::interpolate(model, theta0, thetaf, 0.5, "decoder.9"), Contains("no parameter under 'decoder.9'"),
                         error);
    CHECK(!is_under("encoder.10.x", "encoder.1"));
}
