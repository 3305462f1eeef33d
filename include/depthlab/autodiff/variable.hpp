#pragma once
// Reverse-mode autodiff over coarse ops. A Var is a handle to a node that holds a value,
// a lazily allocated gradient and, for results of ops, the parents and a backward
// function. backward() walks the DAG in reverse topological order; every backward
// function *accumulates* into its parents' gradients, so a value used twice (tied weights,
// residual branches) needs no special case.
//
// As in PyTorch, backward() frees the graph it went through (the saved activations are
// released as soon as their node has been differentiated), and a second backward() through
// a freed node is an error instead of silently doubling the gradients: pass
// depthlab::retain_graph to the first one to go through a graph twice.
#include <algorithm>
#include <functional>
#include <iomanip>
#include <exception>
#include <memory>
#include <ostream>
#include <unordered_set>
#include <utility>
#include <vector>

#include "depthlab/autodiff/op_kind.hpp"
#include "depthlab/autodiff/profiler.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/core/tensor.hpp"

namespace depthlab {

namespace detail {
inline bool& grad_mode() {
    thread_local bool enabled = true;
    return enabled;
}
}  // namespace detail

/// Tag for Var::backward: keep the graph so that another backward() can go through it.
struct retain_graph_t {
    explicit retain_graph_t() = default;
};
inline constexpr retain_graph_t retain_graph{};

/// True unless inside a no_grad scope on this thread.
inline bool grad_enabled() { return detail::grad_mode(); }

/// RAII scope in which ops record nothing (evaluation, optimiser updates).
class no_grad {
public:
    no_grad() : saved_(detail::grad_mode()) { detail::grad_mode() = false; }
    ~no_grad() { detail::grad_mode() = saved_; }
    no_grad(const no_grad&) = delete;
    no_grad& operator=(const no_grad&) = delete;

private:
    bool saved_;
};

template <class T, class B>
struct Node {
    Tensor<T, B> value;
    Tensor<T, B> grad;  // undefined until something flows into it
    bool requires_grad = false;
    bool retain_grad = false;  // keep the gradient of a non-leaf after backward
    bool freed = false;        // a backward() without retain_graph went through it
    op_kind op = op_kind::leaf;
    std::vector<std::shared_ptr<Node>> parents;
    std::function<void(Node&)> backward;  // reads this->grad, accumulates into parents

    /// The gradient buffer, zero-initialised on first use.
    Tensor<T, B>& grad_buffer() {
        if (!grad.defined()) grad = Tensor<T, B>::zeros(value.shape());
        return grad;
    }
};

namespace detail {
/// What names an op's line in an op_profiler: a parameter (a leaf that takes gradients) or a
/// slice, reshape or transpose of one (the query block of a packed QKV weight).
template <class T, class B>
bool profiled_parameter(const Node<T, B>& n, int depth = 0) {
    if (n.op == op_kind::leaf) return n.requires_grad;
    const bool view = n.op == op_kind::slice || n.op == op_kind::reshape || n.op == op_kind::transpose;
    return view && depth < 3 && n.parents.size() == 1 && n.parents[0] && profiled_parameter(*n.parents[0], depth + 1);
}
}  // namespace detail

template <class T, class B = backend::cpu>
class Var {
public:
    using node_type = Node<T, B>;
    using tensor_type = Tensor<T, B>;

    Var() = default;
    /// A constant (no gradient).
    explicit Var(tensor_type value, bool requires_grad = false) : n_(std::make_shared<node_type>()) {
        n_->value = std::move(value);
        n_->requires_grad = requires_grad;
    }
    /// A trainable leaf.
    static Var parameter(tensor_type value) { return Var(std::move(value), true); }
    static Var constant(tensor_type value) { return Var(std::move(value), false); }

