#pragma once
// Optimizer<T, B>: the base of every optimiser (SGD, Adam, AdamW, LAMB), modelled on
// torch.optim.Optimizer.
//
//  * Parameters come as named Vars (Module::named_parameters()). A Var listed twice (tied
//    weights, a shared layer reached under two names) is updated once, under its first name.
//  * They are split into two parameter groups: "decay" (weight decay applies) and
//    "no_decay" (excluded by a name predicate, by default exclude_norm_and_bias, as in
//    BERT/ALBERT). Pass exclude_none to decay everything as plain torch.optim does.
//  * step() updates every parameter whose gradient is defined and skips the others (the
//    semantics of torch with zero_grad(set_to_none=True)); zero_grad() leaves gradients
//    undefined. Bias corrections and first-step rules use a per-parameter step count, as
//    torch does, so a parameter that got no gradient on some steps is treated exactly as
//    torch treats it.
//  * State for checkpoints: state_tensors() gives "<type>.<slot>.<parameter>" tensors
//    (e.g. "adam.m.encoder.0.norm1.weight"), state_scalars() the step counts and learning
//    rate as exact decimal strings, load_state() restores both after checking every name
//    and shape. A resumed optimiser takes bit for bit the step an uninterrupted one takes.
//
// The per-element update rules live in backend/update_rules.hpp (written once for every backend) and
// run as primitives<B> (sgd_update, adam_update, lamb_moments / lamb_apply): a step makes
// one launch per parameter (two for LAMB) and no host synchronisation. Reductions (LAMB's
// norms, gradient clipping) sum in double over fixed chunks, so results do not depend on
// the number of threads.
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

#include "depthlab/autodiff/variable.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/core/parallel.hpp"
#include "depthlab/core/tensor.hpp"
#include "depthlab/core/value_scan.hpp"
#include "depthlab/backend/update_rules.hpp"

namespace depthlab::optim {

template <class T, class B = backend::cpu>
using named_parameters = std::vector<std::pair<std::string, Var<T, B>>>;

/// A predicate on a parameter name; true = excluded (from weight decay, from LAMB's
/// layer adaptation).
using name_predicate = std::function<bool(std::string_view)>;

/// BERT/ALBERT weight-decay exclusion: biases (a name that is "bias" or ends in ".bias")
/// and normalisation parameters (a name containing "norm", case-insensitively, so both
/// "encoder.0.norm1.weight" and Hugging Face's "LayerNorm.weight" match).
inline bool exclude_norm_and_bias(std::string_view name) {
    if (name == "bias" || name.ends_with(".bias")) return true;
    for (std::size_t i = 0; i + 4 <= name.size(); ++i) {
        const auto lower = [&](std::size_t k) { return static_cast<char>(std::tolower(static_cast<unsigned char>(name[i + k]))); };
        if (lower(0) == 'n' && lower(1) == 'o' && lower(2) == 'r' && lower(3) == 'm') return true;
    }
    return false;
}
/// Excludes nothing: every parameter is decayed (plain torch.optim behaviour).
inline bool exclude_none(std::string_view) { return false; }

namespace detail {

/// The update rules (backend/update_rules.hpp) are what primitives<B> applies per element.
template <class T>
using adam_moments = rules::adam_moments<T>;

inline std::string format_double(double v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
    return std::string(buf, r.ptr);
}
template <class N>
bool parse_number(const std::string& s, N& out) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

}  // namespace detail

template <class T, class B = backend::cpu>
class Optimizer {
public:
    using tensor_type = Tensor<T, B>;
    using var_type = Var<T, B>;
    using state_tensor_list = std::vector<std::pair<std::string, tensor_type>>;
    using state_scalar_map = std::map<std::string, std::string>;

    /// One parameter and its optimiser state.
    struct Param {
        std::string name;
        var_type var;
        std::size_t group = 0;         // index into groups()
        bool decay_excluded = false;   // the weight-decay predicate excluded it
        std::int64_t steps = 0;        // updates this parameter has received
        std::vector<tensor_type> slots;  // per slot_names(); allocated on the first update
    };
    /// Parameters sharing hyper-parameters (here: the weight decay).
    struct ParamGroup {
        std::string name;  // "decay" or "no_decay"
        double weight_decay = 0;
        std::vector<std::size_t> params;  // indices into params()
    };

    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;
    virtual ~Optimizer() = default;

    /// "sgd", "adam", "adamw", "lamb": the prefix of state names.
    [[nodiscard]] virtual std::string type() const = 0;
    /// Names of the per-parameter state tensors ({"m", "v"} for Adam; may be empty).
    [[nodiscard]] virtual std::vector<std::string> slot_names() const = 0;

