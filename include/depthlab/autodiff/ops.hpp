#pragma once
// Differentiable ops. Each op checks its operands (throwing an error that names the op and
// the shapes), computes its value with primitives<B>, and registers a backward function
// written right below the forward. Backward functions accumulate into parents (`+=`).
// All op results are contiguous.
//
// Device-agnostic: ops reach memory only through primitives<B> and memory<B>. Index
// arguments (ids, targets, rows) are device tensors Tensor<std::int64_t, B>; the overloads
// taking a host std::span check the values on the host and upload them (an upload, not a
// synchronisation). Losses are device scalars: on a host backend a non-finite loss throws
// at once; on a device it is left to the caller, who reads the loss (one synchronisation)
// when it wants it, e.g. with checked_item().
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "depthlab/autodiff/variable.hpp"
#include "depthlab/backend/backend.hpp"
#include "depthlab/core/rng.hpp"

namespace depthlab {

namespace detail {
template <class T, class B>
Tensor<T, B> contiguous_value(const Var<T, B>& v) {
    return v.value().contiguous();
}
/// b broadcasts against a when it equals a's shape or a trailing part of it.
inline bool is_suffix(const Shape& a, const Shape& b) {
    if (b.rank() > a.rank()) return false;
    for (int i = 1; i <= b.rank(); ++i)
        if (a[a.rank() - i] != b[b.rank() - i]) return false;
    return true;
}
/// Throws unless every value in ids lies in [0, n).
inline void check_ids(const char* op, std::span<const std::int64_t> ids, index_t n, const char* what = "id") {
    for (std::size_t i = 0; i < ids.size(); ++i)
        DEPTHLAB_CHECK(ids[i] >= 0 && ids[i] < n, index_error, op, ": ", what, " ", ids[i], " at position ", i,
                       " out of range [0, ", n, ")");
}
/// Host ids as a device tensor (n,).
template <class B>
Tensor<std::int64_t, B> upload_ids(std::span<const std::int64_t> ids) {
    return Tensor<std::int64_t, B>::from({static_cast<index_t>(ids.size())}, ids);
}
/// Checks a 1-D id tensor's shape, and its values where they can be read without a copy
/// (host backends); on a device, ids come from the library (valid by construction) or
/// through the host overloads, which check before the upload, and the kernels guard
/// against out-of-range values (NaN rows, skipped rows) rather than touch foreign memory.
template <class B>
void check_id_tensor(const char* op, const Tensor<std::int64_t, B>& ids, index_t n, const char* what = "id") {
    DEPTHLAB_CHECK(ids.defined() && ids.rank() == 1 && ids.is_contiguous(), shape_error, op, ": ", what,
                   "s must be a contiguous 1-D tensor, got shape ", ids.shape());
    if constexpr (B::host_accessible) check_ids(op, std::span<const std::int64_t>(ids.data(), static_cast<std::size_t>(ids.numel())), n, what);
}
/// Host targets against logits s: one per row, each ignore or in [0, V).
inline void check_targets(const char* op, const Shape& s, std::span<const std::int64_t> t, std::int64_t ignore) {
    DEPTHLAB_CHECK(s.rank() >= 1 && static_cast<index_t>(t.size()) == s.rows(), shape_error, op, ": ", t.size(),
                   " targets for logits ", s, " (expected one per row: ", s.rows(), ")");
    for (std::size_t i = 0; i < t.size(); ++i)
        DEPTHLAB_CHECK(t[i] == ignore || (t[i] >= 0 && t[i] < s.back()), index_error, op, ": target ", t[i], " at row ", i,
                       " out of range [0, ", s.back(), ") for logits ", s);
}
/// Throws numeric_error when a host backend's scalar loss is not finite (a device defers it).
template <class T, class B>
void check_finite_loss(const char* op, const Tensor<T, B>& loss, const Shape& input) {
    if constexpr (B::host_accessible) {
        const T v = *loss.data();
        DEPTHLAB_CHECK(std::isfinite(v), numeric_error, op, ": non-finite loss ", v, " (NaN or inf in the input of shape ", input, "?)");
    }
}
/// Maps each row of scores `sx` (..., cols) to its row of an additive mask whose leading
/// extents equal the scores' or are 1; M receives the contiguous mask (undefined if none).
template <class T, class B>
row_broadcast mask_rows(const char* op, const Shape& sx, const Tensor<T, B>& mask, Tensor<T, B>& M) {
    row_broadcast map;
    if (!mask.defined()) return map;
    const Shape& sm = mask.shape();
    const index_t cols = sx.back();
    bool ok = sm.rank() >= 1 && sm.rank() <= sx.rank() && sm.back() == cols;
    M = mask.contiguous();
    map.rank = sx.rank() - 1;
    const int pad = sx.rank() - sm.rank();
    index_t stride = cols;
    for (int k = sx.rank() - 2; ok && k >= 0; --k) {
        const index_t md = k - pad >= 0 ? sm[k - pad] : 1;
        ok = md == 1 || md == sx[k];
        map.dims[k] = sx[k];
        map.strides[k] = md == 1 ? 0 : stride;
        stride *= md;
    }
    DEPTHLAB_CHECK(ok, shape_error, op, ": mask ", sm, " does not broadcast to scores ", sx);
    return map;
}
}  // namespace detail

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
    const index_t batch_a = sa.numel() / std::max<index_t>(M * K, 1), batch_b = sb.numel() / std::max<index_t>(K * N, 1);
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
    const index_t batch = std::max(batch_a, batch_b);
    const index_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
    const auto A = detail::contiguous_value(a);
    const auto Bv = detail::contiguous_value(b);
    auto C = Tensor<T, B>::empty(out);
    // A shared B with a non-transposed batched A is one big GEMM over batch*M rows.
    const bool fold = b_shared && !trans_a;
    if (fold) {
        P::gemm(gemm_args{false, trans_b, batch * M, N, K, lda, ldb, N}, T(1), A.data(), Bv.data(), T(0), C.data());
    } else {
        P::gemm(gemm_args{trans_a, trans_b, M, N, K, lda, ldb, N, batch, a_shared ? 0 : M * K, b_shared ? 0 : K * N, M * N},
                T(1), A.data(), Bv.data(), T(0), C.data());
    }
    return detail::make_result<T, B>(op_kind::matmul, std::move(C), {a, b}, [=](Node<T, B>& nd) {
        const T* dC = nd.grad.data();
        if (T* dA = detail::parent_grad(nd, 0)) {
            // dA = dC op(B)^T (or its transpose when A was transposed)
            if (a_shared && batch > 1) {
                for (index_t i = 0; i < batch; ++i) {
                    const T* Bi = Bv.data() + (b_shared ? 0 : i * K * N);
                    if (!trans_a) P::gemm(gemm_args{false, !trans_b, M, K, N, N, ldb, K}, T(1), dC + i * M * N, Bi, T(1), dA);
                    else P::gemm(gemm_args{trans_b, true, K, M, N, ldb, N, M}, T(1), Bi, dC + i * M * N, T(1), dA);
                }
            } else if (fold) {
                P::gemm(gemm_args{false, !trans_b, batch * M, K, N, N, ldb, K}, T(1), dC, Bv.data(), T(1), dA);
            } else if (!trans_a) {
                P::gemm(gemm_args{false, !trans_b, M, K, N, N, ldb, K, batch, M * N, b_shared ? 0 : K * N, M * K}, T(1), dC,
                        Bv.data(), T(1), dA);
            } else {
                P::gemm(gemm_args{trans_b, true, K, M, N, ldb, N, M, batch, b_shared ? 0 : K * N, M * N, M * K}, T(1),
                        Bv.data(), dC, T(1), dA);
            }
        }
        if (T* dB = detail::parent_grad(nd, 1)) {
            // dB = op(A)^T dC (or dC^T op(A) when B was transposed); summed over a shared B's batch
            if (fold) {
                if (!trans_b) P::gemm(gemm_args{true, false, K, N, batch * M, lda, N, N}, T(1), A.data(), dC, T(1), dB);
                else P::gemm(gemm_args{true, false, N, K, batch * M, N, lda, K}, T(1), dC, A.data(), T(1), dB);
            } else if (b_shared && batch > 1) {
                for (index_t i = 0; i < batch; ++i) {
                    const T* Ai = A.data() + (a_shared ? 0 : i * M * K);
                    if (!trans_b) P::gemm(gemm_args{!trans_a, false, K, N, M, lda, N, N}, T(1), Ai, dC + i * M * N, T(1), dB);
                    else P::gemm(gemm_args{true, trans_a, N, K, M, N, lda, K}, T(1), dC + i * M * N, Ai, T(1), dB);
                }
            } else if (!trans_b) {
                P::gemm(gemm_args{!trans_a, false, K, N, M, lda, N, N, batch, a_shared ? 0 : M * K, M * N, K * N}, T(1), A.data(),
                        dC, T(1), dB);
            } else {
                P::gemm(gemm_args{true, trans_a, N, K, M, N, lda, K, batch, M * N, a_shared ? 0 : M * K, K * N}, T(1), dC,
                        A.data(), T(1), dB);
            }
        }
    });
}

