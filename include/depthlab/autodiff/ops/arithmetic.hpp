#pragma once
// Differentiable matmul, linear, add / mul / bias / scale (with broadcasting) and the
// activations (GELU tanh and erf, ReLU, tanh, sigmoid, log-sigmoid).
// Part of autodiff/ops.hpp (whose header says what every op guarantees).
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "depthlab/autodiff/variable.hpp"
#include "depthlab/backend/backend.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/autodiff/ops/common.hpp"

namespace depthlab {

// ---------------------------------------------------------------- matmul
/// Batched matrix product. a: (..., M, K) (or (..., K, M) with trans_a),
/// b: (..., K, N) (or (..., N, K) with trans_b). Either may be 2-D and is then shared by
/// every batch entry; otherwise the batch dimensions must be equal. Result: (..., M, N).
template <class T, class B>
Var<T, B> matmul(const Var<T, B>& a, const Var<T, B>& b, bool trans_a = false, bool trans_b = false) {
    using P = primitives<B>;
    const Shape& sa = a.shape();
    const Shape& sb = b.shape();
    DEPTHLAB_CHECK(sa.rank() >= 2 && sb.rank() >= 2, shape_error, "matmul: operands need rank >= 2, got ", sa, " and ", sb);
    const index_t M = trans_a ? sa.dim(-1) : sa.dim(-2), K = trans_a ? sa.dim(-2) : sa.dim(-1);
    const index_t Kb = trans_b ? sb.dim(-1) : sb.dim(-2), N = trans_b ? sb.dim(-2) : sb.dim(-1);
    DEPTHLAB_CHECK(K == Kb, shape_error, "matmul: inner dimensions differ: ", sa, (trans_a ? "^T" : ""), " x ", sb,
                   (trans_b ? "^T" : ""));
    const bool a_shared = sa.rank() == 2, b_shared = sb.rank() == 2;
    Shape out;
    if (!a_shared) {
        DEPTHLAB_CHECK(b_shared || Shape(sa.begin(), sa.end() - 2) == Shape(sb.begin(), sb.end() - 2), shape_error,
                       "matmul: batch dimensions differ: ", sa, " x ", sb);
        for (int i = 0; i < sa.rank() - 2; ++i) out.push_back(sa[i]);
    } else {
        for (int i = 0; i < sb.rank() - 2; ++i) out.push_back(sb[i]);
    }
    out.push_back(M);
    out.push_back(N);
    // matrices in the batch: the product of the batched operand's leading extents (1 when
    // both are 2-D; 0 for an empty batch, whatever M, K and N are)
    const Shape& batched = a_shared ? sb : sa;
    index_t batch = 1;
    for (int i = 0; i < batched.rank() - 2; ++i) batch *= batched[i];
    const index_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
    auto C = Tensor<T, B>::empty(out);
    if (batch == 0)  // an empty result, and zero gradients (a shared operand's stays zero)
        return detail::make_result<T, B>(op_kind::matmul, std::move(C), {a, b}, [](Node<T, B>& nd) {
            (void)detail::parent_grad(nd, 0);
            (void)detail::parent_grad(nd, 1);
        });
    const auto A = detail::contiguous_value(a);
    const auto Bv = detail::contiguous_value(b);
    // A shared B with a non-transposed batched A is one big GEMM over batch*M rows.
    const bool fold = b_shared && !trans_a;
    if (fold) {
        P::gemm(gemm_args{.trans_b = trans_b, .m = batch * M, .n = N, .k = K, .lda = lda, .ldb = ldb, .ldc = N},
                T(1), A.data(), Bv.data(), T(0), C.data());
    } else {
        P::gemm(gemm_args{.trans_a = trans_a, .trans_b = trans_b, .m = M, .n = N, .k = K, .lda = lda, .ldb = ldb, .ldc = N,
                          .batch = batch, .stride_a = a_shared ? 0 : M * K, .stride_b = b_shared ? 0 : K * N, .stride_c = M * N},
                T(1), A.data(), Bv.data(), T(0), C.data());
    }
    // Gradients are written by their first GEMM (beta 0 into an unfilled buffer) and
    // accumulated by any later one: every GEMM below covers its whole gradient.
    return detail::make_result<T, B>(op_kind::matmul, std::move(C), {a, b}, [=](Node<T, B>& nd) {
        const T* dC = nd.grad.data();
        if (const auto gA = detail::parent_grad_out(nd, 0); T* dA = gA.data) {
            // dA = dC op(B)^T (or its transpose when A was transposed)
            if (a_shared && batch > 1) {
                for (index_t i = 0; i < batch; ++i) {
                    const T* Bi = Bv.data() + (b_shared ? 0 : i * K * N);
                    const T beta = i == 0 ? gA.beta : T(1);
                    if (!trans_a) P::gemm(gemm_args{.trans_b = !trans_b, .m = M, .n = K, .k = N, .lda = N, .ldb = ldb, .ldc = K},
                                          T(1), dC + i * M * N, Bi, beta, dA);
                    else P::gemm(gemm_args{.trans_a = trans_b, .trans_b = true, .m = K, .n = M, .k = N, .lda = ldb, .ldb = N,
                                           .ldc = M}, T(1), Bi, dC + i * M * N, beta, dA);
                }
            } else if (fold) {
                P::gemm(gemm_args{.trans_b = !trans_b, .m = batch * M, .n = K, .k = N, .lda = N, .ldb = ldb, .ldc = K},
                        T(1), dC, Bv.data(), gA.beta, dA);
            } else if (!trans_a) {
                P::gemm(gemm_args{.trans_b = !trans_b, .m = M, .n = K, .k = N, .lda = N, .ldb = ldb, .ldc = K, .batch = batch,
                                  .stride_a = M * N, .stride_b = b_shared ? 0 : K * N, .stride_c = M * K}, T(1), dC,
                        Bv.data(), gA.beta, dA);
            } else {
                P::gemm(gemm_args{.trans_a = trans_b, .trans_b = true, .m = K, .n = M, .k = N, .lda = ldb, .ldb = N, .ldc = M,
                                  .batch = batch, .stride_a = b_shared ? 0 : K * N, .stride_b = M * N, .stride_c = M * K}, T(1),
                        Bv.data(), dC, gA.beta, dA);
            }
        }
        if (const auto gB = detail::parent_grad_out(nd, 1); T* dB = gB.data) {
            // dB = op(A)^T dC (or dC^T op(A) when B was transposed); summed over a shared B's batch
            if (fold) {
                if (!trans_b) P::gemm(gemm_args{.trans_a = true, .m = K, .n = N, .k = batch * M, .lda = lda, .ldb = N, .ldc = N},
                                      T(1), A.data(), dC, gB.beta, dB);
                else P::gemm(gemm_args{.trans_a = true, .m = N, .n = K, .k = batch * M, .lda = N, .ldb = lda, .ldc = K},
                             T(1), dC, A.data(), gB.beta, dB);
            } else if (b_shared && batch > 1) {
                for (index_t i = 0; i < batch; ++i) {
                    const T* Ai = A.data() + (a_shared ? 0 : i * M * K);
                    const T beta = i == 0 ? gB.beta : T(1);
                    if (!trans_b) P::gemm(gemm_args{.trans_a = !trans_a, .m = K, .n = N, .k = M, .lda = lda, .ldb = N, .ldc = N},
                                          T(1), Ai, dC + i * M * N, beta, dB);
                    else P::gemm(gemm_args{.trans_a = true, .trans_b = trans_a, .m = N, .n = K, .k = M, .lda = N, .ldb = lda,
                                           .ldc = K}, T(1), dC + i * M * N, Ai, beta, dB);
                }
            } else if (!trans_b) {
                P::gemm(gemm_args{.trans_a = !trans_a, .m = K, .n = N, .k = M, .lda = lda, .ldb = N, .ldc = N, .batch = batch,
                                  .stride_a = a_shared ? 0 : M * K, .stride_b = M * N, .stride_c = K * N}, T(1), A.data(),
                        dC, gB.beta, dB);
            } else {
                P::gemm(gemm_args{.trans_a = true, .trans_b = trans_a, .m = N, .n = K, .k = M, .lda = N, .ldb = lda, .ldc = K,
                                  .batch = batch, .stride_a = M * N, .stride_b = a_shared ? 0 : M * K, .stride_c = K * N}, T(1), dC,
                        A.data(), gB.beta, dB);
            }
        }
    });
}

// ---------------------------------------------------------------- linear
namespace detail {
/// A linear layer's product y = x W^T (+ b) as its forward sets it up and its backward reads
/// it: the contiguous input and weight, and under bf16 their copies, made once and read by
/// the forward product and by both gradient products (dX reads W, dW reads X).
template <class T, class B>
struct linear_product {
    Tensor<T, B> X, W, b;
    bf16_operand Xb, Wb;
    index_t rows = 0, in = 0, out = 0;

