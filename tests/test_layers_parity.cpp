// Transformer layers and a small full model against PyTorch 1.13 (tests/fixtures/layers_*.txt,
// written by scripts/make_layer_fixtures.py), plus two pure C++ properties of the stacks:
// a tied stack's gradient is the sum of its iterations' gradients, and a switched-off
// sub-layer leaves exactly its residual path (LN(x) post-LN, x pre-LN).
//
// Every parameter value is loaded from the fixture into the depthlab module by name
// (named_parameters(), copied into p.value() in place); then the output, the loss and the
// gradient of the input and of every parameter are compared. Each case runs in double
// against PyTorch's float64 run (rtol 1e-9, atol 1e-12) and in float, on every ISA path
// this CPU has, against PyTorch's float32 run from the same values (rtol 1e-4, atol 1e-5).
// Set DEPTHLAB_PARITY_REPORT=1 to print the largest errors per case and precision (=2:
// per tensor too). The run machinery (Run<T, B>, run_case: every case on every test backend) is in parity.hpp.
#include <cmath>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "parity.hpp"

namespace {

using depthlab::Generator;
using depthlab::index_t;
using depthlab::Shape;
using depthlab::Tensor;
using depthlab::Var;
using depthlab_test::FixtureTensor;
using depthlab_test::Run;
namespace dnn = depthlab::nn;

constexpr index_t kDim = 16, kFF = 32;
constexpr int kHeads = 4;

/// The layer configuration of every fixture: D=16, 4 heads, FF=32, dropout 0, eps 1e-5.
dnn::transformer_config layer_config(dnn::activation act, bool norm_first) {
    return {.dim = kDim, .heads = kHeads, .ff_dim = kFF, .act = act, .dropout = 0.0, .attention_dropout = 0.0,
            .norm_first = norm_first, .ln_eps = 1e-5, .init = depthlab::nn::init_scheme::pytorch};
}

/// Runs body(run) in double, then in float on every ISA path (depthlab_test::run_case); the
/// double run must check something.
template <class Body>
void run_layer_case(const std::string& name, Body body) {
    depthlab_test::run_case(name, body, /*require_checks=*/true);
}

/// torch.nn.TransformerEncoderLayer(16, 4, 32, dropout 0, batch_first) with a key padding
/// mask; loss = sum(out * w).
template <class T, class B>
void encoder_case(Run<T, B>& r, dnn::activation act, bool norm_first) {
    Generator gen(1);
    dnn::EncoderLayer<T, B> layer(layer_config(act, norm_first), gen);
    r.load_parameters(layer);
    auto x = r.parameter("x");
    const auto mask = dnn::padding_mask<T, B>(r.lengths("lengths"), x.shape()[1]);
    auto out = layer(x, mask);
    auto loss = depthlab::sum(depthlab::mul(out, r.constant("w")));
    loss.backward();
    r.check("out", out.value());
    r.check("loss", loss.value());
    r.check_grad("x", x);
    r.check_parameter_grads(layer);
}

/// torch.nn.TransformerDecoderLayer(16, 4, 32, dropout 0, relu, batch_first) with a causal
/// tgt_mask + tgt_key_padding_mask (one causal-padding mask here) and a memory key padding
/// mask; loss = sum(out * w).
template <class T, class B>
void decoder_case(Run<T, B>& r, bool norm_first) {
    Generator gen(2);
    dnn::DecoderLayer<T, B> layer(layer_config(dnn::activation::relu, norm_first), gen);
    r.load_parameters(layer);
    auto x = r.parameter("x");
    auto memory = r.parameter("memory");
    const auto self_mask = dnn::causal_padding_mask<T, B>(r.lengths("lengths"), x.shape()[1]);
    const auto memory_mask = dnn::padding_mask<T, B>(r.lengths("memory_lengths"), memory.shape()[1]);
    auto out = layer(x, memory, self_mask, memory_mask);
    auto loss = depthlab::sum(depthlab::mul(out, r.constant("w")));
    loss.backward();
    r.check("out", out.value());
    r.check("loss", loss.value());
    r.check_grad("x", x);
    r.check_grad("memory", memory);
    r.check_parameter_grads(layer);
}

#if !defined(DEPTHLAB_TEST_CUDA)  // (the CPU only: the helpers of the stacks' properties below)
/// Every parameter random (LayerNorm gains around 1), so that biases and norms matter.
template <class T>
void randomise(const dnn::Module<T>& m, Generator& gen) {
    for (const auto& [name, p] : m.named_parameters()) {
        const bool gain = name.size() >= 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0;
        p.value().copy_(gain ? Tensor<T>::randn(p.value().shape(), gen, 0.2, 1.0) : Tensor<T>::randn(p.value().shape(), gen, 0.3));
    }
}

std::vector<double> values_of(const Tensor<double>& t) { return t.to_vector(); }

/// Largest |a - b| / (atol + rtol |b|) > 1 as a message ("" when all close).
std::string close_or_why(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol) {
    if (got.size() != want.size()) return "sizes " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
    std::size_t at = 0;
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double excess = std::abs(got[i] - want[i]) - (atol + rtol * std::abs(want[i]));
        if (!std::isfinite(got[i]) || excess > worst) {
            worst = std::isfinite(got[i]) ? excess : INFINITY;
            at = i;
        }
    }
    if (worst <= 0) return "";
    std::ostringstream os;
    os.precision(17);
    os << "element " << at << ": got " << got[at] << ", want " << want[at];
    return os.str();
}