// ---------------------------------------------------------------- linear
/// y = x W^T + b.  x: (..., in), W: (out, in) as in PyTorch, b: (out) or undefined.
template <class T, class B>
Var<T, B> linear(const Var<T, B>& x, const Var<T, B>& W, const Var<T, B>& b = {}) {
    using P = primitives<B>;
    const Shape& sx = x.shape();
    DEPTHLAB_CHECK(W.shape().rank() == 2 && sx.rank() >= 1 && sx.back() == W.shape()[1], shape_error, "linear: input ", sx,
                   " does not fit weight ", W.shape(), " (expected weight (out, ", (sx.rank() ? sx.back() : 0), "))");
    const index_t in = W.shape()[1], out = W.shape()[0], rows = sx.rows();
    if (b.defined())
        DEPTHLAB_CHECK(b.shape() == Shape{out}, shape_error, "linear: bias ", b.shape(), " does not fit weight ", W.shape());
    const auto X = detail::contiguous_value(x);
    const auto Wv = detail::contiguous_value(W);
    auto Y = Tensor<T, B>::empty(sx.with_back(out));
    if (b.defined()) {
        // Y = b broadcast, then Y += X W^T: the bias add rides on the GEMM's beta.
        const auto bv = detail::contiguous_value(b);
        P::broadcast_rows(rows, out, bv.data(), Y.data());
        P::gemm(gemm_args{false, true, rows, out, in, in, in, out}, T(1), X.data(), Wv.data(), T(1), Y.data());
    } else {
        P::gemm(gemm_args{false, true, rows, out, in, in, in, out}, T(1), X.data(), Wv.data(), T(0), Y.data());
    }
    std::vector<Var<T, B>> inputs{x, W};
    if (b.defined()) inputs.push_back(b);
    const bool has_bias = b.defined();
    return detail::make_result<T, B>(op_kind::linear, std::move(Y), std::move(inputs), [=](Node<T, B>& nd) {
        const T* dY = nd.grad.data();
        if (T* dX = detail::parent_grad(nd, 0))
            P::gemm(gemm_args{false, false, rows, in, out, out, in, in}, T(1), dY, Wv.data(), T(1), dX);
        if (T* dW = detail::parent_grad(nd, 1))
            P::gemm(gemm_args{true, false, out, in, rows, out, in, in}, T(1), dY, X.data(), T(1), dW);
        if (has_bias)
            if (T* db = detail::parent_grad(nd, 2)) P::sum_rows_acc(rows, out, dY, db);
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
        const T* dY = nd.grad.data();
        if (T* dA = parent_grad(nd, 0)) {
            if (is_mul) P::mul_row_vector_acc(rows, cols, dY, Bv.data(), dA);
            else P::axpby(n, T(1), dY, T(1), dA);
        }
        if (T* dB = parent_grad(nd, 1)) {
            if (is_mul) {
                if (same) P::mul_acc(n, dY, A.data(), dB);
                else P::sum_rows_mul_acc(rows, cols, dY, A.data(), dB);
            } else {
                if (same) P::axpby(n, T(1), dY, T(1), dB);
                else P::sum_rows_acc(rows, cols, dY, dB);
            }
        }
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
        if (T* dX = detail::parent_grad(nd, 0)) P::axpby(n, s, nd.grad.data(), T(1), dX);
    });
}

