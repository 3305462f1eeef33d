// op_profiler (autodiff/profiler.hpp) and train::trainer_options::profile_steps: every op
// result and every backward function is charged to its op kind exactly once, marks to their
// label, nothing while paused, nested profilers take their own ops; the trainer profiles the
// steps after its warm-up, leaves evaluations out and writes profile.csv.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <depthlab/depthlab.hpp>

#include <doctest/doctest.h>
#include "temp_dir.hpp"

using namespace depthlab;

namespace {

/// The row (name, phase) of a profile: its calls, or -1 when absent.
std::int64_t profile_calls(const std::vector<op_profiler::row>& rows, const std::string& name, const std::string& phase) {
    for (const auto& r : rows)
        if (r.name == name && r.phase == phase) return r.calls;
    return -1;
}

/// The fields of one CSV line (RFC 4180 quoting, as io::csv_writer writes it).
std::vector<std::string> csv_fields(const std::string& line) {
    std::vector<std::string> f(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') f.back() += '"', ++i;
        else if (c == '"') quoted = !quoted;
        else if (c == ',' && !quoted) f.emplace_back();
        else f.back() += c;
    }
    return f;
}

}  // namespace

TEST_CASE("op profiler: each op result and backward function is charged once to its kind; marks, pauses, nesting") {
    Generator g(1);
    const auto x = Var<float>::parameter(Tensor<float>::randn({4, 8}, g));
    const auto W = Var<float>::parameter(Tensor<float>::randn({3, 8}, g));
    const auto b = Var<float>::parameter(Tensor<float>::randn({3}, g));
    CHECK(op_profiler::active() == nullptr);
    {
        op_profiler prof;
        CHECK(op_profiler::active() == &prof);
        const auto y = sum(gelu(linear(Var<float>::constant(x.value()), W, b)));  // (an activation in, as in a model)
        profile_mark("host work");
        y.backward();
        {
            op_profiler inner;  // takes the ops of its own scope
            CHECK(op_profiler::active() == &inner);
            (void)scale(x, 2.0f);
            CHECK(profile_calls(inner.rows(), "scale [4, 8]", "forward") == 1);  // x is a parameter here
            CHECK(profile_calls(inner.rows(), "linear [3, 8]", "forward") == -1);
        }
        CHECK(op_profiler::active() == &prof);
        prof.pause();
        {
            const no_grad off;
            (void)relu(x);
        }
        profile_mark("while paused");
        prof.resume();
        (void)tanh(x);

        const auto rows = prof.rows();
        for (const char* op : {"linear [3, 8]", "gelu", "sum"}) {  // linear: W's shape names the layer
            CHECK_MESSAGE(profile_calls(rows, op, "forward") == 1, op);
            CHECK_MESSAGE(profile_calls(rows, op, "backward") == 1, op);
        }
        CHECK(profile_calls(rows, "tanh [4, 8]", "forward") == 1);
        CHECK(profile_calls(rows, "host work", "other") == 1);
        CHECK(profile_calls(rows, "backward: graph walk", "other") == 1);
        CHECK(profile_calls(rows, "(host code before backward)", "other") == 1);
        CHECK(profile_calls(rows, "scale [4, 8]", "forward") == -1);  // the inner profiler's
        CHECK(profile_calls(rows, "relu [4, 8]", "forward") == -1);   // paused
        CHECK(profile_calls(rows, "while paused", "other") == -1);
        CHECK(profile_calls(rows, "leaf", "backward") == -1);  // parameters have no backward function
        double total = 0;
        for (std::size_t i = 0; i < rows.size(); ++i) {
            CHECK(rows[i].seconds >= 0);
            if (i > 0) CHECK(rows[i - 1].seconds >= rows[i].seconds);  // the longest first
            total += rows[i].seconds;
        }
        CHECK(prof.seconds() == doctest::Approx(total));
        CHECK(prof.seconds() <= prof.wall_seconds());
        const std::string text = prof.table(2, 3);
        CHECK(text.find("ms/step") != std::string::npos);
        CHECK(text.find("more lines") != std::string::npos);  // top 3 of more
        CHECK(text.find("total") != std::string::npos);
    }
    CHECK(op_profiler::active() == nullptr);
}