    [[nodiscard]] bool defined() const { return n_ != nullptr; }
    // A Var is a handle (like a shared_ptr): constness of the handle does not make the
    // value read-only, so parameters held in const containers can still be updated.
    [[nodiscard]] tensor_type& value() const { return node().value; }
    [[nodiscard]] const Shape& shape() const { return node().value.shape(); }
    [[nodiscard]] bool requires_grad() const { return node().requires_grad; }
    [[nodiscard]] bool is_leaf() const { return node().op == op_kind::leaf; }
    [[nodiscard]] op_kind op() const { return node().op; }
    /// The accumulated gradient (undefined tensor if none has flowed here).
    [[nodiscard]] tensor_type& grad() const { return node().grad; }
    /// Drops the gradient (the next backward starts from zero).
    void zero_grad() const { node().grad = tensor_type(); }
    /// Keep this non-leaf value's gradient after backward().
    const Var& retain_grad() const {
        node().retain_grad = true;
        return *this;
    }
    [[nodiscard]] node_type& node() const {
        DEPTHLAB_CHECK(n_ != nullptr, usage_error, "Var: use of an undefined variable");
        return *n_;
    }
    [[nodiscard]] const std::shared_ptr<node_type>& node_ptr() const { return n_; }

    /// Backpropagate from a scalar (seed 1); frees the graph.
    void backward() const { backward(scalar_seed(), false); }
    /// Backpropagate from a scalar and keep the graph for another backward().
    void backward(retain_graph_t) const { backward(scalar_seed(), true); }
    /// Backpropagate a seed gradient of this value's shape; frees the graph.
    void backward(const tensor_type& seed) const { backward(seed, false); }
    void backward(const tensor_type& seed, retain_graph_t) const { backward(seed, true); }

    /// "Var(2, 3) cpu, op matmul, requires_grad" and the values, like a Tensor.
    friend std::ostream& operator<<(std::ostream& os, const Var& v) {
        if (!v.defined()) return os << "Var (undefined)\n";
        os << "Var" << v.shape() << ", op " << op_name(v.op()) << (v.requires_grad() ? ", requires_grad" : "")
           << (v.grad().defined() ? ", has grad" : "") << "\n";
        return os << v.value();
    }

private:
    tensor_type scalar_seed() const {
        DEPTHLAB_CHECK(value().numel() == 1, shape_error, "backward: needs a scalar output or an explicit seed, got shape ",
                       shape());
        return tensor_type::ones(shape());
    }

    void backward(const tensor_type& seed, bool retain) const {
        check_same_shape("backward(seed)", seed, value());
        DEPTHLAB_CHECK(requires_grad(), usage_error, "backward: output of ", op_name(op()),
                       " does not depend on any parameter (or was computed under no_grad)");
        op_profiler* const prof = op_profiler::active();
        const profiled_backward profiled(prof);
        const std::vector<node_type*> order = topological_order();
        for (auto it = order.rbegin(); it != order.rend(); ++it) {  // from the output down: names the first freed node
            const node_type* nd = *it;
            DEPTHLAB_CHECK(!nd->freed, usage_error, "backward: the graph through ", op_name(nd->op), " (shape ", nd->value.shape(),
                           ") was freed by an earlier backward(); to go through a graph twice, call the first one as "
                           "backward(depthlab::retain_graph)");
        }
        node().grad_buffer().add_(seed);
        if (prof) prof->mark("backward: graph walk");
        for (auto it = order.rbegin(); it != order.rend(); ++it) {
            node_type& nd = **it;
            if (nd.backward && nd.grad.defined()) nd.backward(nd);
            if (nd.op == op_kind::leaf) continue;
            if (!nd.retain_grad) nd.grad = tensor_type();  // free intermediate gradients
            if (!retain) {
                nd.backward = nullptr;  // releases what the op saved for its backward
                nd.freed = true;
            }
            if (prof) profile_backward(*prof, nd);
        }
    }
    /// Charges a node's backward function to its op and first parameter (op_profiler).
    static void profile_backward(op_profiler& prof, const node_type& nd) {
        for (const auto& p : nd.parents)
            if (p && detail::profiled_parameter(*p)) {
                prof.backward_done(nd.op, {p->value.shape().begin(), p->value.shape().end()});
                return;
            }
        prof.backward_done(nd.op);
    }
    /// The profiler's view of one backward(): ops that backward functions run are theirs.
    struct profiled_backward {
        op_profiler* prof;
        explicit profiled_backward(op_profiler* p) : prof(p) {
            if (prof) prof->backward_begins();
        }
        ~profiled_backward() {
            if (prof) prof->backward_ends();
        }
        profiled_backward(const profiled_backward&) = delete;
        profiled_backward& operator=(const profiled_backward&) = delete;
    };

