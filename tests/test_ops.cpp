// The op harness. Every differentiable op in depthlab::op_kind has at least one case here,
// and every case is run (1) against a plain reference written with loops in double,
// (2) through a central finite-difference gradient check in double, and (3) in float on
// every ISA path the CPU can run, against double, and (4) in float with bf16 GEMM inputs
// against double at bf16 tolerances. Templated over backends, so a new
// backend gets the same tests. A coverage test fails when an op kind has no case.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace depthlab;
using depthlab_test::check_close;
using depthlab_test::from_double;
using depthlab_test::to_double;

namespace {

using vec = std::vector<double>;
using inputs_t = std::vector<vec>;

enum class dist { normal, away_from_zero, logits, wide };
struct input_spec {
    Shape shape;
    dist d = dist::normal;
};

template <class B>
struct op_case {
    std::string name;
    op_kind kind;
    std::vector<input_spec> inputs;
    std::function<Var<double, B>(const std::vector<Var<double, B>>&)> build_double;
    std::function<Var<float, B>(const std::vector<Var<float, B>>&)> build_float;
    std::function<vec(const inputs_t&)> reference;
};

template <class V>
using scalar_of = typename std::decay_t<V>::value_type::tensor_type::value_type;

// ---- references: plain loops, double ----
vec ref_matmul(const vec& a, const Shape& sa, const vec& b, const Shape& sb, bool ta, bool tb) {
    const index_t M = ta ? sa.dim(-1) : sa.dim(-2), K = ta ? sa.dim(-2) : sa.dim(-1);
    const index_t N = tb ? sb.dim(-2) : sb.dim(-1);
    const index_t ba = sa.numel() / (M * K), bb = sb.numel() / (K * N), batch = std::max(ba, bb);
    vec c(static_cast<std::size_t>(batch * M * N), 0.0);
    for (index_t i = 0; i < batch; ++i)
        for (index_t m = 0; m < M; ++m)
            for (index_t n = 0; n < N; ++n) {
                double s = 0;
                for (index_t k = 0; k < K; ++k) {
                    const double av = a[static_cast<std::size_t>((ba > 1 ? i * M * K : 0) + (ta ? k * M + m : m * K + k))];
                    const double bv = b[static_cast<std::size_t>((bb > 1 ? i * K * N : 0) + (tb ? n * K + k : k * N + n))];
                    s += av * bv;
                }
                c[static_cast<std::size_t>(i * M * N + m * N + n)] = s;
            }
    return c;
}
vec map1(const vec& x, double (*f)(double)) {
    vec y(x.size());
    std::transform(x.begin(), x.end(), y.begin(), f);
    return y;
}
double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double gelu_erf_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
/// softmax over rows of `cols`, of scale*x + mask[mask_row(r)]
vec ref_softmax(const vec& x, index_t cols, double scale, const vec* mask, const std::function<index_t(index_t)>& mask_row) {
    vec y(x.size());
    const index_t rows = static_cast<index_t>(x.size()) / cols;
    for (index_t r = 0; r < rows; ++r) {
        double mx = -INFINITY;
        vec z(static_cast<std::size_t>(cols));
        for (index_t c = 0; c < cols; ++c) {
            z[c] = scale * x[r * cols + c] + (mask ? (*mask)[mask_row(r) * cols + c] : 0.0);
            mx = std::max(mx, z[c]);
        }
        double s = 0;
        for (index_t c = 0; c < cols; ++c) s += std::exp(z[c] - mx);
        for (index_t c = 0; c < cols; ++c) y[r * cols + c] = std::exp(z[c] - mx) / s;
    }
    return y;
}
vec ref_log_softmax(const vec& x, index_t cols) {
    vec y(x.size());
    for (index_t r = 0; r < static_cast<index_t>(x.size()) / cols; ++r) {
        double mx = -INFINITY, s = 0;
        for (index_t c = 0; c < cols; ++c) mx = std::max(mx, x[r * cols + c]);
        for (index_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - mx);
        for (index_t c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] - mx - std::log(s);
    }
    return y;
}
/// Copy of the elements of a row-major tensor of shape s, read through index map f(out_index) -> in_index.
template <class F>
vec permute_ref(const vec& x, index_t n, F f) {
    vec y(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) y[i] = x[f(i)];
    return y;
}

const std::vector<std::int64_t> ce_targets{1, -100, 5, 0};
const std::vector<std::int64_t> emb_ids{3, 0, 3, 6, 1, 2};
const std::vector<std::int64_t> gather_ids{4, 0, 4, 2};
const std::vector<std::int64_t> scatter_ids{1, 3, 1, 0};

template <class B, class G>
op_case<B> make_case(std::string name, op_kind k, std::vector<input_spec> in, G build, std::function<vec(const inputs_t&)> ref) {
    return {std::move(name), k, std::move(in), [build](const auto& v) { return build(v); }, [build](const auto& v) { return build(v); },
            std::move(ref)};
}

template <class B>
std::vector<op_case<B>> all_cases() {
    std::vector<op_case<B>> c;
    // matmul: plain batched, each transpose, shared right and left operands
    for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2;
        const Shape sa = ta ? Shape{2, 4, 3} : Shape{2, 3, 4}, sb = tb ? Shape{2, 5, 4} : Shape{2, 4, 5};
        c.push_back(make_case<B>("matmul ta=" + std::to_string(ta) + " tb=" + std::to_string(tb), op_kind::matmul, {{sa}, {sb}},
                                 [=](const auto& v) { return matmul(v[0], v[1], ta, tb); },
                                 [=](const inputs_t& x) { return ref_matmul(x[0], sa, x[1], sb, ta, tb); }));
    }
    for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2;
        const Shape sa = ta ? Shape{2, 4, 3} : Shape{2, 3, 4}, sb = tb ? Shape{5, 4} : Shape{4, 5};
        c.push_back(make_case<B>("matmul shared B ta=" + std::to_string(ta) + " tb=" + std::to_string(tb), op_kind::matmul,
                                 {{sa}, {sb}}, [=](const auto& v) { return matmul(v[0], v[1], ta, tb); },
                                 [=](const inputs_t& x) { return ref_matmul(x[0], sa, x[1], sb, ta, tb); }));
    }
    for (int t = 0; t < 2; ++t) {
        const bool ta = t & 1;
        const Shape sa = ta ? Shape{4, 3} : Shape{3, 4}, sb{2, 4, 5};
        c.push_back(make_case<B>("matmul shared A ta=" + std::to_string(ta), op_kind::matmul, {{sa}, {sb}},
                                 [=](const auto& v) { return matmul(v[0], v[1], ta, false); },
                                 [=](const inputs_t& x) { return ref_matmul(x[0], sa, x[1], sb, ta, false); }));
    }
    // linear, with and without bias
    const auto linear_ref = [](const inputs_t& x, bool has_bias) {
        const index_t rows = 6, in = 4, out = 5;
        vec y(rows * out);
        for (index_t r = 0; r < rows; ++r)
            for (index_t o = 0; o < out; ++o) {
                double s = has_bias ? x[2][o] : 0.0;
                for (index_t i = 0; i < in; ++i) s += x[0][r * in + i] * x[1][o * in + i];
                y[r * out + o] = s;
            }
        return y;
    };
    c.push_back(make_case<B>("linear", op_kind::linear, {{{2, 3, 4}}, {{5, 4}}, {{5}}},
                             [](const auto& v) { return linear(v[0], v[1], v[2]); },
                             [=](const inputs_t& x) { return linear_ref(x, true); }));
    c.push_back(make_case<B>("linear no bias", op_kind::linear, {{{6, 4}}, {{5, 4}}}, [](const auto& v) { return linear(v[0], v[1]); },
                             [=](const inputs_t& x) { return linear_ref(x, false); }));
    c.push_back(make_case<B>("linear_gelu", op_kind::linear_gelu, {{{2, 3, 4}}, {{5, 4}}, {{5}}},
                             [](const auto& v) { return linear_gelu(v[0], v[1], v[2]); },
                             [=](const inputs_t& x) { return map1(linear_ref(x, true), gelu_ref); }));
    // add / mul, same shape and broadcast suffix
    const auto bin_ref = [](const inputs_t& x, bool is_mul) {
        vec y(x[0].size());
        for (std::size_t i = 0; i < y.size(); ++i) {
            const double b = x[1][i % x[1].size()];
            y[i] = is_mul ? x[0][i] * b : x[0][i] + b;
        }
        return y;
    };
    c.push_back(make_case<B>("add", op_kind::add, {{{2, 3, 4}}, {{2, 3, 4}}}, [](const auto& v) { return v[0] + v[1]; },
                             [=](const inputs_t& x) { return bin_ref(x, false); }));
    c.push_back(make_case<B>("add broadcast", op_kind::add, {{{2, 3, 4}}, {{3, 4}}}, [](const auto& v) { return add(v[0], v[1]); },
                             [=](const inputs_t& x) { return bin_ref(x, false); }));
    c.push_back(make_case<B>("mul", op_kind::mul, {{{2, 3, 4}}, {{2, 3, 4}}}, [](const auto& v) { return v[0] * v[1]; },
                             [=](const inputs_t& x) { return bin_ref(x, true); }));
    c.push_back(make_case<B>("mul broadcast", op_kind::mul, {{{2, 3, 4}}, {{4}}}, [](const auto& v) { return mul(v[0], v[1]); },
                             [=](const inputs_t& x) { return bin_ref(x, true); }));
    // One input reaching an op by both arguments, or by two ops: its gradient is written by
    // the first backward to arrive (into an unfilled buffer) and added to by the next.
    c.push_back(make_case<B>("add, one input twice", op_kind::add, {{{2, 3, 4}}}, [](const auto& v) { return v[0] + v[0]; },
                             [](const inputs_t& x) {
                                 vec y = x[0];
                                 for (double& e : y) e *= 2;
                                 return y;
                             }));
    c.push_back(make_case<B>("mul, one input twice", op_kind::mul, {{{2, 3, 4}}}, [](const auto& v) { return v[0] * v[0]; },
                             [](const inputs_t& x) {
                                 vec y = x[0];
                                 for (double& e : y) e *= e;
                                 return y;
                             }));
    c.push_back(make_case<B>("the input times its reshaped half", op_kind::mul, {{{2, 6}}},
                             [](const auto& v) { return scale(reshape(reshape(v[0], {3, 4}), {2, 6}), scalar_of<decltype(v)>(0.5)) * v[0]; },
                             [](const inputs_t& x) {
                                 vec y = x[0];
                                 for (double& e : y) e = 0.5 * e * e;
                                 return y;
                             }));
    c.push_back(make_case<B>("bias", op_kind::bias, {{{3, 5}}, {{5}}}, [](const auto& v) { return bias(v[0], v[1]); },
                             [=](const inputs_t& x) { return bin_ref(x, false); }));
    c.push_back(make_case<B>("scale", op_kind::scale, {{{3, 5}}},
                             [](const auto& v) { return scale(v[0], scalar_of<decltype(v)>(-0.7)); },
                             [](const inputs_t& x) {
                                 vec y = x[0];
                                 for (double& e : y) e *= -0.7;
                                 return y;
                             }));
    // activations (37 elements: a full vector plus a masked tail on every ISA)
    c.push_back(make_case<B>("gelu", op_kind::gelu, {{{37}}}, [](const auto& v) { return gelu(v[0]); },
                             [](const inputs_t& x) { return map1(x[0], gelu_ref); }));
    c.push_back(make_case<B>("gelu_erf", op_kind::gelu_erf, {{{37}}}, [](const auto& v) { return gelu_erf(v[0]); },
                             [](const inputs_t& x) { return map1(x[0], gelu_erf_ref); }));
    c.push_back(make_case<B>("relu", op_kind::relu, {{{37}, dist::away_from_zero}}, [](const auto& v) { return relu(v[0]); },
                             [](const inputs_t& x) { return map1(x[0], [](double a) { return a > 0 ? a : 0.0; }); }));
    c.push_back(make_case<B>("tanh", op_kind::tanh, {{{37}}}, [](const auto& v) { return depthlab::tanh(v[0]); },
                             [](const inputs_t& x) { return map1(x[0], [](double a) { return std::tanh(a); }); }));
    c.push_back(make_case<B>("sigmoid", op_kind::sigmoid, {{{37}}}, [](const auto& v) { return sigmoid(v[0]); },
                             [](const inputs_t& x) { return map1(x[0], [](double a) { return 1 / (1 + std::exp(-a)); }); }));
    // log_sigmoid far out, where sigmoid itself rounds to 0 or 1 in float
    c.push_back(make_case<B>("log_sigmoid", op_kind::log_sigmoid, {{{37}, dist::wide}}, [](const auto& v) { return log_sigmoid(v[0]); },
                             [](const inputs_t& x) { return map1(x[0], [](double a) { return -std::log1p(std::exp(-a)); }); }));
    // softmax: plain with scale; padding mask (2,1,1,19) on (2,2,3,19); causal (3,19); fully masked row
    c.push_back(make_case<B>("softmax", op_kind::softmax, {{{4, 19}, dist::logits}},
                             [](const auto& v) { return softmax(v[0], scalar_of<decltype(v)>(0.7)); },
                             [](const inputs_t& x) { return ref_softmax(x[0], 19, 0.7, nullptr, {}); }));
    vec pad_mask(2 * 19, 0.0);
    for (int k = 15; k < 19; ++k) pad_mask[19 + k] = -INFINITY;  // batch 1: last four keys are padding
    c.push_back(make_case<B>(
        "softmax padding mask", op_kind::softmax, {{{2, 2, 3, 19}, dist::logits}},
        [=](const auto& v) {
            using T = scalar_of<decltype(v)>;
            using Bk = typename std::decay_t<decltype(v[0].value())>::backend_type;
            return softmax(v[0], T(0.5), from_double<T, Bk>({2, 1, 1, 19}, pad_mask));
        },
        [=](const inputs_t& x) { return ref_softmax(x[0], 19, 0.5, &pad_mask, [](index_t r) { return r / 6; }); }));
    vec causal(3 * 19, 0.0);
    for (int q = 0; q < 3; ++q)
        for (int k = q + 1; k < 19; ++k) causal[q * 19 + k] = -1e9;
    c.push_back(make_case<B>(
        "softmax causal mask", op_kind::softmax, {{{2, 3, 19}, dist::logits}},
        [=](const auto& v) {
            using T = scalar_of<decltype(v)>;
            using Bk = typename std::decay_t<decltype(v[0].value())>::backend_type;
            return softmax(v[0], T(1), from_double<T, Bk>({3, 19}, causal));
        },
        [=](const inputs_t& x) { return ref_softmax(x[0], 19, 1.0, &causal, [](index_t r) { return r % 3; }); }));
    c.push_back(make_case<B>("log_softmax", op_kind::log_softmax, {{{3, 21}, dist::logits}},
                             [](const auto& v) { return log_softmax(v[0]); },
                             [](const inputs_t& x) { return ref_log_softmax(x[0], 21); }));
    // cross-entropy: ignore index, with and without label smoothing
    for (double eps : {0.0, 0.1}) {
        c.push_back(make_case<B>(
            "cross_entropy smoothing=" + std::to_string(eps), op_kind::cross_entropy, {{{4, 6}, dist::logits}},
            [=](const auto& v) { return cross_entropy(v[0], ce_targets, -100, scalar_of<decltype(v)>(eps)); },
            [=](const inputs_t& x) {
                const vec lp = ref_log_softmax(x[0], 6);
                double total = 0;
                int n = 0;
                for (int r = 0; r < 4; ++r) {
                    if (ce_targets[r] == -100) continue;
                    double mean_lp = 0;
                    for (int j = 0; j < 6; ++j) mean_lp += lp[r * 6 + j] / 6;
                    total += -(1 - eps) * lp[r * 6 + ce_targets[r]] - eps * mean_lp;
                    ++n;
                }
                return vec{total / n};
            }));
    }
    // reduction 'none': one loss per row, 0 for the ignored row
    c.push_back(make_case<B>(
        "cross_entropy_rows smoothing=0.1", op_kind::cross_entropy, {{{4, 6}, dist::logits}},
        [=](const auto& v) { return cross_entropy_rows(v[0], ce_targets, -100, scalar_of<decltype(v)>(0.1)); },
        [=](const inputs_t& x) {
            const vec lp = ref_log_softmax(x[0], 6);
            vec y(4, 0.0);
            for (int r = 0; r < 4; ++r) {
                if (ce_targets[r] == -100) continue;
                double mean_lp = 0;
                for (int j = 0; j < 6; ++j) mean_lp += lp[r * 6 + j] / 6;
                y[r] = -0.9 * lp[r * 6 + ce_targets[r]] - 0.1 * mean_lp;
            }
            return y;
        }));
    c.push_back(make_case<B>(
        "layer_norm", op_kind::layer_norm, {{{3, 19}}, {{19}}, {{19}}},
        [](const auto& v) { return layer_norm(v[0], v[1], v[2], scalar_of<decltype(v)>(1e-5)); },
        [](const inputs_t& x) {
            vec y(x[0].size());
            for (int r = 0; r < 3; ++r) {
                double m = 0, var = 0;
                for (int j = 0; j < 19; ++j) m += x[0][r * 19 + j] / 19;
                for (int j = 0; j < 19; ++j) var += (x[0][r * 19 + j] - m) * (x[0][r * 19 + j] - m) / 19;
                for (int j = 0; j < 19; ++j) y[r * 19 + j] = (x[0][r * 19 + j] - m) / std::sqrt(var + 1e-5) * x[1][j] + x[2][j];
            }
            return y;
        }));
    // layer_norm(x + dropout(y)): without dropout, and with it (p 0.3, a fresh generator per
    // evaluation: the same mask every time). Rows longer than the CPU's 1024-element mask pieces
    // are checked against the unfused ops (below): central differences over a few thousand
    // outputs are too noisy for this harness's tolerances.
    const auto residual_ln_ref = [](index_t rows, index_t cols, double p) {
        return [=](const inputs_t& x) {
            Generator gen(7);
            const std::uint64_t first = p > 0 ? gen.reserve(x[0].size()) : 0;
            const auto threshold = static_cast<std::uint64_t>(p * 4294967296.0);
            vec z(x[0].size()), y(x[0].size());
            for (std::size_t i = 0; i < z.size(); ++i)
                z[i] = x[0][i] + (p == 0 || gen.word(first + i) >= threshold ? x[1][i] / (1 - p) : 0.0);
            for (index_t r = 0; r < rows; ++r) {
                double m = 0, var = 0;
                for (index_t j = 0; j < cols; ++j) m += z[r * cols + j] / static_cast<double>(cols);
                for (index_t j = 0; j < cols; ++j) var += (z[r * cols + j] - m) * (z[r * cols + j] - m) / static_cast<double>(cols);
                for (index_t j = 0; j < cols; ++j) y[r * cols + j] = (z[r * cols + j] - m) / std::sqrt(var + 1e-5) * x[2][j] + x[3][j];
            }
            return y;
        };
    };
    c.push_back(make_case<B>(
        "residual_layer_norm", op_kind::residual_layer_norm, {{{3, 19}}, {{3, 19}}, {{19}}, {{19}}},
        [](const auto& v) { return residual_layer_norm(v[0], v[1], v[2], v[3], scalar_of<decltype(v)>(1e-5)); }, residual_ln_ref(3, 19, 0.0)));
    c.push_back(make_case<B>(
        "residual_layer_norm with dropout", op_kind::residual_layer_norm, {{{2, 3, 19}}, {{2, 3, 19}}, {{19}}, {{19}}},
        [](const auto& v) {
            using T = scalar_of<decltype(v)>;
            Generator gen(7);
            return residual_layer_norm(v[0], v[1], v[2], v[3], T(1e-5), T(0.3), gen);
        },
        residual_ln_ref(6, 19, 0.3)));
    c.push_back(make_case<B>(
        "dropout", op_kind::dropout, {{{5, 7}}},
        [](const auto& v) {
            Generator gen(42);  // a fresh generator per evaluation: the same mask every time
            return dropout(v[0], scalar_of<decltype(v)>(0.3), gen);
        },
        [](const inputs_t& x) {
            Generator gen(42);
            const std::uint64_t first = gen.reserve(x[0].size());
            const auto threshold = static_cast<std::uint64_t>(0.3 * 4294967296.0);
            vec y(x[0].size());
            for (std::size_t i = 0; i < y.size(); ++i) y[i] = gen.word(first + i) >= threshold ? x[0][i] / 0.7 : 0.0;
            return y;
        }));
    c.push_back(make_case<B>("embedding", op_kind::embedding, {{{7, 4}}}, [](const auto& v) { return embedding(v[0], emb_ids, {2, 3}); },
                             [](const inputs_t& x) {
                                 return permute_ref(x[0], 24, [](index_t i) { return emb_ids[i / 4] * 4 + i % 4; });
                             }));
    c.push_back(make_case<B>("concat", op_kind::concat, {{{2, 1, 3}}, {{2, 2, 3}}, {{2, 3, 3}}},
                             [](const auto& v) { return concat(std::vector{v[0], v[1], v[2]}, 1); },
                             [](const inputs_t& x) {
                                 vec y;
                                 for (int b = 0; b < 2; ++b)
                                     for (int part = 0; part < 3; ++part)
                                         for (int j = 0; j < (part + 1) * 3; ++j) y.push_back(x[part][b * (part + 1) * 3 + j]);
                                 return y;
                             }));
    c.push_back(make_case<B>("split", op_kind::split, {{{2, 6}}}, [](const auto& v) { return split(v[0], {1, 2, 3}, 1)[2]; },
                             [](const inputs_t& x) { return permute_ref(x[0], 6, [](index_t i) { return (i / 3) * 6 + 3 + i % 3; }); }));
    c.push_back(make_case<B>("slice", op_kind::slice, {{{3, 5, 2}}}, [](const auto& v) { return slice(v[0], 1, 1, 4); },
                             [](const inputs_t& x) {
                                 return permute_ref(x[0], 18, [](index_t i) { return (i / 6) * 10 + 2 + i % 6; });
                             }));
    c.push_back(make_case<B>("reshape", op_kind::reshape, {{{2, 6}}}, [](const auto& v) { return reshape(v[0], {3, -1}); },
                             [](const inputs_t& x) { return x[0]; }));
    c.push_back(make_case<B>("transpose", op_kind::transpose, {{{2, 3, 4}}}, [](const auto& v) { return transpose(v[0], 0, 2); },
                             [](const inputs_t& x) {
                                 // out (4,3,2)[k][j][i] = in[i][j][k]
                                 return permute_ref(x[0], 24, [](index_t o) {
                                     const index_t k = o / 6, j = (o / 2) % 3, i = o % 2;
                                     return i * 12 + j * 4 + k;
                                 });
                             }));
    c.push_back(make_case<B>("gather_rows", op_kind::gather_rows, {{{5, 3}}}, [](const auto& v) { return gather_rows(v[0], gather_ids); },
                             [](const inputs_t& x) {
                                 return permute_ref(x[0], 12, [](index_t i) { return gather_ids[i / 3] * 3 + i % 3; });
                             }));
    c.push_back(make_case<B>("scatter_rows", op_kind::scatter_rows, {{{4, 3}}},
                             [](const auto& v) { return scatter_rows(v[0], scatter_ids, 5); },
                             [](const inputs_t& x) {
                                 vec y(15, 0.0);
                                 for (int i = 0; i < 4; ++i)
                                     for (int j = 0; j < 3; ++j) y[scatter_ids[i] * 3 + j] += x[0][i * 3 + j];
                                 return y;
                             }));
    c.push_back(make_case<B>("sum", op_kind::sum, {{{3, 7}}}, [](const auto& v) { return sum(v[0]); },
                             [](const inputs_t& x) {
                                 double s = 0;
                                 for (double e : x[0]) s += e;
                                 return vec{s};
                             }));
    c.push_back(make_case<B>("mean", op_kind::mean, {{{3, 7}}}, [](const auto& v) { return mean(v[0]); },
                             [](const inputs_t& x) {
                                 double s = 0;
                                 for (double e : x[0]) s += e;
                                 return vec{s / 21};
                             }));
    c.push_back(make_case<B>("mse", op_kind::mse, {{{3, 7}}, {{3, 7}}}, [](const auto& v) { return mse(v[0], v[1]); },
                             [](const inputs_t& x) {
                                 double s = 0;
                                 for (std::size_t i = 0; i < x[0].size(); ++i) s += (x[0][i] - x[1][i]) * (x[0][i] - x[1][i]);
                                 return vec{s / 21};
                             }));
    // fused multi-head attention: packed self-attention with a padding mask, and
    // cross-attention (q from one source, k and v packed in another) with a causal-style mask
    const auto attention_ref = [](const vec& qs, index_t Wq, index_t qo, const vec& ks, index_t Wk, index_t ko, const vec& vs,
                                  index_t Wv, index_t vo, index_t Bn, index_t Tq, index_t Tk, index_t dim, index_t H,
                                  const std::function<double(index_t, index_t, index_t, index_t)>& mask) {
        const index_t dh = dim / H;
        vec out(static_cast<std::size_t>(Bn * Tq * dim), 0.0);
        for (index_t b = 0; b < Bn; ++b)
            for (index_t h = 0; h < H; ++h)
                for (index_t i = 0; i < Tq; ++i) {
                    vec s(static_cast<std::size_t>(Tk));
                    double mx = -INFINITY;
                    for (index_t j = 0; j < Tk; ++j) {
                        double d = 0;
                        for (index_t e = 0; e < dh; ++e)
                            d += qs[(b * Tq + i) * Wq + qo + h * dh + e] * ks[(b * Tk + j) * Wk + ko + h * dh + e];
                        s[j] = d / std::sqrt(double(dh)) + mask(b, h, i, j);
                        mx = std::max(mx, s[j]);
                    }
                    double z = 0;
                    for (double& e : s) z += (e = std::exp(e - mx));
                    for (index_t e = 0; e < dh; ++e) {
                        double acc = 0;
                        for (index_t j = 0; j < Tk; ++j) acc += s[j] / z * vs[(b * Tk + j) * Wv + vo + h * dh + e];
                        out[(b * Tq + i) * dim + h * dh + e] = acc;
                    }
                }
        return out;
    };
    vec attn_pad(2 * 5, 0.0);
    attn_pad[5 + 4] = -INFINITY;  // sequence 1: last key is padding
    attn_pad[5 + 3] = -INFINITY;
    c.push_back(make_case<B>(
        "attention self packed qkv + padding mask", op_kind::attention, {{{2, 5, 24}}},
        [=](const auto& v) {
            using T = scalar_of<decltype(v)>;
            using Bk = typename std::decay_t<decltype(v[0].value())>::backend_type;
            return attention<T, Bk>({v[0], 0}, {v[0], 8}, {v[0], 16}, 8, {.heads = 2}, from_double<T, Bk>({2, 1, 1, 5}, attn_pad));
        },
        [=](const inputs_t& x) {
            return attention_ref(x[0], 24, 0, x[0], 24, 8, x[0], 24, 16, 2, 5, 5, 8, 2,
                                 [&](index_t b, index_t, index_t, index_t j) { return attn_pad[b * 5 + j]; });
        }));
    vec attn_causal(3 * 4, 0.0);
    for (int i = 0; i < 3; ++i)
        for (int j = i + 2; j < 4; ++j) attn_causal[i * 4 + j] = -1e9;
    c.push_back(make_case<B>(
        "attention cross q / packed kv + broadcast mask", op_kind::attention, {{{2, 3, 12}}, {{2, 4, 24}}},
        [=](const auto& v) {
            using T = scalar_of<decltype(v)>;
            using Bk = typename std::decay_t<decltype(v[0].value())>::backend_type;
            return attention<T, Bk>({v[0], 0}, {v[1], 0}, {v[1], 12}, 12, {.heads = 3}, from_double<T, Bk>({3, 4}, attn_causal));
        },
        [=](const inputs_t& x) {
            return attention_ref(x[0], 12, 0, x[1], 24, 0, x[1], 24, 12, 2, 3, 4, 12, 3,
                                 [&](index_t, index_t, index_t i, index_t j) { return attn_causal[i * 4 + j]; });
        }));
    // ragged attention, T_ = 4 positions per sequence, 2 heads of 4: queries (Nq, 8), packed
    // [k | v] (B * 4, 16). Three layouts: uneven query counts (the queries are scattered into
    // a padded block); equal counts with some keys missing, and every query of full
    // sequences (the rows already are the block: no copies; the latter also without a mask).
    const auto ragged_ref = [](std::vector<index_t> q_off, std::vector<index_t> k_len) {
        return [=](const inputs_t& x) {
            vec out(static_cast<std::size_t>(q_off.back()) * 8, 0.0);
            for (std::size_t b = 0; b + 1 < q_off.size(); ++b)
                for (index_t i = q_off[b]; i < q_off[b + 1]; ++i)
                    for (index_t h = 0; h < 2; ++h) {
                        vec s(static_cast<std::size_t>(k_len[b]));
                        double mx = -INFINITY, z = 0;
                        for (index_t j = 0; j < k_len[b]; ++j) {
                            double d = 0;
                            for (index_t e = 0; e < 4; ++e) d += x[0][i * 8 + h * 4 + e] * x[1][(b * 4 + j) * 16 + h * 4 + e];
                            s[j] = d / 2.0;
                            mx = std::max(mx, s[j]);
                        }
                        for (double& e : s) z += (e = std::exp(e - mx));
                        for (index_t e = 0; e < 4; ++e)
                            for (index_t j = 0; j < k_len[b]; ++j) out[i * 8 + h * 4 + e] += s[j] / z * x[1][(b * 4 + j) * 16 + 8 + h * 4 + e];
                    }
            return out;
        };
    };
    struct ragged_layout {
        std::string name;
        std::vector<index_t> q_off, k_len;
    };
    for (const ragged_layout& l : std::vector<ragged_layout>{{"ragged_attention", {0, 2, 2, 5}, {3, 2, 4}},
                                                             {"ragged_attention, equal query counts", {0, 2, 4, 6}, {3, 2, 4}},
                                                             {"ragged_attention, every query of full sequences", {0, 4, 8}, {4, 4}}}) {
        const std::vector<index_t> q_off = l.q_off, k_len = l.k_len;  // (copies the lambdas capture)
        const index_t nq = q_off.back(), nb = static_cast<index_t>(k_len.size());
        c.push_back(make_case<B>(
            l.name, op_kind::ragged_attention, {{{nq, 8}}, {{nb * 4, 16}}},
            [=](const auto& v) {
                using T = scalar_of<decltype(v)>;
                using Bk = typename std::decay_t<decltype(v[0].value())>::backend_type;
                return ragged_attention<T, Bk>({v[0], 0}, q_off, {v[1], 0}, {v[1], 8}, 4, k_len, 8, 2);
            },
            ragged_ref(q_off, k_len)));
    }
    c.push_back(make_case<B>("scale_rows", op_kind::scale_rows, {{{4, 19}}, {{4}}}, [](const auto& v) { return scale_rows(v[0], v[1]); },
                             [](const inputs_t& x) {
                                 vec y(x[0].size());
                                 for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] * x[1][i / 19];
                                 return y;
                             }));
    c.push_back(make_case<B>("interpolate_rows", op_kind::interpolate_rows, {{{4, 19}}, {{4, 19}}, {{4}}},
                             [](const auto& v) { return interpolate_rows(v[0], v[1], v[2]); },
                             [](const inputs_t& x) {
                                 vec y(x[0].size());
                                 for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] + x[2][i / 19] * (x[1][i] - x[0][i]);
                                 return y;
                             }));
    c.push_back(make_case<B>("interpolate_rows, one input at both ends", op_kind::interpolate_rows, {{{3, 5}}, {{3}}},
                             [](const auto& v) { return interpolate_rows(v[0], v[0], v[1]); },
                             [](const inputs_t& x) { return x[0]; }));
    c.push_back(make_case<B>("interpolate_rows towards a scaled copy", op_kind::interpolate_rows, {{{3, 5}}, {{3}}},
                             [](const auto& v) { return interpolate_rows(v[0], scale(v[0], scalar_of<decltype(v)>(2)), v[1]); },
                             [](const inputs_t& x) {
                                 vec y(x[0].size());
                                 for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] * (1 + x[1][i / 5]);
                                 return y;
                             }));
    c.push_back(make_case<B>("row_update", op_kind::row_update, {{{5, 3}}, {{2, 3}}},
                             [](const auto& v) { return row_update(v[0], std::vector<std::int64_t>{3, 0}, v[1]); },
                             [](const inputs_t& x) {
                                 vec y = x[0];
                                 for (int j = 0; j < 3; ++j) {
                                     y[3 * 3 + j] = x[1][j];
                                     y[0 * 3 + j] = x[1][3 + j];
                                 }
                                 return y;
                             }));
    // ACT's halting step: each of its three results over tokens that run on, halt now, or
    // ran no more (the masks the host decides), against the arithmetic written out
    {
        const std::vector<double> ra{1, 0, 0, 1, 0}, nh{0, 1, 0, 0, 1};
        const auto step = [=](const auto& v) {
            using T = scalar_of<decltype(v)>;
            using Bk = typename std::decay_t<decltype(v[0].value())>::backend_type;
            return halting::act_halting_step(v[0], v[1], v[2], from_double<T, Bk>({5}, ra), from_double<T, Bk>({5}, nh));
        };
        const auto ref = [=](int which) {
            return [=](const inputs_t& x) {
                vec y(5);
                for (std::size_t i = 0; i < 5; ++i) {
                    const double pr = x[0][i] * ra[i], rn = nh[i] * (1 - x[1][i] - pr);
                    y[i] = which == 0 ? pr + rn : which == 1 ? x[1][i] + pr + rn : x[2][i] + rn;
                }
                return y;
            };
        };
        const std::vector<input_spec> in{{{5}}, {{5}}, {{5}}};
        c.push_back(make_case<B>("act_halting: weights", op_kind::act_halting, in, [=](const auto& v) { return step(v).w; }, ref(0)));
        c.push_back(make_case<B>("act_halting: cumulative probabilities", op_kind::act_halting, in,
                                 [=](const auto& v) { return step(v).cum; }, ref(1)));
        c.push_back(make_case<B>("act_halting: remainders", op_kind::act_halting, in, [=](const auto& v) { return step(v).R; }, ref(2)));
    }
    return c;
}

