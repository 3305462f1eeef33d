#pragma once
// The modules the component-value analyses act on (analysis/component_value.hpp): module_ref
// (a name, a type, a layer, its parameters and how to switch it off), default_modules(model)
// (every residual sub-layer with the paper's types), parameter counts for pruning, and the RAII
// guards that switch a module off or interpolate its parameters and always undo it.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "depthlab/autodiff/variable.hpp"
#include "depthlab/io/csv.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/nn/module.hpp"
#include "depthlab/nn/snapshot.hpp"
#include "depthlab/nn/transformer.hpp"
#include "depthlab/train/progress.hpp"

namespace depthlab::analysis {

// ============================================================================ modules

/// One unit of analysis.
struct module_ref {
    std::string name;   // unique, e.g. "decoder.5.feed_forward"
    std::string type;   // "E:SA", "E:FF", "D:SA", "D:EA", "D:FF" (free text for custom modules)
    int layer = -1;     // layer index; -1 when the module is shared by every layer (tied)
    /// Parameters of the module: every parameter whose name is `prefix` or starts with it
    /// and a dot (nn::is_under). Criticality and rewinding move these; pruning counts them.
    /// Empty: the module has no parameters of its own (criticality/rewinding refuse it,
    /// pruning counts 0) — an empty prefix never means "the whole model" here.
    std::string prefix;
    /// ablate(true) switches the module off (its output contributes nothing), ablate(false)
    /// switches it on again. Needed by contribution and pruning only.
    std::function<void(bool)> ablate;
    /// Prefixes under `prefix` whose parameters an ablated module still uses (the LayerNorm
    /// of a post-LN sub-layer): not counted as removed by pruning.
    std::vector<std::string> kept_prefixes;
    /// Whether the model holding the module is in training mode (set by default_modules):
    /// the analyses that evaluate a metric refuse a model with dropout on.
    std::function<bool()> training;
    /// What the ablation kinds other than zero act on: the residual sub-layer behind the
    /// module (default_modules) or the head (head_modules). Null for a hand-built module,
    /// which only knows zero.
    std::shared_ptr<nn::ablation_target> target;
    /// For a module whose parameters are not a name prefix (an attention head's slices):
    /// interpolate(α) sets them to (1 − α)θ⁰ + αθᶠ, α = 1 writes θᶠ back. Criticality uses it
    /// instead of `prefix` when set; rewinding and pruning's counts still need a prefix.
    std::function<void(double alpha)> interpolate;
};

namespace detail {
inline std::vector<std::string> split_name(const std::string& s) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
        if (c == '.') {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}
inline bool all_digits(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
}  // namespace detail

/// Paper type ("E:SA", ...) and layer of a sub-layer name: side "D" when a component of the
/// name is "decoder", "E" otherwise; SA / EA / FF from the sub-layer type; layer = the last
/// all-digit component of the name, -1 when there is none (a tied stack's "shared").
inline std::pair<std::string, int> paper_type(const std::string& name, nn::sublayer_type t) {
    const auto parts = detail::split_name(name);
    const bool decoder = std::find(parts.begin(), parts.end(), "decoder") != parts.end();
    const char* kind = t == nn::sublayer_type::self_attention    ? "SA"
                       : t == nn::sublayer_type::cross_attention ? "EA"
                                                                 : "FF";
    int layer = -1;
    for (auto it = parts.rbegin(); it != parts.rend(); ++it)
        if (detail::all_digits(*it)) {
            layer = std::stoi(*it);
            break;
        }
    return {std::string(decoder ? "D:" : "E:") + kind, layer};
}

/// Every residual sub-layer of `model` (nn::sublayers, model order) as a module:
/// encoder self_attention -> "E:SA", encoder feed_forward -> "E:FF", decoder
/// self_attention -> "D:SA", decoder cross_attention -> "D:EA", decoder feed_forward ->
/// "D:FF"; layer = the index in the name, -1 for a tied stack's "shared" layer (it stands
/// for every iteration). prefix = the sub-layer name; ablate flips residual_base::enabled.
/// norm_first: whether the sub-layers are pre-LN. Read from model.cfg.layer.norm_first
/// when the model has it (Seq2SeqTransformer, Albert), else post-LN (both papers) unless
/// given. For post-LN the sub-layer's ".norm" is a kept prefix (still used when ablated).
/// The returned ablate functions point into `model`: keep it alive while using them.
template <class Model>
    requires std::derived_from<Model, nn::Module<typename Model::value_type, typename Model::backend_type>>
std::vector<module_ref> default_modules(Model& model, std::optional<bool> norm_first = std::nullopt) {
    bool pre_ln = false;
    if constexpr (requires { static_cast<bool>(model.cfg.layer.norm_first); }) pre_ln = model.cfg.layer.norm_first;
    if (norm_first) pre_ln = *norm_first;
    std::vector<module_ref> out;
    nn::Module<typename Model::value_type, typename Model::backend_type>& base = model;
    for (auto& [name, r] : nn::sublayers(base)) {
        auto [type, layer] = paper_type(name, r->type);
        module_ref m;
        m.name = name;
        m.type = std::move(type);
        m.layer = layer;
        m.prefix = name;
        nn::residual_base* sub = r;
        m.ablate = [sub](bool off) { sub->enabled = !off; };
        m.target = std::shared_ptr<nn::ablation_target>(std::shared_ptr<nn::ablation_target>(), sub);  // not owned: the model's
        if (!pre_ln) m.kept_prefixes.push_back(name + ".norm");
        m.training = [&base] { return base.is_training(); };
        out.push_back(std::move(m));
    }
    DEPTHLAB_CHECK(!out.empty(), usage_error, "default_modules: the model has no residual sub-layers");
    return out;
}

/// Number of parameter values the listed modules stop using when all of them are ablated:
/// parameters under a module's prefix and under none of its kept prefixes, each counted once.
template <class T, class B>
index_t parameters_removed(const nn::Module<T, B>& model, const std::vector<const module_ref*>& modules) {
    index_t n = 0;
    for (auto& named : model.named_parameters()) {
        const std::string& name = named.first;  // (not a structured binding: the lambda below captures it)
        const auto& p = named.second;
        for (const module_ref* m : modules) {
            if (m->prefix.empty() || !nn::is_under(name, m->prefix)) continue;
            const bool kept = std::any_of(m->kept_prefixes.begin(), m->kept_prefixes.end(),
                                          [&](const std::string& k) { return nn::is_under(name, k); });
            if (kept) continue;
            n += p.value().numel();
            break;
        }
    }
    return n;
}
template <class T, class B>
index_t parameters_removed(const nn::Module<T, B>& model, const std::vector<module_ref>& modules) {
    std::vector<const module_ref*> ptrs;
    for (const auto& m : modules) ptrs.push_back(&m);
    return parameters_removed(model, ptrs);
}

// ============================================================================ guards

/// Refuses an ablation kind a module cannot take: anything but zero without a sub-layer,
/// mean without a recorded mean.
inline void check_ablation(const module_ref& m, nn::ablation_kind kind) {
    if (kind == nn::ablation_kind::zero) return;
    DEPTHLAB_CHECK(m.target != nullptr, usage_error, "ablation: module '", m.name, "' is not a residual sub-layer or a head; only zero ablation applies to it, not ",
                   nn::to_string(kind));
    DEPTHLAB_CHECK(kind != nn::ablation_kind::mean || m.target->means().has_mean(), usage_error, "ablation: module '", m.name,
                   "' has no recorded mean output for mean ablation (analysis::record_ablation_means first)");
}

/// Switches modules off for its lifetime, each replaced as its ablation kind says; switches
/// them on again (reverse order, back to the zero kind) when destroyed, also during stack
/// unwinding. Errors while switching on are swallowed there.
class scoped_ablation {
public:
    scoped_ablation() = default;
    explicit scoped_ablation(const module_ref& m, nn::ablation_kind kind = nn::ablation_kind::zero) { add(m, kind); }
    scoped_ablation(const scoped_ablation&) = delete;
    scoped_ablation& operator=(const scoped_ablation&) = delete;
    ~scoped_ablation() { restore(); }

