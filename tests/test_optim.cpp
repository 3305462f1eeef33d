// Optimisers, schedules, clipping: parity with PyTorch 1.13 (tests/fixtures/optim.txt,
// written by scripts/make_optim_fixtures.py), weight-decay exclusion, checkpoint state
// round trips and the errors bad state must raise.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <depthlab/optim/adam.hpp>
#include <depthlab/optim/clip.hpp>
#include <depthlab/optim/lamb.hpp>
#include <depthlab/optim/optimizer.hpp>
#include <depthlab/optim/schedule.hpp>
#include <depthlab/optim/sgd.hpp>

#include "fixture.hpp"
#include "harness.hpp"

#ifndef DEPTHLAB_FIXTURE_DIR
#define DEPTHLAB_FIXTURE_DIR "tests/fixtures"
#endif

namespace {

using depthlab::Shape;
using depthlab::Tensor;
using depthlab::Var;
using depthlab_test::check_close;
using depthlab_test::Fixture;
using depthlab_test::from_double;
using depthlab_test::to_double;
using doctest::Contains;
namespace optim = depthlab::optim;

const std::vector<std::string> kParams = {"layer.weight", "layer.bias", "head.weight"};
const std::vector<std::string> kCases = {"sgd", "sgd_nesterov", "sgd_plain", "adam", "adamw", "lamb"};
constexpr int kSteps = 3;

const Fixture& fixture() {
    static const Fixture fx = depthlab_test::load_fixture(std::string(DEPTHLAB_FIXTURE_DIR) + "/optim.txt");
    return fx;
}

template <class T>
Tensor<T> fixture_tensor(const std::string& name) {
    const auto& t = fixture().get(name);
    return from_double<T, depthlab::backend::cpu>(Shape(t.shape.begin(), t.shape.end()), t.values);
}

double hp(const std::string& c, const std::string& key) { return fixture().get("hp." + c + "." + key).values.at(0); }

/// Fresh parameters with the fixture's initial values.
template <class T>
optim::named_parameters<T> make_params() {
    optim::named_parameters<T> out;
    for (const auto& n : kParams) out.emplace_back(n, Var<T>::parameter(fixture_tensor<T>("init." + n)));
    return out;
}

/// The fixture's gradients of step k (undefined where the fixture has none).
template <class T>
void set_grads(optim::named_parameters<T>& params, int k) {
    for (auto& [name, p] : params) {
        const std::string g = "grad." + std::to_string(k) + "." + name;
        if (fixture().count(g)) p.grad() = fixture_tensor<T>(g);
        else p.zero_grad();
    }
}

template <class T>
std::unique_ptr<optim::Optimizer<T>> make_optimizer(const std::string& c, const optim::named_parameters<T>& params) {
    if (c.starts_with("sgd"))
        return std::make_unique<optim::SGD<T>>(params, optim::SGDOptions{.lr = hp(c, "lr"),
                                                                         .momentum = hp(c, "momentum"),
                                                                         .dampening = hp(c, "dampening"),
                                                                         .nesterov = hp(c, "nesterov") != 0,
                                                                         .weight_decay = hp(c, "weight_decay")});
    if (c == "adam")
        return std::make_unique<optim::Adam<T>>(params, optim::AdamOptions{.lr = hp(c, "lr"),
                                                                           .beta1 = hp(c, "beta1"),
                                                                           .beta2 = hp(c, "beta2"),
                                                                           .eps = hp(c, "eps"),
                                                                           .weight_decay = hp(c, "weight_decay")});
    if (c == "adamw")
        return std::make_unique<optim::AdamW<T>>(params, optim::AdamWOptions{.lr = hp(c, "lr"),
                                                                             .beta1 = hp(c, "beta1"),
                                                                             .beta2 = hp(c, "beta2"),
                                                                             .eps = hp(c, "eps"),
                                                                             .weight_decay = hp(c, "weight_decay")});
    if (c == "lamb")
        return std::make_unique<optim::Lamb<T>>(params, optim::LambOptions{.lr = hp(c, "lr"),
                                                                           .beta1 = hp(c, "beta1"),
                                                                           .beta2 = hp(c, "beta2"),
                                                                           .eps = hp(c, "eps"),
                                                                           .weight_decay = hp(c, "weight_decay")});
    FAIL("unknown case " << c);
    return nullptr;
}

template <class T>
std::vector<T> values(const Var<T>& v) {
    return v.value().to_vector();
}

}  // namespace