// ---------------------------------------------------------------- activations
namespace detail {
/// Unary activation: `fwd(n, x, y)`; `bwd(n, saved, dy, dx)` where saved is the input
/// (from_output = false) or the output (true, cheaper for tanh and sigmoid).
template <class T, class B, class Fwd, class Bwd>
Var<T, B> activation(op_kind op, const Var<T, B>& x, bool from_output, Fwd fwd, Bwd bwd) {
    const auto X = contiguous_value(x);
    auto Y = Tensor<T, B>::empty(x.shape());
    fwd(X.numel(), X.data(), Y.data());
    const index_t n = X.numel();
    const Tensor<T, B> saved = from_output ? Y : X;
    return make_result<T, B>(op, std::move(Y), {x}, [=](Node<T, B>& nd) {
        if (T* dX = parent_grad(nd, 0)) bwd(n, saved.data(), nd.grad.data(), dX);
    });
}
}  // namespace detail

/// GELU, tanh approximation (as BERT/ALBERT and PyTorch's approximate='tanh').
template <class T, class B>
Var<T, B> gelu(const Var<T, B>& x) {
    using P = primitives<B>;
    return detail::activation(op_kind::gelu, x, false, [](index_t n, const T* a, T* y) { P::gelu_fwd(n, a, y); },
                              [](index_t n, const T* s, const T* dy, T* dx) { P::gelu_bwd(n, s, dy, dx); });
}
/// GELU, exact form 0.5 x (1 + erf(x / sqrt(2))) (PyTorch's default, HF BERT's "gelu").
template <class T, class B>
Var<T, B> gelu_erf(const Var<T, B>& x) {
    using P = primitives<B>;
    return detail::activation(op_kind::gelu_erf, x, false, [](index_t n, const T* a, T* y) { P::gelu_erf_fwd(n, a, y); },
                              [](index_t n, const T* s, const T* dy, T* dx) { P::gelu_erf_bwd(n, s, dy, dx); });
}
template <class T, class B>
Var<T, B> relu(const Var<T, B>& x) {
    using P = primitives<B>;
    return detail::activation(op_kind::relu, x, false, [](index_t n, const T* a, T* y) { P::relu_fwd(n, a, y); },
                              [](index_t n, const T* s, const T* dy, T* dx) { P::relu_bwd(n, s, dy, dx); });
}
template <class T, class B>
Var<T, B> tanh(const Var<T, B>& x) {
    using P = primitives<B>;
    return detail::activation(op_kind::tanh, x, true, [](index_t n, const T* a, T* y) { P::tanh_fwd(n, a, y); },
                              [](index_t n, const T* s, const T* dy, T* dx) { P::tanh_bwd(n, s, dy, dx); });
}
template <class T, class B>
Var<T, B> sigmoid(const Var<T, B>& x) {
    using P = primitives<B>;
    return detail::activation(op_kind::sigmoid, x, true, [](index_t n, const T* a, T* y) { P::sigmoid_fwd(n, a, y); },
                              [](index_t n, const T* s, const T* dy, T* dx) { P::sigmoid_bwd(n, s, dy, dx); });
}

/// log(sigmoid(x)), stable for every x (log(1 − sigmoid(x)) = log_sigmoid(−x)): PonderNet's
/// halting log-probabilities.
template <class T, class B>
Var<T, B> log_sigmoid(const Var<T, B>& x) {
    using P = primitives<B>;
    return detail::activation(op_kind::log_sigmoid, x, false, [](index_t n, const T* a, T* y) { P::log_sigmoid_fwd(n, a, y); },
                              [](index_t n, const T* s, const T* dy, T* dx) { P::log_sigmoid_bwd(n, s, dy, dx); });
}

