// ACT halting: the paper's arithmetic on hand-computed cases, padding, no forced halt, the
// ponder gradient, and the equivalence of the compact path (running tokens only, cached
// keys/values) with the dense masked reference — values and every gradient.
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <vector>

#include "harness.hpp"
#include "random_corpus.hpp"

using namespace depthlab;
using namespace depthlab::halting;
using depthlab_test::check_close;
using depthlab_test::to_double;

TEST_CASE("ACT arithmetic: hand-computed cases") {
    SUBCASE("p = 0.3, 0.3, 0.5 halts at iteration 3 with R = 0.4") {
        act_state<double> st({1}, 0.01);
        const std::vector<std::int64_t> row{0};
        st.step({0.3}, row, 1);
        st.step({0.3}, row, 2);
        CHECK(st.running[0]);
        const auto m = st.step({0.5}, row, 3);
        CHECK(m.new_halt[0] == 1.0);
        CHECK(st.N[0] == 3);
        CHECK(st.R[0] == doctest::Approx(0.4).epsilon(1e-12));
        CHECK(st.cum[0] == doctest::Approx(1.0));
        CHECK(!st.any_running());
    }
    SUBCASE("strict '>': reaching exactly 1 - eps keeps running") {
        act_state<double> st({1}, 0.25);  // threshold 0.75, exact in binary
        const std::vector<std::int64_t> row{0};
        st.step({0.5}, row, 1);
        st.step({0.25}, row, 2);  // cum + p == 0.75: not > 0.75
        CHECK(st.running[0]);
        st.step({0.125}, row, 3);
        CHECK(!st.running[0]);
        CHECK(st.N[0] == 3);
        CHECK(st.R[0] == 0.25);
    }
    SUBCASE("p > 1 - eps at the first iteration: N = 1, R = 1") {
        act_state<double> st({1}, 0.01);
        st.step({0.995}, {0}, 1);
        CHECK(st.N[0] == 1);
        CHECK(st.R[0] == 1.0);
    }
    SUBCASE("padding starts halted and never runs; min_iterations delays halting") {
        act_state<double> st({1, 0}, 0.01, /*min_iter=*/2);
        st.step({0.999, 0.999}, {0, 1}, 1);
        CHECK(st.running[0]);  // could not halt before iteration 2
        CHECK(st.N[1] == 0);
        st.step({0.999, 0.999}, {0, 1}, 2);
        CHECK(!st.running[0]);
        CHECK(st.N[0] == 2);
        CHECK(st.R[1] == 0.0);
    }
}

namespace {

nn::transformer_config small_layer() {
    nn::transformer_config c;
    c.dim = 16;
    c.heads = 2;
    c.ff_dim = 32;
    c.dropout = c.attention_dropout = 0;
    c.init = nn::init_scheme::bert;
    return c;
}

/// A tiny ACT-ALBERT (vocab 30, E 8, sequences of 8) over small_layer().
nn::albert_config tiny_albert(int depth) {
    nn::albert_config cfg;
    cfg.vocab = 30;
    cfg.embed = 8;
    cfg.max_len = 8;
    cfg.depth = depth;
    cfg.layer = small_layer();
    return cfg;
}

/// Two sequences ([CLS] A [SEP] B [SEP], lengths 6 and 4, padded to 6) with three MLM targets
/// and one SOP label each.
data::albert_batch two_sequence_albert_batch() {
    data::albert_batch b;
    b.tokens = {2, 6, {2, 7, 4, 9, 3, 11, 2, 5, 8, 3, 0, 0}, {0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0}, {6, 4}};
    b.mlm_positions = {1, 3, 8};
    b.mlm_labels = {5, 17, 9};
    b.sop_labels = {0, 1};
    return b;
}

/// Sets the halting unit so that p varies strongly across tokens and iterations.
template <class Enc>
void spread_halting(Enc& enc, double bias, std::uint64_t seed) {
    using T = typename std::decay_t<decltype(enc.halting_unit->bias.value())>::value_type;
    Generator g(seed);
    enc.halting_unit->weight.value().copy_(Tensor<T>::randn({1, 16}, g, 0.6));
    enc.halting_unit->bias.value().fill_(static_cast<T>(bias));
}

struct run_out {
    std::vector<double> hidden, ponder;
    std::map<std::string, std::vector<double>> grads;
    halting_record rec;
};

template <class T>
run_out run(ActEncoder<T>& enc, const Tensor<T>& x0, const std::vector<index_t>& lengths, bool compact) {
    enc.opt.compact = compact;
    enc.zero_grad();
    auto x = Var<T>::parameter(x0.clone());
    auto r = enc(x, lengths);
    Generator g(77);
    const auto w = Tensor<T>::randn(r.hidden.shape(), g);
    // loss = sum(w * hidden) + 3 * ponder: exercises both gradient paths
    auto loss = add(sum(mul(r.hidden, Var<T>::constant(w))), scale(r.ponder, T(3)));
    loss.backward();
    run_out o;
    o.hidden = to_double(r.hidden.value());
    o.ponder = to_double(r.ponder.value());
    o.grads["input"] = to_double(x.grad());
    for (auto& [name, p] : enc.named_parameters())
        o.grads[name] = p.grad().defined() ? to_double(p.grad()) : std::vector<double>(p.value().numel(), 0.0);
    o.rec = r.record;
    return o;
}

}  // namespace

