// PyTorch parity: rebuild small computations with depthlab ops and compare values and
// every gradient with reference values from PyTorch (tests/fixtures/*.txt, written by
// scripts/make_fixtures.py). Each case runs in double against PyTorch's float64 run
// (rtol 1e-9, atol 1e-12) and in float, on every ISA path this CPU has, against PyTorch's
// float32 run from the same inputs (rtol 1e-4, atol 1e-5).
// Set DEPTHLAB_PARITY_REPORT=1 to print the largest errors seen per case and precision
// (=2: per tensor too); float runs also show their error against the float64 reference.
// The fixture reader and the run machinery are in fixture.hpp and parity.hpp.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "parity.hpp"

using depthlab_test::Fixture;
using depthlab_test::FixtureTensor;
using depthlab_test::Run;
using depthlab_test::run_case;
using depthlab_test::to_shape;

// x (8,6) -> Linear(6,16) -> GELU(tanh) -> Linear(16,5) -> cross_entropy(ignore_index -100,
// label_smoothing 0.1).
TEST_CASE("torch parity: MLP with GELU and label-smoothed cross-entropy") {
    run_case("mlp_ce", []<class T, class B>(Run<T, B>& r) {
        auto x = r.parameter("x");
        auto W1 = r.parameter("W1");
        auto b1 = r.parameter("b1");
        auto W2 = r.parameter("W2");
        auto b2 = r.parameter("b2");
        const auto targets = r.ids("targets");
        auto h = depthlab::gelu(depthlab::linear(x, W1, b1));
        auto logits = depthlab::linear(h, W2, b2);
        auto loss = depthlab::cross_entropy(logits, std::span<const std::int64_t>(targets), -100, T(0.1));
        loss.backward();
        r.check("logits", logits.value());
        r.check("loss", loss.value());
        r.check_grad("x", x);
        r.check_grad("W1", W1);
        r.check_grad("b1", b1);
        r.check_grad("W2", W2);
        r.check_grad("b2", b2);
    });
}

// q, k, v (2,2,4,8); padding mask (2,1,1,4) hides the last key of batch entry 1;
// out = softmax(q k^T / sqrt(8) + mask) v; loss = sum(out * w).
TEST_CASE("torch parity: masked scaled softmax attention") {
    run_case("attention", []<class T, class B>(Run<T, B>& r) {
        auto q = r.parameter("q");
        auto k = r.parameter("k");
        auto v = r.parameter("v");
        const auto mask = r.tensor("mask");
        auto w = r.constant("w");
        auto scores = depthlab::matmul(q, k, false, true);
        auto p = depthlab::softmax(scores, T(1 / std::sqrt(8.0)), mask);
        auto out = depthlab::matmul(p, v);
        auto loss = depthlab::sum(depthlab::mul(out, w));
        loss.backward();
        r.check("p", p.value());
        r.check("out", out.value());
        r.check("loss", loss.value());
        r.check_grad("q", q);
        r.check_grad("k", k);
        r.check_grad("v", v);
    });
}

// y = gelu_tanh(layer_norm(x, gamma, beta, eps 1e-5)), x (3,10); loss = sum(y * w).
TEST_CASE("torch parity: layer norm then GELU") {
    run_case("layernorm_gelu", []<class T, class B>(Run<T, B>& r) {
        auto x = r.parameter("x");
        auto gamma = r.parameter("gamma");
        auto beta = r.parameter("beta");
        auto w = r.constant("w");
        auto y = depthlab::gelu(depthlab::layer_norm(x, gamma, beta, T(1e-5)));
        auto loss = depthlab::sum(depthlab::mul(y, w));
        loss.backward();
        r.check("y", y.value());
        r.check("loss", loss.value());
        r.check_grad("x", x);
        r.check_grad("gamma", gamma);
        r.check_grad("beta", beta);
    });
}

// table (7,5), ids (2,3) with repeats; y = log_softmax(embedding(ids) P), P (5,4);
// loss = sum(y * w).
TEST_CASE("torch parity: embedding, matmul and log-softmax") {
    run_case("embedding_logsoftmax", []<class T, class B>(Run<T, B>& r) {
        auto table = r.parameter("table");
        auto P = r.parameter("P");
        auto w = r.constant("w");
        const auto ids = r.ids("ids");
        const FixtureTensor& ids_t = r.fx.get("ids");
        auto e = depthlab::embedding(table, std::span<const std::int64_t>(ids), to_shape(ids_t));
        auto y = depthlab::log_softmax(depthlab::matmul(e, P));
        auto loss = depthlab::sum(depthlab::mul(y, w));
        loss.backward();
        r.check("y", y.value());
        r.check("loss", loss.value());
        r.check_grad("table", table);
        r.check_grad("P", P);
    });
}

TEST_CASE("torch parity: fixture reader reports bad files by path") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("depthlab_fixture_test_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(dir);
    auto write = [&](const std::string& file, const std::string& text) {
        const std::string p = (dir / file).string();
        std::ofstream(p) << text;
        return p;
    };
    auto message_of = [](const std::string& p) -> std::string {
        try {
            (void)depthlab_test::load_fixture(p);
        } catch (const std::runtime_error& e) {
            return e.what();
        }
        return "";
    };
    const std::string missing = (dir / "nope.txt").string();
    CHECK(message_of(missing).find(missing) != std::string::npos);

    const std::string ok = write("ok.txt", "# c\nx f64 2 2\n1 2 3 -inf\ns f32 -\n0.5\nids i64 3\n0 1 2\n");
    const Fixture fx = depthlab_test::load_fixture(ok);
    CHECK(fx.get("x").shape == std::vector<std::int64_t>{2, 2});
    CHECK(fx.get("x").values[3] == -INFINITY);
    CHECK(fx.get("s").shape.empty());
    CHECK(fx.get("s").values == std::vector<double>{0.5});
    CHECK(fx.get("ids").values == std::vector<double>{0, 1, 2});
    std::string unknown;
    try {
        (void)fx.get("y");
    } catch (const std::runtime_error& e) {
        unknown = e.what();
    }
    CHECK(unknown.find(ok) != std::string::npos);
    CHECK(unknown.find("no tensor named 'y'") != std::string::npos);

    const std::string count = write("count.txt", "x f64 2 2\n1 2 3\n");
    CHECK(message_of(count).find(count + ":2") != std::string::npos);
    CHECK(message_of(count).find("needs 4 values, got 3") != std::string::npos);
    const std::string value = write("value.txt", "x f64 2\n1 zz\n");
    CHECK(message_of(value).find("bad value 'zz'") != std::string::npos);
    const std::string header = write("header.txt", "x f64\n1\n");
    CHECK(message_of(header).find(header + ":1") != std::string::npos);
    const std::string dtype = write("dtype.txt", "x f16 1\n1\n");
    CHECK(message_of(dtype).find("unknown dtype 'f16'") != std::string::npos);
    const std::string twice = write("twice.txt", "x f64 1\n1\nx f64 1\n2\n");
    CHECK(message_of(twice).find("appears twice") != std::string::npos);
    const std::string truncated = write("truncated.txt", "x f64 1\n");
    CHECK(message_of(truncated).find("missing value line") != std::string::npos);
    fs::remove_all(dir);
}
