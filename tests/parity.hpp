#pragma once
// Shared machinery of the PyTorch parity tests (test_torch_parity.cpp, test_layers_parity.cpp):
// fixture paths, error statistics, and Run<T>, one evaluation of a case in precision T that
// builds tensors from a fixture's inputs and checks results against its reference tensors.
// Each case runs in double against PyTorch's float64 run (rtol 1e-9, atol 1e-12) and in
// float, on every ISA path this CPU has, against PyTorch's float32 run (rtol 1e-4, atol 1e-5).
// Set DEPTHLAB_PARITY_REPORT=1 to print the largest errors per case and precision (=2: per
// tensor too); float runs also show their error against the float64 reference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "fixture.hpp"
#include "harness.hpp"  // depthlab (the CPU backends, or CUDA under nvcc)

#ifndef DEPTHLAB_FIXTURE_DIR
#define DEPTHLAB_FIXTURE_DIR "tests/fixtures"
#endif

namespace depthlab_test {

/// The fixture file `<DEPTHLAB_FIXTURE_DIR>/<name>.txt`.
inline std::string fixture_path(const std::string& name) { return std::string(DEPTHLAB_FIXTURE_DIR) + "/" + name + ".txt"; }

inline Shape to_shape(const FixtureTensor& t) { return Shape(t.shape.begin(), t.shape.end()); }

/// Row-major multi-index of flat element i, e.g. "[1, 0, 3]".
inline std::string multi_index(const Shape& s, std::size_t i) {
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

/// DEPTHLAB_PARITY_REPORT: 0 = quiet, 1 = one line per case and precision, 2 = also one
/// line per tensor.
inline int report_level() {
    const char* env = std::getenv("DEPTHLAB_PARITY_REPORT");
    return env == nullptr || *env == '\0' ? 0 : std::atoi(env);
}

/// Largest errors of got against want: max |diff|, and max |diff|/|want| over the elements
/// with |want| >= 1e-3 max|want| (so that near-zero entries do not dominate);
/// `worst_rel_in` names the tensor of the largest relative error.
struct ErrorStats {
    double max_rel = 0, max_abs = 0;
    std::string worst_rel_in;
    void add(const std::string& name, const std::vector<double>& got, const std::vector<double>& want) {
        double scale = 0;
        for (double w : want)
            if (std::isfinite(w)) scale = std::max(scale, std::abs(w));
        for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
            if (!std::isfinite(want[i])) continue;
            const double diff = std::abs(got[i] - want[i]);
            max_abs = std::max(max_abs, diff);
            if (want[i] != 0 && std::abs(want[i]) >= 1e-3 * scale && diff / std::abs(want[i]) > max_rel) {
                max_rel = diff / std::abs(want[i]);
                worst_rel_in = name;
            }
        }
    }
    void merge(const ErrorStats& o) {
        max_abs = std::max(max_abs, o.max_abs);
        if (o.max_rel > max_rel) {
            max_rel = o.max_rel;
            worst_rel_in = o.worst_rel_in;
        }
    }
};

/// One evaluation of a case in precision T: builds tensors from the fixture's inputs and
/// checks results against the reference tensors `<prefix><name>`.
template <class T, class B = primary_backend>
struct Run {
    using value_type = T;
    const Fixture& fx;
    std::string prefix;  // "" (float64 reference) or "f32."
    std::string label;   // e.g. "mlp_ce double" or "layers_encoder float/avx2"
    double rtol, atol;
    ErrorStats err;      // against the reference checked (<prefix><name>)
    ErrorStats err_f64;  // float runs: against PyTorch's float64 values (reported, not checked)
    int checked = 0;

    Run(const Fixture& f, std::string pre, std::string lab, double rt, double at)
        : fx(f), prefix(std::move(pre)), label(std::move(lab)), rtol(rt), atol(at) {}

    depthlab::Tensor<T, B> tensor(const std::string& name) const {
        const FixtureTensor& t = fx.get(name);
        const std::vector<T> v(t.values.begin(), t.values.end());
        return depthlab::Tensor<T, B>::from(to_shape(t), v);
    }
    depthlab::Var<T, B> parameter(const std::string& name) const { return depthlab::Var<T, B>::parameter(tensor(name)); }
    depthlab::Var<T, B> constant(const std::string& name) const { return depthlab::Var<T, B>::constant(tensor(name)); }
    std::vector<std::int64_t> ids(const std::string& name) const {
        const FixtureTensor& t = fx.get(name);
        REQUIRE_MESSAGE(t.dtype == "i64", fx.path, ": tensor '", name, "' should be i64, is ", t.dtype);
        return {t.values.begin(), t.values.end()};
    }
    std::vector<index_t> lengths(const std::string& name) const {
        const auto v = ids(name);
        return {v.begin(), v.end()};
    }