// ---------------------------------------------------------------- softmax family
/// softmax(scale * x + mask) over the last axis. mask (optional, additive, not
/// differentiated) has x's last extent and leading extents equal to x's or 1, e.g. a
/// padding mask (B,1,1,Tk) or a causal mask (Tq,Tk) for scores (B,H,Tq,Tk).
template <class T, class B>
Var<T, B> softmax(const Var<T, B>& x, T scale = T(1), const Tensor<T, B>& mask = {}) {
    using P = primitives<B>;
    const Shape& sx = x.shape();
    DEPTHLAB_CHECK(sx.rank() >= 1, shape_error, "softmax: input must have rank >= 1, got ", sx);
    const index_t cols = sx.back(), rows = sx.rows();
    Tensor<T, B> M;
    const row_broadcast map = detail::mask_rows("softmax", sx, mask, M);
    const auto X = detail::contiguous_value(x);
    auto Y = Tensor<T, B>::empty(sx);
    P::softmax_fwd(rows, cols, X.data(), scale, M.defined() ? M.data() : nullptr, map, Y.data());
    const Tensor<T, B> Ys = Y;
    return detail::make_result<T, B>(op_kind::softmax, std::move(Y), {x}, [=](Node<T, B>& nd) {
        if (T* dX = detail::parent_grad(nd, 0)) P::softmax_bwd(rows, cols, Ys.data(), nd.grad.data(), scale, dX);
    });
}
/// log(softmax(x)) over the last axis.
template <class T, class B>
Var<T, B> log_softmax(const Var<T, B>& x) {
    using P = primitives<B>;
    DEPTHLAB_CHECK(x.shape().rank() >= 1, shape_error, "log_softmax: input must have rank >= 1, got ", x.shape());
    const index_t cols = x.shape().back(), rows = x.shape().rows();
    const auto X = detail::contiguous_value(x);
    auto Y = Tensor<T, B>::empty(x.shape());
    P::log_softmax_fwd(rows, cols, X.data(), Y.data());
    const Tensor<T, B> Ys = Y;
    return detail::make_result<T, B>(op_kind::log_softmax, std::move(Y), {x}, [=](Node<T, B>& nd) {
        if (T* dX = detail::parent_grad(nd, 0)) P::log_softmax_bwd(rows, cols, Ys.data(), nd.grad.data(), dX);
    });
}

namespace detail {
/// Cross-entropy of every row (the forward and backward shared by both reductions); rows whose
/// target is ignore_index get 0. Returns their mean over the counted rows (mean = true) or the
/// per-row losses.
template <class T, class B>
Var<T, B> cross_entropy_impl(const char* name, const Var<T, B>& logits, const Tensor<std::int64_t, B>& targets,
                             std::int64_t ignore_index, T label_smoothing, bool mean) {
    using P = primitives<B>;
    const Shape& s = logits.shape();
    DEPTHLAB_CHECK(s.rank() >= 1 && targets.defined() && targets.rank() == 1 && targets.numel() == s.rows() &&
                       targets.is_contiguous(),
                   shape_error, name, ": targets ", targets.shape(), " for logits ", s, " (expected one per row: (", s.rows(), ",))");
    DEPTHLAB_CHECK(label_smoothing >= T(0) && label_smoothing <= T(1), usage_error, name, ": label_smoothing ", label_smoothing,
                   " outside [0, 1]");
    const index_t rows = s.rows(), V = s.back();
    if constexpr (B::host_accessible) {
        const std::int64_t* t = targets.data();
        for (index_t i = 0; i < rows; ++i)
            DEPTHLAB_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < V), index_error, name, ": target ", t[i], " at row ", i,
                           " out of range [0, ", V, ") for logits ", s);
    }
    const Tensor<std::int64_t, B> tgt = targets;
    const auto X = contiguous_value(logits);
    auto loss_rows = Tensor<T, B>::empty({rows});
    auto lse = Tensor<T, B>::empty({rows});
    P::cross_entropy_fwd(rows, V, X.data(), tgt.data(), ignore_index, label_smoothing, loss_rows.data(), lse.data());
    // the mean and 1 / (rows counted), both on the device
    auto reduced = Tensor<T, B>::empty({2});
    P::cross_entropy_mean(rows, loss_rows.data(), tgt.data(), ignore_index, reduced.data(), reduced.data() + 1);
    check_finite_loss(name, reduced.slice(0, 0, 1), s);
    auto backward = [=](Node<T, B>& nd) {
        if (T* dX = parent_grad(nd, 0)) {
            // per-row upstream gradient: the mean's dL/dloss_i = g / counted, or the rows' own
            const auto g = nd.grad.contiguous();
            P::cross_entropy_bwd(rows, V, X.data(), tgt.data(), ignore_index, label_smoothing, lse.data(), g.data(), mean ? 0 : 1,
                                 mean ? reduced.data() + 1 : nullptr, dX);
        }
    };
    if (mean) return make_result<T, B>(op_kind::cross_entropy, reduced.slice(0, 0, 1).reshape(Shape{}), {logits}, backward);
    return make_result<T, B>(op_kind::cross_entropy, std::move(loss_rows), {logits}, backward);
}
}  // namespace detail

/// Mean cross-entropy of logits (..., V) against integer targets (one per row), as
/// PyTorch's F.cross_entropy: rows whose target is ignore_index are skipped (and not
/// counted in the mean); label_smoothing mixes in the uniform distribution. When every
/// row is ignored the loss is 0 with zero gradient. Throws on out-of-range targets and
/// (on host backends) on a non-finite loss.
template <class T, class B>
Var<T, B> cross_entropy(const Var<T, B>& logits, const Tensor<std::int64_t, B>& targets, std::int64_t ignore_index = -100,
                        T label_smoothing = T(0)) {
    return detail::cross_entropy_impl("cross_entropy", logits, targets, ignore_index, label_smoothing, true);
}
template <class T, class B>
Var<T, B> cross_entropy(const Var<T, B>& logits, std::span<const std::int64_t> targets, std::int64_t ignore_index = -100,
                        T label_smoothing = T(0)) {
    detail::check_targets("cross_entropy", logits.shape(), targets, ignore_index);
    return cross_entropy(logits, detail::upload_ids<B>(targets), ignore_index, label_smoothing);
}
/// The cross-entropy of every row, shape (rows,) (PyTorch's reduction='none'; ignored rows
/// are 0): for losses weighted per row, e.g. PonderNet's expectation over halting steps.
template <class T, class B>
Var<T, B> cross_entropy_rows(const Var<T, B>& logits, const Tensor<std::int64_t, B>& targets, std::int64_t ignore_index = -100,
                             T label_smoothing = T(0)) {
    return detail::cross_entropy_impl("cross_entropy_rows", logits, targets, ignore_index, label_smoothing, false);
}
template <class T, class B>
Var<T, B> cross_entropy_rows(const Var<T, B>& logits, std::span<const std::int64_t> targets, std::int64_t ignore_index = -100,
                             T label_smoothing = T(0)) {
    detail::check_targets("cross_entropy_rows", logits.shape(), targets, ignore_index);
    return cross_entropy_rows(logits, detail::upload_ids<B>(targets), ignore_index, label_smoothing);
}

