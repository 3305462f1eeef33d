#pragma once
// GEMM on the GPU through cuBLAS: row-major C = alpha op(A) op(B) + beta C computed as the
// column-major C^T = alpha op(B)^T op(A)^T + beta C^T, so no data is transposed. Strided
// batches go to cublas{S,D}gemmStridedBatched in one call. gemm_args' outer batch (batch2,
// the (sequence, head) layout of attention: two strides, which one strided batch cannot
// express) is one cublas{S,D}gemmBatched call over pointer arrays that a kernel writes on
// the device: 2 launches per product instead of one GEMM call per sequence.
// float runs in full fp32 (no TF32) unless DEPTHLAB_CUDA_TF32=1 (see runtime.cuh).
#include <algorithm>
#include <type_traits>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/cuda/launch.cuh"
#include "depthlab/backend/cuda/runtime.cuh"

namespace depthlab::cuda {

template <class T>
cublasStatus_t strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha,
                               const T* a, int lda, long long sa, const T* b, int ldb, long long sb, const T* beta, T* c, int ldc,
                               long long sc, int batch) {
    if constexpr (std::is_same_v<T, float>)
        return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
    else
        return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}
template <class T>
cublasStatus_t pointer_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha,
                               const T* const* a, int lda, const T* const* b, int ldb, const T* beta, T* const* c, int ldc, int batch) {
    if constexpr (std::is_same_v<T, float>)
        return cublasSgemmBatched(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch);
    else
        return cublasDgemmBatched(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch);
}

/// depthlab::check_gemm (shared with the CPU), plus cuBLAS's int extents.
inline void check_cublas_gemm(const gemm_args& g) {
    depthlab::check_gemm(g);
    const index_t int_max = 2147483647;
    DEPTHLAB_CHECK(std::max({g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch}) <= int_max, shape_error,
                   "gemm: an extent above cuBLAS's int range (m=", g.m, " n=", g.n, " k=", g.k, " batch=", g.batch, ")");
}

template <class T>
void gemm(const gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "cuda::gemm: float or double");
    check_cublas_gemm(g);
    if (g.m == 0 || g.n == 0) return;
    if (g.k == 0) {  // C = beta C (cuBLAS wants leading dimensions >= 1 even for an empty inner product)
        const index_t m = g.m, n = g.n, ldc = g.ldc, nb = g.batch, sc = g.stride_c, sc2 = g.stride_c2;
        for_each(g.batch2 * nb * m * n, [=] __device__(index_t i) {
            const index_t col = i % n, row = (i / n) % m, inner = (i / (n * m)) % nb, outer = i / (n * m * nb);
            T& v = c[outer * sc2 + inner * sc + row * ldc + col];
            v = beta == T(0) ? T(0) : beta * v;
        }, "gemm (k = 0)");
        return;
    }
    const cublasHandle_t h = blas();
    // column-major view: C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m)
    const cublasOperation_t ta = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int m = static_cast<int>(g.n), n = static_cast<int>(g.m), k = static_cast<int>(g.k);  // (column-major)
    if (g.batch2 == 1) {
        note_gemm();
        check(strided_batched<T>(h, ta, tb, m, n, k, &alpha, b, static_cast<int>(g.ldb), g.stride_b, a, static_cast<int>(g.lda), g.stride_a,
                                 &beta, c, static_cast<int>(g.ldc), g.stride_c, static_cast<int>(g.batch)),
              "gemm (strided batched)");
        return;
    }
    const index_t count = g.batch * g.batch2, nb = g.batch;
    DEPTHLAB_CHECK(count <= 2147483647, shape_error, "gemm: ", g.batch, " x ", g.batch2, " matrices exceed cuBLAS's int batch count");
    // the matrices' addresses: [op(B)^T operands | op(A)^T operands | C], batch-major
    const auto table = memory<backend::cuda>::allocate<const T*>(static_cast<std::size_t>(3 * count));
    const T** p = table.get();
    const index_t sa = g.stride_a, sb = g.stride_b, sc = g.stride_c, sa2 = g.stride_a2, sb2 = g.stride_b2, sc2 = g.stride_c2;
    for_each(count, [=] __device__(index_t q) {
        const index_t outer = q / nb, inner = q % nb;
        p[q] = b + outer * sb2 + inner * sb;
        p[count + q] = a + outer * sa2 + inner * sa;
        p[2 * count + q] = c + outer * sc2 + inner * sc;
    }, "gemm (batch addresses)");
    note_gemm();
    check(pointer_batched<T>(h, ta, tb, m, n, k, &alpha, p, static_cast<int>(g.ldb), p + count, static_cast<int>(g.lda), &beta,
                             const_cast<T* const*>(p + 2 * count), static_cast<int>(g.ldc), static_cast<int>(count)),
          "gemm (pointer batched)");
}

}  // namespace depthlab::cuda