#endif  // !DEPTHLAB_TEST_CUDA

}  // namespace

// ------------------------------------------------------------------ PyTorch parity
TEST_CASE("layer parity: encoder layer, post-LN, GELU (tanh), key padding") {
    run_layer_case("layers_encoder", []<class T, class B>(Run<T, B>& r) { encoder_case(r, dnn::activation::gelu, false); });
}

TEST_CASE("layer parity: encoder layer, post-LN, ReLU, key padding") {
    run_layer_case("layers_encoder_relu", []<class T, class B>(Run<T, B>& r) { encoder_case(r, dnn::activation::relu, false); });
}

TEST_CASE("layer parity: encoder layer, pre-LN, GELU (tanh), key padding") {
    run_layer_case("layers_encoder_preln", []<class T, class B>(Run<T, B>& r) { encoder_case(r, dnn::activation::gelu, true); });
}

TEST_CASE("layer parity: decoder layer, post-LN, causal + padding masks, memory padding") {
    run_layer_case("layers_decoder", []<class T, class B>(Run<T, B>& r) { decoder_case(r, false); });
}

TEST_CASE("layer parity: decoder layer, pre-LN, causal + padding masks, memory padding") {
    run_layer_case("layers_decoder_preln", []<class T, class B>(Run<T, B>& r) { decoder_case(r, true); });
}

// A 2 + 2 layer Seq2SeqTransformer (post-LN, ReLU, separate embeddings, output tied to the
// target embedding) against a PyTorch mirror; label-smoothed (0.1) cross-entropy that
// ignores the padding id, over the (B, Tt, V) logits. Loss and every parameter's gradient.
TEST_CASE("layer parity: small encoder-decoder model, loss and every gradient") {
    run_layer_case("layers_seq2seq", []<class T, class B>(Run<T, B>& r) {
        const auto vocab = r.ids("config.vocab");
        const std::int64_t pad = r.ids("config.pad").at(0);
        dnn::seq2seq_config c;
        c.src_vocab = vocab.at(0);
        c.tgt_vocab = vocab.at(1);
        c.share_embeddings = false;
        c.tie_output = true;
        c.encoder_layers = 2;
        c.decoder_layers = 2;
        c.max_len = r.ids("config.max_len").at(0);
        c.layer = layer_config(dnn::activation::relu, false);
        dnn::Seq2SeqTransformer<T, B> model(c, 3);
        r.load_parameters(model);

        const FixtureTensor& src_t = r.fx.get("src");
        const FixtureTensor& tgt_t = r.fx.get("tgt_in");
        dnn::token_batch src{.batch = src_t.shape.at(0), .length = src_t.shape.at(1), .ids = r.ids("src"), .segments = {},
                             .lengths = r.lengths("src_lengths")};
        dnn::token_batch tgt{.batch = tgt_t.shape.at(0), .length = tgt_t.shape.at(1), .ids = r.ids("tgt_in"), .segments = {},
                             .lengths = r.lengths("tgt_lengths")};
        const auto targets = r.ids("tgt_out");

        const auto memory = model.encode(src);
        const auto logits = model.decode(memory, src, tgt);
        REQUIRE(logits.shape() == Shape{tgt.batch, tgt.length, c.tgt_vocab});
        auto loss = depthlab::cross_entropy(logits, std::span<const std::int64_t>(targets), pad, T(0.1));
        loss.backward();
        r.check("loss", loss.value());
        r.check_parameter_grads(model);
    });
}

