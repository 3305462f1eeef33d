// PyTorch parity: rebuild small computations with depthlab ops and compare values and
// every gradient with reference values from PyTorch (tests/fixtures/*.txt, written by
// scripts/make_fixtures.py). Each case runs in double against PyTorch's float64 run
// (rtol 1e-9, atol 1e-12) and in float, on every ISA path this CPU has, against PyTorch's
// float32 run from the same inputs (rtol 1e-4, atol 1e-5).
// Set DEPTHLAB_PARITY_REPORT=1 to print the largest errors seen per case and precision
// (=2: per tensor too); float runs also show their error against the float64 reference.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include <depthlab/depthlab.hpp>

#include "fixture.hpp"

#ifndef DEPTHLAB_FIXTURE_DIR
#define DEPTHLAB_FIXTURE_DIR "tests/fixtures"
#endif

namespace {

using depthlab::index_t;
using depthlab::Shape;
using depthlab::Tensor;
using depthlab::Var;
using depthlab_test::Fixture;
using depthlab_test::FixtureTensor;

std::string fixture_path(const std::string& name) { return std::string(DEPTHLAB_FIXTURE_DIR) + "/" + name + ".txt"; }

Shape to_shape(const FixtureTensor& t) { return Shape(t.shape.begin(), t.shape.end()); }

/// Row-major multi-index of flat element i, e.g. "[1, 0, 3]".
std::string multi_index(const Shape& s, std::size_t i) {
    std::vector<index_t> idx(static_cast<std::size_t>(s.rank()));
    auto rem = static_cast<index_t>(i);
    for (int k = s.rank() - 1; k >= 0; --k) {
        idx[static_cast<std::size_t>(k)] = s[k] ? rem % s[k] : 0;
        rem = s[k] ? rem / s[k] : 0;
    }
    std::string out = "[";
    for (std::size_t k = 0; k < idx.size(); ++k) out += (k ? ", " : "") + std::to_string(idx[k]);
    return out + "]";
}

/// 0 = quiet, 1 = one line per case and precision, 2 = also one line per tensor.
int report_level() {
    const char* env = std::getenv("DEPTHLAB_PARITY_REPORT");
    return env == nullptr || *env == '\0' ? 0 : std::atoi(env);
}

/// Largest errors of got against want: max |diff|, and max |diff|/|want| over the elements
/// with |want| >= 1e-3 max|want| (so that near-zero entries do not dominate).
struct ErrorStats {
    double max_rel = 0, max_abs = 0;
    void add(const std::vector<double>& got, const std::vector<double>& want) {
        double scale = 0;
        for (double w : want)
            if (std::isfinite(w)) scale = std::max(scale, std::abs(w));
        for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
            if (!std::isfinite(want[i])) continue;
            const double diff = std::abs(got[i] - want[i]);
            max_abs = std::max(max_abs, diff);
            if (want[i] != 0 && std::abs(want[i]) >= 1e-3 * scale) max_rel = std::max(max_rel, diff / std::abs(want[i]));
        }
    }
    void merge(const ErrorStats& o) {
        max_rel = std::max(max_rel, o.max_rel);
        max_abs = std::max(max_abs, o.max_abs);
    }
};

/// One evaluation of a case in precision T: builds leaves from the fixture's inputs and
/// checks results against the reference tensors `<prefix><name>`.
template <class T>
struct Run {
    using value_type = T;
    const Fixture& fx;
    std::string prefix;  // "" (float64 reference) or "f32."
    std::string label;   // e.g. "mlp_ce double" or "mlp_ce float/avx2"
    double rtol, atol;
    ErrorStats err;      // against the reference checked (<prefix><name>)
    ErrorStats err_f64;  // float runs: against PyTorch's float64 values (reported, not checked)
    int checked = 0;

    Run(const Fixture& f, std::string pre, std::string lab, double rt, double at)
        : fx(f), prefix(std::move(pre)), label(std::move(lab)), rtol(rt), atol(at) {}

    Tensor<T> tensor(const std::string& name) const {
        const FixtureTensor& t = fx.get(name);
        const std::vector<T> v(t.values.begin(), t.values.end());
        return Tensor<T>::from(to_shape(t), v);
    }
    Var<T> parameter(const std::string& name) const { return Var<T>::parameter(tensor(name)); }
    Var<T> constant(const std::string& name) const { return Var<T>::constant(tensor(name)); }
    std::vector<std::int64_t> ids(const std::string& name) const {
        const FixtureTensor& t = fx.get(name);
        REQUIRE_MESSAGE(t.dtype == "i64", fx.path, ": tensor '", name, "' should be i64, is ", t.dtype);
        return {t.values.begin(), t.values.end()};
    }