// ---------------------------------------------------------------- layer norm
/// LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta.
template <class T, class B>
Var<T, B> layer_norm(const Var<T, B>& x, const Var<T, B>& gamma, const Var<T, B>& beta, T eps = T(1e-5)) {
    using P = primitives<B>;
    const Shape& sx = x.shape();
    DEPTHLAB_CHECK(sx.rank() >= 1 && gamma.shape() == Shape{sx.back()} && beta.shape() == Shape{sx.back()}, shape_error,
                   "layer_norm: input ", sx, ", gamma ", gamma.shape(), ", beta ", beta.shape(), " (expected both (",
                   (sx.rank() ? sx.back() : 0), ",))");
    const index_t cols = sx.back(), rows = sx.rows();
    const auto X = detail::contiguous_value(x);
    const auto G = detail::contiguous_value(gamma);
    const auto Bt = detail::contiguous_value(beta);
    auto Y = Tensor<T, B>::empty(sx);
    auto mean = Tensor<T, B>::empty({rows});
    auto rstd = Tensor<T, B>::empty({rows});
    P::layernorm_fwd(rows, cols, X.data(), G.data(), Bt.data(), eps, Y.data(), mean.data(), rstd.data());
    return detail::make_result<T, B>(op_kind::layer_norm, std::move(Y), {x, gamma, beta}, [=](Node<T, B>& nd) {
        T* dX = detail::parent_grad(nd, 0);
        T* dG = detail::parent_grad(nd, 1);
        T* dB = detail::parent_grad(nd, 2);
        Tensor<T, B> scratch;  // receives the gradient of a frozen gamma or beta
        if ((dG == nullptr) != (dB == nullptr)) {
            scratch = Tensor<T, B>::zeros({cols});
            (dG ? dB : dG) = scratch.data();
        }
        P::layernorm_bwd(rows, cols, X.data(), nd.grad.data(), G.data(), mean.data(), rstd.data(), dX, dG, dB);
    });
}

// ---------------------------------------------------------------- dropout
/// Inverted dropout: zero each element with probability p, scale the rest by 1/(1-p).
/// Identity when !training or p == 0. The mask comes from `gen` (reproducible).
template <class T, class B>
Var<T, B> dropout(const Var<T, B>& x, T p, Generator& gen, bool training = true) {
    using P = primitives<B>;
    DEPTHLAB_CHECK(p >= T(0) && p < T(1), usage_error, "dropout: probability ", p, " outside [0, 1)");
    if (!training || p == T(0)) return x;
    const index_t n = x.value().numel();
    auto mask = Tensor<T, B>::empty(x.shape());
    P::dropout_mask(n, p, gen, gen.reserve(static_cast<std::uint64_t>(n)), mask.data());
    const auto X = detail::contiguous_value(x);
    auto Y = Tensor<T, B>::empty(x.shape());
    P::mul(n, X.data(), mask.data(), Y.data());
    return detail::make_result<T, B>(op_kind::dropout, std::move(Y), {x}, [=](Node<T, B>& nd) {
        if (T* dX = detail::parent_grad(nd, 0)) P::mul_acc(n, nd.grad.data(), mask.data(), dX);
    });
}