TEST_CASE_TEMPLATE("ACT: the compact path equals the dense masked reference (values and gradients)", T, double, float) {
    const double rtol = std::is_same_v<T, double> ? 1e-9 : 2e-4, atol = std::is_same_v<T, double> ? 1e-11 : 2e-5;
    // Padded batches (the running rows are gathered from the start), and full ones, where
    // every token runs the first iterations and the compact path takes the rows as they are
    // (no gather, no partial key/value update, no scatter into the attention's block); with
    // a bias of -30 nobody halts early, so every token stops at N_max in the same iteration.
    struct layout {
        std::vector<index_t> lengths;
        double bias;  // (NaN: the seed's spread, below)
    };
    // row_quantum pads each iteration's rows with halted tokens (and, at first, padding
    // positions) up to a multiple of it: 1 pads nothing, 4 and 16 (the default) pad most
    // iterations of these 21-token batches, 16 up to every row.
    const double spread = std::numeric_limits<double>::quiet_NaN();
    for (int quantum : {1, 4, 16})
    for (const layout& l : {layout{{7, 4, 1}, spread}, layout{{7, 7, 7}, spread}, layout{{7, 7, 7}, -30.0}})
        for (std::uint64_t seed : {1u, 2u, 3u}) {
            CAPTURE(quantum);
            CAPTURE(seed);
            CAPTURE(l.lengths[1]);
            CAPTURE(l.bias);
            Generator gen(seed);
            act_options opt;
            opt.max_iterations = 6;
            opt.row_quantum = quantum;
            ActEncoder<T> enc(small_layer(), gen, opt);
            spread_halting(enc, std::isnan(l.bias) ? (seed == 3 ? 0.5 : -1.0) : l.bias, seed + 100);
            const std::vector<index_t>& lengths = l.lengths;
            const auto x0 = Tensor<T>::randn({3, 7, 16}, gen);
            const run_out dense = run(enc, x0, lengths, false);
            const run_out compact = run(enc, x0, lengths, true);
            CHECK(dense.rec.N == compact.rec.N);
            CHECK(dense.rec.running_per_iteration == compact.rec.running_per_iteration);  // padding rows do not count
            check_close("R", compact.rec.R, dense.rec.R, rtol, atol);
            check_close("hidden", compact.hidden, dense.hidden, rtol, atol);
            check_close("ponder", compact.ponder, dense.ponder, rtol, atol);
            for (auto& [name, g] : dense.grads) check_close("gradient of " + name, compact.grads.at(name), g, rtol, atol);
            // padding never runs
            for (index_t b = 0; b < 3; ++b)
                for (index_t t = lengths[b]; t < 7; ++t) CHECK(dense.rec.N[b * 7 + t] == 0);
            std::map<int, int> hist;
            for (int n : dense.rec.N)
                if (n > 0) ++hist[n];
            if (std::isnan(l.bias)) {  // the batch covers several halting iterations
                MESSAGE("seed ", seed, ": ", hist.size(), " distinct halting iterations");
                CHECK(hist.size() >= 3);
            } else {
                CHECK(hist.size() == 1);
                CHECK(hist.begin()->first == 6);
            }
        }
}