#if !defined(DEPTHLAB_TEST_CUDA)  // (the CPU only: properties of the stacks, not of a backend)
// ------------------------------------------------------------------ pure C++ properties
// One layer applied 4 times (tied) has one layer's parameters, and its gradient is the sum
// of the gradients of 4 untied layers that hold the same weights.
TEST_CASE("layers: a tied 4-iteration encoder stack has one layer's parameters and the summed gradient") {
    const auto cfg = layer_config(dnn::activation::gelu, false);
    Generator gen(7);
    dnn::EncoderLayer<double> one(cfg, gen);
    dnn::Stack<dnn::EncoderLayer<double>, dnn::tied, double> tied(4, cfg, gen);
    dnn::Stack<dnn::EncoderLayer<double>, dnn::untied, double> untied(4, cfg, gen);
    CHECK(tied.parameter_count() == one.parameter_count());
    CHECK(tied.named_parameters().size() == one.named_parameters().size());
    CHECK(untied.parameter_count() == 4 * one.parameter_count());
    randomise(tied, gen);

    // the untied layers get the shared layer's weights ("shared.<name>" -> "<i>.<name>")
    const std::string shared = "shared.";
    for (const auto& [name, p] : tied.named_parameters()) {
        REQUIRE(name.rfind(shared, 0) == 0);
        for (int i = 0; i < 4; ++i) untied.parameter(std::to_string(i) + "." + name.substr(shared.size())).value().copy_(p.value());
    }

    const auto x0 = Tensor<double>::randn({2, 5, kDim}, gen);
    const auto w = Var<double>::constant(Tensor<double>::randn({2, 5, kDim}, gen));
    const auto mask = dnn::padding_mask<double>({5, 3}, 5);
    auto xt = Var<double>::parameter(x0.clone());
    auto xu = Var<double>::parameter(x0.clone());
    const auto out_t = tied.forward(-1, xt, mask);
    const auto out_u = untied.forward(-1, xu, mask);
    CHECK_MESSAGE(close_or_why(values_of(out_t.value()), values_of(out_u.value()), 0, 0) == "", "tied and untied outputs differ");
    depthlab::sum(depthlab::mul(out_t, w)).backward();
    depthlab::sum(depthlab::mul(out_u, w)).backward();
    CHECK_MESSAGE(close_or_why(values_of(xt.grad()), values_of(xu.grad()), 1e-10, 1e-12) == "", "input gradients differ");

    bool iterations_differ = false;  // the test means something only if the iterations' gradients differ
    for (const auto& entry : tied.named_parameters()) {
        const auto& name = entry.first;  // (not a structured binding: doctest's macros capture it)
        const auto& p = entry.second;
        const std::string rest = name.substr(shared.size());
        std::vector<double> sum(static_cast<std::size_t>(p.value().numel()), 0.0);
        for (int i = 0; i < 4; ++i) {
            const auto g = values_of(untied.parameter(std::to_string(i) + "." + rest).grad());
            REQUIRE(g.size() == sum.size());
            for (std::size_t k = 0; k < g.size(); ++k) sum[k] += g[k];
            if (i == 0 && close_or_why(g, values_of(p.grad()), 1e-6, 0) != "") iterations_differ = true;
        }
        const std::string m = close_or_why(values_of(p.grad()), sum, 1e-10, 1e-12);
        CHECK_MESSAGE(m == "", "tied gradient of ", name, " != sum of the 4 untied layers' gradients of ", rest, ": ", m);
    }
    CHECK(iterations_differ);
}