// ---------------------------------------------------------------- rows by index
/// out[i] = x[idx[i]] along axis 0.  x: (N, ...), idx: (n,) on the device, result: (n, ...).
template <class T, class B>
Var<T, B> gather_rows(const Var<T, B>& x, const Tensor<std::int64_t, B>& idx, op_kind op = op_kind::gather_rows) {
    using P = primitives<B>;
    const Shape& sx = x.shape();
    const char* name = op_name(op);
    DEPTHLAB_CHECK(sx.rank() >= 1, shape_error, name, ": input must have rank >= 1, got ", sx);
    detail::check_id_tensor(name, idx, sx[0], op == op_kind::embedding ? "id" : "index");
    const index_t n = idx.numel(), cols = sx.numel() / std::max<index_t>(sx[0], 1), limit = sx[0];
    Shape so = sx;
    so[0] = n;
    const Tensor<std::int64_t, B> ids = idx;
    const auto X = detail::contiguous_value(x);
    auto Y = Tensor<T, B>::empty(so);
    P::gather_rows(n, cols, X.data(), limit, ids.data(), Y.data());
    return detail::make_result<T, B>(op, std::move(Y), {x}, [=](Node<T, B>& nd) {
        if (T* dX = detail::parent_grad(nd, 0)) P::scatter_add_rows(n, cols, nd.grad.data(), limit, ids.data(), dX);
    });
}
/// The same with host indices (checked here, then uploaded).
template <class T, class B>
Var<T, B> gather_rows(const Var<T, B>& x, std::span<const std::int64_t> idx, op_kind op = op_kind::gather_rows) {
    DEPTHLAB_CHECK(x.shape().rank() >= 1, shape_error, op_name(op), ": input must have rank >= 1, got ", x.shape());
    detail::check_ids(op_name(op), idx, x.shape()[0], op == op_kind::embedding ? "id" : "index");
    return gather_rows(x, detail::upload_ids<B>(idx), op);
}
/// out = zeros(rows, ...); out[idx[i]] += x[i].  x: (n, ...), idx: (n,), result: (rows, ...).
template <class T, class B>
Var<T, B> scatter_rows(const Var<T, B>& x, const Tensor<std::int64_t, B>& idx, index_t rows) {
    using P = primitives<B>;
    const Shape& sx = x.shape();
    DEPTHLAB_CHECK(sx.rank() >= 1 && idx.defined() && sx[0] == idx.numel(), shape_error, "scatter_rows: indices ", idx.shape(),
                   " for input ", sx);
    detail::check_id_tensor("scatter_rows", idx, rows, "index");
    const index_t n = sx[0], cols = sx.numel() / std::max<index_t>(n, 1);
    Shape so = sx;
    so[0] = rows;
    const Tensor<std::int64_t, B> ids = idx;
    const auto X = detail::contiguous_value(x);
    auto Y = Tensor<T, B>::zeros(so);
    P::scatter_add_rows(n, cols, X.data(), rows, ids.data(), Y.data());
    return detail::make_result<T, B>(op_kind::scatter_rows, std::move(Y), {x}, [=](Node<T, B>& nd) {
        if (T* dX = detail::parent_grad(nd, 0)) P::gather_rows(n, cols, nd.grad.data(), rows, ids.data(), dX, /*accumulate=*/true);
    });
}
template <class T, class B>
Var<T, B> scatter_rows(const Var<T, B>& x, std::span<const std::int64_t> idx, index_t rows) {
    DEPTHLAB_CHECK(x.shape().rank() >= 1 && x.shape()[0] == static_cast<index_t>(idx.size()), shape_error, "scatter_rows: ",
                   idx.size(), " indices for input ", x.shape());
    detail::check_ids("scatter_rows", idx, rows, "index");
    return scatter_rows(x, detail::upload_ids<B>(idx), rows);
}

namespace detail {
/// Throws unless the host indices are distinct (they are all in [0, n)).
inline void check_distinct(const char* op, std::span<const std::int64_t> idx, index_t n) {
    std::vector<char> seen(static_cast<std::size_t>(n), 0);
    for (std::size_t i = 0; i < idx.size(); ++i) {
        DEPTHLAB_CHECK(!seen[static_cast<std::size_t>(idx[i])], index_error, op, ": index ", idx[i], " repeated (position ", i, ")");
        seen[static_cast<std::size_t>(idx[i])] = 1;
    }
}
}  // namespace detail

/// y = copy of base with rows idx[i] replaced by rows[i] (idx without repeats).
/// base: (N, ...), idx: (n,) on the device, rows: (n, ...). Gradients: base gets dy outside
/// the replaced rows, rows get dy of their rows. (ACT: only the running tokens' states change.)
template <class T, class B>
Var<T, B> row_update(const Var<T, B>& base, const Tensor<std::int64_t, B>& idx, const Var<T, B>& rows) {
    using P = primitives<B>;
    const Shape& sb = base.shape();
    const Shape& sr = rows.shape();
    DEPTHLAB_CHECK(sb.rank() >= 1 && sr.rank() == sb.rank() && idx.defined() && sr[0] == idx.numel() &&
                       Shape(sb.begin() + 1, sb.end()) == Shape(sr.begin() + 1, sr.end()),
                   shape_error, "row_update: base ", sb, ", indices ", idx.shape(), ", rows ", sr);
    detail::check_id_tensor("row_update", idx, sb[0], "index");
    if constexpr (B::host_accessible)
        detail::check_distinct("row_update", std::span<const std::int64_t>(idx.data(), static_cast<std::size_t>(idx.numel())), sb[0]);
    const index_t n = sr[0], cols = sb.numel() / std::max<index_t>(sb[0], 1), limit = sb[0];
    const Tensor<std::int64_t, B> ids = idx;
    auto Y = base.value().contiguous().clone();
    const auto R = detail::contiguous_value(rows);
    P::scatter_rows_set(n, cols, R.data(), limit, ids.data(), Y.data());
    return detail::make_result<T, B>(op_kind::row_update, std::move(Y), {base, rows}, [=](Node<T, B>& nd) {
        const T* dY = nd.grad.data();
        if (T* dR = detail::parent_grad(nd, 1)) P::gather_rows(n, cols, dY, limit, ids.data(), dR, /*accumulate=*/true);
        Node<T, B>& pb = *nd.parents[0];
        if (!pb.requires_grad) return;
        if (!pb.grad.defined() && !nd.retain_grad) {
            // the base's first gradient: take over this node's buffer (freed after this call
            // anyway) and clear the replaced rows, instead of zero-filling a new buffer and
            // adding to it — chains of updates (ACT's keys/values) then cost no full passes
            pb.grad = nd.grad;
            P::rows_axpy(n, cols, T(0), static_cast<const T*>(nullptr), limit, ids.data(), pb.grad.data());
            return;
        }
        T* dB = pb.grad_buffer().data();
        // every row passes through, then the replaced rows are taken back out (one pass, no copy)
        P::axpby(nd.grad.numel(), T(1), dY, T(1), dB);
        P::rows_axpy(n, cols, T(-1), dY, limit, ids.data(), dB);
    });
}
template <class T, class B>
Var<T, B> row_update(const Var<T, B>& base, std::span<const std::int64_t> idx, const Var<T, B>& rows) {
    const Shape& sb = base.shape();
    DEPTHLAB_CHECK(sb.rank() >= 1 && rows.shape().rank() == sb.rank() && rows.shape()[0] == static_cast<index_t>(idx.size()),
                   shape_error, "row_update: base ", sb, ", ", idx.size(), " indices, rows ", rows.shape());
    detail::check_ids("row_update", idx, sb[0], "index");
    detail::check_distinct("row_update", idx, sb[0]);
    return row_update(base, detail::upload_ids<B>(idx), rows);
}
/// y[r] = w[r] * x[r] for x: (N, C), w: (N) — a per-row weight.
template <class T, class B>
Var<T, B> scale_rows(const Var<T, B>& x, const Var<T, B>& w) {
    using P = primitives<B>;
    const Shape& sx = x.shape();
    DEPTHLAB_CHECK(sx.rank() == 2 && w.shape() == Shape{sx[0]}, shape_error, "scale_rows: input ", sx, " and weights ", w.shape(),
                   " (expected (N, C) and (N,))");
    const index_t rows = sx[0], cols = sx[1];
    const auto X = detail::contiguous_value(x);
    const auto Wt = detail::contiguous_value(w);
    auto Y = Tensor<T, B>::empty(sx);
    P::scale_rows(rows, cols, X.data(), Wt.data(), Y.data());
    return detail::make_result<T, B>(op_kind::scale_rows, std::move(Y), {x, w}, [=](Node<T, B>& nd) {
        P::scale_rows_bwd(rows, cols, X.data(), Wt.data(), nd.grad.data(), detail::parent_grad(nd, 0), detail::parent_grad(nd, 1));
    });
}