TEST_CASE_TEMPLATE("optim: SGD, Adam, AdamW and LAMB match PyTorch over 3 steps", T, double, float) {
    const bool is_double = std::is_same_v<T, double>;
    const std::string prefix = is_double ? "" : "f32.";
    const double rtol = is_double ? 1e-10 : 1e-5, atol = is_double ? 1e-13 : 1e-7;
    for (const auto& c : kCases) {
        CAPTURE(c);
        auto params = make_params<T>();
        auto opt = make_optimizer<T>(c, params);
        for (int k = 1; k <= kSteps; ++k) {
            set_grads(params, k);
            opt->step();
            CHECK(opt->step_count() == k);
            for (const auto& [name, p] : params)
                check_close(prefix + c + "." + std::to_string(k) + "." + name, to_double(p.value()),
                            fixture().get(prefix + c + "." + std::to_string(k) + "." + name).values, rtol, atol);
        }
    }
}

TEST_CASE_TEMPLATE("optim: clip_grad_norm matches torch.nn.utils.clip_grad_norm_", T, double, float) {
    const bool is_double = std::is_same_v<T, double>;
    const std::string prefix = is_double ? "" : "f32.";
    const double rtol = is_double ? 1e-12 : 1e-6;
    for (const std::string tag : {"clip", "noclip"}) {
        CAPTURE(tag);
        auto params = make_params<T>();
        set_grads(params, 1);
        const auto before = to_double(params[0].second.grad());
        const double total = optim::clip_grad_norm(params, fixture().get(tag + ".max_norm").values[0]);
        check_close(tag + ".total_norm", {total}, fixture().get(prefix + tag + ".total_norm").values, rtol, 0);
        for (const auto& [name, p] : params)
            check_close(tag + ".grad." + name, to_double(p.grad()), fixture().get(prefix + tag + ".grad." + name).values, rtol, 1e-14);
        if (tag == "noclip") CHECK(to_double(params[0].second.grad()) == before);  // untouched, not multiplied by ~1
    }
    // The unnamed overload, and a parameter without a gradient is ignored.
    auto params = make_params<T>();
    set_grads(params, 2);  // head.weight has none at step 2
    std::vector<Var<T>> plain;
    for (auto& [n, p] : params) plain.push_back(p);
    double want = 0;
    for (int i = 0; i < 2; ++i)
        for (T g : params[static_cast<std::size_t>(i)].second.grad().to_vector()) want += static_cast<double>(g) * static_cast<double>(g);
    CHECK(optim::clip_grad_norm(plain, 1e9) == doctest::Approx(std::sqrt(want)).epsilon(1e-6));
    CHECK_THROWS_WITH_AS(optim::clip_grad_norm(plain, 0.0), Contains("max_norm must be finite and > 0"), depthlab::usage_error);
}

TEST_CASE("optim: clip_grad_norm names the parameter with a non-finite gradient and changes nothing") {
    auto params = make_params<double>();
    set_grads(params, 1);
    params[1].second.grad()(2) = std::numeric_limits<double>::quiet_NaN();
    params[2].second.grad()(0, 0) = std::numeric_limits<double>::infinity();
    const auto g0 = to_double(params[0].second.grad());
    CHECK_THROWS_WITH_AS(optim::clip_grad_norm(params, 0.1), Contains("the gradient of 'layer.bias' is not finite (element 2 is nan)"),
                         depthlab::numeric_error);
    CHECK(to_double(params[0].second.grad()) == g0);
    params[1].second.grad()(2) = 1.0;
    CHECK_THROWS_WITH_AS(optim::clip_grad_norm(params, 0.1), Contains("'head.weight' is not finite (element 0 is inf)"),
                         depthlab::numeric_error);
}

TEST_CASE("optim: gradient accumulation with scale_grads equals the mean gradient") {
    using depthlab::mul;
    using depthlab::sum;
    auto w = Var<double>::parameter(Tensor<double>::from({4}, {0.5, -1.0, 2.0, 0.25}));
    const std::vector<Tensor<double>> xs = {Tensor<double>::from({4}, {1, 2, 3, 4}), Tensor<double>::from({4}, {-1, 0.5, 2, 8}),
                                            Tensor<double>::from({4}, {0, 1, -3, 2})};
    // loss_k = sum(w * x_k): grad_k = x_k; accumulated over N = 3 and scaled by 1/3 = mean.
    for (const auto& x : xs) sum(mul(w, Var<double>::constant(x))).backward();
    optim::named_parameters<double> params = {{"w", w}, {"w_alias", w}};  // counted once
    optim::scale_grads(params, 1.0 / 3.0);
    const std::vector<double> mean = {0.0, 3.5 / 3.0, 2.0 / 3.0, 14.0 / 3.0};
    check_close("accumulated", to_double(w.grad()), mean, 1e-15, 1e-15);
    // The same through scaling each loss.
    w.zero_grad();
    for (const auto& x : xs) depthlab::scale(sum(mul(w, Var<double>::constant(x))), 1.0 / 3.0).backward();
    check_close("scaled losses", to_double(w.grad()), mean, 1e-15, 1e-15);
    CHECK_THROWS_AS(optim::scale_grads(params, std::nan("")), depthlab::usage_error);
}