    // Post-order DFS over nodes that require grad (iterative: graphs can be deep).
    std::vector<node_type*> topological_order() const {
        std::vector<node_type*> order;
        std::unordered_set<node_type*> seen;
        std::vector<std::pair<node_type*, std::size_t>> stack{{n_.get(), 0}};
        seen.insert(n_.get());
        while (!stack.empty()) {
            auto& [nd, next] = stack.back();
            if (next < nd->parents.size()) {
                node_type* p = nd->parents[next++].get();
                if (p->requires_grad && seen.insert(p).second) stack.emplace_back(p, 0);
            } else {
                order.push_back(nd);
                stack.pop_back();
            }
        }
        return order;
    }

    std::shared_ptr<node_type> n_;
};

namespace detail {
/// Result of an op: records parents and the backward function when any input requires a
/// gradient and grad mode is on; otherwise a plain constant.
template <class T, class B, class F>
Var<T, B> make_result(op_kind op, Tensor<T, B> value, std::vector<Var<T, B>> inputs, F&& backward) {
    if (op_profiler* prof = op_profiler::active()) {  // (the op's work is done)
        const auto param = std::find_if(inputs.begin(), inputs.end(), [](const Var<T, B>& v) { return profiled_parameter(v.node()); });
        if (param == inputs.end()) prof->forward_done(op);
        else prof->forward_done(op, {param->shape().begin(), param->shape().end()});
    }
    Var<T, B> out(std::move(value));
    const bool needs = grad_enabled() && std::any_of(inputs.begin(), inputs.end(), [](const Var<T, B>& v) { return v.requires_grad(); });
    auto& nd = out.node();
    nd.op = op;
    if (!needs) return out;
    nd.requires_grad = true;
    nd.parents.reserve(inputs.size());
    for (auto& v : inputs) nd.parents.push_back(v.node_ptr());
    nd.backward = std::forward<F>(backward);
    return out;
}
/// Gradient buffer of parent i if it takes a gradient, else nullptr.
template <class T, class B>
T* parent_grad(Node<T, B>& nd, std::size_t i) {
    auto& p = *nd.parents[i];
    return p.requires_grad ? p.grad_buffer().data() : nullptr;
}
/// Where a backward that writes *every element* of parent i's gradient in one call (a GEMM,
/// an elementwise copy or product) puts it: the first gradient to reach the parent is
/// written (beta 0) into a buffer never zero-filled, later ones are accumulated (beta 1).
/// data is nullptr when the parent takes no gradient. Keep it alive until the write is done:
/// if an exception leaves its scope first, a buffer it created is dropped again, so no
/// half-written gradient stays behind.
template <class T, class B>
class grad_out {
public:
    T* data = nullptr;
    T beta = T(1);
    grad_out() = default;
    grad_out(T* d, T b, Node<T, B>* fresh) : data(d), beta(b), fresh_(fresh) {}
    grad_out(const grad_out&) = delete;
    grad_out& operator=(const grad_out&) = delete;
    ~grad_out() {
        if (fresh_ != nullptr && std::uncaught_exceptions() > exceptions_) fresh_->grad = Tensor<T, B>();
    }

private:
    Node<T, B>* fresh_ = nullptr;
    int exceptions_ = std::uncaught_exceptions();
};
/// Where an op passes its gradient to parent i unchanged (add, reshape) and the parent has
/// none yet: the parent takes this node's buffer itself, seen in its own shape, instead of a
/// copy. The buffer is this node's alone (backward drops it right after this node's turn)
/// unless the node keeps its gradient (retain_grad). False where it cannot: the caller then
/// copies or accumulates. Call it last in a backward function: the buffer is the parent's
/// from then on.
template <class T, class B>
bool pass_grad_through(Node<T, B>& nd, std::size_t i) {
    auto& p = *nd.parents[i];
    if (!p.requires_grad || p.grad.defined() || nd.retain_grad || !nd.grad.is_contiguous() || nd.grad.numel() != p.value.numel())
        return false;
    p.grad = nd.grad.reshape(p.value.shape());
    return true;
}
template <class T, class B>
grad_out<T, B> parent_grad_out(Node<T, B>& nd, std::size_t i) {
    auto& p = *nd.parents[i];
    if (!p.requires_grad) return {};
    if (p.grad.defined()) return {p.grad.data(), T(1), nullptr};
    p.grad = Tensor<T, B>::empty(p.value.shape());
    return {p.grad.data(), T(0), &p};
}
}  // namespace detail

}  // namespace depthlab
