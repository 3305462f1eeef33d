#pragma once
// The per-element update rules of the optimisers and of gradient clipping (namespace
// optim::rules, on the backend floor because primitives<B> apply them), written once for
// every backend: primitives<B> loop over them (OpenMP chunks on the CPU, one thread per
// element in a CUDA kernel). Host-only set-up (powers for the bias correction) stays in
// make(); everything a kernel calls is DEPTHLAB_HOST_AND_GPU.
#include <cmath>
#include <cstdint>

#include "depthlab/core/portable.hpp"
#include "depthlab/core/shape.hpp"

namespace depthlab::optim::rules {

/// SGD as torch.optim.SGD for one element: d = g + wd w; with momentum, buf = d on the first
/// step of this parameter, else buf = momentum buf + (1 - dampening) d; d = nesterov ? d +
/// momentum buf : buf; w -= lr d. `buf` is null without momentum.
template <class T>
struct sgd {
    T lr, wd, momentum, keep;  // keep = 1 - dampening
    bool first, nesterov;
    DEPTHLAB_HOST_AND_GPU void operator()(T& w, T g, T* buf) const {
        T d = g + wd * w;
        if (buf) {
            *buf = first ? d : momentum * *buf + keep * d;
            d = nesterov ? d + momentum * *buf : *buf;
        }
        w -= lr * d;
    }
};

/// The Adam moment update and normalised direction, shared by Adam, AdamW and LAMB:
///   m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2,
///   direction = m_hat / (sqrt(v_hat) + eps),  m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t)
/// (bias correction optional: without it m_hat = m, v_hat = v).
template <class T>
struct adam_moments {
    T beta1, beta2, c1, c2, inv_bc1, inv_sqrt_bc2, eps;

    static adam_moments make(double beta1, double beta2, double eps, std::int64_t step, bool bias_correction = true) {
        const double t = static_cast<double>(step);
        const double bc1 = bias_correction ? 1.0 - std::pow(beta1, t) : 1.0;
        const double bc2 = bias_correction ? 1.0 - std::pow(beta2, t) : 1.0;
        return {static_cast<T>(beta1), static_cast<T>(beta2), static_cast<T>(1.0 - beta1), static_cast<T>(1.0 - beta2),
                static_cast<T>(1.0 / bc1),  static_cast<T>(1.0 / std::sqrt(bc2)), static_cast<T>(eps)};
    }
    /// Updates m and v with gradient g; returns the direction.
    DEPTHLAB_HOST_AND_GPU T update(T g, T& m, T& v) const {
        m = beta1 * m + c1 * g;
        v = beta2 * v + c2 * g * g;
        return direction(m, v);
    }
    [[nodiscard]] DEPTHLAB_HOST_AND_GPU T direction(T m, T v) const { return (m * inv_bc1) / (std::sqrt(v) * inv_sqrt_bc2 + eps); }
};

/// Adam / AdamW for one element: g' = g + l2 w (Adam's coupled decay); w = decay w - lr
/// direction(g'), decay = 1 - lr wd for AdamW's decoupled decay (1 for Adam).
template <class T>
struct adam {
    adam_moments<T> am;
    T lr, l2, decay;
    DEPTHLAB_HOST_AND_GPU void operator()(T& w, T g, T& m, T& v) const {
        const T u = am.update(g + l2 * w, m, v);
        w = decay * w - lr * u;
    }
};

/// LAMB's step size lr * r, with the trust ratio r = ||w|| / ||u|| from the squared norms
/// {||w||^2, ||u||^2} (null: not adapted) and r = 1 when either norm is 0.
DEPTHLAB_HOST_AND_GPU inline double lamb_trust_ratio(const double* sums) {
    if (!sums) return 1.0;
    const double wn = std::sqrt(sums[0]), un = std::sqrt(sums[1]);
    return wn > 0 && un > 0 ? wn / un : 1.0;
}

/// The clipping factor of clip_grad_norm from the per-parameter squared norms, summed in
/// their order: max_norm / (total + 1e-6) when that is < 1 and the total is finite, else 1
/// (a non-finite total leaves the gradients unchanged).
DEPTHLAB_HOST_AND_GPU inline double clip_total(const double* parts, index_t k) {
    double s = 0;
    for (index_t i = 0; i < k; ++i) s += parts[i];
    return std::sqrt(s);
}
DEPTHLAB_HOST_AND_GPU inline double clip_factor(double total, double max_norm) {
    if (!(total - total == 0)) return 1.0;  // NaN or inf (isfinite without <cmath> device overloads)
    const double coef = max_norm / (total + 1e-6);
    return coef < 1.0 ? coef : 1.0;
}

// ---- multi-tensor steps: one primitive call updates every parameter (the *_many routines,
// a handful of kernel launches on a device instead of a few per parameter). The caller
// passes a host array of these; pointers are device memory.

/// One tensor of adam_update_many: w, g, m, v of n elements, updated by `rule`.
template <class T>
struct adam_tensor {
    index_t n = 0;
    T* w = nullptr;
    const T* g = nullptr;
    T* m = nullptr;
    T* v = nullptr;
    adam<T> rule{};
};
/// One tensor of lamb_step_many: moments, then {||w||^2, ||u||^2} into `sums` (2 doubles of
/// device memory), then w -= lr r u with r the trust ratio from `sums` (1 unless `adapt`).
template <class T>
struct lamb_tensor {
    index_t n = 0;
    T* w = nullptr;
    const T* g = nullptr;
    T* m = nullptr;
    T* v = nullptr;
    adam_moments<T> am{};
    T wd = T(0);
    double lr = 0;
    double* sums = nullptr;
    bool adapt = true;
};
/// n elements at x (a gradient, for the clipping routines).
template <class T>
struct tensor_span {
    index_t n = 0;
    T* x = nullptr;
};

}  // namespace depthlab::optim::rules
