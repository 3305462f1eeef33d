#pragma once
// Differentiable softmax, log-softmax and cross-entropy, layer norm (alone and after a residual
// sum, residual_layer_norm) and dropout.
// Part of autodiff/ops.hpp (whose header says what every op guarantees).
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "depthlab/autodiff/variable.hpp"
#include "depthlab/backend/backend.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/autodiff/ops/arithmetic.hpp"

namespace depthlab {

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
/// row is ignored the loss is 0 with zero gradient, where PyTorch gives NaN (0 / 0): a
/// micro-batch of padding only then adds nothing to an accumulated step instead of
/// stopping it at the NaN guard. Throws on out-of-range targets and
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
namespace detail {
/// A layer norm's backward (node nd, its input X with gamma and beta at parents
/// `gamma_index` and + 1): the input's gradient into dx (null: none; written when acc_x is
/// false, else added) and gamma's and beta's. gamma and beta share one choice: written when
/// neither has a gradient yet (the usual first backward through a layer), else added (a fresh
/// one zero-filled).
template <class T, class B>
void layer_norm_backward(Node<T, B>& nd, std::size_t gamma_index, index_t rows, index_t cols, const Tensor<T, B>& X, const Tensor<T, B>& G,
                         const Tensor<T, B>& mean, const Tensor<T, B>& rstd, T* dx, bool acc_x) {
    using P = primitives<B>;
    const Node<T, B>&pg = *nd.parents[gamma_index], &pb = *nd.parents[gamma_index + 1];
    if (pg.requires_grad && pb.requires_grad && &pg != &pb && !pg.grad.defined() && !pb.grad.defined()) {
        const auto gG = parent_grad_out(nd, gamma_index);
        const auto gB = parent_grad_out(nd, gamma_index + 1);
        P::layernorm_bwd(rows, cols, X.data(), nd.grad.data(), G.data(), mean.data(), rstd.data(), dx, gG.data, gB.data, acc_x, false);
        return;
    }
    T* dG = parent_grad(nd, gamma_index);
    T* dB = parent_grad(nd, gamma_index + 1);
    Tensor<T, B> scratch;  // receives the gradient of a frozen gamma or beta
    if ((dG == nullptr) != (dB == nullptr)) {
        scratch = Tensor<T, B>::zeros({cols});
        (dG ? dB : dG) = scratch.data();
    }
    P::layernorm_bwd(rows, cols, X.data(), nd.grad.data(), G.data(), mean.data(), rstd.data(), dx, dG, dB, acc_x);
}
template <class T, class B>
void check_layer_norm_params(const char* name, const Shape& sx, const Var<T, B>& gamma, const Var<T, B>& beta) {
    DEPTHLAB_CHECK(sx.rank() >= 1 && gamma.shape() == Shape{sx.back()} && beta.shape() == Shape{sx.back()}, shape_error, name, ": input ",
                   sx, ", gamma ", gamma.shape(), ", beta ", beta.shape(), " (expected both (", (sx.rank() ? sx.back() : 0), ",))");
}
}  // namespace detail

/// LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta.
template <class T, class B>
Var<T, B> layer_norm(const Var<T, B>& x, const Var<T, B>& gamma, const Var<T, B>& beta, T eps = T(1e-5)) {
    using P = primitives<B>;
    const Shape& sx = x.shape();
    detail::check_layer_norm_params("layer_norm", sx, gamma, beta);
    const index_t cols = sx.back(), rows = sx.rows();
    const auto X = detail::contiguous_value(x);
    const auto G = detail::contiguous_value(gamma);
    const auto Bt = detail::contiguous_value(beta);
    auto Y = Tensor<T, B>::empty(sx);
    auto mean = Tensor<T, B>::empty({rows});
    auto rstd = Tensor<T, B>::empty({rows});
    P::layernorm_fwd(rows, cols, X.data(), G.data(), Bt.data(), eps, Y.data(), mean.data(), rstd.data());
    return detail::make_result<T, B>(op_kind::layer_norm, std::move(Y), {x, gamma, beta}, [=](Node<T, B>& nd) {
        // The first gradient to reach x is written, later ones added.
        const auto gX = detail::parent_grad_out(nd, 0);
        detail::layer_norm_backward(nd, 1, rows, cols, X, G, mean, rstd, gX.data, gX.beta != T(0));
    });
}

namespace detail {
/// residual_layer_norm with the dropout probability p in effect (0: none, gen not used).
template <class T, class B>
Var<T, B> residual_layer_norm(const Var<T, B>& x, const Var<T, B>& y, const Var<T, B>& gamma, const Var<T, B>& beta, T eps, T p,
                              Generator& gen) {
    using P = primitives<B>;
    const Shape& sx = x.shape();
    DEPTHLAB_CHECK(y.shape() == sx, shape_error, "residual_layer_norm: residual ", sx, " and branch ", y.shape(), " differ");
    check_layer_norm_params("residual_layer_norm", sx, gamma, beta);
    const index_t cols = sx.back(), rows = sx.rows();
    const std::uint64_t first = p > T(0) ? gen.reserve(static_cast<std::uint64_t>(sx.numel())) : 0;
    const auto X = contiguous_value(x);
    const auto Yb = contiguous_value(y);
    const auto G = contiguous_value(gamma);
    const auto Bt = contiguous_value(beta);
    auto Z = Tensor<T, B>::empty(sx);
    auto out = Tensor<T, B>::empty(sx);
    auto mean = Tensor<T, B>::empty({rows});
    auto rstd = Tensor<T, B>::empty({rows});
    P::residual_layernorm_fwd(rows, cols, X.data(), Yb.data(), p, gen, first, G.data(), Bt.data(), eps, Z.data(), out.data(), mean.data(),
                              rstd.data());
    return make_result<T, B>(op_kind::residual_layer_norm, std::move(out), {x, y, gamma, beta}, [=, words = gen](Node<T, B>& nd) {
        // y (the branch) first, then x: the order of add's backward, whose x may be handed
        // the buffer of the sum's gradient
        const auto gY = parent_grad_out(nd, 1);
        const auto gX = parent_grad_out(nd, 0);
        P::residual_layernorm_bwd(rows, cols, Z.data(), nd.grad.data(), G.data(), mean.data(), rstd.data(), p, words, first, gX.data,
                                  gX.beta != T(0), gY.data, gY.beta != T(0));
        layer_norm_backward(nd, 2, rows, cols, Z, G, mean, rstd, static_cast<T*>(nullptr), false);
    });
}
}  // namespace detail

/// layer_norm(x + dropout(y, p, gen, training), gamma, beta, eps) as one op: the post-LN
/// residual of nn::Residual. The values, the gradients and the dropout mask (the same words of
/// gen) are those of the three ops bit for bit on the CPU; it reads x and y once and writes
/// the sum and the output, where the three ops write and read the dropped y and the sum again,
/// and its backward gives x and y their gradients in one pass.
template <class T, class B>
Var<T, B> residual_layer_norm(const Var<T, B>& x, const Var<T, B>& y, const Var<T, B>& gamma, const Var<T, B>& beta, T eps, T p,
                              Generator& gen, bool training = true) {
    DEPTHLAB_CHECK(p >= T(0) && p < T(1), usage_error, "residual_layer_norm: dropout probability ", p, " outside [0, 1)");
    return detail::residual_layer_norm(x, y, gamma, beta, eps, training ? p : T(0), gen);
}
/// layer_norm(x + y, gamma, beta, eps) as one op (residual_layer_norm without dropout).
template <class T, class B>
Var<T, B> residual_layer_norm(const Var<T, B>& x, const Var<T, B>& y, const Var<T, B>& gamma, const Var<T, B>& beta, T eps = T(1e-5)) {
    Generator unused;
    return detail::residual_layer_norm(x, y, gamma, beta, eps, T(0), unused);
}

// ---------------------------------------------------------------- dropout
/// Inverted dropout: zero each element with probability p, scale the rest by 1/(1-p).
/// Identity when !training or p == 0. The mask comes from `gen` (reproducible): drawn where
/// it is applied, forward and again backward from the same counter words, never stored.
template <class T, class B>
Var<T, B> dropout(const Var<T, B>& x, T p, Generator& gen, bool training = true) {
    using P = primitives<B>;
    DEPTHLAB_CHECK(p >= T(0) && p < T(1), usage_error, "dropout: probability ", p, " outside [0, 1)");
    if (!training || p == T(0)) return x;
    const index_t n = x.value().numel();
    const std::uint64_t first = gen.reserve(static_cast<std::uint64_t>(n));
    const auto X = detail::contiguous_value(x);
    auto Y = Tensor<T, B>::empty(x.shape());
    P::dropout_apply(n, p, gen, first, X.data(), Y.data());
    return detail::make_result<T, B>(op_kind::dropout, std::move(Y), {x}, [=, words = gen](Node<T, B>& nd) {
        if (const auto gX = detail::parent_grad_out(nd, 0); gX.data)
            P::dropout_apply(n, p, words, first, nd.grad.data(), gX.data, gX.beta != T(0));
    });
}

}  // namespace depthlab
