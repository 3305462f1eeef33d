#pragma once
// Scanning a tensor for values that must not be there (NaN/Inf in a checkpoint, negative
// second moments in optimiser state): one host pass, for load and save time only.
#include <cstddef>
#include <vector>

#include "depthlab/core/tensor.hpp"

namespace depthlab {

/// The values of a tensor for which a predicate held: how many, and the first of them.
template <class T>
struct value_scan {
    std::size_t count = 0, first = 0, numel = 0;  ///< first: flat index of the first bad value
    T value{};                                    ///< the first bad value
};

template <class T, class B, class Bad>
value_scan<T> scan_values(const Tensor<T, B>& t, Bad&& bad) {
    const std::vector<T> v = t.to_vector();  // (a host copy: fine at load and save time)
    value_scan<T> r;
    r.numel = v.size();
    for (std::size_t i = 0; i < v.size(); ++i)
        if (bad(v[i]) && r.count++ == 0) {
            r.first = i;
            r.value = v[i];
        }
    return r;
}

}  // namespace depthlab
