#pragma once
// The ablation kinds the analyses switch a unit off with (a residual sub-layer, or one head of
// an attention), and what both kinds of unit share: the interface the analyses act through
// (ablation_target), the recorder of a unit's mean output (output_mean) and the row map of
// resampling (resample_rows).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "depthlab/autodiff/ops.hpp"
#include "depthlab/core/error.hpp"

namespace depthlab::nn {

/// What a switched-off unit outputs instead (the analyses' ablation kinds):
///   zero      nothing: a sub-layer's y = LN(x) post-LN, y = x pre-LN (the residual path
///             alone); a head's columns before the output projection are 0;
///   mean      its mean output over a reference set, per position and feature (record_mean;
///             a position the reference never reached takes the mean over all positions);
///   resample  its output for another input of the same batch: sequence b takes the output
///             computed for sequence b + 1 (cyclically; see ablation_site for decoding).
enum class ablation_kind { zero, mean, resample };
inline const char* to_string(ablation_kind k) {
    switch (k) {
        case ablation_kind::mean: return "mean";
        case ablation_kind::resample: return "resample";
        default: return "zero";
    }
}
/// "zero", "mean" or "resample"; usage_error naming `what` (a flag or key) otherwise.
inline ablation_kind parse_ablation_kind(const std::string& s, const std::string& what = "ablation") {
    for (const ablation_kind k : {ablation_kind::zero, ablation_kind::mean, ablation_kind::resample})
        if (s == to_string(k)) return k;
    throw usage_error(what + ": '" + s + "' is not an ablation kind (zero, mean or resample)");
}

/// Where a unit's rows are, for the ablation kinds that depend on it.
struct ablation_site {
    index_t first_position = 0;                     // the position of x's first column (incremental decoding: t)
    std::span<const std::int64_t> resample_from{};  // row r takes row resample_from[r]'s output (empty: row r + 1, cyclically)
};

/// The rows a resample-ablated unit of `rows` rows takes its output from at `site`.
inline std::vector<std::int64_t> resample_rows(const ablation_site& site, index_t rows) {
    std::vector<std::int64_t> from(site.resample_from.begin(), site.resample_from.end());
    if (from.empty())
        for (index_t r = 0; r < rows; ++r) from.push_back((r + 1) % rows);
    DEPTHLAB_CHECK(static_cast<index_t>(from.size()) == rows, shape_error, "ablation: resampling ", rows, " rows from a map of ", from.size());
    return from;
}

/// What records a unit's mean output for mean ablation. The heads of one attention share one
/// (its head outputs, before the output projection).
struct mean_recording {
    virtual ~mean_recording() = default;
    /// record_mean(true) starts summing the unit's outputs per position and feature (every
    /// forward, over every sequence of the batch, padding positions as computed);
    /// record_mean(false) stops and makes their mean the one `mean` ablation outputs.
    virtual void record_mean(bool on) = 0;
    /// Stops recording and keeps the previous mean, if any.
    virtual void discard_recording() noexcept = 0;
    [[nodiscard]] virtual bool has_mean() const = 0;
};

/// A unit the analyses switch off with any ablation kind (analysis::module_ref::target):
/// the kind is set first, then the module's ablate function switches it off.
struct ablation_target {
    virtual ~ablation_target() = default;
    /// What the unit outputs while it is switched off.
    virtual void set_ablation(ablation_kind kind) = 0;
    [[nodiscard]] virtual bool is_on() const = 0;
    [[nodiscard]] virtual mean_recording& means() = 0;
};

/// The mean of a unit's outputs (N, T, D) per position and feature over the forward passes
/// seen between start() and finish(), summed on the host in double, and that mean served
/// back for any positions.
template <class T, class B>
class output_mean {
public:
    void start() { sums_.emplace(); }
    [[nodiscard]] bool recording() const { return sums_.has_value(); }
    void discard() noexcept { sums_.reset(); }
    [[nodiscard]] bool defined() const { return mean_.defined(); }
    /// Counts finish() calls: a cache of the unit's outputs compares it.
    [[nodiscard]] std::uint64_t generation() const { return generation_; }