// FLOPs counted where products are issued (flop_scope): a dense encoder layer's forward is
// the analytic 2·BT·(4D² + 2DF) + 4·B·T²·D, its backward twice that; the compact ACT
// forward counts the rows it computed, iteration by iteration, from the tokens' N.
TEST_CASE("FLOPs: a dense layer's count is the analytic formula; the compact ACT count is the sum over executed rows") {
    const nn::transformer_config cfg = small_layer();
    const index_t Bn = 3, Tt = 7, D = cfg.dim, F = cfg.ff_dim;
    Generator gen(5);
    nn::EncoderLayer<double> layer(cfg, gen);
    const auto x = Var<double>::parameter(Tensor<double>::randn({Bn, Tt, D}, gen));
    const std::int64_t forward = 2 * Bn * Tt * (4 * D * D + 2 * D * F) + 4 * Bn * Tt * Tt * D;
    {
        no_grad g;
        const flop_scope f;
        (void)layer(x);
        CHECK(f.flops() == forward);
    }
    const flop_scope f;
    auto y = layer(x);
    CHECK(f.flops() == forward);
    sum(y).backward();
    CHECK(f.flops() == 3 * forward);

    for (int quantum : {1, 16}) {
        CAPTURE(quantum);
        Generator g2(6);
        act_options opt;
        opt.max_iterations = 6;
        opt.row_quantum = quantum;
        ActEncoder<double> enc(cfg, g2, opt);
        spread_halting(enc, -1.0, 101);
        const std::vector<index_t> lengths{7, 4, 1};
        const auto x0 = Var<double>::constant(Tensor<double>::randn({Bn, Tt, D}, g2));
        no_grad ng;
        const auto r = enc(x0, lengths);
        REQUIRE(r.record.compact);
        const auto& N = r.record.N;
        std::int64_t want = 2 * Bn * Tt * D * 2 * D;  // keys and values of every position, once
        index_t prev_rows = 0;
        for (int n = 1; n <= r.record.iterations; ++n) {
            std::vector<index_t> running(static_cast<std::size_t>(Bn), 0);
            for (index_t i = 0; i < Bn * Tt; ++i) running[static_cast<std::size_t>(i / Tt)] += N[static_cast<std::size_t>(i)] >= n;
            index_t rows = 0, most = 0;
            for (const index_t c : running) {
                rows += c;
                most = std::max(most, c);
            }
            if (quantum > 1) break;  // (padded rows: checked below as a bound)
            const bool block = rows == Bn * most;  // every sequence runs as many: no padding block
            const index_t block_rows = block ? most : std::max<index_t>(1, (most + 7) / 8 * 8);
            if (n > 1) want += 2 * prev_rows * D * 2 * D;                // the previous iteration's keys and values again
            want += 2 * rows * D * D * 2 + 2 * rows * D * F * 2 + 2 * rows * D;  // q, out projections; FF; halting unit
            want += 4 * Bn * block_rows * Tt * D;                       // scores and mix over the (B, block_rows) block
            prev_rows = rows;
        }
        if (quantum == 1) {
            CHECK(r.record.flops == want);
        } else {
            // padded to 16 rows an iteration: more than the exact rows, less than the dense path's
            act_options dense_opt = opt;
            dense_opt.compact = false;
            Generator g3(6);  // the same parameters as enc's
            ActEncoder<double> dense(cfg, g3, dense_opt);
            spread_halting(dense, -1.0, 101);
            const auto rd = dense(x0, lengths);
            CHECK(rd.record.N == r.record.N);
            CHECK(r.record.flops < rd.record.flops);
            CHECK(rd.record.flops == static_cast<std::int64_t>(rd.record.iterations) * (forward + 2 * Bn * Tt * D));
        }
        CHECK(r.record.flops_per_token() == doctest::Approx(static_cast<double>(r.record.flops) / 12.0));
    }
}

TEST_CASE("ACT: the default options train with dropout and pre-LN (the dense path runs where the compact one does not apply)") {
    for (const bool norm_first : {false, true}) {
        CAPTURE(norm_first);
        nn::transformer_config cfg = small_layer();
        cfg.dropout = cfg.attention_dropout = 0.1;  // transformer_config's default
        cfg.norm_first = norm_first;
        Generator gen(7);
        ActEncoder<double> enc(cfg, gen, {});  // compact = true by default
        const auto x = Var<double>::constant(Tensor<double>::randn({2, 5, 16}, gen));
        enc.train();
        const auto r = enc(x, {5, 3});  // used to throw "the compact path runs without dropout"
        CHECK(!r.record.compact);
        add(sum(r.hidden), r.ponder).backward();
        CHECK(enc.halting_unit->weight.grad().defined());
        enc.eval();
        CHECK(enc(x, {5, 3}).record.compact == !norm_first);
        enc.layer->feed_forward.enabled = false;  // an ablated sub-layer: dense
        CHECK(!enc(x, {5, 3}).record.compact);
        enc.layer->feed_forward.enabled = true;
    }
}

TEST_CASE("ACT: no forced halt at N_max, tokens keep R = 0") {
    Generator gen(5);
    act_options opt;
    opt.max_iterations = 3;
    ActEncoder<double> enc(small_layer(), gen, opt);
    enc.halting_unit->bias.value().fill_(-30.0);  // p ~ 1e-13: nobody halts
    const auto r = enc(Var<double>::constant(Tensor<double>::randn({2, 5, 16}, gen)), {5, 3});
    CHECK(r.record.iterations == 3);
    for (index_t i = 0; i < 10; ++i) {
        CHECK(r.record.N[i] == (i % 5 < (i < 5 ? 5 : 3) ? 3 : 0));
        CHECK(r.record.R[i] == 0.0);
    }
    CHECK(r.ponder.value().item() == doctest::Approx((8 * 3) / 2.0));
}

