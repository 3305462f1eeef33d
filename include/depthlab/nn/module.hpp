#pragma once
// Module: a named tree of parameters, as in PyTorch. Parameter names follow state_dict
// habits ("encoder.3.self_attention.q_proj.weight"), so checkpoints map one to one.
// Parameters are Var handles: swapping a parameter's value (rewinding, interpolation)
// never needs the model to be rebuilt.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "depthlab/autodiff/variable.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/core/tensor.hpp"

namespace depthlab::nn {

template <class T, class B>
using named_parameter = std::pair<std::string, Var<T, B>>;

/// True when a parameter name is `prefix` itself or lies below it ("prefix." + ...); an
/// empty prefix matches everything. "encoder.1" does not match "encoder.10.x".
inline bool is_under(const std::string& name, const std::string& prefix) {
    if (prefix.empty() || name == prefix) return true;
    return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 && name[prefix.size()] == '.';
}

template <class T, class B = backend::cpu>
class Module {
public:
    using value_type = T;
    using backend_type = B;

    Module() = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;
    virtual ~Module() = default;

    /// Every parameter below this module, depth first, in registration order.
    [[nodiscard]] std::vector<named_parameter<T, B>> named_parameters(const std::string& prefix = "") const {
        std::vector<named_parameter<T, B>> out;
        collect(prefix, out);
        return out;
    }
    [[nodiscard]] std::vector<Var<T, B>> parameters() const {
        std::vector<Var<T, B>> out;
        for (auto& [name, p] : named_parameters()) out.push_back(p);
        return out;
    }
    /// Parameter by its full name; throws naming the missing parameter.
    [[nodiscard]] Var<T, B> parameter(const std::string& name) const {
        for (auto& [n, p] : named_parameters())
            if (n == name) return p;
        throw error(detail::cat("Module: no parameter named '", name, "'"));
    }
    [[nodiscard]] index_t parameter_count() const {
        index_t n = 0;
        for (auto& [name, p] : named_parameters()) n += p.value().numel();
        return n;
    }
    void zero_grad() {
        for (auto& [name, p] : named_parameters()) p.zero_grad();
    }
    /// Direct children with their names.
    [[nodiscard]] const std::vector<std::pair<std::string, Module*>>& children() const { return children_; }
    /// Walks this module and every descendant with its full name.
    void visit(const std::function<void(const std::string&, Module&)>& f, const std::string& prefix = "") {
        f(prefix, *this);
        for (auto& [name, child] : children_) child->visit(f, join(prefix, name));
    }

    /// Training mode switches dropout on; eval mode off (like nn.Module.train()/eval()).
    void train(bool on = true) {
        visit([on](const std::string&, Module& m) { m.training_ = on; });
    }
    void eval() { train(false); }
    [[nodiscard]] bool is_training() const { return training_; }

protected:
    Var<T, B> register_parameter(const std::string& name, Tensor<T, B> value) {
        Var<T, B> p = Var<T, B>::parameter(std::move(value));
        params_.emplace_back(name, p);
        return p;
    }
    /// Registers a child that this module owns (the caller keeps a reference or pointer).
    template <class M>
    M& register_module(const std::string& name, std::unique_ptr<M> m) {
        M& ref = *m;
        children_.emplace_back(name, &ref);
        owned_.push_back(std::move(m));
        return ref;
    }
    /// Constructs a child in place and registers it: emplace_module<Linear<T, B>>("proj", 64, 64, gen).
    template <class M, class... Args>
    M& emplace_module(const std::string& name, Args&&... args) {
        return register_module(name, std::make_unique<M>(std::forward<Args>(args)...));
    }
    /// Registers a child owned elsewhere (e.g. one layer shared by every iteration).
    void register_shared(const std::string& name, Module& m) { children_.emplace_back(name, &m); }

private:
    static std::string join(const std::string& a, const std::string& b) {
        if (a.empty()) return b;
        return b.empty() ? a : a + "." + b;
    }
    void collect(const std::string& prefix, std::vector<named_parameter<T, B>>& out) const {
        for (auto& [name, p] : params_) out.emplace_back(join(prefix, name), p);
        for (auto& [name, child] : children_) child->collect(join(prefix, name), out);
    }

    std::vector<named_parameter<T, B>> params_;
    std::vector<std::pair<std::string, Module*>> children_;
    std::vector<std::unique_ptr<Module>> owned_;
    bool training_ = true;
};

/// A list of modules of one type, named "0", "1", ... like torch.nn.ModuleList; the
/// parameters of element i are "<list name>.i.<...>".
template <class M>
class ModuleList : public Module<typename M::value_type, typename M::backend_type> {
public:
    ModuleList() = default;
    /// Constructs one more element in place.
    template <class... Args>
    M& emplace_back(Args&&... args) {
        M& m = this->register_module(std::to_string(items_.size()), std::make_unique<M>(std::forward<Args>(args)...));
        items_.push_back(&m);
        return m;
    }
    [[nodiscard]] std::size_t size() const { return items_.size(); }
    [[nodiscard]] bool empty() const { return items_.empty(); }
    M& operator[](std::size_t i) const {
        DEPTHLAB_CHECK(i < items_.size(), index_error, "ModuleList: index ", i, " out of range for ", items_.size(), " modules");
        return *items_[i];
    }
    [[nodiscard]] auto begin() const { return Deref{items_.begin()}; }
    [[nodiscard]] auto end() const { return Deref{items_.end()}; }

private:
    struct Deref {  // iterates M& rather than M*
        typename std::vector<M*>::const_iterator it;
        M& operator*() const { return **it; }
        Deref& operator++() {
            ++it;
            return *this;
        }
        bool operator!=(const Deref& o) const { return it != o.it; }
    };
    std::vector<M*> items_;
};

/// Modules and functions applied one after another, like torch.nn.Sequential: each step
/// maps a Var to a Var. A module step is named by its position ("0.weight"); a plain
/// function (relu, gelu, a lambda) takes a position too but has no parameters, as
/// nn.ReLU() does in PyTorch, so the names match a PyTorch state_dict of the same stack.
template <class T, class B = backend::cpu>
class Sequential : public Module<T, B> {
public:
    using step_fn = std::function<Var<T, B>(const Var<T, B>&)>;

    /// Appends a module constructed in place; it must be callable as m(x).
    template <class M, class... Args>
    M& add(Args&&... args) {
        M& m = this->register_module(std::to_string(steps_.size()), std::make_unique<M>(std::forward<Args>(args)...));
        steps_.emplace_back([&m](const Var<T, B>& x) { return m(x); });
        return m;
    }
    /// Appends a parameter-free step (e.g. depthlab::relu<float>, or a lambda).
    Sequential& then(step_fn f) {
        DEPTHLAB_CHECK(static_cast<bool>(f), usage_error, "Sequential::then: empty function at step ", steps_.size());
        steps_.push_back(std::move(f));
        return *this;
    }
    [[nodiscard]] std::size_t size() const { return steps_.size(); }
    Var<T, B> operator()(const Var<T, B>& x) const {
        Var<T, B> h = x;
        for (const auto& f : steps_) h = f(h);
        return h;
    }

private:
    std::vector<step_fn> steps_;
};

}  // namespace depthlab::nn