TEST_CASE("optim: weight-decay exclusion by parameter name") {
    using optim::exclude_norm_and_bias;
    CHECK(exclude_norm_and_bias("encoder.0.norm1.weight"));
    CHECK(exclude_norm_and_bias("encoder.0.norm1.bias"));
    CHECK(exclude_norm_and_bias("embeddings.norm.weight"));
    CHECK(exclude_norm_and_bias("encoder.3.self_attention.q_proj.bias"));
    CHECK(exclude_norm_and_bias("bert.encoder.layer.0.output.LayerNorm.weight"));
    CHECK(exclude_norm_and_bias("bias"));
    CHECK_FALSE(exclude_norm_and_bias("encoder.3.self_attention.q_proj.weight"));
    CHECK_FALSE(exclude_norm_and_bias("embeddings.token.weight"));
    CHECK_FALSE(exclude_norm_and_bias("encoder.0.ffn.biased_gate.weight"));
    CHECK_FALSE(optim::exclude_none("encoder.0.norm1.weight"));

    const auto make = [](const std::string& name, double v) {
        return std::pair<std::string, Var<double>>{name, Var<double>::parameter(Tensor<double>::full({3}, v))};
    };
    optim::named_parameters<double> params = {make("encoder.0.linear.weight", 2.0), make("encoder.0.linear.bias", 2.0),
                                              make("encoder.0.norm1.weight", 2.0), make("head.weight", 2.0)};
    for (auto& [n, p] : params) p.grad() = Tensor<double>::zeros({3});  // zero gradient: only the decay moves w
    optim::AdamW<double> opt(params, {.lr = 0.1, .weight_decay = 0.5});
    REQUIRE(opt.groups().size() == 2);
    CHECK(opt.groups()[0].name == "decay");
    CHECK(opt.groups()[0].weight_decay == 0.5);
    CHECK(opt.groups()[0].params == std::vector<std::size_t>{0, 3});
    CHECK(opt.groups()[1].name == "no_decay");
    CHECK(opt.groups()[1].weight_decay == 0.0);
    CHECK(opt.groups()[1].params == std::vector<std::size_t>{1, 2});
    opt.step();
    CHECK(values(params[0].second) == std::vector<double>(3, 2.0 * (1 - 0.1 * 0.5)));
    CHECK(values(params[1].second) == std::vector<double>(3, 2.0));
    CHECK(values(params[2].second) == std::vector<double>(3, 2.0));
    CHECK(values(params[3].second) == std::vector<double>(3, 2.0 * (1 - 0.1 * 0.5)));

    // A custom predicate: only "head." is excluded.
    optim::SGD<double> sgd(params, {.lr = 0.1, .weight_decay = 0.5,
                                    .exclude_from_weight_decay = [](std::string_view n) { return n.starts_with("head."); }});
    CHECK(sgd.groups()[0].params == std::vector<std::size_t>{0, 1, 2});
    CHECK(sgd.groups()[1].params == std::vector<std::size_t>{3});
    optim::Adam<double> all(params, {.weight_decay = 0.1, .exclude_from_weight_decay = optim::exclude_none});
    CHECK(all.groups()[1].params.empty());
}