TEST_CASE("ACT: the fixed-point trace is recorded in eval mode, the same on both paths, and skipped in training") {
    Generator gen(12);
    ActEncoder<double> enc(small_layer(), gen);
    spread_halting(enc, -1.0, 31);
    const auto x = Var<double>::constant(Tensor<double>::randn({2, 7, 16}, gen));
    const std::vector<index_t> lengths{7, 5};
    no_grad guard;
    enc.eval();
    enc.opt.compact = true;
    const auto compact = enc(x, lengths).record;
    enc.opt.compact = false;
    const auto dense = enc(x, lengths).record;
    REQUIRE(compact.cosine.size() == static_cast<std::size_t>(compact.iterations));
    REQUIRE(dense.cosine.size() == compact.cosine.size());
    for (std::size_t n = 0; n < dense.cosine.size(); ++n)
        for (std::size_t i = 0; i < dense.cosine[n].size(); ++i) {
            CAPTURE(n);
            CAPTURE(i);
            const double a = compact.cosine[n][i], b = dense.cosine[n][i];
            CHECK(std::isnan(a) == std::isnan(b));
            if (!std::isnan(a)) CHECK(a == doctest::Approx(b).epsilon(1e-9));
        }
    CHECK(std::isnan(dense.cosine[0][13]));  // padding never runs
    enc.train();
    CHECK(enc(x, lengths).record.cosine.empty());
    enc.opt.fixed_point_trace = act_options::trace::always;
    CHECK(!enc(x, lengths).record.cosine.empty());
}

TEST_CASE("ACT: the ponder gradient flows through R only (finite differences on the halting bias)") {
    Generator gen(8);
    ActEncoder<double> enc(small_layer(), gen);
    spread_halting(enc, -0.5, 9);
    const auto x = Var<double>::constant(Tensor<double>::randn({2, 6, 16}, gen));
    const std::vector<index_t> lengths{6, 4};
    auto r = enc(x, lengths);
    r.ponder.backward();
    const double analytic = enc.halting_unit->bias.grad().item();
    const double h = 1e-6, b0 = enc.halting_unit->bias.value().item();
    auto ponder_at = [&](double b) {
        enc.halting_unit->bias.value().fill_(b);
        no_grad guard;
        auto rr = enc(x, lengths);
        CHECK(rr.record.N == r.record.N);  // the step is small enough not to change any decision
        return rr.ponder.value().item();
    };
    const double numeric = (ponder_at(b0 + h) - ponder_at(b0 - h)) / (2 * h);
    CHECK(analytic == doctest::Approx(numeric).epsilon(1e-5));
    CHECK(analytic != 0.0);
}

TEST_CASE("ACT variants: fixed depth, Graves mean-field, UT-style run and differentiate") {
    Generator gen(4);
    const auto x0 = Tensor<double>::randn({2, 5, 16}, gen);
    const std::vector<index_t> lengths{5, 3};
    {
        ActEncoder<double, backend::cpu, fixed> enc(small_layer(), gen, {.max_iterations = 3});
        auto r = enc(Var<double>::constant(x0), lengths);
        CHECK(r.record.N[0] == 3);
        CHECK(r.ponder.value().item() == 0.0);
        // identical to applying the layer three times
        auto s = Var<double>::constant(x0);
        for (int i = 0; i < 3; ++i) s = (*enc.layer)(s, nn::padding_mask<double>(lengths, 5));
        check_close("fixed depth", to_double(r.hidden.value()), to_double(s.value()), 1e-12, 1e-12);
    }
    {
        ActEncoder<double, backend::cpu, act_graves> enc(small_layer(), gen);
        CHECK(enc.halting_unit->bias.value().item() == 1.0);  // Graves' initialisation
        auto x = Var<double>::parameter(x0.clone());
        auto r = enc(x, lengths);
        add(sum(r.hidden), r.ponder).backward();
        CHECK(x.grad().defined());
    }
    {
        ActEncoder<double, backend::cpu, act_ut> enc(small_layer(), gen);
        auto x = Var<double>::parameter(x0.clone());
        auto r = enc(x, lengths);
        add(sum(r.hidden), r.ponder).backward();
        CHECK(enc.halting_unit->weight.grad().defined());
    }
}

