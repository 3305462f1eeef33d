#pragma once
// Data parallelism: what train::Trainer does with a communicator of more than one rank
// (and with gradient accumulation on one).
//
//   * The global batch of a step is world x accumulate micro-batches of one deterministic
//     stream, in order; rank r trains on micro-batches r*A .. r*A + A - 1 and skips the
//     others (shard_of). Every rank walks the same stream, so its position after a step is
//     the same on every rank, and a checkpoint written by rank 0 resumes them all.
//   * Each micro-batch's loss is scaled by 1 / (world x accumulate); after its backward the
//     gradients are added into gradient_buckets (one flat buffer in the optimiser's fixed
//     parameter order, reduced in buckets of at most bucket_bytes) and cleared. After the
//     last micro-batch the buckets are all-reduced once (sum) and copied back into the
//     gradients. Never inside a forward or backward pass: ACT ranks halt at different depths
//     and run different iteration counts, so a collective there would deadlock.
//   * The step's gradient is therefore sum over micro-batches, in micro-batch order within a
//     rank and then across ranks by the all-reduce. With 2 ranks that is (0 + g1) + g2 on
//     one side and (0 + g1) + (0 + g2) on the other: the same bits as one process running
//     the 2 micro-batches with accumulate 2, whatever the model (tied weights included).
//   * A parameter without a gradient on any rank (a head not used this step) keeps none:
//     each parameter's "had a gradient" flag is reduced with the buckets.
//
// broadcast_parameters copies rank 0's parameters to every rank (a run's start).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "depthlab/autodiff/variable.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/core/tensor.hpp"
#include "depthlab/dist/communicator.hpp"

namespace depthlab::dist {

/// Which micro-batches of a global batch of world x accumulate are this rank's.
struct shard_of {
    int rank = 0, world = 1;
    std::int64_t accumulate = 1;
    [[nodiscard]] std::int64_t micro_batches() const { return static_cast<std::int64_t>(world) * accumulate; }
    [[nodiscard]] std::int64_t before() const { return static_cast<std::int64_t>(rank) * accumulate; }  // skipped first
    [[nodiscard]] std::int64_t after() const { return static_cast<std::int64_t>(world - 1 - rank) * accumulate; }  // skipped last
};

namespace detail {
/// A collective over a buffer of backend B through a communicator whose buffers live in
/// `comm.memory()`: device tensors go through a host copy for a host communicator.
template <class T, class B, class F>
void on_comm_memory(communicator& comm, T* data, std::size_t n, F&& collective) {
    if constexpr (B::host_accessible) {
        DEPTHLAB_CHECK(comm.memory() == memory_space::host, usage_error, "dist: the ", comm.name(),
                       " communicator reduces device buffers, but these tensors are on the ", B::name, " backend");
        collective(data);
    } else {
        if (comm.memory() == memory_space::device) {
            collective(data);
            return;
        }
        std::vector<T> host(n);
        memory<B>::to_host(data, host.data(), n);
        collective(host.data());
        memory<B>::from_host(host.data(), data, n);
    }
}
template <class T, class B>
void copy_n(index_t n, const T* src, T* dst) {
    primitives<B>::copy_strided(Shape{n}, src, Shape{1}, dst, Shape{1}, /*accumulate=*/false);
}
}  // namespace detail

/// The distinct parameters (by node) of a named list, in order.
template <class T, class B>
std::vector<Var<T, B>> distinct_parameters(const std::vector<std::pair<std::string, Var<T, B>>>& named) {
    std::vector<Var<T, B>> out;
    std::unordered_set<const void*> seen;
    for (const auto& [name, v] : named)
        if (seen.insert(v.node_ptr().get()).second) out.push_back(v);
    return out;
}

/// Every rank's parameters become root's (in place: every Var handle stays valid).
template <class T, class B>
void broadcast_parameters(communicator& comm, const std::vector<Var<T, B>>& params, int root = 0) {
    if (!comm.distributed()) return;
    index_t total = 0;
    for (const auto& p : params) total += p.value().numel();
    if (total == 0) return;
    auto flat = Tensor<T, B>::empty({total});
    index_t off = 0;
    for (const auto& p : params) {
        DEPTHLAB_CHECK(p.value().is_contiguous(), usage_error, "dist::broadcast_parameters: a parameter of shape ", p.shape(),
                       " is not contiguous");
        detail::copy_n<T, B>(p.value().numel(), p.value().data(), flat.data() + off);
        off += p.value().numel();
    }
    detail::on_comm_memory<T, B>(comm, flat.data(), static_cast<std::size_t>(total),
                                 [&](T* d) { comm.broadcast(d, static_cast<std::size_t>(total), root); });
    off = 0;
    for (const auto& p : params) {
        detail::copy_n<T, B>(p.value().numel(), flat.data() + off, const_cast<T*>(p.value().data()));
        off += p.value().numel();
    }
}

/// The gradient buffer of data-parallel steps and of gradient accumulation (file comment).
template <class T, class B>
class gradient_buckets {
public:
    static constexpr std::size_t default_bucket_bytes = std::size_t{25} << 20;  // as PyTorch DDP