    linear_product(const char* name, const Var<T, B>& x, const Var<T, B>& weight, const Var<T, B>& bias) {
        const Shape& sx = x.shape();
        DEPTHLAB_CHECK(weight.shape().rank() == 2 && sx.rank() >= 1 && sx.back() == weight.shape()[1], shape_error, name, ": input ", sx,
                       " does not fit weight ", weight.shape(), " (expected weight (out, ", (sx.rank() ? sx.back() : 0), "))");
        in = weight.shape()[1];
        out = weight.shape()[0];
        rows = sx.rows();
        if (bias.defined()) {
            DEPTHLAB_CHECK(bias.shape() == Shape{out}, shape_error, name, ": bias ", bias.shape(), " does not fit weight ", weight.shape());
            b = contiguous_value(bias);
        }
        X = contiguous_value(x);
        W = contiguous_value(weight);
        const gemm_args fwd = forward_args();
        // X's copy serves the weight gradient; without one to come (inference, no_grad, a
        // frozen weight) the forward product rounds X itself, row block by row block
        if (grad_enabled() && weight.requires_grad()) Xb = bf16_copy_for<T, B>(fwd, layout_a(fwd), X.data());
        Wb = bf16_copy_for<T, B>(fwd, layout_b(fwd), W.data());
    }
    /// The forward product Y = X W^T, reading the bf16 copies (valid while this object lives).
    [[nodiscard]] gemm_args forward_args() const {
        return {.trans_b = true, .m = rows, .n = out, .k = in, .lda = in, .ldb = in, .ldc = out, .a_bf16 = &Xb, .b_bf16 = &Wb};
    }
    /// dX (rows, in) = dY W, dW (out, in) = dY^T X and db = Σ_rows dY into parents 0, 1 and 2
    /// of nd, each written when it is the first gradient to arrive, else accumulated. dY is
    /// converted to bf16 once for both products; a first bias gradient comes with dW's product
    /// (gemm_bias_grad: on a GPU one cuBLASLt call).
    void backward(Node<T, B>& nd, const T* dY) const {
        using P = primitives<B>;
        const auto gX = parent_grad_out(nd, 0);
        const auto gW = parent_grad_out(nd, 1);
        const auto gb = b.defined() ? parent_grad_out(nd, 2) : grad_out<T, B>{};
        gemm_args dx{.m = rows, .n = in, .k = out, .lda = out, .ldb = in, .ldc = in, .b_bf16 = &Wb};
        gemm_args dw{.trans_a = true, .m = out, .n = in, .k = rows, .lda = out, .ldb = in, .ldc = in, .b_bf16 = &Xb};
        const bf16_operand dYb = gX.data && gW.data ? bf16_copy_for<T, B>(dx, layout_a(dx), dY) : bf16_operand{};  // (read by both)
        dx.a_bf16 = dw.a_bf16 = &dYb;
        if (gX.data) P::gemm(dx, T(1), dY, W.data(), gX.beta, gX.data);
        if (gW.data && gb.data && gb.beta == T(0)) {
            P::gemm_bias_grad(dw, dY, X.data(), gW.beta, gW.data, gb.data);
            return;
        }
        if (gW.data) P::gemm(dw, T(1), dY, X.data(), gW.beta, gW.data);
        if (gb.data) P::sum_rows_acc(rows, out, dY, gb.data, gb.beta != T(0));
    }
};
}  // namespace detail

/// y = x W^T + b.  x: (..., in), W: (out, in) as in PyTorch, b: (out) or undefined.
template <class T, class B>
Var<T, B> linear(const Var<T, B>& x, const Var<T, B>& W, const Var<T, B>& b = {}) {
    using P = primitives<B>;
    detail::linear_product<T, B> lp("linear", x, W, b);
    auto Y = Tensor<T, B>::empty(x.shape().with_back(lp.out));
    // Y = X W^T + b: the bias is the GEMM's epilogue, added as Y is written
    if (b.defined()) P::gemm_bias(lp.forward_args(), lp.X.data(), lp.W.data(), lp.b.data(), Y.data());
    else P::gemm(lp.forward_args(), T(1), lp.X.data(), lp.W.data(), T(0), Y.data());
    std::vector<Var<T, B>> inputs{x, W};
    if (b.defined()) inputs.push_back(b);
    return detail::make_result<T, B>(op_kind::linear, std::move(Y), std::move(inputs),
                                     [lp = std::move(lp)](Node<T, B>& nd) { lp.backward(nd, nd.grad.data()); });
}

/// gelu(x W^T + b) (the tanh form, as gelu()): a feed-forward layer's first half as one op,
/// whose product writes the GELU and keeps its input for backward (on a GPU one cuBLASLt call
/// with the GELU_AUX_BIAS epilogue; on the CPU the same bits as linear then gelu).
template <class T, class B>
Var<T, B> linear_gelu(const Var<T, B>& x, const Var<T, B>& W, const Var<T, B>& b) {
    using P = primitives<B>;
    DEPTHLAB_CHECK(b.defined(), usage_error, "linear_gelu: needs a bias (linear then gelu otherwise)");
    detail::linear_product<T, B> lp("linear_gelu", x, W, b);
    const Shape sy = x.shape().with_back(lp.out);
    auto pre = Tensor<T, B>::empty(sy), Y = Tensor<T, B>::empty(sy);
    P::gemm_bias_gelu(lp.forward_args(), lp.X.data(), lp.W.data(), lp.b.data(), pre.data(), Y.data());
    return detail::make_result<T, B>(op_kind::linear_gelu, std::move(Y), {x, W, b}, [lp = std::move(lp), pre](Node<T, B>& nd) {
        // d pre = gelu'(pre) dY, then the linear layer's gradients from it
        auto dpre = Tensor<T, B>::empty(pre.shape());
        P::gelu_bwd(pre.numel(), pre.data(), nd.grad.data(), dpre.data(), false);
        lp.backward(nd, dpre.data());
    });
}

// ---------------------------------------------------------------- add / mul / bias / scale
namespace detail {
template <class T, class B>
Var<T, B> broadcast_binary(op_kind op, const char* name, const Var<T, B>& a, const Var<T, B>& b) {
    using P = primitives<B>;
    DEPTHLAB_CHECK(is_suffix(a.shape(), b.shape()), shape_error, name, ": shapes ", a.shape(), " and ", b.shape(),
                   " do not broadcast (the second must equal the first or a trailing part of it)");
    const auto A = contiguous_value(a);
    const auto Bv = contiguous_value(b);
    const index_t n = A.numel(), cols = std::max<index_t>(Bv.numel(), 1), rows = Bv.numel() ? n / cols : 0;
    const bool same = a.shape() == b.shape();
    auto Y = Tensor<T, B>::empty(a.shape());
    const bool is_mul = op == op_kind::mul;
    if (is_mul) P::mul_row_vector(rows, cols, A.data(), Bv.data(), Y.data());
    else P::add_row_vector(rows, cols, A.data(), Bv.data(), Y.data());
    return make_result<T, B>(op, std::move(Y), {a, b}, [=](Node<T, B>& nd) {
        // A gradient of a's shape covers its parent whole: the first to arrive is written
        // into an unfilled buffer (beta 0), later ones are added; so are a broadcast b's row sums
        // (a product's accumulate into a zero-filled buffer). An add hands a its own buffer when it can (a
        // residual stream's first gradient: no copy), so b is served first.
        const T* dY = nd.grad.data();
        const auto grad_a = [&] {
            if (!is_mul && pass_grad_through(nd, 0)) return;
            if (const auto gA = parent_grad_out(nd, 0); T* dA = gA.data) {
                if (!is_mul) P::axpby(n, T(1), dY, gA.beta, dA);
                else if (gA.beta == T(0)) P::mul_row_vector(rows, cols, dY, Bv.data(), dA);
                else P::mul_row_vector_acc(rows, cols, dY, Bv.data(), dA);
            }
        };
        if (is_mul) grad_a();
        if (same) {
            if (const auto gB = parent_grad_out(nd, 1); T* dB = gB.data) {
                if (!is_mul) P::axpby(n, T(1), dY, gB.beta, dB);
                else if (gB.beta == T(0)) P::mul(n, dY, A.data(), dB);
                else P::mul_acc(n, dY, A.data(), dB);
            }
        } else if (is_mul) {
            if (T* dB = parent_grad(nd, 1)) P::sum_rows_mul_acc(rows, cols, dY, A.data(), dB);
        } else if (const auto gB = parent_grad_out(nd, 1); gB.data) {
            P::sum_rows_acc(rows, cols, dY, gB.data, gB.beta != T(0));
        }
        if (!is_mul) grad_a();
    });
}
}  // namespace detail

/// a + b, b equal to a's shape or to a trailing part of it (broadcast over the rest).
template <class T, class B>
Var<T, B> add(const Var<T, B>& a, const Var<T, B>& b) {
    return detail::broadcast_binary(op_kind::add, "add", a, b);
}
/// a * b elementwise, with the same broadcasting as add.
template <class T, class B>
Var<T, B> mul(const Var<T, B>& a, const Var<T, B>& b) {
    return detail::broadcast_binary(op_kind::mul, "mul", a, b);
}
/// x + b with b: (C) added to every row of x: (..., C).
template <class T, class B>
Var<T, B> bias(const Var<T, B>& x, const Var<T, B>& b) {
    DEPTHLAB_CHECK(b.shape().rank() == 1 && x.shape().rank() >= 1 && b.shape()[0] == x.shape().back(), shape_error, "bias: bias ",
                   b.shape(), " does not fit input ", x.shape());
    Var<T, B> y = detail::broadcast_binary(op_kind::add, "bias", x, b);
    y.node().op = op_kind::bias;
    return y;
}
/// s * x.
template <class T, class B>
Var<T, B> scale(const Var<T, B>& x, T s) {
    using P = primitives<B>;
    const auto X = detail::contiguous_value(x);
    auto Y = Tensor<T, B>::empty(x.shape());
    P::axpby(X.numel(), s, X.data(), T(0), Y.data());
    const index_t n = X.numel();
    return detail::make_result<T, B>(op_kind::scale, std::move(Y), {x}, [=](Node<T, B>& nd) {
        if (const auto gX = detail::parent_grad_out(nd, 0); T* dX = gX.data) P::axpby(n, s, nd.grad.data(), gX.beta, dX);
    });
}

// ---------------------------------------------------------------- activations
namespace detail {
/// Unary activation: `fwd(n, x, y)`; `bwd(n, saved, dy, dx, accumulate)` where saved is the input
/// (from_output = false) or the output (true, cheaper for tanh and sigmoid).
template <class T, class B, class Fwd, class Bwd>
Var<T, B> activation(op_kind op, const Var<T, B>& x, bool from_output, Fwd fwd, Bwd bwd) {
    const auto X = contiguous_value(x);
    auto Y = Tensor<T, B>::empty(x.shape());
    fwd(X.numel(), X.data(), Y.data());
    const index_t n = X.numel();
    const Tensor<T, B> saved = from_output ? Y : X;
    return make_result<T, B>(op, std::move(Y), {x}, [=](Node<T, B>& nd) {
        // (the first gradient to reach x is written, later ones added: no zero-fill pass)
        if (const auto gX = parent_grad_out(nd, 0); gX.data) bwd(n, saved.data(), nd.grad.data(), gX.data, gX.beta != T(0));
    });
}
}  // namespace detail

/// GELU, tanh approximation (as BERT/ALBERT and PyTorch's approximate='tanh').
template <class T, class B>
Var<T, B> gelu(const Var<T, B>& x) {
    using P = primitives<B>;
    return detail::activation(op_kind::gelu, x, false, [](index_t n, const T* a, T* y) { P::gelu_fwd(n, a, y); },
                              [](index_t n, const T* s, const T* dy, T* dx, bool acc) { P::gelu_bwd(n, s, dy, dx, acc); });
}
/// GELU, exact form 0.5 x (1 + erf(x / sqrt(2))) (PyTorch's default, HF BERT's "gelu").
template <class T, class B>
Var<T, B> gelu_erf(const Var<T, B>& x) {
    using P = primitives<B>;
    return detail::activation(op_kind::gelu_erf, x, false, [](index_t n, const T* a, T* y) { P::gelu_erf_fwd(n, a, y); },
                              [](index_t n, const T* s, const T* dy, T* dx, bool acc) { P::gelu_erf_bwd(n, s, dy, dx, acc); });
}
template <class T, class B>
Var<T, B> relu(const Var<T, B>& x) {
    using P = primitives<B>;
    return detail::activation(op_kind::relu, x, false, [](index_t n, const T* a, T* y) { P::relu_fwd(n, a, y); },
                              [](index_t n, const T* s, const T* dy, T* dx, bool acc) { P::relu_bwd(n, s, dy, dx, acc); });
}
template <class T, class B>
Var<T, B> tanh(const Var<T, B>& x) {
    using P = primitives<B>;
    return detail::activation(op_kind::tanh, x, true, [](index_t n, const T* a, T* y) { P::tanh_fwd(n, a, y); },
                              [](index_t n, const T* s, const T* dy, T* dx, bool acc) { P::tanh_bwd(n, s, dy, dx, acc); });
}
template <class T, class B>
Var<T, B> sigmoid(const Var<T, B>& x) {
    using P = primitives<B>;
    return detail::activation(op_kind::sigmoid, x, true, [](index_t n, const T* a, T* y) { P::sigmoid_fwd(n, a, y); },
                              [](index_t n, const T* s, const T* dy, T* dx, bool acc) { P::sigmoid_bwd(n, s, dy, dx, acc); });
}

/// log(sigmoid(x)), stable for every x (log(1 − sigmoid(x)) = log_sigmoid(−x)): PonderNet's
/// halting log-probabilities.
template <class T, class B>
Var<T, B> log_sigmoid(const Var<T, B>& x) {
    using P = primitives<B>;
    return detail::activation(op_kind::log_sigmoid, x, false, [](index_t n, const T* a, T* y) { P::log_sigmoid_fwd(n, a, y); },
                              [](index_t n, const T* s, const T* dy, T* dx, bool acc) { P::log_sigmoid_bwd(n, s, dy, dx, acc); });
}

}  // namespace depthlab