TEST_CASE("PonderNet: the halting distribution, median step and KL on a hand-computed case") {
    // w_h = 0 and b_h = log(0.3 / 0.7): λ = 0.3 at every iteration for every token, so
    // p = 0.3, 0.21, 0.147, then the remaining 0.343 at N_max = 4 (0.7^3 = 0.343 > ε);
    // CDF 0.3, 0.51 → median step 2 with p = 0.21. Padding gets p = 0 and N = 0.
    Generator gen(5);
    ActEncoder<double, backend::cpu, pondernet> enc(small_layer(), gen, {.max_iterations = 4, .lambda_p = 0.5});
    enc.halting_unit->weight.value().fill_(0.0);
    enc.halting_unit->bias.value().fill_(std::log(0.3 / 0.7));
    const auto x = Var<double>::constant(Tensor<double>::randn({2, 3, 16}, gen));
    const std::vector<index_t> lengths{3, 2};
    auto r = enc(x, lengths);
    REQUIRE(r.halt_prob.size() == 4);
    REQUIRE(r.states.size() == 4);
    const std::vector<double> expect{0.3, 0.21, 0.147, 0.343};
    for (int n = 0; n < 4; ++n) {
        const auto p = to_double(r.halt_prob[n].value());
        for (int i = 0; i < 6; ++i) CHECK(p[i] == doctest::Approx(i == 5 ? 0.0 : expect[n]).epsilon(1e-12));
    }
    CHECK(r.record.N == std::vector<int>{2, 2, 2, 2, 2, 0});
    CHECK(r.record.R[0] == doctest::Approx(0.21));
    CHECK(r.record.running_per_iteration == std::vector<index_t>{5, 5, 0, 0});
    // KL to the geometric prior λ_p = 0.5 truncated to 4 steps: q = (0.5, 0.25, 0.125, 0.0625) / 0.9375
    double kl = 0;
    const std::vector<double> q{0.5 / 0.9375, 0.25 / 0.9375, 0.125 / 0.9375, 0.0625 / 0.9375};
    for (int n = 0; n < 4; ++n) kl += expect[n] * std::log(expect[n] / q[n]);
    CHECK(r.ponder.value().item() == doctest::Approx(kl).epsilon(1e-12));
    // evaluation output: y at the median step
    const auto h = to_double(r.hidden.value()), y2 = to_double(r.states[1].value());
    check_close("hidden = y^N (real tokens)", std::vector<double>(h.begin(), h.begin() + 5 * 16), std::vector<double>(y2.begin(), y2.begin() + 5 * 16),
                0, 0);
}

TEST_CASE("PonderNet: early stop once every token halted with probability >= 1 - eps; gradients by finite differences") {
    Generator gen(6);
    ActEncoder<double, backend::cpu, pondernet> enc(small_layer(), gen, {.max_iterations = 12, .epsilon = 0.05});
    // λ between ~0.6 and ~0.85: every token halts with probability >= 0.95 well before 12 steps
    Generator gh(21);
    enc.halting_unit->weight.value().copy_(Tensor<double>::randn({1, 16}, gh, 0.08));
    enc.halting_unit->bias.value().fill_(1.2);
    const auto x0 = Tensor<double>::randn({2, 5, 16}, gen);
    const std::vector<index_t> lengths{5, 3};
    Generator gw(3);
    const auto c = Tensor<double>::randn({16, 1}, gw);
    // L = KL + Σ_n Σ_t p^n_t · (y^n_t · c): the shape of PonderNet's objective
    auto objective = [&](auto& r) {
        Var<double> L = r.ponder;
        for (std::size_t n = 0; n < r.states.size(); ++n) {
            const auto f = reshape(matmul(reshape(r.states[n], {10, 16}), Var<double>::constant(c)), {10});
            L = add(L, sum(mul(r.halt_prob[n], f)));
        }
        return L;
    };
    auto x = Var<double>::parameter(x0.clone());
    auto r = enc(x, lengths);
    const std::size_t iters = r.states.size();
    CHECK(iters < 12);  // stopped early
    std::vector<double> total(10, 0.0);
    for (const auto& p : r.halt_prob) {
        const auto pv = to_double(p.value());
        for (int i = 0; i < 10; ++i) total[i] += pv[i];
    }
    for (int i = 0; i < 10; ++i) CHECK(total[i] == doctest::Approx(i % 5 < lengths[i / 5] ? 1.0 : 0.0).epsilon(1e-12));
    objective(r).backward();
    auto fd_check = [&](Var<double> param, index_t k, const char* what) {
        CAPTURE(what);
        const double analytic = to_double(param.grad())[k];
        const double h = 1e-6, v0 = param.value().data()[k];
        auto at = [&](double v) {
            param.value().data()[k] = v;
            no_grad guard;
            auto rr = enc(Var<double>::constant(x0), lengths);
            CHECK(rr.states.size() == iters);  // no decision changes within the step
            return objective(rr).value().item();
        };
        const double numeric = (at(v0 + h) - at(v0 - h)) / (2 * h);
        param.value().data()[k] = v0;
        CHECK(analytic == doctest::Approx(numeric).epsilon(1e-5));
        CHECK(analytic != 0.0);
    };
    fd_check(enc.halting_unit->bias, 0, "halting bias");
    fd_check(enc.halting_unit->weight, 3, "halting weight");
    fd_check(enc.layer->feed_forward.branch.linear1->weight, 7, "feed-forward weight");
}