    /// Switches one more module off.
    void add(const module_ref& m, nn::ablation_kind kind = nn::ablation_kind::zero) {
        DEPTHLAB_CHECK(static_cast<bool>(m.ablate), usage_error, "ablation: module '", m.name, "' has no ablate function");
        check_ablation(m, kind);
        off_.push_back(&m);  // before the calls: a half-done ablate(true) is undone too
        if (m.target) m.target->set_ablation(kind);
        m.ablate(true);
    }
    /// Switches every module on again now.
    void restore() noexcept {
        while (!off_.empty()) {
            try {
                off_.back()->ablate(false);
            } catch (...) {
            }
            if (off_.back()->target) off_.back()->target->set_ablation(nn::ablation_kind::zero);
            off_.pop_back();
        }
    }
    [[nodiscard]] std::size_t size() const { return off_.size(); }

private:
    std::vector<const module_ref*> off_;
};

/// Records the mean output of every module (its sub-layer's, or its head's), per position and
/// feature, over the reference forward passes forward(0), ..., forward(batches − 1) (the
/// caller's: e.g. the model on N training batches, teacher-forced, in eval mode), for mean
/// ablation. Modules without a target are skipped. On an exception no partial mean is kept.
inline void record_ablation_means(const std::vector<module_ref>& modules, std::size_t batches, const std::function<void(std::size_t)>& forward) {
    DEPTHLAB_CHECK(batches >= 1, usage_error, "record_ablation_means: ", batches, " reference batches (at least 1)");
    DEPTHLAB_CHECK(static_cast<bool>(forward), usage_error, "record_ablation_means: no reference forward function");
    std::vector<nn::mean_recording*> subs;  // each recorder once (the heads of an attention share one)
    for (const auto& m : modules) {
        if (!m.target) continue;
        DEPTHLAB_CHECK(m.target->is_on(), usage_error, "record_ablation_means: module '", m.name, "' is switched off");
        nn::mean_recording* r = &m.target->means();
        if (std::find(subs.begin(), subs.end(), r) == subs.end()) subs.push_back(r);
    }
    struct recording {
        std::vector<nn::mean_recording*>& subs;
        bool done = false;
        ~recording() {
            if (!done)
                for (auto* s : subs) s->discard_recording();
        }
    } guard{subs};
    for (auto* s : subs) s->record_mean(true);
    {
        no_grad g;
        for (std::size_t i = 0; i < batches; ++i) forward(i);
    }
    for (auto* s : subs) s->record_mean(false);
    guard.done = true;
}

/// Moves a module's parameters for its lifetime: set(α) calls the function (a module's own
/// interpolate, or interpolation_by_prefix), and θᶠ is written back (α = 1) when destroyed,
/// also during stack unwinding.
class scoped_module_interpolation {
public:
    explicit scoped_module_interpolation(std::function<void(double)> f) : f_(std::move(f)) {}
    scoped_module_interpolation(const scoped_module_interpolation&) = delete;
    scoped_module_interpolation& operator=(const scoped_module_interpolation&) = delete;
    ~scoped_module_interpolation() {
        try {
            f_(1.0);
        } catch (...) {
        }
    }
    void set(double alpha) {
        DEPTHLAB_CHECK(alpha >= 0.0 && alpha <= 1.0, usage_error, "interpolation: alpha ", alpha, " outside [0, 1]");
        f_(alpha);
    }

private:
    std::function<void(double)> f_;
};

/// α ↦ the parameters under `prefix` set to (1 − α) θ⁰ + α θᶠ (nn::Snapshot::interpolate).
template <class T, class B>
std::function<void(double)> interpolation_by_prefix(nn::Module<T, B>& model, std::string prefix, const nn::Snapshot<T, B>& initial,
                                                    const nn::Snapshot<T, B>& final_) {
    DEPTHLAB_CHECK(!prefix.empty(), usage_error, "interpolation: empty parameter prefix (it would move the whole model)");
    return [&model, prefix = std::move(prefix), &initial, &final_](double alpha) { nn::Snapshot<T, B>::interpolate(model, initial, final_, alpha, prefix); };
}

/// Sets the parameters under `prefix` to (1 − α) θ⁰ + α θᶠ for its lifetime (set() moves α);
/// writes θᶠ back under the prefix when destroyed, also during stack unwinding.
template <class T, class B>
class scoped_interpolation : public scoped_module_interpolation {
public:
    scoped_interpolation(nn::Module<T, B>& model, std::string prefix, const nn::Snapshot<T, B>& initial, const nn::Snapshot<T, B>& final_)
        : scoped_module_interpolation(interpolation_by_prefix(model, std::move(prefix), initial, final_)) {}
};

}  // namespace depthlab::analysis
