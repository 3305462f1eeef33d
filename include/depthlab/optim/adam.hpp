#pragma once
// Adam (torch.optim.Adam: weight decay as an L2 term added to the gradient) and AdamW
// (torch.optim.AdamW: decoupled decay, w *= 1 - lr wd before the Adam step), both with
// bias correction:
//   g' = g + wd w                              (Adam only)
//   m = beta1 m + (1 - beta1) g',  v = beta2 v + (1 - beta2) g'^2
//   w = (1 - lr wd) w                          (AdamW only)
//   w -= lr (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
// t is the parameter's own step count. State: "<adam|adamw>.m.<parameter>", ".v.".
#include <string>
#include <utility>
#include <vector>

#include "depthlab/optim/optimizer.hpp"

namespace depthlab::optim {

struct AdamOptions {
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.0;  // L2, added to the gradient
    name_predicate exclude_from_weight_decay = exclude_norm_and_bias;
};

struct AdamWOptions {
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 1e-2;  // decoupled
    name_predicate exclude_from_weight_decay = exclude_norm_and_bias;
};

namespace detail {
/// Adam and AdamW: one implementation, the decay mode chosen at construction.
template <class T, class B>
class AdamBase : public Optimizer<T, B> {
    using base = Optimizer<T, B>;

public:
    [[nodiscard]] std::string type() const override { return decoupled_ ? "adamw" : "adam"; }
    [[nodiscard]] std::vector<std::string> slot_names() const override { return {"m", "v"}; }

protected:
    [[nodiscard]] bool slot_is_nonnegative(std::size_t slot) const override { return slot == 1; }  // v

    AdamBase(const named_parameters<T, B>& params, double lr, double beta1, double beta2, double eps, double weight_decay,
             const name_predicate& exclude, bool decoupled);

    void update(std::size_t i, double lr, double weight_decay) override {
        const rules::adam_tensor<T> t = tensor(i, lr, weight_decay);
        primitives<B>::adam_update(t.n, t.w, t.g, t.m, t.v, t.rule);
    }
    void update_all(const std::vector<std::size_t>& due, double lr) override {
        std::vector<rules::adam_tensor<T>> t;
        t.reserve(due.size());
        for (std::size_t i : due) t.push_back(tensor(i, lr, this->weight_decay_of(i)));
        primitives<B>::adam_update_many(static_cast<index_t>(t.size()), t.data());
    }
    /// Parameter i's update: its tensors and its rule (the bias correction of its own step count).
    rules::adam_tensor<T> tensor(std::size_t i, double lr, double weight_decay) {
        auto& p = this->param(i);
        const auto am = adam_moments<T>::make(beta1_, beta2_, eps_, p.steps);
        const T l2 = decoupled_ ? T(0) : static_cast<T>(weight_decay);
        const T decay = decoupled_ ? static_cast<T>(1.0 - lr * weight_decay) : T(1);
        return {p.var.value().numel(), p.var.value().data(), p.var.grad().data(), this->slot(i, 0).data(), this->slot(i, 1).data(),
                rules::adam<T>{am, static_cast<T>(lr), l2, decay}};
    }
    [[nodiscard]] std::vector<std::pair<std::string, double>> hyperparameters() const override {
        return {{"beta1", beta1_}, {"beta2", beta2_}, {"eps", eps_}, {"weight_decay", weight_decay_}};
    }

private:
    double beta1_, beta2_, eps_, weight_decay_;
    bool decoupled_;
};

// Defined outside the class body, so not inline: under DEPTHLAB_COMPILED a program calls the
// library's copy instead of compiling it again (include/depthlab/compiled.hpp).
template <class T, class B>
AdamBase<T, B>::AdamBase(const named_parameters<T, B>& params, double lr, double beta1, double beta2, double eps, double weight_decay,
                         const name_predicate& exclude, bool decoupled)
    : base(params, lr, weight_decay, exclude, decoupled ? "adamw" : "adam"),
      beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay), decoupled_(decoupled) {
    const char* name = decoupled ? "adamw" : "adam";
    DEPTHLAB_CHECK(beta1 >= 0 && beta1 < 1, usage_error, name, ": beta1 must be in [0, 1), got ", beta1);
    DEPTHLAB_CHECK(beta2 >= 0 && beta2 < 1, usage_error, name, ": beta2 must be in [0, 1), got ", beta2);
    DEPTHLAB_CHECK(std::isfinite(eps) && eps >= 0, usage_error, name, ": eps must be finite and >= 0, got ", eps);
}

}  // namespace detail

template <class T, class B = backend::cpu>
class Adam : public detail::AdamBase<T, B> {
public:
    Adam(const named_parameters<T, B>& params, const AdamOptions& o = {})
        : detail::AdamBase<T, B>(params, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.exclude_from_weight_decay, false) {}
};

template <class T, class B = backend::cpu>
class AdamW : public detail::AdamBase<T, B> {
public:
    AdamW(const named_parameters<T, B>& params, const AdamWOptions& o = {})
        : detail::AdamBase<T, B>(params, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.exclude_from_weight_decay, true) {}
};

}  // namespace depthlab::optim