TEST_CASE("PonderNet ALBERT losses: expectations over halting steps; all mass on step 1 gives the plain losses") {
    const nn::albert_config cfg = tiny_albert(4);
    const data::albert_batch b = two_sequence_albert_batch();
    ActAlbert<double, backend::cpu, pondernet> model(cfg, {.max_iterations = 4}, 3);
    auto& hu = *model.encoder->halting_unit;
    hu.weight.value().fill_(0.0);
    for (const double bias : {40.0, -0.4}) {
        CAPTURE(bias);
        hu.bias.value().fill_(bias);
        const auto l = model.losses(b);
        // the expectation written out from the states and the halting distribution
        double mlm = 0, sop = 0;
        for (std::size_t n = 0; n < l.encoded.states.size(); ++n) {
            const auto p = to_double(l.encoded.halt_prob[n].value());
            const auto& y = l.encoded.states[n];
            const auto ce_m = to_double(cross_entropy_rows(model.mlm_logits(y, b.mlm_positions), b.mlm_labels).value());
            const auto ce_s = to_double(cross_entropy_rows(model.sop_logits(y), b.sop_labels).value());
            for (std::size_t k = 0; k < 3; ++k) mlm += p[b.mlm_positions[k]] * ce_m[k] / 3;
            for (std::size_t k = 0; k < 2; ++k) sop += p[k * 6] * ce_s[k] / 2;
        }
        CHECK(l.mlm.value().item() == doctest::Approx(mlm).epsilon(1e-12));
        CHECK(l.sop.value().item() == doctest::Approx(sop).epsilon(1e-12));
        if (bias > 0) {  // λ = 1 in double: one iteration, and the plain losses of y^1
            CHECK(l.encoded.states.size() == 1);
            const auto& h = l.encoded.hidden;
            CHECK(l.mlm.value().item() == doctest::Approx(cross_entropy(model.mlm_logits(h, b.mlm_positions), b.mlm_labels).value().item()));
            CHECK(l.sop.value().item() == doctest::Approx(cross_entropy(model.sop_logits(h), b.sop_labels).value().item()));
        } else {
            CHECK(l.encoded.states.size() == 4);
        }
    }
}

TEST_CASE("ACT-ALBERT: SOP head dropout acts in training only, scales the kept features, and leaves the compact path on") {
    nn::albert_config cfg = tiny_albert(3);
    cfg.sop_dropout = 0.5;
    const data::albert_batch b = two_sequence_albert_batch();
    ActAlbert<double> model(cfg, {.max_iterations = 3}, 5);
    model.eval();
    const auto h = model.encode(b.tokens).hidden;
    const auto eval_logits = to_double(model.sop_logits(h).value());
    CHECK(to_double(model.sop_logits(h).value()) == eval_logits);  // eval: no mask drawn
    // With the classifier's weight set to e_j on one class, a logit is bias + the (scaled,
    // maybe dropped) pooled feature j: each train-mode value is 0 or 2 × the eval value.
    model.sop->weight.value().fill_(0.0);
    model.sop->weight.value().data()[0] = 1.0;  // logit 0 = pooled feature 0 (+ bias)
    const double bias0 = model.sop->bias.value().data()[0];
    const auto feature = to_double(model.sop_logits(h).value());
    model.train();
    int dropped = 0, kept = 0;
    for (int draw = 0; draw < 20; ++draw) {
        const auto t = to_double(model.sop_logits(h).value());
        for (std::size_t r = 0; r < 2; ++r) {
            const double e = feature[r * 2] - bias0, v = t[r * 2] - bias0;
            if (v == 0) ++dropped;
            else {
                CHECK(v == doctest::Approx(2 * e).epsilon(1e-12));
                ++kept;
            }
        }
    }
    CHECK(dropped > 5);
    CHECK(kept > 5);
    const auto l = model.losses(b);
    CHECK(l.encoded.record.compact);  // head dropout does not push the encoder onto the dense path
    add(l.mlm, l.sop).backward();
    CHECK(model.pooler->weight.grad().defined());
}

TEST_CASE_TEMPLATE("ACT-ALBERT: with sop_trains_encoder false, SOP's loss is the same and trains its head only", Policy, act, pondernet) {
    const nn::albert_config cfg = tiny_albert(3);
    const data::albert_batch b = two_sequence_albert_batch();
    const auto sop_gradients = [&](bool trains_encoder) {
        ActAlbert<double, backend::cpu, Policy> model(cfg, {.max_iterations = 3, .halting_bias = -1.0}, 5);
        const auto l = model.losses(b, trains_encoder);
        l.sop.backward();
        const auto norm = [](const Var<double>& p) {
            double s2 = 0;
            if (p.grad().defined())
                for (double g : to_double(p.grad())) s2 += g * g;
            return std::sqrt(s2);
        };
        return std::array<double, 4>{l.sop.value().item(), norm(model.sop->weight) + norm(model.pooler->weight),
                                     norm(model.embeddings->word->weight), norm(model.encoder->halting_unit->weight)};
    };
    const auto full = sop_gradients(true), head = sop_gradients(false);
    CHECK(head[0] == full[0]);  // the same forward pass
    CHECK(full[1] > 0);
    CHECK(head[1] == doctest::Approx(full[1]).epsilon(1e-12));  // the head learns as before
    CHECK(full[2] > 0);
    CHECK(head[2] == 0);  // no SOP gradient reaches the embeddings (so none went through the tied layer either)
    // the halting unit: through the interpolation weights (act) or the expectation's
    // weights (PonderNet), SOP reaches it, unless cut
    CHECK(full[3] > 0);
    CHECK(head[3] == 0);
}