TEST_CASE("optim: LAMB trust ratio (excluded parameters and zero norms use 1)") {
    optim::named_parameters<double> params = {
        {"w", Var<double>::parameter(Tensor<double>::from({2}, {3.0, 4.0}))},
        {"zero.weight", Var<double>::parameter(Tensor<double>::zeros({2}))},
        {"norm.weight", Var<double>::parameter(Tensor<double>::from({2}, {3.0, 4.0}))},
    };
    for (auto& [n, p] : params) p.grad() = Tensor<double>::from({2}, {1.0, -1.0});
    optim::Lamb<double> opt(params, {.lr = 0.1, .weight_decay = 0.0});
    CHECK(opt.adapts(0));
    CHECK(opt.adapts(1));
    CHECK_FALSE(opt.adapts(2));
    opt.step();
    // First step, no decay: u = g / (|g| + eps) ~ sign(g), ||u|| ~ sqrt(2); ||w|| = 5.
    const double u = 1.0 / (1.0 + 1e-6);
    CHECK(opt.last_trust_ratio(0) == doctest::Approx(5.0 / (u * std::sqrt(2.0))).epsilon(1e-12));
    CHECK(opt.last_trust_ratio(1) == 1.0);
    CHECK(opt.last_trust_ratio(2) == 1.0);
    CHECK(values(params[1].second)[0] == doctest::Approx(-0.1 * u).epsilon(1e-14));
    CHECK(values(params[2].second)[1] == doctest::Approx(4.0 + 0.1 * u).epsilon(1e-14));
    // Adapting excluded parameters too.
    optim::Lamb<double> all(params, {.exclude_from_adaptation = optim::exclude_none});
    CHECK(all.adapts(2));
}

TEST_CASE("optim: update loops and norms do not depend on the thread count") {
#if defined(_OPENMP)
    const int saved = omp_get_max_threads();
    const auto run = [](int threads) {
        omp_set_num_threads(threads);
        depthlab::Generator gen(11);
        auto w = Var<float>::parameter(Tensor<float>::randn({300, 250}, gen));  // 75000 elements: several chunks
        optim::named_parameters<float> params = {{"w", w}};
        optim::Lamb<float> opt(params, {.lr = 0.01});
        for (int k = 0; k < 2; ++k) {
            w.grad() = Tensor<float>::randn({300, 250}, gen);
            optim::clip_grad_norm(params, 10.0);
            opt.step();
        }
        return values(w);
    };
    const auto one = run(1), two = run(std::max(2, saved));
    omp_set_num_threads(saved);
    CHECK(one == two);
#endif
}

TEST_CASE_TEMPLATE("optim: state export/import resumes bit for bit", T, double, float) {
    for (const auto& c : {"sgd", "sgd_plain", "adam", "adamw", "lamb"}) {
        CAPTURE(c);
        // Uninterrupted: 3 steps.
        auto pa = make_params<T>();
        auto a = make_optimizer<T>(c, pa);
        a->set_lr(0.1 * a->lr() + 0.003);  // not a short decimal: checks the exact lr round trip
        for (int k = 1; k <= kSteps; ++k) {
            set_grads(pa, k);
            a->step();
        }
        // Interrupted after 2 steps: export (copies, as a checkpoint would), rebuild, import.
        auto pb = make_params<T>();
        auto b = make_optimizer<T>(c, pb);
        b->set_lr(0.1 * b->lr() + 0.003);
        for (int k = 1; k <= 2; ++k) {
            set_grads(pb, k);
            b->step();
        }
        typename optim::Optimizer<T>::state_tensor_list saved;
        for (const auto& [name, t] : b->state_tensors()) saved.emplace_back(name, t.clone());
        const auto scalars = b->state_scalars();
        CHECK(scalars.at("optimizer") == b->type());
        CHECK(scalars.at("step") == "2");
        CHECK(scalars.at(b->type() + ".step.layer.weight") == "2");
        CHECK(scalars.at(b->type() + ".step.head.weight") == "1");  // no gradient at step 2
        const std::size_t nslots = b->slot_names().size();
        CHECK(saved.size() == 3 * nslots);
        if (nslots) CHECK(saved[0].first == b->type() + "." + b->slot_names()[0] + ".layer.weight");

        auto pc = make_params<T>();
        for (std::size_t i = 0; i < pc.size(); ++i) pc[i].second.value() = pb[i].second.value().clone();
        auto resumed = make_optimizer<T>(c, pc);
        resumed->load_state(saved, scalars);
        CHECK(resumed->step_count() == 2);
        CHECK(resumed->lr() == b->lr());
        CHECK(resumed->state_scalars() == scalars);
        set_grads(pc, 3);
        resumed->step();
        for (std::size_t i = 0; i < pc.size(); ++i) {
            CAPTURE(pc[i].first);
            CHECK(values(pc[i].second) == values(pa[i].second));
        }
    }
}

