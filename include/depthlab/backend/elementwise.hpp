#pragma once
// Scalar forms of the activations and their derivatives, for every backend: the CUDA
// kernels apply them per element, the CPU uses them where a scalar loop is enough
// (log-sigmoid) and its SIMD kernels implement the same formulas (tested against these
// through the op harness, which checks every backend against one reference).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "depthlab/core/portable.hpp"
#include "depthlab/core/shape.hpp"

namespace depthlab::elementwise {

// ACT's halting step for one token (halting/act.hpp), ra and nh its 0/1 masks "runs on" and
// "halts now" (never both 1): p·ra joins the cumulative probability; a token that halts
// takes the remainder 1 − cum into R and into its weight; cum then sums to 1. The products
// are by 0 or 1, so exact: the outputs are those of the same steps done one op at a time.
template <class T>
struct halting_outputs {
    T w, cum, r;
};
template <class T>
DEPTHLAB_HOST_AND_GPU inline halting_outputs<T> act_halting(T p, T cum, T r, T ra, T nh) {
    const T pr = p * ra;
    const T c1 = cum + pr;
    const T rn = (T(1) + -c1) * nh;
    return {pr + rn, c1 + rn, r + rn};
}
// The gradient coefficient c = run·ra + halt·nh + one of one input of one halting output
// (act_halting_bwd): w, cum and R are affine in p, cum and R with these 0/±1 coefficients.
template <class T>
struct halting_coefficient {
    T run = T(0), halt = T(0), one = T(0);
    DEPTHLAB_HOST_AND_GPU T at(T ra, T nh) const { return run * ra + halt * nh + one; }
};
/// One element of such a gradient: c(ra, nh)·dy, written (beta 0: the old value is never
/// read, it may be NaN) or added to `old` (beta 1).
template <class T>
DEPTHLAB_HOST_AND_GPU inline T halting_grad(halting_coefficient<T> c, T ra, T nh, T dy, T beta, T old) {
    const T g = c.at(ra, nh) * dy;
    return beta == T(0) ? g : g + beta * old;
}

// ACT's halting decision for one token at iteration `iteration` (1-based): act_state::step's
// rule, so that the compact path decides on the device what the host would. A token that is not
// active (halted before, or a row that only pads the set) gets ra = nh = 0 and nothing of it
// changes. An active one halts (nh = 1) when cum + p > threshold (strict) and iteration >=
// min_iterations, else runs on (ra = 1); either way the iteration counts in `steps`. A
// probability that is not a number stops the token (ra = nh = 0: a NaN would compare false and
// keep it running on NaN states) and records the iteration in first_bad, for the host to report.
template <class T>
DEPTHLAB_HOST_AND_GPU inline void act_decide(T p, T cum, T active, T threshold, int iteration, int min_iterations, T& ra, T& nh, T& steps,
                                             T& first_bad) {
    ra = nh = T(0);
    if (active == T(0)) return;
    if (!(p == p)) {  // (a sigmoid's output: NaN is its only non-finite value)
        if (first_bad == T(0)) first_bad = static_cast<T>(iteration);
        return;
    }
    const bool halt = cum + p > threshold && iteration >= min_iterations;
    nh = halt ? T(1) : T(0);
    ra = halt ? T(0) : T(1);
    steps += T(1);
}

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <class T>
DEPTHLAB_HOST_AND_GPU inline T gelu(T x) {
    const T k0 = T(0.7978845608028654), k1 = T(0.044715);
    return T(0.5) * x * (T(1) + std::tanh(k0 * (k1 * x * x * x + x)));
}
template <class T>
DEPTHLAB_HOST_AND_GPU inline T gelu_grad(T x) {
    const T k0 = T(0.7978845608028654), k1 = T(0.044715);
    const T t = std::tanh(k0 * (k1 * x * x * x + x));
    const T du = k0 * (T(3) * k1 * x * x + T(1));
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
}
// GELU, exact form (Hendrycks & Gimpel; PyTorch's default, HF BERT's "gelu"):
// 0.5 x (1 + erf(x / sqrt(2))); derivative Phi(x) + x phi(x).
template <class T>
DEPTHLAB_HOST_AND_GPU inline T gelu_erf(T x) {
    return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
}
template <class T>
DEPTHLAB_HOST_AND_GPU inline T gelu_erf_grad(T x) {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.7071067811865476)));
    const T pdf = T(0.3989422804014327) * std::exp(T(-0.5) * x * x);
    return cdf + x * pdf;
}
template <class T>
DEPTHLAB_HOST_AND_GPU inline T relu(T x) { return x > T(0) ? x : T(0); }
template <class T>
DEPTHLAB_HOST_AND_GPU inline T relu_grad(T x) { return x > T(0) ? T(1) : T(0); }
/// from the output y = tanh(x)
template <class T>
DEPTHLAB_HOST_AND_GPU inline T tanh_grad_from_output(T y) { return T(1) - y * y; }
template <class T>
DEPTHLAB_HOST_AND_GPU inline T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }
/// from the output y = sigmoid(x)
template <class T>
DEPTHLAB_HOST_AND_GPU inline T sigmoid_grad_from_output(T y) { return y * (T(1) - y); }
/// log σ(x) = min(x, 0) − log1p(exp(−|x|)): finite for every x, where σ itself rounds to 0 or 1.
template <class T>
DEPTHLAB_HOST_AND_GPU inline T log_sigmoid(T x) { return (x < T(0) ? x : T(0)) - std::log1p(std::exp(-std::abs(x))); }
/// d log σ(x) / dx = σ(−x)
template <class T>
DEPTHLAB_HOST_AND_GPU inline T log_sigmoid_grad(T x) { return T(1) / (T(1) + std::exp(x)); }

/// log_softmax of one row of logits into out (double accumulation; host code: decoding).
// Beam search's order of candidates (nn/decoding.hpp): higher score first, a NaN score after
// every number (ranked as −inf), then the lower beam, then the lower token id. A strict weak
// order even with NaN, shared by the device's per-row selection and the host's merge.
DEPTHLAB_HOST_AND_GPU inline double beam_rank(double score) {
    return score != score ? -std::numeric_limits<double>::infinity() : score;
}
DEPTHLAB_HOST_AND_GPU inline bool beam_before(double score_a, long long beam_a, long long token_a, double score_b, long long beam_b,
                                              long long token_b) {
    const double a = beam_rank(score_a), b = beam_rank(score_b);
    if (a != b) return a > b;
    if (beam_a != beam_b) return beam_a < beam_b;
    return token_a < token_b;
}

template <class T>
void log_softmax_row(const T* x, index_t V, std::vector<double>& out) {
    out.resize(static_cast<std::size_t>(V));
    double mx = -std::numeric_limits<double>::infinity();
    for (index_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(x[v]));
    double s = 0;
    for (index_t v = 0; v < V; ++v) s += std::exp(static_cast<double>(x[v]) - mx);
    const double lse = mx + std::log(s);
    for (index_t v = 0; v < V; ++v) out[static_cast<std::size_t>(v)] = static_cast<double>(x[v]) - lse;
}

}  // namespace depthlab::elementwise