    /// Compares `got` with the reference `<prefix><name>`: shape, then every element
    /// (|got - ref| <= atol + rtol |ref|; non-finite references must match exactly).
    void check(const std::string& name, const Tensor<T>& got) {
        const std::string ref = prefix + name;
        const FixtureTensor& want = fx.get(ref);
        INFO(label, ": ", name, " vs ", fx.path, " '", ref, "'");
        REQUIRE_MESSAGE(got.defined(), label, ": ", name, " is undefined (no gradient flowed?)");
        const Shape ws = to_shape(want);
        REQUIRE_MESSAGE(got.shape() == ws, label, ": ", name, " has shape ", got.shape(), ", PyTorch has ", ws);
        const std::vector<T> gt = got.to_vector();
        const std::vector<double> g(gt.begin(), gt.end());
        std::size_t bad = 0, worst_at = 0;
        double worst_excess = -1;
        for (std::size_t i = 0; i < g.size(); ++i) {
            const double a = g[i], b = want.values[i];
            const double excess = std::abs(a - b) - (atol + rtol * std::abs(b));
            const bool ok = std::isfinite(b) ? std::isfinite(a) && excess <= 0 : a == b;
            if (!ok) {
                const double ex = std::isfinite(excess) ? excess : INFINITY;
                if (bad++ == 0 || ex > worst_excess) {
                    worst_excess = ex;
                    worst_at = i;
                }
            }
        }
        ErrorStats e;
        e.add(g, want.values);
        err.merge(e);
        ErrorStats e64;
        if (!prefix.empty() && fx.count(name)) {
            e64.add(g, fx.get(name).values);
            err_f64.merge(e64);
        }
        if (report_level() >= 2) {
            std::printf("[parity]   %-34s %-12s max rel err %.3e  max abs err %.3e", label.c_str(), name.c_str(), e.max_rel,
                        e.max_abs);
            if (!prefix.empty()) std::printf("  (vs float64: rel %.3e abs %.3e)", e64.max_rel, e64.max_abs);
            std::printf("\n");
        }
        ++checked;
        if (bad) {
            std::ostringstream os;
            os.precision(17);
            const double a = g[worst_at], b = want.values[worst_at];
            os << label << ": " << name << " differs from PyTorch ('" << ref << "' in " << fx.path << ") at " << bad << " of "
               << g.size() << " elements; worst at " << multi_index(ws, worst_at) << ": depthlab " << a << ", PyTorch " << b
               << ", |diff| " << std::setprecision(3) << std::abs(a - b) << " > atol " << atol << " + rtol " << rtol
               << " * |PyTorch|";
            FAIL_CHECK(os.str());
        }
    }
    void check_grad(const std::string& name, const Var<T>& v) {
        INFO(label, ": gradient of ", name);
        REQUIRE_MESSAGE(v.grad().defined(), label, ": no gradient reached ", name);
        check("grad." + name, v.grad());
    }

    void report() const {
        if (report_level() < 1) return;
        std::printf("[parity] %-34s %2d tensors  max rel err %.3e  max abs err %.3e", label.c_str(), checked, err.max_rel,
                    err.max_abs);
        if (!prefix.empty()) std::printf("  (vs float64: rel %.3e abs %.3e)", err_f64.max_rel, err_f64.max_abs);
        std::printf("\n");
    }
};

/// Runs `body(run)` in double, then in float on every ISA path this CPU can run.
template <class Body>
void run_case(const std::string& name, Body body) {
    const Fixture fx = depthlab_test::load_fixture(fixture_path(name));
    {
        Run<double> r{fx, "", name + " double", 1e-9, 1e-12};
        body(r);
        r.report();
    }
    for (const auto i : {depthlab::cpu::isa::scalar, depthlab::cpu::isa::avx2, depthlab::cpu::isa::avx512}) {
        if (!depthlab::cpu::cpu_supports(i)) continue;
        const depthlab::cpu::isa_scope scope(i);
        Run<float> r{fx, "f32.", name + " float/" + depthlab::cpu::to_string(i), 1e-4, 1e-5};
        body(r);
        r.report();
    }
}

}  // namespace

// x (8,6) -> Linear(6,16) -> GELU(tanh) -> Linear(16,5) -> cross_entropy(ignore_index -100,
// label_smoothing 0.1).
TEST_CASE("torch parity: MLP with GELU and label-smoothed cross-entropy") {
    run_case("mlp_ce", []<class T>(Run<T>& r) {
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
    run_case("attention", []<class T>(Run<T>& r) {
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
    run_case("layernorm_gelu", []<class T>(Run<T>& r) {
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
    run_case("embedding_logsoftmax", []<class T>(Run<T>& r) {
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