TEST_CASE("optim: load_state rejects mismatched state, naming what is wrong") {
    auto params = make_params<double>();
    optim::Adam<double> opt(params);
    set_grads(params, 1);
    opt.step();
    const auto tensors = opt.state_tensors();
    const auto scalars = opt.state_scalars();
    auto fresh = make_params<double>();
    optim::Adam<double> other(fresh);
    const auto before = other.state_scalars();

    auto wrong_shape = tensors;
    for (auto& [name, t] : wrong_shape)
        if (name == "adam.v.layer.weight") t = Tensor<double>::zeros({4, 3});
    CHECK_THROWS_WITH_AS(other.load_state(wrong_shape, scalars),
                         Contains("tensor 'adam.v.layer.weight' has shape (4, 3) but parameter 'layer.weight' has shape (3, 4)"),
                         depthlab::shape_error);
    CHECK(other.state_scalars() == before);  // nothing applied

    auto unknown = tensors;
    unknown.emplace_back("adam.m.decoder.weight", Tensor<double>::zeros({2}));
    CHECK_THROWS_WITH_AS(other.load_state(unknown, scalars), Contains("'adam.m.decoder.weight' names no parameter"),
                         depthlab::usage_error);
    auto bad_slot = tensors;
    bad_slot.emplace_back("adam.momentum.layer.bias", Tensor<double>::zeros({4}));
    CHECK_THROWS_WITH_AS(other.load_state(bad_slot, scalars), Contains("'momentum' is not a state slot of adam"),
                         depthlab::usage_error);
    auto missing = tensors;
    missing.pop_back();
    CHECK_THROWS_WITH_AS(other.load_state(missing, scalars), Contains("missing tensor 'adam.v.head.weight'"), depthlab::usage_error);
    auto twice = tensors;
    twice.push_back(tensors.front());
    CHECK_THROWS_WITH_AS(other.load_state(twice, scalars), Contains("appears twice"), depthlab::usage_error);

    auto s = scalars;
    s["optimizer"] = "sgd";
    CHECK_THROWS_WITH_AS(other.load_state(tensors, s), Contains("belongs to a 'sgd' optimiser, not 'adam'"), depthlab::usage_error);
    s = scalars;
    s["step"] = "two";
    CHECK_THROWS_WITH_AS(other.load_state(tensors, s), Contains("scalar 'step' = 'two'"), depthlab::usage_error);
    s = scalars;
    s.erase("lr");
    CHECK_THROWS_WITH_AS(other.load_state(tensors, s), Contains("missing scalar 'lr'"), depthlab::usage_error);
    s = scalars;
    s["adam.step.layer.weight"] = "5";
    CHECK_THROWS_WITH_AS(other.load_state(tensors, s), Contains("'adam.step.layer.weight' = '5' is not a step count in [1, 1]"),
                         depthlab::usage_error);
    s = scalars;
    s["adam.bogus"] = "1";
    CHECK_THROWS_WITH_AS(other.load_state(tensors, s), Contains("unknown scalar 'adam.bogus'"), depthlab::usage_error);
    s = scalars;
    s.erase("adam.step.head.weight");
    CHECK_THROWS_WITH_AS(other.load_state(tensors, s), Contains("scalar 'adam.step.head.weight' (the parameter's step count) is missing"),
                         depthlab::usage_error);
    other.load_state(tensors, scalars);  // and the real thing loads
    CHECK(other.state_scalars() == scalars);
}

TEST_CASE("optim: step skips parameters without gradients; a Var listed twice is updated once") {
    auto shared = Var<double>::parameter(Tensor<double>::from({2}, {1.0, 2.0}));
    auto idle = Var<double>::parameter(Tensor<double>::from({2}, {5.0, 6.0}));
    optim::named_parameters<double> params = {{"embed.weight", shared}, {"idle.weight", idle}, {"lm_head.weight", shared}};
    optim::SGD<double> opt(params, {.lr = 0.5});
    CHECK(opt.params().size() == 2);
    CHECK(opt.params()[0].name == "embed.weight");
    shared.grad() = Tensor<double>::from({2}, {1.0, -2.0});
    opt.step();
    CHECK(values(shared) == std::vector<double>{0.5, 3.0});  // once, not twice
    CHECK(values(idle) == std::vector<double>{5.0, 6.0});
    CHECK(opt.params()[1].steps == 0);
    opt.zero_grad();
    CHECK_FALSE(shared.grad().defined());
    opt.step();  // nothing has a gradient: nothing moves, the step still counts
    CHECK(values(shared) == std::vector<double>{0.5, 3.0});
    CHECK(opt.step_count() == 2);

    shared.grad() = Tensor<double>::zeros({3});
    CHECK_THROWS_WITH_AS(opt.step(), Contains("gradient of 'embed.weight' has shape (3,) but the parameter has shape (2,)"),
                         depthlab::shape_error);
    CHECK(opt.step_count() == 2);

    CHECK_THROWS_WITH_AS(optim::SGD<double>({}, {}), Contains("empty parameter list"), depthlab::usage_error);
    CHECK_THROWS_WITH_AS(optim::SGD<double>(params, {.momentum = 0.0, .nesterov = true}), Contains("Nesterov"), depthlab::usage_error);
    CHECK_THROWS_WITH_AS(optim::SGD<double>(optim::named_parameters<double>{{"a", shared}, {"a", idle}}, {}),
                         Contains("parameter name 'a' appears twice"), depthlab::usage_error);
    CHECK_THROWS_WITH_AS(optim::Adam<double>(params, {.beta1 = 1.0}), Contains("beta1 must be in [0, 1)"), depthlab::usage_error);
    CHECK_THROWS_WITH_AS(opt.set_lr(-1.0), Contains("learning rate must be finite and >= 0"), depthlab::usage_error);
}