    /// One update of every parameter whose gradient is defined. Everything is checked
    /// (shapes, contiguity) before anything is modified.
    void step();
    /// Leaves every gradient undefined (the next backward() starts afresh).
    void zero_grad() {
        for (Param& p : params_) p.var.zero_grad();
    }

    [[nodiscard]] double lr() const { return lr_; }
    void set_lr(double lr) {
        DEPTHLAB_CHECK(std::isfinite(lr) && lr >= 0, usage_error, type(), ": learning rate must be finite and >= 0, got ", lr);
        lr_ = lr;
    }
    /// Number of step() calls so far (restored by load_state).
    [[nodiscard]] std::int64_t step_count() const { return step_count_; }

    [[nodiscard]] const std::vector<Param>& params() const { return params_; }
    [[nodiscard]] const std::vector<ParamGroup>& groups() const { return groups_; }
    /// The parameters as (name, Var), duplicates removed (e.g. for clip_grad_norm).
    [[nodiscard]] named_parameters<T, B> parameters() const {
        named_parameters<T, B> out;
        for (const Param& p : params_) out.emplace_back(p.name, p.var);
        return out;
    }

    // ---- state export / import (checkpoints) ----

    /// "<type>.<slot>.<parameter>" for every parameter that has been updated at least once.
    /// The tensors share storage with the live state: write or clone them before the next step().
    [[nodiscard]] state_tensor_list state_tensors() const;
    /// Exact scalars: "optimizer" (the type), "step", "lr" (shortest round-trip decimal),
    /// "<type>.step.<parameter>" for every updated parameter, and "<type>.hparam.<name>"
    /// (informational: load_state ignores them; the constructed optimiser's settings win).
    [[nodiscard]] state_scalar_map state_scalars() const;
    /// Restores what state_tensors()/state_scalars() exported. Checks, before changing
    /// anything: the optimiser type, every scalar, that every tensor name is a known slot of
    /// a known parameter with the parameter's shape, that each updated parameter has all
    /// its slots, and that every value is finite (and >= 0 in second-moment slots: a
    /// negative one turns the parameter NaN at the next step). Throws usage_error (names,
    /// scalars), shape_error (shapes) or io_error (values: corrupt state) naming the
    /// culprit; `origin` (e.g. the checkpoint's path) is named in every message.
    void load_state(const state_tensor_list& tensors, const state_scalar_map& scalars, std::string_view origin = {});

protected:
    /// True for state slots that can only hold values >= 0 (Adam's and LAMB's second moments).
    [[nodiscard]] virtual bool slot_is_nonnegative(std::size_t /*slot*/) const { return false; }

    /// Builds the groups: parameters for which `exclude_from_decay(name)` holds get no
    /// weight decay. Throws usage_error on an empty list, an undefined Var, a repeated
    /// name, or bad lr / weight decay.
    Optimizer(const named_parameters<T, B>& params, double lr, double weight_decay, const name_predicate& exclude_from_decay,
              const std::string& type_name);

    /// Updates params()[i] (its gradient is defined and checked; its step count already
    /// incremented) with the current learning rate and its group's weight decay.
    virtual void update(std::size_t i, double lr, double weight_decay) = 0;
    /// Updates every params()[i] for i in `due` (as update). An optimiser with a multi-tensor
    /// primitive does all of them in one call (a few kernel launches on a device for the
    /// whole model); the default updates them one by one.
    virtual void update_all(const std::vector<std::size_t>& due, double lr) {
        for (std::size_t i : due) update(i, lr, weight_decay_of(i));
    }
    /// The weight decay of params()[i]'s group.
    [[nodiscard]] double weight_decay_of(std::size_t i) const { return groups_[params_[i].group].weight_decay; }
    /// Hyper-parameters reported by state_scalars().
    [[nodiscard]] virtual std::vector<std::pair<std::string, double>> hyperparameters() const = 0;

    Param& param(std::size_t i) { return params_[i]; }
    /// State slot k of parameter i, zero-initialised on first use.
    tensor_type& slot(std::size_t i, std::size_t k) {
        Param& p = params_[i];
        if (p.slots.size() <= k) p.slots.resize(k + 1);
        if (!p.slots[k].defined()) p.slots[k] = tensor_type::zeros(p.var.value().shape());
        return p.slots[k];
    }

private:
    /// io_error unless every value of a state tensor is finite (and >= 0 if nonnegative);
    /// the message counts the bad values and names the first.
    static void check_state_values(const std::string& where, const std::string& key, const tensor_type& t, bool nonnegative) {
        const value_scan<T> r = scan_values(t, [&](T x) { return !std::isfinite(x) || (nonnegative && x < T(0)); });
        DEPTHLAB_CHECK(r.count == 0, io_error, where, "tensor '", key, "' holds ", r.count, " invalid value", r.count == 1 ? "" : "s",
                       nonnegative ? " (non-finite or negative second moments)" : " (non-finite)", "; the first is ", r.value,
                       " at flat index ", r.first, " of ", r.numel);
    }

