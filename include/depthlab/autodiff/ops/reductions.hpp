#pragma once
// Differentiable reductions and losses: sum, mean, mean squared error.
// Part of autodiff/ops.hpp (whose header says what every op guarantees).
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "depthlab/autodiff/variable.hpp"
#include "depthlab/backend/backend.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/autodiff/ops/structure.hpp"

namespace depthlab {

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