vec random_input(const input_spec& s, Generator& gen) {
    vec v(static_cast<std::size_t>(s.shape.numel()));
    for (double& e : v) {
        e = gen.normal();
        if (s.d == dist::away_from_zero) e = (e < 0 ? -0.2 : 0.2) + e;  // keep |x| >= 0.2: no kink within FD step
        if (s.d == dist::logits) e *= 2.0;
        if (s.d == dist::wide) e *= 15.0;  // |x| up to ~45: where sigmoid rounds to 0 or 1
    }
    return v;
}

template <class T, class B>
std::vector<Var<T, B>> make_vars(const op_case<B>& c, const inputs_t& x) {
    std::vector<Var<T, B>> v;
    for (std::size_t i = 0; i < x.size(); ++i) v.push_back(Var<T, B>::parameter(from_double<T, B>(c.inputs[i].shape, x[i])));
    return v;
}

template <class T, class B>
Var<T, B> build(const op_case<B>& c, const std::vector<Var<T, B>>& v) {
    if constexpr (std::is_same_v<T, double>) return c.build_double(v);
    else return c.build_float(v);
}

/// Runs the case in precision T: returns the output and the gradient of sum(w * y) for
/// every input.
template <class T, class B>
std::pair<vec, inputs_t> run(const op_case<B>& c, const inputs_t& x, const vec& w, const Shape& out_shape) {
    auto v = make_vars<T, B>(c, x);
    Var<T, B> y = build<T, B>(c, v);
    y.backward(from_double<T, B>(out_shape, w));
    inputs_t grads;
    for (auto& p : v) grads.push_back(p.grad().defined() ? to_double(p.grad()) : vec(static_cast<std::size_t>(p.value().numel()), 0.0));
    return {to_double(y.value()), grads};
}