/// Embedding lookup: table (V, E), ids (n,) on the device, of shape `ids_shape` ->
/// ids_shape + (E).
template <class T, class B>
Var<T, B> embedding(const Var<T, B>& table, const Tensor<std::int64_t, B>& ids, Shape ids_shape) {
    DEPTHLAB_CHECK(table.shape().rank() == 2, shape_error, "embedding: table must be (vocab, dim), got ", table.shape());
    DEPTHLAB_CHECK(ids.defined() && ids_shape.numel() == ids.numel(), shape_error, "embedding: ", ids.numel(), " ids for shape ",
                   ids_shape);
    Var<T, B> rows = gather_rows(table, ids, op_kind::embedding);
    ids_shape.push_back(table.shape()[1]);
    rows.value() = rows.value().reshape(ids_shape);
    return rows;
}
template <class T, class B>
Var<T, B> embedding(const Var<T, B>& table, std::span<const std::int64_t> ids, Shape ids_shape) {
    DEPTHLAB_CHECK(table.shape().rank() == 2, shape_error, "embedding: table must be (vocab, dim), got ", table.shape());
    DEPTHLAB_CHECK(ids_shape.numel() == static_cast<index_t>(ids.size()), shape_error, "embedding: ", ids.size(),
                   " ids for shape ", ids_shape);
    detail::check_ids("embedding", ids, table.shape()[0], "id");
    return embedding(table, detail::upload_ids<B>(ids), std::move(ids_shape));
}

// ---------------------------------------------------------------- structure
namespace detail {
/// A view-producing op made concrete: value = contiguous copy of view(x.value());
/// backward adds the gradient into the same view of x's gradient.
template <class T, class B, class View>
Var<T, B> view_op(op_kind op, const Var<T, B>& x, View view) {
    auto Y = view(x.value()).contiguous();
    if (Y.shares_storage(x.value())) Y = Y.clone();
    return make_result<T, B>(op, std::move(Y), {x}, [=](Node<T, B>& nd) {
        auto& p = *nd.parents[0];
        if (!p.requires_grad) return;
        Tensor<T, B> target = view(p.grad_buffer());
        target.add_(nd.grad.reshape(target.shape()));
    });
}
}  // namespace detail