TEST_CASE("halting statistics: categories counted right, padding excluded, CSVs") {
    halting_record rec;
    rec.batch = 1;
    rec.length = 6;
    //           CLS  tok  MASK tok  SEP  pad
    rec.N = {6, 2, 5, 3, 1, 0};
    rec.R = {0.0, 0.5, 0.25, 0.75, 1.0, 0.0};
    rec.cosine = {{0.1, 0.2, 0.3, 0.4, 0.5, NAN}, {0.9, 0.8, 0.7, 0.6, NAN, NAN}};
    using C = data::token_category;
    const std::vector<std::uint8_t> cat{static_cast<std::uint8_t>(C::cls),      static_cast<std::uint8_t>(C::unmasked),
                                        static_cast<std::uint8_t>(C::mask_to_mask), static_cast<std::uint8_t>(C::unmasked),
                                        static_cast<std::uint8_t>(C::sep),      static_cast<std::uint8_t>(C::pad)};
    const std::vector<std::string> labels{"", "verb", "", "noun", "", ""};
    halting_stats st;
    st.add(rec, cat, &labels);
    CHECK(st.count("all") == 5);
    CHECK(st.mean_iterations("all") == doctest::Approx((6 + 2 + 5 + 3 + 1) / 5.0));
    CHECK(st.count("unmasked") == 2);
    CHECK(st.mean_iterations("unmasked") == 2.5);
    CHECK(st.mean_remainder("unmasked") == doctest::Approx(0.625));
    CHECK(st.mean_iterations("cls") == 6);
    CHECK(st.mean_iterations("mask_to_mask") == 5);
    CHECK(st.mean_iterations("sep") == 1);
    CHECK(st.mean_iterations("label:verb") == 2);
    CHECK(st.count("mask_to_random") == 0);
    CHECK(std::isnan(st.mean_iterations("mask_to_random")));
    CHECK(st.mean_cosine("all", 1) == doctest::Approx(0.3));
    CHECK(st.mean_cosine("all", 2) == doctest::Approx(0.75));  // SEP and pad did not run at iteration 2
    CHECK(st.mean_cosine("sep", 2) != st.mean_cosine("sep", 2));  // NaN: no [SEP] ran then
    const auto names = st.ordered_names();
    CHECK(names.front() == "all");
    CHECK(names.back() == "label:verb");
    // a real token with N = 0 means lengths and categories disagree
    halting_record bad = rec;
    bad.N[1] = 0;
    CHECK_THROWS_AS(st.add(bad, cat), error);
}

TEST_CASE("dev evaluation record and line; the halting-collapse warning comes once per collapse") {
    halting_record rec;
    rec.batch = 1;
    rec.length = 3;
    rec.N = {4, 1, 2};  // CLS, MASK, SEP
    rec.R = {0.0, 0.5, 0.5};
    using C = data::token_category;
    albert_eval ev;
    ev.mlm_acc = 23.84;
    ev.sop_acc = 64.4;
    ev.mlm_loss = 5.25;
    ev.stats.add(rec, {static_cast<std::uint8_t>(C::cls), static_cast<std::uint8_t>(C::mask_to_mask), static_cast<std::uint8_t>(C::sep)});
    const auto j = to_json(ev);
    CHECK(j["dev_mlm_acc"] == 23.84);
    CHECK(j["dev_sop_acc"] == 64.4);
    CHECK(j["dev_mlm_loss"] == 5.25);
    CHECK(j["dev_mean_N"].get<double>() == doctest::Approx(7.0 / 3));
    CHECK(j["dev_halting"]["cls"] == 4.0);
    CHECK(j["dev_halting"].begin().key() == "all");  // the paper's order
    CHECK(summary(ev) == "MLM acc 23.8%  SOP acc 64.4%  mean N: all 2.33 unmasked nan [MASK]->[MASK] 1.00 [CLS] 4.00 [SEP] 2.00");

    collapse_watch watch;
    CHECK(watch.check(2.5).empty());
    const std::string w = watch.check(1.01);
    CHECK(w.find("halting collapse") != std::string::npos);
    CHECK(w.find("1.010") != std::string::npos);
    CHECK(watch.check(1.0).empty());   // still collapsed: said once
    CHECK(watch.check(1.8).empty());   // recovered
    CHECK(!watch.check(1.02).empty()); // a new collapse is reported again
}