TEST_CASE("op profiler: a backward function that throws leaves the profiler charging forward ops again") {
    Generator g(2);
    const auto x = Var<float>::parameter(Tensor<float>::randn({2, 3}, g));
    op_profiler prof;
    const auto y = sum(relu(x));
    y.backward();
    CHECK_THROWS_AS(y.backward(), usage_error);  // the graph was freed
    (void)relu(x);
    CHECK(profile_calls(prof.rows(), "relu [2, 3]", "forward") == 2);
}

TEST_CASE("trainer: profile_steps times the steps after the warm-up, leaves evaluations out, writes profile.csv") {
    depthlab_test::temp_dir dir("profile");
    Generator init(7), data(11);
    nn::Linear<float> model(8, 4, init);
    optim::Adam<float> opt(model.named_parameters(), {.lr = 1e-2});
    const Tensor<float> A = Tensor<float>::randn({8, 4}, init);
    train::Trainer<float> trainer(model, opt, {.steps = 10, .log_every = 2, .eval_every = 3, .save_every = 100, .out = dir.str(), .profile_steps = 3});
    int evaluations = 0;
    trainer.evaluate = [&](std::int64_t, bool) {
        ++evaluations;
        const no_grad off;
        (void)model(Var<float>::constant(Tensor<float>::randn({2, 8}, data)));  // a linear forward, not part of a step
        return nlohmann::ordered_json{{"eval", 1}};
    };
    trainer.fit([&] {
        const auto x = Var<float>::constant(Tensor<float>::randn({16, 8}, data));
        const auto target = Var<float>::constant(Tensor<float>::randn({16, 4}, data));
        auto loss = mse(model(x), target);
        return train::micro_batch<float>{.loss = loss, .logged = {{"loss", loss}}, .tokens = 16};
    });
    CHECK(evaluations == 4);  // steps 3, 6 (inside the profiled steps 6-8), 9 and the final one

    std::ifstream in(dir.str() + "/profile.csv");
    REQUIRE(in.good());
    std::string header;
    std::getline(in, header);
    CHECK(header == "name,phase,calls,seconds,ms_per_step,share");
    std::vector<op_profiler::row> rows;
    double share = 0;
    for (std::string line; std::getline(in, line);) {
        const std::vector<std::string> f = csv_fields(line);
        REQUIRE(f.size() == 6);
        rows.push_back({f[0], f[1], std::stoll(f[2]), std::stod(f[3])});
        share += std::stod(f[5]);
    }
    CHECK(share == doctest::Approx(1.0).epsilon(1e-9));
    CHECK(profile_calls(rows, "linear [4, 8]", "forward") == 3);  // one per step: the evaluation's is left out
    CHECK(profile_calls(rows, "linear [4, 8]", "backward") == 3);
    CHECK(profile_calls(rows, "mse", "backward") == 3);
    CHECK(profile_calls(rows, "optimizer: step", "other") == 3);
    CHECK(profile_calls(rows, "optimizer: clip_grad_norm", "other") == 3);
    CHECK(profile_calls(rows, "trainer: schedule and zero_grad", "other") == 3);
    CHECK(op_profiler::active() == nullptr);
}

TEST_CASE("trainer: profile_steps below 0 is a usage error") {
    Generator init(7);
    nn::Linear<float> model(2, 2, init);
    optim::Adam<float> opt(model.named_parameters(), {.lr = 1e-2});
    CHECK_THROWS_AS(train::Trainer<float>(model, opt, {.steps = 1, .profile_steps = -1}), usage_error);
}
