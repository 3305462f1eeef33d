#pragma once
// Shared machinery of the differentiable ops (autodiff/ops.hpp): operand checks, the result
// node and the elementwise launch helpers every op uses.
// Part of autodiff/ops.hpp (whose header says what every op guarantees).
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "depthlab/autodiff/variable.hpp"
#include "depthlab/backend/backend.hpp"
#include "depthlab/core/rng.hpp"

namespace depthlab {

namespace detail {
template <class T, class B>
Tensor<T, B> contiguous_value(const Var<T, B>& v) {
    return v.value().contiguous();
}
/// b broadcasts against a when it equals a's shape or a trailing part of it.
inline bool is_suffix(const Shape& a, const Shape& b) {
    if (b.rank() > a.rank()) return false;
    for (int i = 1; i <= b.rank(); ++i)
        if (a[a.rank() - i] != b[b.rank() - i]) return false;
    return true;
}
/// Throws unless every value in ids lies in [0, n).
inline void check_ids(const char* op, std::span<const std::int64_t> ids, index_t n, const char* what = "id") {
    for (std::size_t i = 0; i < ids.size(); ++i)
        DEPTHLAB_CHECK(ids[i] >= 0 && ids[i] < n, index_error, op, ": ", what, " ", ids[i], " at position ", i,
                       " out of range [0, ", n, ")");
}
/// Host ids as a device tensor (n,).
template <class B>
Tensor<std::int64_t, B> upload_ids(std::span<const std::int64_t> ids) {
    return Tensor<std::int64_t, B>::from({static_cast<index_t>(ids.size())}, ids);
}
/// Checks a 1-D id tensor's shape, and its values where they can be read without a copy
/// (host backends); on a device, ids come from the library (valid by construction) or
/// through the host overloads, which check before the upload, and the kernels guard
/// against out-of-range values (NaN rows, skipped rows) rather than touch foreign memory.
template <class B>
void check_id_tensor(const char* op, const Tensor<std::int64_t, B>& ids, index_t n, const char* what = "id") {
    DEPTHLAB_CHECK(ids.defined() && ids.rank() == 1 && ids.is_contiguous(), shape_error, op, ": ", what,
                   "s must be a contiguous 1-D tensor, got shape ", ids.shape());
    if constexpr (B::host_accessible) check_ids(op, std::span<const std::int64_t>(ids.data(), static_cast<std::size_t>(ids.numel())), n, what);
}
/// Host targets against logits s: one per row, each ignore or in [0, V).
inline void check_targets(const char* op, const Shape& s, std::span<const std::int64_t> t, std::int64_t ignore) {
    DEPTHLAB_CHECK(s.rank() >= 1 && static_cast<index_t>(t.size()) == s.rows(), shape_error, op, ": ", t.size(),
                   " targets for logits ", s, " (expected one per row: ", s.rows(), ")");
    for (std::size_t i = 0; i < t.size(); ++i)
        DEPTHLAB_CHECK(t[i] == ignore || (t[i] >= 0 && t[i] < s.back()), index_error, op, ": target ", t[i], " at row ", i,
                       " out of range [0, ", s.back(), ") for logits ", s);
}
/// Throws numeric_error when a host backend's scalar loss is not finite (a device defers it).
template <class T, class B>
void check_finite_loss(const char* op, const Tensor<T, B>& loss, const Shape& input) {
    if constexpr (B::host_accessible) {
        const T v = *loss.data();
        DEPTHLAB_CHECK(std::isfinite(v), numeric_error, op, ": non-finite loss ", v, " (NaN or inf in the input of shape ", input, "?)");
    }
}
/// Maps each row of scores `sx` (..., cols) to its row of an additive mask whose leading
/// extents equal the scores' or are 1; M receives the contiguous mask (undefined if none).
template <class T, class B>
row_broadcast mask_rows(const char* op, const Shape& sx, const Tensor<T, B>& mask, Tensor<T, B>& M) {
    row_broadcast map;
    if (!mask.defined()) return map;
    const Shape& sm = mask.shape();
    const index_t cols = sx.back();
    bool ok = sm.rank() >= 1 && sm.rank() <= sx.rank() && sm.back() == cols;
    M = mask.contiguous();
    map.rank = sx.rank() - 1;
    const int pad = sx.rank() - sm.rank();
    index_t stride = cols;
    for (int k = sx.rank() - 2; ok && k >= 0; --k) {
        const index_t md = k - pad >= 0 ? sm[k - pad] : 1;
        ok = md == 1 || md == sx[k];
        map.dims[k] = sx[k];
        map.strides[k] = md == 1 ? 0 : stride;
        stride *= md;
    }
    DEPTHLAB_CHECK(ok, shape_error, op, ": mask ", sm, " does not broadcast to scores ", sx);
    return map;
}
/// The bf16 copy of `src`, read by product g in `layout` (layout_a(g) or layout_b(g)), made
/// once for every product of the op that reads it the same way (gemm_args::a_bf16 / b_bf16);
/// empty, and nothing converted, unless g multiplies in bf16 now.
template <class T, class B>
bf16_operand bf16_copy_for(const gemm_args& g, const operand_layout& layout, const T* src) {
    bf16_operand out;
    if constexpr (std::is_same_v<T, float>)
        if (bf16_product(g)) primitives<B>::prepare_bf16(layout, src, out);
    return out;
}
}  // namespace detail

}  // namespace depthlab