    [[nodiscard]] std::size_t find_param(const std::string& name) const {
        for (std::size_t i = 0; i < params_.size(); ++i)
            if (params_[i].name == name) return i;
        return params_.size();
    }

    std::vector<Param> params_;
    std::vector<ParamGroup> groups_;
    double lr_ = 0;
    std::int64_t step_count_ = 0;
};

// Defined outside the class body, so not inline: under DEPTHLAB_COMPILED a program calls the
// library's copy instead of compiling it again (include/depthlab/compiled.hpp).
template <class T, class B>
void Optimizer<T, B>::step() {
    for (const Param& p : params_) {
        if (!p.var.grad().defined()) continue;
        const tensor_type& w = p.var.value();
        const tensor_type& g = p.var.grad();
        DEPTHLAB_CHECK(g.shape() == w.shape(), shape_error, type(), ".step: gradient of '", p.name, "' has shape ", g.shape(),
                       " but the parameter has shape ", w.shape());
        DEPTHLAB_CHECK(w.is_contiguous() && g.is_contiguous(), usage_error, type(), ".step: parameter '", p.name,
                       "' or its gradient is not contiguous");
        for (std::size_t k = 0; k < p.slots.size(); ++k)
            DEPTHLAB_CHECK(!p.slots[k].defined() || p.slots[k].shape() == w.shape(), shape_error, type(), ".step: parameter '",
                           p.name, "' now has shape ", w.shape(), " but its state '", slot_names()[k], "' has shape ",
                           p.slots[k].shape());
    }
    no_grad guard;
    ++step_count_;
    std::vector<std::size_t> due;
    due.reserve(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i) {
        Param& p = params_[i];
        if (!p.var.grad().defined()) continue;
        ++p.steps;
        due.push_back(i);
    }
    update_all(due, lr_);
}

template <class T, class B>
void Optimizer<T, B>::load_state(const state_tensor_list& tensors, const state_scalar_map& scalars, std::string_view origin) {
    const std::string where = origin.empty() ? type() + ".load_state: "
                                             : depthlab::detail::cat(type(), ".load_state (", origin, "): ");
    const auto scalar = [&](const std::string& key) -> const std::string& {
        const auto it = scalars.find(key);
        DEPTHLAB_CHECK(it != scalars.end(), usage_error, where, "missing scalar '", key, "'");
        return it->second;
    };
    const std::string& kind = scalar("optimizer");
    DEPTHLAB_CHECK(kind == type(), usage_error, where, "the state belongs to a '", kind, "' optimiser, not '", type(), "'");
    std::int64_t step = 0;
    DEPTHLAB_CHECK(detail::parse_number(scalar("step"), step) && step >= 0, usage_error, where, "scalar 'step' = '",
                   scalar("step"), "' is not a step count");
    double lr = 0;
    DEPTHLAB_CHECK(detail::parse_number(scalar("lr"), lr) && std::isfinite(lr) && lr >= 0, usage_error, where, "scalar 'lr' = '",
                   scalar("lr"), "' is not a learning rate");

    const std::string step_prefix = type() + ".step.", hparam_prefix = type() + ".hparam.";
    std::vector<std::int64_t> steps(params_.size(), 0);
    for (const auto& [key, value] : scalars) {
        if (key == "optimizer" || key == "step" || key == "lr" || key.starts_with(hparam_prefix)) continue;
        DEPTHLAB_CHECK(key.starts_with(step_prefix), usage_error, where, "unknown scalar '", key, "'");
        const std::string name = key.substr(step_prefix.size());
        const std::size_t i = find_param(name);
        DEPTHLAB_CHECK(i < params_.size(), usage_error, where, "scalar '", key, "' names no parameter of this optimiser");
        std::int64_t s = 0;
        DEPTHLAB_CHECK(detail::parse_number(value, s) && s >= 1 && s <= step, usage_error, where, "scalar '", key, "' = '", value,
                       "' is not a step count in [1, ", step, "]");
        steps[i] = s;
    }

    const auto slots = slot_names();
    const std::string tensor_prefix = type() + ".";
    std::vector<std::vector<const tensor_type*>> found(params_.size(), std::vector<const tensor_type*>(slots.size(), nullptr));
    for (const auto& [key, t] : tensors) {
        DEPTHLAB_CHECK(key.starts_with(tensor_prefix), usage_error, where, "tensor '", key, "' is not '", type(),
                       ".<slot>.<parameter>'");
        const std::string rest = key.substr(tensor_prefix.size());
        const std::size_t dot = rest.find('.');
        const std::string slot = dot == std::string::npos ? rest : rest.substr(0, dot);
        const auto sk = std::find(slots.begin(), slots.end(), slot);
        DEPTHLAB_CHECK(dot != std::string::npos && sk != slots.end(), usage_error, where, "tensor '", key, "': '", slot,
                       "' is not a state slot of ", type());
        const std::string name = rest.substr(dot + 1);
        const std::size_t i = find_param(name);
        DEPTHLAB_CHECK(i < params_.size(), usage_error, where, "tensor '", key, "' names no parameter of this optimiser");
        const auto k = static_cast<std::size_t>(sk - slots.begin());
        DEPTHLAB_CHECK(found[i][k] == nullptr, usage_error, where, "tensor '", key, "' appears twice");
        DEPTHLAB_CHECK(t.defined(), usage_error, where, "tensor '", key, "' is undefined");
        DEPTHLAB_CHECK(t.shape() == params_[i].var.value().shape(), shape_error, where, "tensor '", key, "' has shape ", t.shape(),
                       " but parameter '", name, "' has shape ", params_[i].var.value().shape());
        DEPTHLAB_CHECK(steps[i] > 0, usage_error, where, "tensor '", key, "' given but scalar '", step_prefix, name,
                       "' (the parameter's step count) is missing");
        check_state_values(where, key, t, slot_is_nonnegative(k));
        found[i][k] = &t;
    }
    for (std::size_t i = 0; i < params_.size(); ++i)
        for (std::size_t k = 0; k < slots.size(); ++k)
            DEPTHLAB_CHECK(steps[i] == 0 || found[i][k] != nullptr, usage_error, where, "missing tensor '", tensor_prefix,
                           slots[k], ".", params_[i].name, "' (parameter '", params_[i].name, "' has taken ", steps[i],
                           " steps)");

    // All checked: apply.
    for (std::size_t i = 0; i < params_.size(); ++i) {
        Param& p = params_[i];
        p.steps = steps[i];
        p.slots.assign(slots.size(), tensor_type());
        if (steps[i] == 0) continue;
        for (std::size_t k = 0; k < slots.size(); ++k) {
            p.slots[k] = tensor_type::empty(found[i][k]->shape());
            p.slots[k].copy_(*found[i][k]);
        }
    }
    step_count_ = step;
    lr_ = lr;
}

template <class T, class B>
Optimizer<T, B>::Optimizer(const named_parameters<T, B>& params, double lr, double weight_decay, const name_predicate& exclude_from_decay,
                           const std::string& type_name) {
    DEPTHLAB_CHECK(!params.empty(), usage_error, type_name, ": empty parameter list");
    DEPTHLAB_CHECK(std::isfinite(lr) && lr >= 0, usage_error, type_name, ": learning rate must be finite and >= 0, got ", lr);
    DEPTHLAB_CHECK(std::isfinite(weight_decay) && weight_decay >= 0, usage_error, type_name,
                   ": weight decay must be finite and >= 0, got ", weight_decay);
    lr_ = lr;
    groups_ = {ParamGroup{"decay", weight_decay, {}}, ParamGroup{"no_decay", 0.0, {}}};
    std::unordered_set<const void*> seen_nodes;
    std::set<std::string> seen_names;
    for (const auto& [name, var] : params) {
        DEPTHLAB_CHECK(var.defined(), usage_error, type_name, ": parameter '", name, "' is an undefined Var");
        DEPTHLAB_CHECK(seen_names.insert(name).second, usage_error, type_name, ": parameter name '", name, "' appears twice");
        if (!seen_nodes.insert(var.node_ptr().get()).second) continue;  // the same Var under another name
        Param p;
        p.name = name;
        p.var = var;
        p.decay_excluded = exclude_from_decay ? exclude_from_decay(name) : false;
        p.group = p.decay_excluded ? 1 : 0;
        groups_[p.group].params.push_back(params_.size());
        params_.push_back(std::move(p));
    }
}

template <class T, class B>
typename Optimizer<T, B>::state_scalar_map Optimizer<T, B>::state_scalars() const {
    state_scalar_map out;
    out["optimizer"] = type();
    out["step"] = std::to_string(step_count_);
    out["lr"] = detail::format_double(lr_);
    for (const Param& p : params_)
        if (p.steps > 0) out[type() + ".step." + p.name] = std::to_string(p.steps);
    for (const auto& [k, v] : hyperparameters()) out[type() + ".hparam." + k] = detail::format_double(v);
    return out;
}

template <class T, class B>
typename Optimizer<T, B>::state_tensor_list Optimizer<T, B>::state_tensors() const {
    state_tensor_list out;
    const auto slots = slot_names();
    for (const Param& p : params_) {
        if (p.steps == 0) continue;
        for (std::size_t k = 0; k < slots.size(); ++k) out.emplace_back(type() + "." + slots[k] + "." + p.name, p.slots[k]);
    }
    return out;
}

}  // namespace depthlab::optim