double weighted(const vec& y, const vec& w) {
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * w[i];
    return s;
}

}  // namespace

TEST_CASE_TEMPLATE("op harness: reference, finite-difference gradient, float vs double on every ISA", B, DEPTHLAB_TEST_BACKENDS) {
    const auto cases = all_cases<B>();
    std::uint64_t seed = 1000;
    for (const auto& c : cases) {
        CAPTURE(c.name);
        Generator gen(seed++);
        inputs_t x;
        for (const auto& s : c.inputs) x.push_back(random_input(s, gen));

        // (1) value against the reference, and the op really is the one under test
        auto vars = make_vars<double, B>(c, x);
        Var<double, B> y = build<double, B>(c, vars);
        CHECK_MESSAGE(y.op() == c.kind, c.name, ": built op ", op_name(y.op()), ", expected ", op_name(c.kind));
        const Shape out_shape = y.shape();
        check_close(c.name + " value vs reference", to_double(y.value()), c.reference(x), 1e-10, 1e-12);

        // (2) gradient of L = sum(w * y) against central differences
        vec w(static_cast<std::size_t>(out_shape.numel()));
        for (double& e : w) e = gen.normal();
        // (named references, not a structured binding: clang 14 cannot capture those in lambdas)
        const auto reference_run = run<double, B>(c, x, w, out_shape);
        const auto& value = reference_run.first;
        const auto& grads = reference_run.second;
        for (std::size_t i = 0; i < x.size(); ++i) {
            vec numeric(x[i].size());
            for (std::size_t j = 0; j < x[i].size(); ++j) {
                const double h = 1e-6 * std::max(1.0, std::abs(x[i][j]));
                inputs_t xp = x, xm = x;
                xp[i][j] += h;
                xm[i][j] -= h;
                no_grad guard;
                const double lp = weighted(to_double(build<double, B>(c, make_vars<double, B>(c, xp)).value()), w);
                const double lm = weighted(to_double(build<double, B>(c, make_vars<double, B>(c, xm)).value()), w);
                numeric[j] = (lp - lm) / (2 * h);
            }
            check_close(c.name + " gradient of input " + std::to_string(i) + " vs finite differences", grads[i], numeric, 1e-5, 1e-7);
        }

        // (3) float on every ISA path against double
        depthlab_test::for_each_float_path<B>([&](const std::string& path) {
            const std::string tag = c.name + " float/" + path;
            const auto [fvalue, fgrads] = run<float, B>(c, x, w, out_shape);
            check_close(tag + " value vs double", fvalue, value, 1e-4, 1e-5);
            for (std::size_t i = 0; i < x.size(); ++i)
                check_close(tag + " gradient of input " + std::to_string(i) + " vs double", fgrads[i], grads[i], 1e-3, 1e-4);
        });

        // (4) float with bf16 GEMM inputs against double, at bf16 tolerances: an input rounded
        // to bf16 is off by up to 2^-9 relative, a product of k terms by ~2^-9 sqrt(k) of its
        // scale, so values and gradients are held to 3e-2 of the largest magnitude (ops without
        // a GEMM are unaffected and still meet these bounds).
        {
            matmul_precision_scope bf16(matmul_precision::bf16);
            const auto bf16_run = run<float, B>(c, x, w, out_shape);
            const auto scale = [](const vec& v) {
                double m = 0;
                for (double e : v) m = std::max(m, std::isfinite(e) ? std::abs(e) : 0.0);
                return m;
            };
            check_close(c.name + " bf16 value vs double", bf16_run.first, value, 1e-2, 3e-2 * scale(value));
            for (std::size_t i = 0; i < x.size(); ++i)
                check_close(c.name + " bf16 gradient of input " + std::to_string(i) + " vs double", bf16_run.second[i], grads[i], 1e-2,
                            3e-2 * scale(grads[i]));
        }
    }
}

