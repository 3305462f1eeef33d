#pragma once
// In-memory parameter snapshots: keep θ⁰ at initialisation, restore it, or set one module's
// parameters to (1 − α) θ⁰ + α θᶠ (weight rewinding and criticality need exactly this).
// Values are copied in place, so every Var handle of the model stays valid.
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "depthlab/nn/module.hpp"

namespace depthlab::nn {

template <class T, class B = backend::cpu>
class Snapshot {
public:
    Snapshot() = default;
    /// Copies of every parameter of m.
    explicit Snapshot(const Module<T, B>& m);
    /// Copies of saved tensors (e.g. θ⁰ read from a checkpoint) for the parameters of m: one
    /// tensor per parameter, by name, with its shape; io_error naming the first that is not.
    Snapshot(const Module<T, B>& m, const std::vector<std::pair<std::string, Tensor<T, B>>>& saved);
    [[nodiscard]] const std::vector<std::pair<std::string, Tensor<T, B>>>& tensors() const { return tensors_; }
    [[nodiscard]] const Tensor<T, B>& at(const std::string& name) const {
        auto it = index_.find(name);
        DEPTHLAB_CHECK(it != index_.end(), error, "Snapshot: no parameter '", name, "'");
        return tensors_[it->second].second;
    }

    /// Writes the snapshot back into m: every parameter, or only those under `prefix`
    /// (a module name such as "decoder.5.feed_forward").
    void restore(Module<T, B>& m, const std::string& prefix = "") const { interpolate(m, *this, *this, 1.0, prefix); }

    /// For the parameters under `prefix` (all when empty): θ = (1 − α) a + α b.
    /// Parameters outside the prefix are left untouched. α = 0 gives a, α = 1 gives b exactly.
    static void interpolate(Module<T, B>& m, const Snapshot& a, const Snapshot& b, double alpha, const std::string& prefix = "");

private:
    std::vector<std::pair<std::string, Tensor<T, B>>> tensors_;
    std::unordered_map<std::string, std::size_t> index_;
};

// Defined outside the class body, so not inline: under DEPTHLAB_COMPILED a program calls the
// library's copy instead of compiling it again (include/depthlab/compiled.hpp).
template <class T, class B>
Snapshot<T, B>::Snapshot(const Module<T, B>& m) {
    for (auto& [name, p] : m.named_parameters()) {
        index_.emplace(name, tensors_.size());
        tensors_.emplace_back(name, p.value().clone());
    }
}

template <class T, class B>
Snapshot<T, B>::Snapshot(const Module<T, B>& m, const std::vector<std::pair<std::string, Tensor<T, B>>>& saved) {
    std::unordered_map<std::string, const Tensor<T, B>*> by_name;
    for (const auto& [name, t] : saved) by_name.emplace(name, &t);
    for (auto& [name, p] : m.named_parameters()) {
        const auto it = by_name.find(name);
        DEPTHLAB_CHECK(it != by_name.end(), io_error, "Snapshot: no saved tensor for parameter '", name, "'");
        DEPTHLAB_CHECK(it->second->shape() == p.value().shape(), io_error, "Snapshot: saved '", name, "' has shape ", it->second->shape(),
                       ", the parameter ", p.value().shape());
        index_.emplace(name, tensors_.size());
        tensors_.emplace_back(name, it->second->clone());
    }
    DEPTHLAB_CHECK(saved.size() == tensors_.size(), io_error, "Snapshot: ", saved.size(), " saved tensors for ", tensors_.size(), " parameters");
}

template <class T, class B>
void Snapshot<T, B>::interpolate(Module<T, B>& m, const Snapshot& a, const Snapshot& b, double alpha, const std::string& prefix) {
    std::size_t matched = 0;
    for (auto& [name, p] : m.named_parameters()) {
        if (!is_under(name, prefix)) continue;
        ++matched;
        const Tensor<T, B>& ta = a.at(name);
        const Tensor<T, B>& tb = b.at(name);
        DEPTHLAB_CHECK(ta.shape() == p.value().shape() && tb.shape() == p.value().shape(), shape_error, "Snapshot: parameter '",
                       name, "' has shape ", p.value().shape(), ", snapshots hold ", ta.shape(), " and ", tb.shape());
        Tensor<T, B>& dst = p.value();
        const index_t n = dst.numel();
        if (alpha == 0.0) {
            dst.copy_(ta);
        } else if (alpha == 1.0) {
            dst.copy_(tb);
        } else {
            primitives<B>::axpby(n, static_cast<T>(1.0 - alpha), ta.data(), T(0), dst.data());
            primitives<B>::axpby(n, static_cast<T>(alpha), tb.data(), T(1), dst.data());
        }
    }
    DEPTHLAB_CHECK(matched > 0, error, "Snapshot: no parameter under '", prefix, "'");
}

}  // namespace depthlab::nn