/// Elements [start, stop) along an axis.
template <class T, class B>
Var<T, B> slice(const Var<T, B>& x, int axis, index_t start, index_t stop) {
    (void)x.value().slice(axis, start, stop);  // validates the range
    return detail::view_op<T, B>(op_kind::slice, x, [=](const Tensor<T, B>& t) { return t.slice(axis, start, stop); });
}
/// Swap two axes (materialised: the result is contiguous).
template <class T, class B>
Var<T, B> transpose(const Var<T, B>& x, int a, int b) {
    (void)x.shape().axis(a);  // validate both axes
    (void)x.shape().axis(b);
    return detail::view_op<T, B>(op_kind::transpose, x, [=](const Tensor<T, B>& t) { return t.transpose(a, b); });
}
/// Same elements, new shape (one extent may be -1).
template <class T, class B>
Var<T, B> reshape(const Var<T, B>& x, const Shape& s) {
    const Shape out = x.value().reshape(s).shape();  // validates and resolves -1
    const Shape in = x.shape();
    auto Y = x.value().contiguous().reshape(out);
    return detail::make_result<T, B>(op_kind::reshape, std::move(Y), {x}, [=](Node<T, B>& nd) {
        if (T* dX = detail::parent_grad(nd, 0)) primitives<B>::axpby(in.numel(), T(1), nd.grad.data(), T(1), dX);
    });
}
/// Pieces of the given sizes along an axis (sizes must add up to the extent).
template <class T, class B>
std::vector<Var<T, B>> split(const Var<T, B>& x, const std::vector<index_t>& sizes, int axis) {
    const int a = x.shape().axis(axis);
    index_t total = 0;
    for (index_t s : sizes) total += s;
    DEPTHLAB_CHECK(total == x.shape()[a], shape_error, "split: sizes add up to ", total, " but axis ", axis, " of ", x.shape(),
                   " has ", x.shape()[a]);
    std::vector<Var<T, B>> out;
    index_t start = 0;
    for (index_t s : sizes) {
        const index_t st = start;
        out.push_back(detail::view_op<T, B>(op_kind::split, x, [=](const Tensor<T, B>& t) { return t.slice(a, st, st + s); }));
        start += s;
    }
    return out;
}
/// Join along an axis; all other extents must agree.
template <class T, class B>
Var<T, B> concat(const std::vector<Var<T, B>>& xs, int axis) {
    DEPTHLAB_CHECK(!xs.empty(), shape_error, "concat: no inputs");
    const Shape& s0 = xs[0].shape();
    const int a = s0.axis(axis);
    Shape out = s0;
    out[a] = 0;
    for (const auto& x : xs) {
        bool ok = x.shape().rank() == s0.rank();
        for (int k = 0; ok && k < s0.rank(); ++k) ok = k == a || x.shape()[k] == s0[k];
        DEPTHLAB_CHECK(ok, shape_error, "concat: shape ", x.shape(), " does not match ", s0, " outside axis ", axis);
        out[a] += x.shape()[a];
    }
    auto Y = Tensor<T, B>::empty(out);
    std::vector<index_t> offsets;
    index_t off = 0;
    for (const auto& x : xs) {
        offsets.push_back(off);
        Y.slice(a, off, off + x.shape()[a]).copy_(x.value());
        off += x.shape()[a];
    }
    return detail::make_result<T, B>(op_kind::concat, std::move(Y), xs, [=](Node<T, B>& nd) {
        for (std::size_t i = 0; i < nd.parents.size(); ++i) {
            auto& p = *nd.parents[i];
            if (!p.requires_grad) continue;
            p.grad_buffer().add_(nd.grad.slice(a, offsets[i], offsets[i] + p.value.shape()[a]));
        }
    });
}

// ---------------------------------------------------------------- reductions and losses
/// Sum of all elements (a scalar of shape ()).
template <class T, class B>
Var<T, B> sum(const Var<T, B>& x) {
    using P = primitives<B>;
    const auto X = detail::contiguous_value(x);
    const index_t n = X.numel();
    auto S = Tensor<T, B>::empty(Shape{});
    P::sum_to(n, X.data(), T(1), S.data());
    return detail::make_result<T, B>(op_kind::sum, std::move(S), {x}, [=](Node<T, B>& nd) {
        if (T* dX = detail::parent_grad(nd, 0)) P::add_scaled_by(n, nd.grad.data(), T(1), static_cast<const T*>(nullptr), dX);
    });
}
/// Mean of all elements.
template <class T, class B>
Var<T, B> mean(const Var<T, B>& x) {
    DEPTHLAB_CHECK(x.value().numel() > 0, shape_error, "mean: empty input ", x.shape());
    Var<T, B> s = scale(sum(x), T(1) / static_cast<T>(x.value().numel()));
    s.node().op = op_kind::mean;
    return s;
}
/// Mean squared error mean((a - b)^2); both operands may require gradients.
template <class T, class B>
Var<T, B> mse(const Var<T, B>& a, const Var<T, B>& b) {
    using P = primitives<B>;
    check_same_shape("mse", a.value(), b.value());
    const auto A = detail::contiguous_value(a);
    const auto Bv = detail::contiguous_value(b);
    const index_t n = A.numel();
    DEPTHLAB_CHECK(n > 0, shape_error, "mse: empty inputs ", a.shape());
    auto diff = Tensor<T, B>::empty(a.shape());
    P::axpby(n, T(1), A.data(), T(0), diff.data());
    P::axpby(n, T(-1), Bv.data(), T(1), diff.data());
    auto sq = Tensor<T, B>::empty(a.shape());
    P::mul(n, diff.data(), diff.data(), sq.data());
    auto L = Tensor<T, B>::empty(Shape{});
    P::sum_to(n, sq.data(), T(1) / static_cast<T>(n), L.data());
    detail::check_finite_loss("mse", L, a.shape());
    return detail::make_result<T, B>(op_kind::mse, std::move(L), {a, b}, [=](Node<T, B>& nd) {
        const T g = T(2) / static_cast<T>(n);
        if (T* dA = detail::parent_grad(nd, 0)) P::add_scaled_by(n, nd.grad.data(), g, diff.data(), dA);
        if (T* dB = detail::parent_grad(nd, 1)) P::add_scaled_by(n, nd.grad.data(), -g, diff.data(), dB);
    });
}

/// The value of a scalar loss on the host (on a device: the one synchronisation a training
/// step makes for the line it prints); throws numeric_error naming the op that produced
/// it when the value is NaN or infinite.
template <class T, class B>
T checked_item(const Var<T, B>& loss) {
    const T v = loss.value().item();
    DEPTHLAB_CHECK(std::isfinite(v), numeric_error, op_name(loss.op()), ": non-finite loss ", v, " (shape ", loss.shape(), ")");
    return v;
}

// Operators for readable model code.
template <class T, class B>
Var<T, B> operator+(const Var<T, B>& a, const Var<T, B>& b) { return add(a, b); }
/// acc += v for a running sum that starts empty (acc undefined: acc = v).
template <class T, class B>
void accumulate(Var<T, B>& acc, const Var<T, B>& v) {
    acc = acc.defined() ? add(acc, v) : v;
}
template <class T, class B>
Var<T, B> operator*(const Var<T, B>& a, const Var<T, B>& b) { return mul(a, b); }

}  // namespace depthlab