    /// Adds one forward's outputs y (N, T, D), D the width given; `what` names the unit.
    void add(const Tensor<T, B>& y, index_t D, const char* what) {
        DEPTHLAB_CHECK(y.shape().rank() == 3 && y.dim(2) == D, shape_error, "record_mean: ", what, " output ", y.shape(), ", expected (N, T, ", D, ")");
        const index_t Tn = y.dim(1), N = y.dim(0);
        auto& r = *sums_;
        if (static_cast<index_t>(r.count.size()) < Tn) {
            r.count.resize(static_cast<std::size_t>(Tn), 0);
            r.sum.resize(static_cast<std::size_t>(Tn * D), 0.0);
        }
        const std::vector<T> v = y.to_vector();
        for (index_t t = 0; t < Tn; ++t) r.count[static_cast<std::size_t>(t)] += N;
        for (index_t n = 0; n < N; ++n)
            for (index_t i = 0; i < Tn * D; ++i) r.sum[static_cast<std::size_t>(i)] += static_cast<double>(v[static_cast<std::size_t>(n * Tn * D + i)]);
    }
    /// Stops recording; the mean of what was added becomes the one served.
    void finish(index_t D, const char* what) {
        DEPTHLAB_CHECK(sums_ && !sums_->count.empty(), usage_error, "record_mean: no ", what, " output was recorded (no forward pass ran while recording)");
        const auto& r = *sums_;
        const index_t P = static_cast<index_t>(r.count.size());
        std::vector<T> mean(static_cast<std::size_t>((P + 1) * D));
        std::vector<double> pooled(static_cast<std::size_t>(D), 0.0);
        std::int64_t total = 0;
        for (index_t t = 0; t < P; ++t) {
            total += r.count[static_cast<std::size_t>(t)];
            for (index_t d = 0; d < D; ++d) {
                const double v = r.sum[static_cast<std::size_t>(t * D + d)];
                pooled[static_cast<std::size_t>(d)] += v;
                mean[static_cast<std::size_t>(t * D + d)] = static_cast<T>(v / static_cast<double>(r.count[static_cast<std::size_t>(t)]));
            }
        }
        for (index_t d = 0; d < D; ++d)
            mean[static_cast<std::size_t>(P * D + d)] = static_cast<T>(pooled[static_cast<std::size_t>(d)] / static_cast<double>(total));
        mean_ = Tensor<T, B>::from({P + 1, D}, mean);
        ++generation_;
        sums_.reset();
    }
    /// The mean at positions first, ..., first + Tn − 1: (Tn, D), broadcast over the rows of
    /// a batch; a position past the recorded ones takes the mean over all of them.
    [[nodiscard]] Var<T, B> at(index_t first, index_t Tn, const char* what) const {
        DEPTHLAB_CHECK(mean_.defined(), usage_error, "ablation: a mean-ablated ", what, " without a recorded mean (record_mean, or analysis::record_ablation_means)");
        const index_t P = mean_.dim(0) - 1;
        if (first + Tn <= P) return Var<T, B>::constant(mean_.slice(0, first, first + Tn));  // every position recorded: a view
        std::vector<std::int64_t> rows(static_cast<std::size_t>(Tn));
        for (index_t t = 0; t < Tn; ++t) rows[static_cast<std::size_t>(t)] = std::min(first + t, P);
        return gather_rows(Var<T, B>::constant(mean_), std::span<const std::int64_t>(rows));
    }

private:
    struct sums {
        std::vector<double> sum;          // (positions, D)
        std::vector<std::int64_t> count;  // sequences summed at each position
    };
    std::optional<sums> sums_;
    Tensor<T, B> mean_;  // (positions + 1, D): the mean at each recorded position, then over all of them
    std::uint64_t generation_ = 0;
};

}  // namespace depthlab::nn
