#pragma once
// Gradient clipping and scaling.
//
// clip_grad_norm(params, max_norm) is torch.nn.utils.clip_grad_norm_(..., norm_type=2,
// error_if_nonfinite=True): total = sqrt(sum over parameters of ||grad||^2); when
// max_norm / (total + 1e-6) < 1, every gradient is multiplied by that factor. It returns
// the total norm before clipping. Parameters without a gradient are ignored; a Var listed
// twice counts once. A non-finite total norm throws numeric_error naming the first
// parameter whose gradient holds a non-finite value, and leaves every gradient unchanged.
//
// Gradient accumulation (an effective batch of N micro-batches): backward() adds into
// the gradients (+=), so
//     opt.zero_grad();
//     for (int k = 0; k < N; ++k) {
//         Var loss = compute_loss(micro_batch[k]);
//         depthlab::scale(loss, T(1) / T(N)).backward();   // or plain backward(), then
//     }                                                    //   scale_grads(params, 1.0 / N) here
//     clip_grad_norm(opt.parameters(), 1.0);    // clip the accumulated (mean) gradient
//     opt.step();
// Scaling by 1/N makes the accumulated gradient the mean over the N micro-batches, as one
// big batch would give (when each micro-batch loss is itself a mean over equally many
// examples). scale_grads(params, 1.0 / N) after the loop is equivalent to scaling each loss.
#include <cmath>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/optim/optimizer.hpp"

namespace depthlab::optim {

namespace detail {
/// The distinct parameters (by node) of `params` that have a gradient, checked contiguous.
template <class T, class B>
std::vector<const std::pair<std::string, Var<T, B>>*> with_grads(const named_parameters<T, B>& params, const char* fn) {
    static_assert(B::host_accessible, "clip/scale: host backends only for now");
    std::vector<const std::pair<std::string, Var<T, B>>*> out;
    std::unordered_set<const void*> seen;
    for (const auto& np : params) {
        const auto& [name, var] = np;
        DEPTHLAB_CHECK(var.defined(), usage_error, fn, ": parameter '", name, "' is an undefined Var");
        if (!var.grad().defined() || !seen.insert(var.node_ptr().get()).second) continue;
        DEPTHLAB_CHECK(var.grad().is_contiguous(), usage_error, fn, ": the gradient of '", name, "' is not contiguous");
        out.push_back(&np);
    }
    return out;
}
template <class T, class B>
named_parameters<T, B> numbered(const std::vector<Var<T, B>>& params) {
    named_parameters<T, B> out;
    for (std::size_t i = 0; i < params.size(); ++i) out.emplace_back("#" + std::to_string(i), params[i]);
    return out;
}
}  // namespace detail

/// Clips the global L2 norm of the gradients to max_norm (> 0); returns the norm before.
template <class T, class B>
double clip_grad_norm(const named_parameters<T, B>& params, double max_norm) {
    DEPTHLAB_CHECK(std::isfinite(max_norm) && max_norm > 0, usage_error, "clip_grad_norm: max_norm must be finite and > 0, got ",
                   max_norm);
    const auto list = detail::with_grads(params, "clip_grad_norm");
    double sum = 0;
    for (const auto* np : list) sum += detail::sum_squares(np->second.grad().numel(), np->second.grad().data());
    const double total = std::sqrt(sum);
    if (!std::isfinite(total)) {
        for (const auto* np : list) {
            const auto& g = np->second.grad();
            const T* x = g.data();
            for (index_t i = 0; i < g.numel(); ++i)
                DEPTHLAB_CHECK(std::isfinite(x[i]), numeric_error, "clip_grad_norm: the gradient of '", np->first,
                               "' is not finite (element ", i, " is ", x[i], "); the total norm is ", total);
        }
        throw numeric_error(depthlab::detail::cat("clip_grad_norm: the total gradient norm overflowed (", total, ") though every element is finite"));
    }
    const double coef = max_norm / (total + 1e-6);
    if (coef < 1.0)
        for (const auto* np : list) {
            Var<T, B> v = np->second;  // a handle: its gradient is the parameter's
            detail::scale(v.grad().numel(), v.grad().data(), static_cast<T>(coef));
        }
    return total;
}
template <class T, class B>
double clip_grad_norm(const std::vector<Var<T, B>>& params, double max_norm) {
    return clip_grad_norm(detail::numbered(params), max_norm);
}

/// Multiplies every defined gradient by factor (each distinct Var once).
template <class T, class B>
void scale_grads(const named_parameters<T, B>& params, double factor) {
    DEPTHLAB_CHECK(std::isfinite(factor), usage_error, "scale_grads: factor must be finite, got ", factor);
    for (const auto* np : detail::with_grads(params, "scale_grads")) {
        Var<T, B> v = np->second;
        detail::scale(v.grad().numel(), v.grad().data(), static_cast<T>(factor));
    }
}
template <class T, class B>
void scale_grads(const std::vector<Var<T, B>>& params, double factor) {
    scale_grads(detail::numbered(params), factor);
}

}  // namespace depthlab::optim