TEST_CASE("ACT: options out of range, an empty or NaN input and a negative ponder weight are clear errors") {
    const auto bad = [](act_options o, const char* says) {
        CAPTURE(says);
        CHECK_THROWS_WITH_AS(o.validate(), doctest::Contains(says), usage_error);
    };
    bad({.epsilon = 1.5}, "epsilon 1.5 must lie in (0, 1)");
    bad({.max_iterations = 0}, "max_iterations (N_max) 0 must be >= 1");
    bad({.max_iterations = 6, .min_iterations = 100}, "min_iterations 100 must lie in [0, max_iterations = 6]");
    bad({.row_quantum = 0}, "row_quantum 0 must be >= 1");
    bad({.host_reads = -2}, "host_reads -2 must be >= 0, or -1 (after every iteration)");
    bad({.halting_bias = std::numeric_limits<double>::infinity()}, "halting_bias inf must be finite");
    CHECK_THROWS_WITH_AS(ponder_weight(-1e-3, 0, 5), doctest::Contains("a negative weight rewards pondering"), usage_error);
    CHECK(ponder_weight(1e-3, 10, 5) == doctest::Approx(5e-4));

    // NaN is the documented "the policy's bias": the model's bias is then finite, 0 for act
    Generator gen(3);
    ActEncoder<double> enc(small_layer(), gen, {.halting_bias = std::numeric_limits<double>::quiet_NaN()});
    CHECK(enc.halting_unit->bias.value().to_vector() == std::vector<double>{0.0});
    enc.eval();
    auto xs = Tensor<double>::randn({2, 5, 16}, gen);
    CHECK_THROWS_WITH_AS(enc(Var<double>::constant(xs), {5, 0}), doctest::Contains("sequence 1 has length 0, outside [1, 5]"), usage_error);
    CHECK_THROWS_WITH_AS(enc(Var<double>::constant(Tensor<double>({0, 5, 16})), {}), doctest::Contains("an empty batch"), usage_error);
    xs.data()[17] = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_WITH_AS(enc(Var<double>::constant(xs), {5, 5}), doctest::Contains("ACT: iteration 1: the halting probability of token 0 is nan"),
                         numeric_error);
}

// albert_act's iso-FLOP table: evaluate_at_fixed_depths runs a model's own weights at depth N
// for every token (mean N exactly N, N times depth 1's FLOPs) on the same batches as an
// evaluation of the model: a fixed-depth model at its own depth gives its own evaluation bit
// for bit. An ACT model whose tokens all halt at the first iteration (halting bias +100: p = 1,
// w = 1, s¹ = the layer's output) computes what its weights compute at depth 1.
TEST_CASE("evaluate_at_fixed_depths: a model's weights at depth N, on the same batches") {
    nn::albert_config cfg;
    cfg.vocab = 300, cfg.embed = 16, cfg.max_len = 32, cfg.depth = 3;
    cfg.layer.dim = 16, cfg.layer.heads = 2, cfg.layer.ff_dim = 32, cfg.layer.dropout = cfg.layer.attention_dropout = 0;
    data::albert_data_config dcfg;
    dcfg.max_len = 32;
    dcfg.vocab = cfg.vocab;
    const data::corpus corpus = depthlab_test::random_albert_corpus(2, 30, cfg.vocab);
    const std::function<data::albert_sampler()> dev = [&] { return data::albert_sampler(corpus, dcfg, 7); };

    ActAlbert<double, backend::cpu, fixed> three(cfg, {.max_iterations = 3}, 4);
    three.eval();
    auto s = dev();
    const albert_eval own = evaluate_albert(three, s, 2, 8);
    const auto evs = evaluate_at_fixed_depths(three, {1, 2, 3}, dev, 2, 8);
    REQUIRE(evs.size() == 3);
    for (int n = 1; n <= 3; ++n) {
        CAPTURE(n);
        const albert_eval& ev = evs[static_cast<std::size_t>(n - 1)];
        CHECK(ev.stats.mean_iterations("all") == n);
        CHECK(ev.stats.flops_per_token() == doctest::Approx(n * evs[0].stats.flops_per_token()).epsilon(1e-12));
    }
    CHECK(evs[2].mlm_loss == own.mlm_loss);
    CHECK(evs[2].sop_loss == own.sop_loss);
    CHECK(evs[2].mlm_acc == own.mlm_acc);
    CHECK(evs[0].mlm_loss != doctest::Approx(own.mlm_loss).epsilon(1e-6));

    ActAlbert<double, backend::cpu, act> halts_at_once(cfg, {.max_iterations = 3, .halting_bias = 100}, 5);
    halts_at_once.eval();
    auto s2 = dev();
    const albert_eval adaptive = evaluate_albert(halts_at_once, s2, 2, 8);
    CHECK(adaptive.stats.mean_iterations("all") == 1);
    const auto one = evaluate_at_fixed_depths(halts_at_once, {1}, dev, 2, 8);
    CHECK(one[0].mlm_loss == doctest::Approx(adaptive.mlm_loss).epsilon(1e-12));
    CHECK(one[0].sop_loss == doctest::Approx(adaptive.sop_loss).epsilon(1e-12));
    CHECK(one[0].mlm_loss != doctest::Approx(evs[0].mlm_loss).epsilon(1e-6));  // (other weights than `three`'s: the copy is what agrees)
    CHECK_THROWS_WITH_AS(evaluate_at_fixed_depths(three, {0}, dev, 1, 8), doctest::Contains("depth 0"), usage_error);
}
