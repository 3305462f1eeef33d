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

/// Clips the global L2 norm of the gradients to max_norm (> 0) without leaving the device:
/// returns the squared norm of every distinct gradient (in `params` order, a device tensor
/// (k,)), from which the total is sqrt of their sum. A non-finite total leaves every
/// gradient unchanged. No host synchronisation: a training step can clip and step without
/// waiting for the device.
template <class T, class B>
Tensor<double, B> clip_grad_norm_on_device(const named_parameters<T, B>& params, double max_norm) {
    DEPTHLAB_CHECK(std::isfinite(max_norm) && max_norm > 0, usage_error, "clip_grad_norm: max_norm must be finite and > 0, got ",
                   max_norm);
    using P = primitives<B>;
    const auto list = detail::with_grads(params, "clip_grad_norm");
    const auto k = static_cast<index_t>(list.size());
    auto parts = Tensor<double, B>::empty({k});
    std::vector<rules::tensor_span<T>> grads;
    grads.reserve(list.size());
    for (const auto* np : list) {
        Var<T, B> v = np->second;  // a handle: its gradient is the parameter's
        grads.push_back({v.grad().numel(), v.grad().data()});
    }
    // one pass for every squared norm, one for every scaling (a launch each on a device)
    P::sum_squares_many(k, grads.data(), parts.data());
    P::clip_scale_many(k, grads.data(), parts.data(), k, max_norm);
    return parts;
}

/// torch.nn.utils.clip_grad_norm_ (see the top of the file): clips, then reads the norm back
/// (one synchronisation on a device) and returns it; throws numeric_error naming the first
/// parameter with a non-finite gradient when the norm is not finite (gradients unchanged).
template <class T, class B>
double clip_grad_norm(const named_parameters<T, B>& params, double max_norm) {
    const Tensor<double, B> parts = clip_grad_norm_on_device(params, max_norm);
    const std::vector<double> sq = parts.to_host();
    const double total = rules::clip_total(sq.data(), static_cast<index_t>(sq.size()));
    if (!std::isfinite(total)) {
        for (const auto* np : detail::with_grads(params, "clip_grad_norm")) {
            const std::vector<T> x = np->second.grad().to_host();  // (the error path only)
            for (std::size_t i = 0; i < x.size(); ++i)
                DEPTHLAB_CHECK(std::isfinite(x[i]), numeric_error, "clip_grad_norm: the gradient of '", np->first,
                               "' is not finite (element ", i, " is ", x[i], "); the total norm is ", total);
        }
        throw numeric_error(depthlab::detail::cat("clip_grad_norm: the total gradient norm overflowed (", total, ") though every element is finite"));
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
        primitives<B>::axpby(v.grad().numel(), static_cast<T>(factor), v.grad().data(), T(0), v.grad().data());
    }
}
template <class T, class B>
void scale_grads(const std::vector<Var<T, B>>& params, double factor) {
    scale_grads(detail::numbered(params), factor);
}

}  // namespace depthlab::optim
