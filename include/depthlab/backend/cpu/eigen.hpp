#pragma once
// Eigen views of host tensors: a 2-D tensor (any strides) as an Eigen::Map of a row-major
// matrix, a contiguous tensor as a vector. Host-accessible backends only; kept out of
// core/tensor.hpp so that device code (nvcc) never sees Eigen.
#include <Eigen/Core>

#include "depthlab/core/tensor.hpp"

namespace depthlab {

template <class T>
using eigen_row_major = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using eigen_stride = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;

template <class T, class B>
Eigen::Map<eigen_row_major<T>, 0, eigen_stride> eigen_matrix(Tensor<T, B>& t) {
    static_assert(B::host_accessible, "eigen_matrix: needs a host backend");
    DEPTHLAB_CHECK(t.rank() == 2, shape_error, "eigen_matrix: needs a 2-D tensor, got shape ", t.shape());
    return {t.data(), t.dim(0), t.dim(1), eigen_stride(t.strides()[0], t.strides()[1])};
}
template <class T, class B>
Eigen::Map<const eigen_row_major<T>, 0, eigen_stride> eigen_matrix(const Tensor<T, B>& t) {
    static_assert(B::host_accessible, "eigen_matrix: needs a host backend");
    DEPTHLAB_CHECK(t.rank() == 2, shape_error, "eigen_matrix: needs a 2-D tensor, got shape ", t.shape());
    return {t.data(), t.dim(0), t.dim(1), eigen_stride(t.strides()[0], t.strides()[1])};
}
template <class T, class B>
Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>, Eigen::Unaligned> eigen_vector(const Tensor<T, B>& t) {
    static_assert(B::host_accessible, "eigen_vector: needs a host backend");
    DEPTHLAB_CHECK(t.is_contiguous(), usage_error, "eigen_vector: needs a contiguous tensor, got shape ", t.shape());
    return {t.data(), t.numel()};
}

}  // namespace depthlab