// Switching a sub-layer off leaves its residual path: LN(x) post-LN, x pre-LN; switching it
// back on restores the output bit for bit.
TEST_CASE("layers: a switched-off sub-layer leaves LN(x) (post-LN) or x (pre-LN)") {
    for (const bool norm_first : {false, true}) {
        CAPTURE(norm_first);
        Generator gen(11);
        dnn::EncoderLayer<double> layer(layer_config(dnn::activation::relu, norm_first), gen);
        randomise(layer, gen);
        const auto x = Var<double>::constant(Tensor<double>::randn({2, 5, kDim}, gen));
        const auto mask = dnn::padding_mask<double>({5, 3}, 5);
        const auto base = values_of(layer(x, mask).value());

        auto subs = dnn::sublayers(layer);
        REQUIRE(subs.size() == 2);
        CHECK(subs[0].first == "self_attention");
        CHECK(subs[1].first == "feed_forward");
        auto& sa = layer.self_attention;
        auto& ff = layer.feed_forward;
        const double eps = 1e-5;
        auto ln = [eps](const Var<double>& v, const dnn::LayerNorm<double>& n) { return depthlab::layer_norm(v, n.weight, n.bias, eps); };
        auto ffn = [&](const Var<double>& v) {  // the feed-forward branch by hand: linear2(relu(linear1(v)))
            const auto& f = ff.branch;
            return depthlab::linear(depthlab::relu(depthlab::linear(v, f.linear1->weight, f.linear1->bias)), f.linear2->weight,
                                    f.linear2->bias);
        };

        // each sub-layer alone, as a residual: off -> LN(x) or x
        for (auto& entry : subs) {
            const auto& name = entry.first;  // (not a structured binding: doctest's macros capture it)
            auto& r = entry.second;
            CAPTURE(name);
            r->enabled = false;
            const auto& res_norm = r == static_cast<dnn::residual_base*>(&sa) ? sa.norm : ff.norm;
            const auto got = r == static_cast<dnn::residual_base*>(&sa) ? sa(x, mask) : ff(x);
            const auto want = norm_first ? values_of(x.value()) : values_of(ln(x, res_norm).value());
            CHECK_MESSAGE(close_or_why(values_of(got.value()), want, 0, 0) == "", name, " switched off is not ",
                          norm_first ? "x" : "LN(x)");
            r->enabled = true;
        }

        // self-attention off: the layer is the feed-forward sub-layer on LN_sa(x) (post-LN) or x
        subs[0].second->enabled = false;
        {
            const auto y = norm_first ? x : ln(x, sa.norm);
            const auto want = norm_first ? y + ffn(ln(y, ff.norm)) : ln(y + ffn(y), ff.norm);
            CHECK_MESSAGE(close_or_why(values_of(layer(x, mask).value()), values_of(want.value()), 0, 0) == "",
                          "self_attention off: layer output != the feed-forward sub-layer computed by hand");
        }
        // both off: LN_ff(LN_sa(x)) post-LN, x pre-LN
        subs[1].second->enabled = false;
        {
            const auto want = norm_first ? values_of(x.value()) : values_of(ln(ln(x, sa.norm), ff.norm).value());
            CHECK_MESSAGE(close_or_why(values_of(layer(x, mask).value()), want, 0, 0) == "", "both sub-layers off");
        }
        // feed-forward off only: LN_ff(SA-sub-layer(x)) post-LN, SA-sub-layer(x) pre-LN
        subs[0].second->enabled = true;
        {
            const auto a = sa(x, mask);
            const auto want = norm_first ? values_of(a.value()) : values_of(ln(a, ff.norm).value());
            CHECK_MESSAGE(close_or_why(values_of(layer(x, mask).value()), want, 0, 0) == "", "feed_forward off");
        }
        // back on: the original output, bit for bit
        subs[1].second->enabled = true;
        CHECK(values_of(layer(x, mask).value()) == base);
    }
}

// The same switches addressed by full name in a whole model: every sub-layer changes the
// logits when off, and switching it back on restores them bit for bit.
TEST_CASE("layers: sub-layers of an encoder-decoder model are addressable and switch off and back on") {
    dnn::seq2seq_config c;
    c.src_vocab = 11;
    c.tgt_vocab = 13;
    c.encoder_layers = 2;
    c.decoder_layers = 2;
    c.max_len = 16;
    c.layer = layer_config(dnn::activation::relu, false);
    dnn::Seq2SeqTransformer<double> model(c, 5);
    Generator gen(12);
    randomise(model, gen);
    dnn::token_batch src{.batch = 2, .length = 6, .ids = {10, 9, 4, 5, 6, 5, 8, 8, 7, 10, 0, 0}, .segments = {}, .lengths = {6, 4}};
    dnn::token_batch tgt{.batch = 2, .length = 5, .ids = {1, 5, 7, 9, 11, 1, 9, 6, 0, 0}, .segments = {}, .lengths = {5, 3}};
    auto logits = [&] { return values_of(model.decode(model.encode(src), src, tgt).value()); };
    const auto base = logits();

    auto subs = dnn::sublayers(model);
    std::vector<std::string> names;
    for (auto& [name, r] : subs) names.push_back(name);
    const std::vector<std::string> expected = {
        "encoder.0.self_attention",  "encoder.0.feed_forward",  "encoder.1.self_attention", "encoder.1.feed_forward",
        "decoder.0.self_attention",  "decoder.0.cross_attention", "decoder.0.feed_forward", "decoder.1.self_attention",
        "decoder.1.cross_attention", "decoder.1.feed_forward"};
    CHECK(names == expected);
    for (auto& entry : subs) {
        const auto& name = entry.first;  // (not a structured binding: doctest's macros capture it)
        auto& r = entry.second;
        CAPTURE(name);
        r->enabled = false;
        CHECK(logits() != base);
        r->enabled = true;
        CHECK(logits() == base);
    }
}
#endif  // !DEPTHLAB_TEST_CUDA