TEST_CASE("op harness covers every op kind") {
    std::set<op_kind> covered;
    for (const auto& c : all_cases<depthlab_test::primary_backend>()) covered.insert(c.kind);
    for (int k = 0; k < op_count; ++k) {
        const auto kind = static_cast<op_kind>(k);
        if (kind == op_kind::leaf) continue;
        CHECK_MESSAGE(covered.count(kind) == 1, "op '", op_name(kind), "' has no case in the harness (tests/test_ops.cpp)");
    }
}

TEST_CASE_TEMPLATE("residual_layer_norm is layer_norm(x + dropout(y)): values, masks and gradients, bit for bit on the host", B,
                   DEPTHLAB_TEST_BACKENDS) {
    // rows of 37 (rows start inside a Philox block), 256 and 1500 (two of the CPU's mask pieces), with and without dropout, with
    // x's gradient written first and added to, in float (the ISA path the machine runs)
    for (const index_t cols : {index_t{37}, index_t{256}, index_t{1500}})
        for (const float p : {0.0f, 0.1f})
            for (const bool x_has_grad : {false, true}) {
                CAPTURE(cols);
                CAPTURE(p);
                CAPTURE(x_has_grad);
                Generator init(cols);
                const auto make = [&](const Shape& s, double stddev) { return Var<float, B>::parameter(Tensor<float, B>::randn(s, init, stddev)); };
                const Shape s{3, 5, cols};
                const auto x = make(s, 1.0), y = make(s, 2.0), gamma = make({cols}, 1.0), beta = make({cols}, 1.0);
                const auto w = Tensor<float, B>::randn(s, init);
                const auto run = [&](bool fused) {
                    for (const auto* v : {&x, &y, &gamma, &beta}) v->zero_grad();
                    Generator gen(99);
                    Var<float, B> out = fused ? residual_layer_norm(x, y, gamma, beta, 1e-5f, p, gen)
                                              : layer_norm(x + dropout(y, p, gen), gamma, beta, 1e-5f);
                    Var<float, B> loss = sum(mul(out, Var<float, B>::constant(w)));
                    if (x_has_grad) loss = loss + sum(mul(x, x));  // a second gradient for x, before or after
                    loss.backward();
                    std::vector<std::vector<double>> r{to_double(out.value())};
                    for (const auto* v : {&x, &y, &gamma, &beta}) r.push_back(to_double(v->grad()));
                    r.push_back({static_cast<double>(gen.offset())});
                    return r;
                };
                const auto fused = run(true), unfused = run(false);
                if constexpr (B::host_accessible) {
                    CHECK(fused == unfused);
                } else {
                    for (std::size_t i = 0; i < fused.size(); ++i) check_close("residual_layer_norm " + std::to_string(i), fused[i], unfused[i], 1e-5, 1e-5);
                }
            }
}

// Under bf16 a linear layer keeps a bf16 copy of its input for the weight gradient; with no
// weight gradient to come (no_grad, a frozen weight) the product rounds the input itself (on
// the CPU row block by row block inside its tasks). The values are the training forward's bits.
TEST_CASE_TEMPLATE("linear under bf16: without a weight gradient to come, the forward has the training forward's bits", B,
                   DEPTHLAB_TEST_BACKENDS) {
    const matmul_precision_scope bf16(matmul_precision::bf16);
    Generator gen(5);
    const auto x = Var<float, B>::parameter(Tensor<float, B>::randn({300, 48}, gen));
    const auto W = Var<float, B>::parameter(Tensor<float, B>::randn({40, 48}, gen));
    const auto b = Var<float, B>::parameter(Tensor<float, B>::randn({40}, gen));
    const std::vector<double> train = to_double(linear(x, W, b).value());
    std::vector<double> inference;
    {
        const no_grad guard;
        inference = to_double(linear(x, W, b).value());
    }
    CHECK(inference == train);
    const Var<float, B> frozen(W.value());  // no gradient for the weight
    CHECK(to_double(linear(x, frozen, b).value()) == train);
}