    /// Copies `param.<name>` into every parameter of m, in place; the fixture must hold
    /// exactly m's parameters.
    void load_parameters(const depthlab::nn::Module<T, B>& m) const {
        const auto params = m.named_parameters();
        std::size_t in_fixture = 0;
        for (const auto& [name, t] : fx)
            if (name.rfind("param.", 0) == 0) ++in_fixture;
        for (const auto& entry : params) {
            const auto& name = entry.first;  // (not a structured binding: doctest's macros capture it)
            const auto& p = entry.second;
            REQUIRE_MESSAGE(fx.count("param." + name), label, ": depthlab parameter '", name, "' has no 'param.", name, "' in ",
                            fx.path);
            const depthlab::Tensor<T, B> v = tensor("param." + name);
            REQUIRE_MESSAGE(p.value().shape() == v.shape(), label, ": parameter '", name, "' has shape ", p.value().shape(),
                            ", the fixture ", v.shape());
            p.value().copy_(v);
            p.zero_grad();
        }
        REQUIRE_MESSAGE(in_fixture == params.size(), label, ": ", fx.path, " holds ", in_fixture, " parameters, the depthlab model ",
                        params.size());
    }

    /// Compares `got` with the reference `<prefix><name>`: shape, then every element
    /// (|got - ref| <= atol + rtol |ref|; non-finite references must match exactly); a
    /// failure names the tensor, the number of bad elements and the worst one.
    void check(const std::string& name, const depthlab::Tensor<T, B>& got) {
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
        e.add(name, g, want.values);
        err.merge(e);
        ErrorStats e64;
        if (!prefix.empty() && fx.count(name)) {
            e64.add(name, g, fx.get(name).values);
            err_f64.merge(e64);
        }
        if (report_level() >= 2) {
            std::printf("[parity]   %-36s %-48s max rel err %.3e  max abs err %.3e", label.c_str(), name.c_str(), e.max_rel,
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
    void check_grad(const std::string& name, const depthlab::Var<T, B>& v) {
        INFO(label, ": gradient of ", name);
        REQUIRE_MESSAGE(v.grad().defined(), label, ": no gradient reached ", name);
        check("grad." + name, v.grad());
    }
    /// The gradient of every parameter of m against `grad.<name>`.
    void check_parameter_grads(const depthlab::nn::Module<T, B>& m) {
        for (const auto& [name, p] : m.named_parameters()) check_grad(name, p);
    }

    void report() const {
        if (report_level() < 1) return;
        std::printf("[parity] %-34s %2d tensors  max rel err %.3e  max abs err %.3e  (worst: %s)", label.c_str(), checked,
                    err.max_rel, err.max_abs, err.worst_rel_in.c_str());
        if (!prefix.empty()) std::printf("  (vs float64: rel %.3e abs %.3e)", err_f64.max_rel, err_f64.max_abs);
        std::printf("\n");
    }
};

/// Runs `body(run)` on fixture `name` on every test backend: in double against the float64
/// reference, then in float on every float path (each ISA path of the CPU) against the
/// float32 one. With
/// `require_checks`, CHECKs that the double run compared at least one tensor.
template <class Body>
void run_case(const std::string& name, Body body, bool require_checks = false) {
    const Fixture fx = load_fixture(fixture_path(name));
    for_each_backend([&]<class B>() {
        {
            Run<double, B> r{fx, "", name + " double/" + B::name, 1e-9, 1e-12};
            body(r);
            if (require_checks) {
                CHECK_MESSAGE(r.checked > 0, name, ": nothing checked");
            }
            r.report();
        }
        for_each_float_path<B>([&](const std::string& path) {
            Run<float, B> r{fx, "f32.", name + " float/" + B::name + "/" + path, 1e-4, 1e-5};
            body(r);
            r.report();
        });
    });
}

}  // namespace depthlab_test
