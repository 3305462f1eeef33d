// Models end to end: an encoder-decoder learns a synthetic task inside the suite, ALBERT's
// heads and depth, and in-memory snapshots (rewinding / interpolation of one module).
#include <algorithm>
#include <cmath>
#include <string>
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

// bf16 GEMM inputs (f32 master weights, optimiser state, softmax, layer norm and loss):
// the same model from the same seed on the same batches ends within 0.03 of the f32 loss
// and under the same bar. (On CPUs without native bf16 the GEMMs are emulated: same numbers.)
TEST_CASE("bf16 matmul precision: the reverse task trains to the f32 loss") {
    const auto train = [](matmul_precision p) {
        matmul_precision_scope scope(p);
        Seq2SeqTransformer<float> model(tiny_seq2seq(), 7);
        Generator gen(11);
        return depthlab_test::train_reverse_task(model, gen);
    };
    const double f32 = train(matmul_precision::f32), bf16 = train(matmul_precision::bf16);
    MESSAGE("reverse task after 600 steps: f32 loss ", f32, ", bf16 loss ", bf16);
    CHECK(bf16 < 0.05);
    CHECK(std::abs(bf16 - f32) < 0.03);
    CHECK(bf16 != f32);  // the GEMMs did run in bf16
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

TEST_CASE("Sequential and ModuleList: PyTorch names, in-place construction, forward in order") {
    Generator gen(4);
    Sequential<double> mlp;
    mlp.add<Linear<double>>(3, 5, gen);
    mlp.then([](const Var<double>& x) { return depthlab::relu(x); });
    auto& out = mlp.add<Linear<double>>(5, 2, gen);
    std::vector<std::string> names;
    for (const auto& [n, p] : mlp.named_parameters()) names.push_back(n);
    // the same names as torch.nn.Sequential(Linear(3, 5), ReLU(), Linear(5, 2)).state_dict()
    CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
    const auto x = Var<double>::constant(Tensor<double>::randn({4, 3}, gen));
    const auto& first = static_cast<const Linear<double>&>(*mlp.children()[0].second);
    const auto want = out(depthlab::relu(first(x))).value().to_vector();
    CHECK(mlp(x).value().to_vector() == want);
    CHECK(mlp.size() == 3);
    CHECK_THROWS_AS(mlp.then({}), usage_error);

    ModuleList<LayerNorm<double>> norms;
    for (int i = 0; i < 3; ++i) norms.emplace_back(4);
    CHECK(norms.size() == 3);
    CHECK(norms.named_parameters("norms").front().first == "norms.0.weight");
    CHECK(norms.named_parameters().back().first == "2.bias");
    int count = 0;
    for (auto& ln : norms) count += ln.weight.shape()[0] == 4 ? 1 : 0;
    CHECK(count == 3);
    CHECK_THROWS_WITH_AS(norms[3], Contains("ModuleList: index 3 out of range for 3 modules"), index_error);
}

TEST_CASE("argmax and accuracy: ties to the lowest id, ignore_index, bad labels") {
    const auto logits = Tensor<float>::from({3, 3}, {0.1f, 0.7f, 0.2f,    //
                                                            0.5f, 0.5f, 0.0f,    // tie: 0
                                                            -1.f, -2.f, -0.5f});
    CHECK(argmax(logits) == std::vector<std::int64_t>{1, 0, 2});
    const std::vector<std::int64_t> labels{1, 1, -100};
    const auto a = accuracy(logits, labels);
    CHECK(a.correct == 1);
    CHECK(a.total == 2);
    CHECK(a.percent() == doctest::Approx(50.0));
    accuracy_count sum_of;
    sum_of += a;
    sum_of += a;
    CHECK(sum_of.total == 4);
    const std::vector<std::int64_t> two{1, 1};
    CHECK_THROWS_WITH_AS(accuracy(logits, two), Contains("accuracy: logits of shape (3, 3) have 3 rows but there are 2 labels"), shape_error);
    const std::vector<std::int64_t> bad{1, 3, 0};
    CHECK_THROWS_WITH_AS(accuracy(logits, bad), Contains("label 3 at row 1 is outside [0, 3)"), index_error);
    CHECK(accuracy_count{}.percent() == 0.0);
}
