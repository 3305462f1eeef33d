#pragma once
// Predictions and accuracy from logits: what every evaluation loop of a classifier or a
// masked language model writes by hand. Counted on the host (one download per call), so
// they work on every backend.
#include <cstdint>
#include <span>
#include <vector>

#include "depthlab/autodiff/variable.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/core/tensor.hpp"

namespace depthlab::nn {

/// The class of each row: the index of the largest logit along the last axis (ties: the
/// lowest index, like torch.argmax). logits: [..., classes] → one id per leading row.
template <class T, class B>
std::vector<std::int64_t> argmax(const Tensor<T, B>& logits) {
    DEPTHLAB_CHECK(logits.rank() >= 1 && logits.shape().back() > 0, shape_error, "argmax: needs logits of shape [..., classes], got ",
                   logits.shape());
    const std::vector<T> v = logits.to_vector();
    const auto classes = static_cast<std::size_t>(logits.shape().back());
    std::vector<std::int64_t> out(v.size() / classes);
    for (std::size_t r = 0; r < out.size(); ++r) {
        const T* row = v.data() + r * classes;
        std::size_t best = 0;
        for (std::size_t c = 1; c < classes; ++c)
            if (row[c] > row[best]) best = c;  // NaN never wins: a row of NaN says class 0
        out[r] = static_cast<std::int64_t>(best);
    }
    return out;
}
template <class T, class B>
std::vector<std::int64_t> argmax(const Var<T, B>& logits) {
    return argmax(logits.value());
}

/// Correct predictions out of counted ones; add the counts of several batches with +=.
struct accuracy_count {
    std::int64_t correct = 0, total = 0;
    [[nodiscard]] double fraction() const { return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0; }
    [[nodiscard]] double percent() const { return 100.0 * fraction(); }
    accuracy_count& operator+=(const accuracy_count& o) {
        correct += o.correct;
        total += o.total;
        return *this;
    }
};

/// How many rows of logits [..., classes] have their argmax equal to the label; rows whose
/// label is ignore_index are not counted (the convention of cross_entropy).
template <class T, class B>
accuracy_count accuracy(const Tensor<T, B>& logits, std::span<const std::int64_t> labels, std::int64_t ignore_index = -100) {
    const auto predicted = argmax(logits);
    DEPTHLAB_CHECK(predicted.size() == labels.size(), shape_error, "accuracy: logits of shape ", logits.shape(), " have ", predicted.size(),
                   " rows but there are ", labels.size(), " labels");
    const std::int64_t classes = logits.shape().back();
    accuracy_count a;
    for (std::size_t i = 0; i < labels.size(); ++i) {
        if (labels[i] == ignore_index) continue;
        DEPTHLAB_CHECK(0 <= labels[i] && labels[i] < classes, index_error, "accuracy: label ", labels[i], " at row ", i, " is outside [0, ",
                       classes, ") for logits of shape ", logits.shape());
        a.correct += predicted[i] == labels[i] ? 1 : 0;
        ++a.total;
    }
    return a;
}
template <class T, class B>
accuracy_count accuracy(const Var<T, B>& logits, std::span<const std::int64_t> labels, std::int64_t ignore_index = -100) {
    return accuracy(logits.value(), labels, ignore_index);
}

}  // namespace depthlab::nn
