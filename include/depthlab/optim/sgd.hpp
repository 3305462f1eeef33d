#pragma once
// SGD with momentum (optionally Nesterov) and L2 weight decay, as torch.optim.SGD:
//   d = g + wd w
//   buf = d                                   (first update of this parameter)
//   buf = momentum buf + (1 - dampening) d    (later updates)
//   d = nesterov ? d + momentum buf : buf     (when momentum != 0)
//   w -= lr d
// State: "sgd.momentum.<parameter>" when momentum != 0 (none otherwise).
#include <string>
#include <utility>
#include <vector>

#include "depthlab/optim/optimizer.hpp"

namespace depthlab::optim {

struct SGDOptions {
    double lr = 0.01;
    double momentum = 0.0;
    double dampening = 0.0;
    bool nesterov = false;
    double weight_decay = 0.0;
    /// Parameters for which this holds get no weight decay.
    name_predicate exclude_from_weight_decay = exclude_norm_and_bias;
};

template <class T, class B = backend::cpu>
class SGD : public Optimizer<T, B> {
    using base = Optimizer<T, B>;

public:
    SGD(const named_parameters<T, B>& params, SGDOptions opt = {})
        : base(params, opt.lr, opt.weight_decay, opt.exclude_from_weight_decay, "sgd"), opt_(std::move(opt)) {
        DEPTHLAB_CHECK(std::isfinite(opt_.momentum) && opt_.momentum >= 0, usage_error, "sgd: momentum must be >= 0, got ",
                       opt_.momentum);
        DEPTHLAB_CHECK(std::isfinite(opt_.dampening), usage_error, "sgd: dampening must be finite, got ", opt_.dampening);
        DEPTHLAB_CHECK(!opt_.nesterov || (opt_.momentum > 0 && opt_.dampening == 0), usage_error,
                       "sgd: Nesterov momentum requires a momentum > 0 and zero dampening");
    }

    [[nodiscard]] std::string type() const override { return "sgd"; }
    [[nodiscard]] std::vector<std::string> slot_names() const override {
        return opt_.momentum != 0 ? std::vector<std::string>{"momentum"} : std::vector<std::string>{};
    }
    [[nodiscard]] const SGDOptions& options() const { return opt_; }

protected:
    void update(std::size_t i, double lr, double weight_decay) override {
        auto& p = this->param(i);
        T* buf = opt_.momentum != 0 ? this->slot(i, 0).data() : nullptr;
        const rules::sgd<T> rule{static_cast<T>(lr), static_cast<T>(weight_decay), static_cast<T>(opt_.momentum),
                                 static_cast<T>(T(1) - static_cast<T>(opt_.dampening)), p.steps == 1, opt_.nesterov};
        primitives<B>::sgd_update(p.var.value().numel(), p.var.value().data(), p.var.grad().data(), buf, rule);
    }
    [[nodiscard]] std::vector<std::pair<std::string, double>> hyperparameters() const override {
        return {{"momentum", opt_.momentum},
                {"dampening", opt_.dampening},
                {"nesterov", opt_.nesterov ? 1.0 : 0.0},
                {"weight_decay", opt_.weight_decay}};
    }

private:
    SGDOptions opt_;
};

}  // namespace depthlab::optim
