// backend::cuda: a dense encoder-layer training step (forward, backward, clipping, AdamW)
// launches kernels and makes no host synchronisation; reading the loss is the one sync.
// (Values are checked by the op harness and the PyTorch layer parity, compiled for cuda in
// test_ops.cu and test_layers_parity.cu.)
#include <cstring>

#include "../harness.hpp"

#include "device_steps.hpp"

using namespace depthlab;
using cu = backend::cuda;

TEST_CASE("cuda: a dense encoder-layer training step makes no host synchronisation") {
    nn::transformer_config c;
    c.dim = 64;
    c.heads = 4;
    c.ff_dim = 128;
    c.dropout = c.attention_dropout = 0;
    Generator g(11);
    nn::EncoderLayer<float, cu> layer(c, g);
    optim::AdamW<float, cu> opt(layer.named_parameters(), {.lr = 1e-3});
    Generator gx(3);
    const auto x = Tensor<float, cu>::randn({4, 16, 64}, gx);
    const auto target = Tensor<float, cu>::randn({4, 16, 64}, gx);
    const auto mask = nn::padding_mask<float, cu>({16, 9, 4, 1}, 16);
    auto& k = counters<cu>();
    for (int step = 0; step < 3; ++step) {
        k.reset();
        opt.zero_grad();
        const auto y = layer(Var<float, cu>::constant(x), mask);
        const auto loss = mse(y, Var<float, cu>::constant(target));
        loss.backward();
        optim::clip_grad_norm_on_device(opt.parameters(), 1.0);
        opt.step();
        CHECK(k.syncs == 0);
        MESSAGE("cuda dense step: ", k.launches.load(), " launches, ", k.syncs.load(), " syncs");
        const float l = checked_item(loss);
        CHECK(std::isfinite(l));
    }
}

TEST_CASE("cuda: an ACT step synchronises twice (a read of the running tokens and the record), compact or dense, plus the loss it prints") {
    nn::transformer_config c;
    c.dim = 32;
    c.heads = 4;
    c.ff_dim = 64;
    c.dropout = c.attention_dropout = 0;
    c.init = nn::init_scheme::bert;
    Generator g(5);
    halting::ActEncoder<float, cu, halting::act> enc(c, g, {.max_iterations = 6});
    optim::Lamb<float, cu> opt(enc.named_parameters(), {.lr = 1e-2});
    Generator gx(9);
    const auto x = Tensor<float, cu>::randn({3, 8, 32}, gx);
    const auto w = Tensor<float, cu>::randn({3, 8, 32}, gx);
    for (const bool compact : {true, false}) {
        CAPTURE(compact);
        enc.opt.compact = compact;
        auto& k = counters<cu>();
        k.reset();
        opt.zero_grad();
        auto r = enc(Var<float, cu>::constant(x), {8, 6, 3});
        auto loss = add(sum(mul(r.hidden, Var<float, cu>::constant(w))), scale(r.ponder, 0.01f));
        loss.backward();
        opt.step();
        const float printed = checked_item(loss);
        CHECK(std::isfinite(printed));
        CHECK(r.record.compact == compact);
        CHECK(k.syncs == enc.opt.host_reads + 2);
    }
}

TEST_CASE("cuda: greedy decoding synchronises once per output position; beam search picks on the device") {
    nn::seq2seq_config c = depthlab_test::tiny_seq2seq(14, 12, 16, 2, 32);
    nn::Seq2SeqTransformer<float, cu> model(c, 4);
    model.eval();
    const nn::token_batch src = depthlab_test::two_sentence_source();
    no_grad guard;
    const auto memory = model.encode(src);
    auto& k = counters<cu>();
    k.reset();
    const auto hyps = nn::greedy_search(model, memory, src, {.max_len_a = 0, .max_len_b = 6});
    std::size_t positions = 0;
    for (const auto& h : hyps) positions = std::max(positions, h.tokens.size() + 1);
    CHECK(k.syncs == static_cast<std::int64_t>(positions));
    // beam search: the candidates chosen on the device (their choice is tested against a
    // host sort in test_primitives), one read-back a position; beam 1 is the greedy output
    k.reset();
    const auto beams = nn::beam_search(model, memory, src, {.beam = 3, .max_len_a = 0, .max_len_b = 6});
    CHECK(k.syncs <= 6);
    for (const auto& h : beams) CHECK(std::isfinite(h.score));
    const auto beam1 = nn::beam_search(model, memory, src, {.beam = 1, .max_len_a = 0, .max_len_b = 6});
    for (std::size_t i = 0; i < hyps.size(); ++i) CHECK(beam1[i].tokens == hyps[i].tokens);
}