TEST_CASE("optim: learning-rate schedules") {
    const optim::warmup_linear lin(1e-3, 100, 1000);
    CHECK(lin.lr(0) == 0.0);
    CHECK(lin.lr(50) == doctest::Approx(5e-4).epsilon(1e-15));
    CHECK(lin.lr(100) == doctest::Approx(1e-3).epsilon(1e-15));
    CHECK(lin.lr(550) == doctest::Approx(5e-4).epsilon(1e-15));
    CHECK(lin.lr(1000) == 0.0);
    CHECK(lin.lr(5000) == 0.0);

    const optim::polynomial_decay poly(1.0, 10, 110, 2.0, 0.1);
    CHECK(poly.lr(5) == doctest::Approx(0.5).epsilon(1e-15));
    CHECK(poly.lr(10) == doctest::Approx(1.0).epsilon(1e-15));
    CHECK(poly.lr(60) == doctest::Approx(0.9 * 0.25 + 0.1).epsilon(1e-15));
    CHECK(poly.lr(110) == doctest::Approx(0.1).epsilon(1e-15));
    CHECK(poly.lr(200) == doctest::Approx(0.1).epsilon(1e-15));
    const optim::polynomial_decay no_warmup(2.0, 0, 4);
    CHECK(no_warmup.lr(0) == 2.0);
    CHECK(no_warmup.lr(1) == doctest::Approx(1.5).epsilon(1e-15));

    const optim::inverse_sqrt isr(5e-4, 4000);
    CHECK(isr.lr(0) == 0.0);
    CHECK(isr.lr(1000) == doctest::Approx(1.25e-4).epsilon(1e-15));
    CHECK(isr.lr(4000) == doctest::Approx(5e-4).epsilon(1e-15));
    CHECK(isr.lr(16000) == doctest::Approx(2.5e-4).epsilon(1e-15));
    CHECK(isr.lr(64000) == doctest::Approx(1.25e-4).epsilon(1e-15));

    const optim::constant cst(3e-4);
    CHECK(cst.lr(0) == 3e-4);
    CHECK(cst.lr(123456) == 3e-4);

    static_assert(optim::lr_schedule<optim::warmup_linear> && optim::lr_schedule<optim::inverse_sqrt> &&
                  optim::lr_schedule<optim::polynomial_decay> && optim::lr_schedule<optim::constant>);
    CHECK_THROWS_WITH_AS((void)lin.lr(-1), Contains("negative step -1"), depthlab::usage_error);
    CHECK_THROWS_AS(optim::warmup_linear(1e-3, 100, 50), depthlab::usage_error);
    CHECK_THROWS_AS(optim::inverse_sqrt(1e-3, 0), depthlab::usage_error);

    // Driving an optimiser: lr set from the schedule before each step.
    auto w = Var<double>::parameter(Tensor<double>::from({1}, {1.0}));
    optim::SGD<double> opt({{"w", w}}, {.lr = 0.0});
    const optim::warmup_linear sched(0.1, 2, 4);
    for (int k = 0; k < 4; ++k) {
        opt.set_lr(sched.lr(opt.step_count()));
        w.grad() = Tensor<double>::ones({1});
        opt.step();
    }
    CHECK(values(w)[0] == doctest::Approx(1.0 - (0.0 + 0.05 + 0.1 + 0.05)).epsilon(1e-15));
}
