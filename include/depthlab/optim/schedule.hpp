#pragma once
// Learning-rate schedules: small value types with `double lr(std::int64_t step) const`,
// where `step` is the number of optimiser steps already taken (0 for the first update),
// the convention of Hugging Face's LambdaLR schedules and of BERT's TF code (so the first
// update of a warm-up schedule uses lr 0). Typical use, before each update:
//     opt.set_lr(schedule.lr(opt.step_count()));
//     opt.step();
// Steps past total_steps keep the final value. A negative step throws usage_error.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>

#include "depthlab/core/error.hpp"

namespace depthlab::optim {

/// Anything with `double lr(std::int64_t) const`.
template <class S>
concept lr_schedule = requires(const S& s, std::int64_t step) {
    { s.lr(step) } -> std::convertible_to<double>;
};

namespace detail {
inline void check_schedule(bool ok, const char* what) { DEPTHLAB_CHECK(ok, usage_error, what); }
inline void check_step(std::int64_t step, const char* schedule) {
    DEPTHLAB_CHECK(step >= 0, usage_error, schedule, ".lr: negative step ", step);
}
}  // namespace detail

/// lr(step) = value.
class constant {
public:
    explicit constant(double value) : value_(value) {
        detail::check_schedule(std::isfinite(value) && value >= 0, "constant: the learning rate must be finite and >= 0");
    }
    [[nodiscard]] double lr(std::int64_t step) const {
        detail::check_step(step, "constant");
        return value_;
    }

private:
    double value_;
};

/// Polynomial decay after a linear warm-up (Hugging Face's
/// get_polynomial_decay_schedule_with_warmup):
///   step < warmup:                 peak * step / warmup
///   warmup <= step <= total:       (peak - end) * (1 - (step - warmup) / (total - warmup))^power + end
///   step > total:                  end
class polynomial_decay {
public:
    polynomial_decay(double peak, std::int64_t warmup_steps, std::int64_t total_steps, double power = 1.0, double end_lr = 0.0)
        : peak_(peak), end_(end_lr), power_(power), warmup_(warmup_steps), total_(total_steps) {
        detail::check_schedule(std::isfinite(peak) && peak >= 0, "polynomial_decay: peak must be finite and >= 0");
        detail::check_schedule(std::isfinite(end_lr) && end_lr >= 0 && end_lr <= peak,
                               "polynomial_decay: end_lr must be in [0, peak]");
        detail::check_schedule(std::isfinite(power) && power > 0, "polynomial_decay: power must be > 0");
        detail::check_schedule(warmup_steps >= 0 && total_steps >= warmup_steps,
                               "polynomial_decay: needs 0 <= warmup_steps <= total_steps");
    }
    [[nodiscard]] double lr(std::int64_t step) const {
        detail::check_step(step, "polynomial_decay");
        if (step < warmup_) return peak_ * static_cast<double>(step) / static_cast<double>(warmup_);
        if (step >= total_) return end_;
        const double left = 1.0 - static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);
        return (peak_ - end_) * std::pow(left, power_) + end_;
    }

private:
    double peak_, end_, power_;
    std::int64_t warmup_, total_;
};

/// Linear warm-up to peak, then linear decay to 0 at total_steps (BERT; Hugging Face's
/// get_linear_schedule_with_warmup): polynomial_decay with power 1 and end 0.
class warmup_linear {
public:
    warmup_linear(double peak, std::int64_t warmup_steps, std::int64_t total_steps) : impl_(peak, warmup_steps, total_steps) {}
    [[nodiscard]] double lr(std::int64_t step) const { return impl_.lr(step); }

private:
    polynomial_decay impl_;
};

/// Inverse square root (Vaswani et al.; fairseq's inverse_sqrt with warmup_init_lr = 0):
///   lr = peak * min(step / warmup, sqrt(warmup / step)),   lr(0) = 0.
class inverse_sqrt {
public:
    inverse_sqrt(double peak, std::int64_t warmup_steps) : peak_(peak), warmup_(warmup_steps) {
        detail::check_schedule(std::isfinite(peak) && peak >= 0, "inverse_sqrt: peak must be finite and >= 0");
        detail::check_schedule(warmup_steps >= 1, "inverse_sqrt: warmup_steps must be >= 1");
    }
    [[nodiscard]] double lr(std::int64_t step) const {
        detail::check_step(step, "inverse_sqrt");
        if (step == 0) return 0.0;
        const double s = static_cast<double>(step), w = static_cast<double>(warmup_);
        return step < warmup_ ? peak_ * s / w : peak_ * std::sqrt(w / s);
    }

private:
    double peak_;
    std::int64_t warmup_;
};

}  // namespace depthlab::optim