TEST_CASE("cuda: SGD, Adam and LAMB steps, clipping and dropout run on the device") {
    Generator g(21);
    const auto w0 = Tensor<float, cu>::randn({3000}, g), g0 = Tensor<float, cu>::randn({3000}, g);
    const auto run = [&](auto make) {
        auto p = Var<float, cu>::parameter(w0.clone());
        optim::named_parameters<float, cu> params{{"w", p}};
        auto opt = make(params);
        for (int s = 0; s < 3; ++s) {
            opt.zero_grad();
            p.grad() = g0.clone();
            optim::clip_grad_norm(params, 2.0);
            opt.step();
        }
        for (float v : p.value().to_host()) REQUIRE(std::isfinite(v));
    };
    run([](auto& p) { return optim::SGD<float, cu>(p, {.lr = 0.1, .momentum = 0.9, .nesterov = true}); });
    run([](auto& p) { return optim::Adam<float, cu>(p, {.lr = 0.1, .weight_decay = 0.01}); });
    run([](auto& p) { return optim::Lamb<float, cu>(p, {.lr = 0.1, .exclude_from_weight_decay = optim::exclude_none}); });
    // dropout: the CPU's Philox words, so the kept fraction is the CPU's for the same seed
    Generator gd(7);
    const auto ones = Var<float, cu>::constant(Tensor<float, cu>::ones({4096}));
    const auto kept = dropout(ones, 0.25f, gd).value().to_host();
    std::size_t nonzero = 0;
    for (float v : kept) nonzero += v != 0;
    CHECK(nonzero > 2800);
    CHECK(nonzero < 3350);
}

// The counts of bench/device_steps.hpp's steps (printed at the issue's shapes by
// depthlab_launch_counts), pinned at small shapes: a change that adds launches, GEMM calls or
// synchronisations to a training step fails here and must update these numbers on purpose.
TEST_CASE("cuda: the launch, GEMM and synchronisation counts of a dense and an ACT training step") {
    const auto dense = depthlab_bench::dense_layer_train_step<cu>({.dim = 32, .heads = 4, .ff = 64, .batch = 3, .seq = 8});
    MESSAGE(depthlab_bench::format_counts("dense", dense));
    CHECK(dense.launches == 45);
    // 4 linear products forward and 7 backward (the input needs no gradient), 6 attention
    // products: one call each, whatever the batch
    CHECK(dense.gemms == 17);
    CHECK(dense.syncs == 0);
    const auto act = depthlab_bench::act_train_step<cu>({.dim = 32, .heads = 4, .ff = 64, .batch = 3, .seq = 8, .max_iterations = 6});
    MESSAGE(depthlab_bench::format_counts("act", act), " mean depth ", act.mean_iterations);
    REQUIRE(act.mean_iterations == doctest::Approx(19.0 / 6));  // the halting profile these counts are for
    // one read of the running tokens (after iteration 3 of 6) and one of the record; the
    // iterations after the read run to N_max (6 here, where tokens run 4 at most)
    CHECK(act.launches == 401);
    CHECK(act.gemms == 142);
    CHECK(act.syncs == 2);
}

// Under bf16 every GEMM operand is converted once per step however many products read it:
// a linear layer converts its input, weight and output gradient (three conversions, three
// products), attention its q, k, v, probabilities, output gradient and score gradient (six
// conversions, eight products). Each conversion is one launch and f32 makes none, so the
// launch counts of the two precisions differ by exactly that many — and by one bias-gradient
// pass for the linear layer, whose f32 weight gradient brings its bias gradient (BGRADB) while
// under bf16 the bias gradient is summed apart from dY in f32; for attention, by three address
// tables: the probabilities' and the score gradient's copies are made after the tables of the
// other products are built together, so the three products that read them build their own.
TEST_CASE("cuda: under bf16 each GEMM operand is converted once a step, whatever reads it") {
    Generator g(2);
    const index_t width = 48;
    const auto x = Var<float, cu>::parameter(Tensor<float, cu>::randn({2, 8, width}, g));
    const auto W = Var<float, cu>::parameter(Tensor<float, cu>::randn({40, width}, g));
    const auto b = Var<float, cu>::parameter(Tensor<float, cu>::randn({40}, g));
    const auto qkv = Var<float, cu>::parameter(Tensor<float, cu>::randn({2, 8, 3 * width}, g));
    auto& k = counters<cu>();
    const auto launches = [&](matmul_precision p, auto&& step) {
        const matmul_precision_scope scope(p);
        for (const Var<float, cu>* v : {&x, &W, &b, &qkv}) v->zero_grad();
        k.reset();
        sum(step()).backward();
        return k.launches.load();
    };
    const auto dense = [&] { return linear(x, W, b); };
    CHECK(launches(matmul_precision::bf16, dense) - launches(matmul_precision::f32, dense) == 3 + 1);
    const auto attend = [&] { return attention<float, cu>({qkv, 0}, {qkv, width}, {qkv, 2 * width}, width, {.heads = 4}); };
    CHECK(launches(matmul_precision::bf16, attend) - launches(matmul_precision::f32, attend) == 6 + 3);
}
