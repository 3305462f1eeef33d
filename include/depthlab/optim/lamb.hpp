#pragma once
// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in
// 76 minutes"), as used for BERT/ALBERT pre-training:
//   m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2
//   u = m_hat / (sqrt(v_hat) + eps) + wd w       (m_hat, v_hat bias-corrected; wd = 0 for
//                                                 parameters excluded from weight decay)
//   r = ||w|| / ||u||    (1 when either norm is 0, and 1 for parameters excluded from layer
//                         adaptation)
//   w -= lr r u
// Choices, where implementations differ:
//  * Parameters excluded from weight decay (biases, norms by default) are also excluded from
//    layer adaptation (r = 1: a plain Adam step), as in ALBERT's and NVIDIA's BERT LAMB
//    (exclude_from_layer_adaptation defaults to exclude_from_weight_decay). Set
//    LambOptions::exclude_from_adaptation to choose otherwise (exclude_none: adapt all).
//  * Bias correction is on, as in the paper's algorithm; bias_correction = false gives
//    the TF ALBERT optimiser (no correction).
//  * No clamp on the trust ratio (the paper's phi is the identity).
//  * Norms are summed in double, also for float parameters.
// State: "lamb.m.<parameter>", "lamb.v.<parameter>".
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "depthlab/optim/optimizer.hpp"

namespace depthlab::optim {

struct LambOptions {
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-6;
    double weight_decay = 0.01;
    bool bias_correction = true;
    name_predicate exclude_from_weight_decay = exclude_norm_and_bias;
    /// Parameters for which this holds take trust ratio 1. Empty: the same as
    /// exclude_from_weight_decay.
    name_predicate exclude_from_adaptation = {};
};

template <class T, class B = backend::cpu>
class Lamb : public Optimizer<T, B> {
    using base = Optimizer<T, B>;

public:
    Lamb(const named_parameters<T, B>& params, LambOptions opt = {});

    [[nodiscard]] std::string type() const override { return "lamb"; }
    [[nodiscard]] std::vector<std::string> slot_names() const override { return {"m", "v"}; }

protected:
    [[nodiscard]] bool slot_is_nonnegative(std::size_t slot) const override { return slot == 1; }  // v

public:
    [[nodiscard]] const LambOptions& options() const { return opt_; }
    /// Whether params()[i] uses the trust ratio.
    [[nodiscard]] bool adapts(std::size_t i) const { return adapt_.at(i); }
    /// The trust ratio of params()[i] at its last update (1 before any, or when not adapted).
    /// Reads the norms back from the device: a synchronisation, for inspection only.
    [[nodiscard]] double last_trust_ratio(std::size_t i) const {
        if (norms_.empty() || !norms_.at(i).defined() || !adapt_.at(i)) return 1.0;
        const std::vector<double> sums = norms_[i].to_host();
        return rules::lamb_trust_ratio(sums.data());
    }

protected:
    void update(std::size_t i, double lr, double weight_decay) override {
        const rules::lamb_tensor<T> t = tensor(i, lr, weight_decay);
        primitives<B>::lamb_step_many(1, &t);
    }
    void update_all(const std::vector<std::size_t>& due, double lr) override {
        std::vector<rules::lamb_tensor<T>> t;
        t.reserve(due.size());
        for (std::size_t i : due) t.push_back(tensor(i, lr, this->weight_decay_of(i)));
        primitives<B>::lamb_step_many(static_cast<index_t>(t.size()), t.data());
    }
    /// Parameter i's update. {||w||^2, ||u||^2} stay on the device (norms_[i]); the apply pass
    /// turns them into the trust ratio.
    rules::lamb_tensor<T> tensor(std::size_t i, double lr, double weight_decay) {
        auto& p = this->param(i);
        if (norms_.empty()) norms_.resize(adapt_.size());
        if (!norms_[i].defined()) norms_[i] = Tensor<double, B>::empty({2});
        return {.n = p.var.value().numel(),
                .w = p.var.value().data(),
                .g = p.var.grad().data(),
                .m = this->slot(i, 0).data(),
                .v = this->slot(i, 1).data(),
                .am = detail::adam_moments<T>::make(opt_.beta1, opt_.beta2, opt_.eps, p.steps, opt_.bias_correction),
                .wd = static_cast<T>(weight_decay),
                .lr = lr,
                .sums = norms_[i].data(),
                .adapt = adapt_[i]};
    }
    [[nodiscard]] std::vector<std::pair<std::string, double>> hyperparameters() const override {
        return {{"beta1", opt_.beta1},
                {"beta2", opt_.beta2},
                {"eps", opt_.eps},
                {"weight_decay", opt_.weight_decay},
                {"bias_correction", opt_.bias_correction ? 1.0 : 0.0}};
    }

private:
    LambOptions opt_;
    std::vector<bool> adapt_;
    std::vector<Tensor<double, B>> norms_;  // per parameter: {||w||^2, ||u||^2} of its last update
};

// Defined outside the class body, so not inline: under DEPTHLAB_COMPILED a program calls the
// library's copy instead of compiling it again (include/depthlab/compiled.hpp).
template <class T, class B>
Lamb<T, B>::Lamb(const named_parameters<T, B>& params, LambOptions opt)
    : base(params, opt.lr, opt.weight_decay, opt.exclude_from_weight_decay, "lamb"), opt_(std::move(opt)) {
    DEPTHLAB_CHECK(opt_.beta1 >= 0 && opt_.beta1 < 1, usage_error, "lamb: beta1 must be in [0, 1), got ", opt_.beta1);
    DEPTHLAB_CHECK(opt_.beta2 >= 0 && opt_.beta2 < 1, usage_error, "lamb: beta2 must be in [0, 1), got ", opt_.beta2);
    DEPTHLAB_CHECK(std::isfinite(opt_.eps) && opt_.eps >= 0, usage_error, "lamb: eps must be finite and >= 0, got ", opt_.eps);
    for (const auto& p : this->params())
        adapt_.push_back(opt_.exclude_from_adaptation ? !opt_.exclude_from_adaptation(p.name) : !p.decay_excluded);
}

}  // namespace depthlab::optim