    gradient_buckets(communicator& comm, std::vector<Var<T, B>> params, std::size_t bucket_bytes = default_bucket_bytes)
        : comm_(comm), params_(std::move(params)), bucket_elems_(std::max<std::size_t>(1, bucket_bytes / sizeof(T))) {
        offsets_.reserve(params_.size() + 1);
        offsets_.push_back(0);
        for (const auto& p : params_) offsets_.push_back(offsets_.back() + p.value().numel());
        const index_t total = offsets_.back() + static_cast<index_t>(params_.size()) + 1;  // + a flag per parameter, + poison
        flat_ = Tensor<T, B>::empty({std::max<index_t>(total, 1)});
        had_.assign(params_.size() + 1, T(0));
    }

    /// Bytes one all-reduce of the buckets moves per rank (gradients and flags).
    [[nodiscard]] std::size_t bytes() const { return (static_cast<std::size_t>(offsets_.back()) + params_.size() + 1) * sizeof(T); }
    [[nodiscard]] std::size_t buckets() const { return (bytes() / sizeof(T) + bucket_elems_ - 1) / bucket_elems_; }
    [[nodiscard]] const std::vector<Var<T, B>>& parameters() const { return params_; }

    /// Starts a step: the sum is empty.
    void zero() {
        primitives<B>::fill(offsets_.back(), T(0), flat_.data());
        std::fill(had_.begin(), had_.end(), T(0));
    }
    /// Adds every defined gradient into the sum and clears it (after one micro-batch).
    void add_gradients() {
        for (std::size_t i = 0; i < params_.size(); ++i) {
            Tensor<T, B>& g = params_[i].grad();
            if (!g.defined()) continue;
            DEPTHLAB_CHECK(g.is_contiguous() && g.numel() == params_[i].value().numel(), shape_error,
                           "dist::gradient_buckets: gradient ", g.shape(), " of a parameter ", params_[i].shape());
            T* dst = flat_.data() + offsets_[i];
            primitives<B>::add(g.numel(), dst, g.data(), dst);
            had_[i] = T(1);
            params_[i].zero_grad();
        }
    }
    /// All-reduces the sum (when distributed) and makes it the parameters' gradients; a
    /// parameter no rank gave a gradient stays without one. `poisoned`: this rank's step
    /// failed (a non-finite loss); the flag travels with the sum, so that every rank learns
    /// it in the same collective and they stop together. Returns whether any rank was.
    bool finish(bool poisoned = false) {
        const index_t n = offsets_.back();
        const auto flags = static_cast<std::size_t>(params_.size()) + 1;
        had_.back() = poisoned ? T(1) : T(0);  // (the flags are reduced in place; zero() clears them)
        if (comm_.distributed()) {
            memory<B>::from_host(had_.data(), flat_.data() + n, flags);
            const std::size_t total = static_cast<std::size_t>(n) + flags;
            for (std::size_t off = 0; off < total; off += bucket_elems_) {  // fixed order: the same buckets on every rank
                const std::size_t len = std::min(bucket_elems_, total - off);
                detail::on_comm_memory<T, B>(comm_, flat_.data() + off, len, [&](T* d) { comm_.all_reduce(d, len, reduce_op::sum); });
            }
            memory<B>::to_host(flat_.data() + n, had_.data(), flags);
        }
        if (had_.back() != T(0)) return true;
        for (std::size_t i = 0; i < params_.size(); ++i) {
            if (had_[i] == T(0)) continue;
            auto g = Tensor<T, B>::empty(params_[i].shape());
            detail::copy_n<T, B>(g.numel(), flat_.data() + offsets_[i], g.data());
            params_[i].grad() = std::move(g);
        }
        return false;
    }

private:
    communicator& comm_;
    std::vector<Var<T, B>> params_;
    std::vector<index_t> offsets_;  // parameter i's gradient: flat_[offsets_[i], offsets_[i+1])
    std::size_t bucket_elems_;
    Tensor<T, B> flat_;             // the gradients, one flag per parameter, the poison flag
    std::vector<T> had_;            // this rank gave parameter i a gradient this step; last: the poison flag
};

}  // namespace depthlab::dist
