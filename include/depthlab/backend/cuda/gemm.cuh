#pragma once
// GEMM on the GPU through cuBLAS: row-major C = alpha op(A) op(B) + beta C computed as the
// column-major C^T = alpha op(B)^T op(A)^T + beta C^T, so no data is transposed. Strided
// batches go to one strided-batched call. gemm_args' outer batch (batch2, the (sequence,
// head) layout of attention: two strides, which one strided batch cannot express) is one
// pointer-array batched call over addresses that a kernel writes on the device: 2 launches
// per product instead of one GEMM call per sequence.
//
// Precision (backend/precision.hpp, the CPU's semantics): under bf16, float products read
// bf16 copies of A and B (round to nearest even, one conversion kernel per operand) and
// accumulate and write f32 on the tensor cores (cublasGemm*Ex, CUDA_R_16BF inputs,
// CUBLAS_COMPUTE_32F); products with a vector operand stay f32, as on the CPU. f32 runs in
// full fp32 (no TF32) unless DEPTHLAB_CUDA_TF32=1 (see runtime.cuh); double is double.
//
// cuBLASLt epilogues (lt_matmul): a linear layer's forward is one matmul with the BIAS
// epilogue, with GELU after it the GELU_AUX_BIAS epilogue (GELU's input kept for backward), and
// an f32 weight gradient brings its bias gradient (BGRADB).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/cuda/launch.cuh"
#include "depthlab/backend/cuda/runtime.cuh"
#include "depthlab/backend/precision.hpp"

namespace depthlab::cuda {

/// The cuBLAS element type of T.
template <class T>
constexpr cudaDataType element_type() {
    if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
    else if constexpr (std::is_same_v<T, double>) return CUDA_R_64F;
    else {
        static_assert(std::is_same_v<T, __nv_bfloat16>, "cuda: float, double or bf16 GEMM operands");
        return CUDA_R_16BF;
    }
}
/// Operands of type In (T, or bf16 for a float product), C of type T.
template <class In, class T>
cublasStatus_t strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha,
                               const In* a, int lda, long long sa, const In* b, int ldb, long long sb, const T* beta, T* c, int ldc,
                               long long sc, int batch) {
    if constexpr (std::is_same_v<In, float> && std::is_same_v<T, float>)
        return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
    else if constexpr (std::is_same_v<In, double> && std::is_same_v<T, double>)
        return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
    else
        return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, a, element_type<In>(), lda, sa, b, element_type<In>(), ldb, sb, beta, c,
                                          element_type<T>(), ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}
template <class In, class T>
cublasStatus_t pointer_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha,
                               const In* const* a, int lda, const In* const* b, int ldb, const T* beta, T* const* c, int ldc, int batch) {
    if constexpr (std::is_same_v<In, float> && std::is_same_v<T, float>)
        return cublasSgemmBatched(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch);
    else if constexpr (std::is_same_v<In, double> && std::is_same_v<T, double>)
        return cublasDgemmBatched(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch);
    else
        return cublasGemmBatchedEx(h, ta, tb, m, n, k, alpha, reinterpret_cast<const void* const*>(a), element_type<In>(), lda,
                                   reinterpret_cast<const void* const*>(b), element_type<In>(), ldb, beta, reinterpret_cast<void* const*>(c),
                                   element_type<T>(), ldc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/// depthlab::check_gemm (shared with the CPU), plus cuBLAS's int extents.
inline void check_cublas_gemm(const gemm_args& g) {
    depthlab::check_gemm(g);
    const index_t int_max = 2147483647;
    DEPTHLAB_CHECK(std::max({g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch}) <= int_max, shape_error,
                   "gemm: an extent above cuBLAS's int range (m=", g.m, " n=", g.n, " k=", g.k, " batch=", g.batch, ")");
}

/// Elements from an operand's first to its last element that a product reads (over both
/// batches).
inline index_t operand_reach(const operand_layout& l) {
    DEPTHLAB_CHECK(l.stride >= 0 && l.stride2 >= 0, shape_error, "gemm: bf16 operands need non-negative batch strides (got ", l.stride,
                   ", ", l.stride2, ")");
    return (l.batch2 - 1) * l.stride2 + (l.batch - 1) * l.stride + (l.rows - 1) * l.ld + l.cols;
}
/// A bf16 copy (round to nearest even) of the `n` floats from x, on this thread's stream.
inline std::shared_ptr<__nv_bfloat16> bf16_copy(const float* x, index_t n) {
    auto y = memory<backend::cuda>::allocate<__nv_bfloat16>(static_cast<std::size_t>(n));
    __nv_bfloat16* p = y.get();
    for_each(n, [=] __device__(index_t i) { p[i] = __float2bfloat16_rn(x[i]); }, "gemm (operand to bf16)");
    return y;
}
/// The bf16 copy of an operand, read with the operand's own layout (bf16_operand::packed =
/// layout): every element from its first to its last that a product reads.
inline bf16_operand prepare_bf16(const operand_layout& layout, const float* src) {
    return {.source = src, .layout = layout, .data = bf16_copy(src, operand_reach(layout)), .packed = layout};
}
/// The bf16 operand of a product: the copy made beforehand when it is this operand's, else a
/// fresh one.
inline std::shared_ptr<__nv_bfloat16> bf16_input(const bf16_operand* made, const float* src, const operand_layout& layout) {
    if (made != nullptr && made->serves(src, layout)) return std::static_pointer_cast<__nv_bfloat16>(made->data);
    return bf16_copy(src, operand_reach(layout));
}

/// bf16 copies of a float product's A and B, each over every element the product reads.
struct bf16_operands {
    std::shared_ptr<__nv_bfloat16> a, b;
    bf16_operands(const gemm_args& g, const float* fa, const float* fb)
        : a(bf16_input(g.a_bf16, fa, layout_a(g))), b(bf16_input(g.b_bf16, fb, layout_b(g))) {}
};

/// One product's address table: the matrices addressed in bytes, and where the table's
/// entries start among those of the tables built in the same launch (gemm_address_tables; a
/// product building its own has first = 0). (At namespace scope: nvcc refuses a function's
/// local type in a device lambda's captures.)
struct address_table_source {
    const char* a;
    const char* b;
    char* c;
    const void** table;
    index_t first, matrices, batch, in_size, out_size, sa, sb, sc, sa2, sb2, sc2;
    /// Writes the addresses of matrix q: [op(B)^T operands | op(A)^T operands | C], batch-major.
    DEPTHLAB_HOST_AND_GPU void write(index_t q) const {
        const index_t outer = q / batch, inner = q % batch;
        table[q] = b + (outer * sb2 + inner * sb) * in_size;
        table[matrices + q] = a + (outer * sa2 + inner * sa) * in_size;
        table[2 * matrices + q] = c + (outer * sc2 + inner * sc) * out_size;
    }
};
/// The table source of product g reading a and b (elements of in_size bytes), writing c.
inline address_table_source address_source(const gemm_args& g, const void* a, const void* b, void* c, index_t in_size, index_t out_size,
                                           const void** table, index_t first = 0) {
    return {static_cast<const char*>(a), static_cast<const char*>(b), static_cast<char*>(c), table, first, g.batch * g.batch2, g.batch,
            in_size, out_size, g.stride_a, g.stride_b, g.stride_c, g.stride_a2, g.stride_b2, g.stride_c2};
}

/// The product once operands have their GEMM type In (T, or bf16 for a float product).
template <class In, class T>
void gemm_typed(const gemm_args& g, T alpha, const In* a, const In* b, T beta, T* c) {
    const cublasHandle_t h = blas();
    // column-major view: C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m)
    const cublasOperation_t ta = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int m = static_cast<int>(g.n), n = static_cast<int>(g.m), k = static_cast<int>(g.k);  // (column-major)
    if (g.batch2 == 1) {
        note_gemm(g);
        check(strided_batched<In, T>(h, ta, tb, m, n, k, &alpha, b, static_cast<int>(g.ldb), g.stride_b, a, static_cast<int>(g.lda), g.stride_a,
                                     &beta, c, static_cast<int>(g.ldc), g.stride_c, static_cast<int>(g.batch)),
              "gemm (strided batched)");
        return;
    }
    const index_t count = g.batch * g.batch2;
    DEPTHLAB_CHECK(count <= 2147483647, shape_error, "gemm: ", g.batch, " x ", g.batch2, " matrices exceed cuBLAS's int batch count");
    // the matrices' addresses (address_table_source::write), built beforehand with others
    // (gemm_addresses) or here
    std::shared_ptr<const void*> table;
    const void** p = nullptr;
    if (g.addresses != nullptr && g.addresses->serves(a, b, c, g)) {
        p = static_cast<const void**>(g.addresses->table.get());
    } else {
        table = memory<backend::cuda>::allocate<const void*>(static_cast<std::size_t>(3 * count));
        p = table.get();
        const address_table_source s = address_source(g, a, b, c, sizeof(In), sizeof(T), p);
        for_each(count, [=] __device__(index_t q) { s.write(q); }, "gemm (batch addresses)");
    }
    note_gemm(g);
    check(pointer_batched<In, T>(h, ta, tb, m, n, k, &alpha, reinterpret_cast<const In* const*>(p), static_cast<int>(g.ldb),
                                 reinterpret_cast<const In* const*>(p + count), static_cast<int>(g.lda), &beta,
                                 reinterpret_cast<T* const*>(const_cast<void**>(p + 2 * count)), static_cast<int>(g.ldc), static_cast<int>(count)),
          "gemm (pointer batched)");
}

/// One cuBLASLt matmul's descriptors, destroyed with it.
struct lt_plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    lt_plan() = default;
    lt_plan(const lt_plan&) = delete;
    lt_plan& operator=(const lt_plan&) = delete;
    ~lt_plan() {
        cublasLtMatrixLayoutDestroy(d);
        cublasLtMatrixLayoutDestroy(b);
        cublasLtMatrixLayoutDestroy(a);
        cublasLtMatmulDescDestroy(desc);
    }
};
/// A cuBLASLt epilogue and its vectors, in the column-major view (D = C^T, n x m):
/// BIAS adds `bias` (n) down each column (to every row of C); GELU_AUX_BIAS also applies GELU
/// (tanh form, as depthlab's gelu) and writes its input to `aux` (laid out as C, leading
/// dimension aux_ld); BGRADB writes into `bias` the sums of cuBLASLt's B = our A over k
/// (the column sums of dY for a weight gradient dW = dY^T X).
struct lt_epilogue {
    std::uint32_t kind = CUBLASLT_EPILOGUE_BIAS;
    const void* bias = nullptr;
    void* aux = nullptr;
    std::int64_t aux_ld = 0;
};
/// C = alpha op(A) op(B) + beta C with the epilogue e, as one cuBLASLt matmul (one product,
/// k > 0). Operands of type In (T, or bf16 for a float product). False where cuBLASLt has no
/// kernel for the problem (CUBLAS_STATUS_NOT_SUPPORTED): the caller then takes the unfused path.
template <class In, class T>
bool lt_matmul(const gemm_args& g, const lt_epilogue& e, T alpha, const In* a, const In* b, T beta, T* c) {
    const blas_context& ctx = blas_handles();
    // column-major view: D (n x m) = op(B)^T (n x k) op(A)^T (k x m)
    const std::int32_t ta = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const bool f64 = std::is_same_v<T, double>;
    const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F
                                            : std::is_same_v<In, float> && tf32_requested() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const auto u = [](index_t v) { return static_cast<std::uint64_t>(v); };
    lt_plan p;
    check(cublasLtMatmulDescCreate(&p.desc, compute, element_type<T>()), "cublasLtMatmulDescCreate");
    const auto attribute = [&](cublasLtMatmulDescAttributes_t which, const auto& value, const char* what) {
        check(cublasLtMatmulDescSetAttribute(p.desc, which, &value, sizeof value), what);
    };
    attribute(CUBLASLT_MATMUL_DESC_TRANSA, ta, "cublasLtMatmulDescSetAttribute (transa)");
    attribute(CUBLASLT_MATMUL_DESC_TRANSB, tb, "cublasLtMatmulDescSetAttribute (transb)");
    attribute(CUBLASLT_MATMUL_DESC_EPILOGUE, e.kind, "cublasLtMatmulDescSetAttribute (epilogue)");
    attribute(CUBLASLT_MATMUL_DESC_BIAS_POINTER, e.bias, "cublasLtMatmulDescSetAttribute (bias)");
    if (e.aux != nullptr) {
        attribute(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, e.aux, "cublasLtMatmulDescSetAttribute (aux)");
        attribute(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, e.aux_ld, "cublasLtMatmulDescSetAttribute (aux ld)");
    }
    // stored matrices: op(B)^T is B stored n x k (row-major k x n when not transposed)...
    check(cublasLtMatrixLayoutCreate(&p.a, element_type<In>(), g.trans_b ? u(g.k) : u(g.n), g.trans_b ? u(g.n) : u(g.k), g.ldb), "cublasLtMatrixLayoutCreate (B)");
    check(cublasLtMatrixLayoutCreate(&p.b, element_type<In>(), g.trans_a ? u(g.m) : u(g.k), g.trans_a ? u(g.k) : u(g.m), g.lda), "cublasLtMatrixLayoutCreate (A)");
    check(cublasLtMatrixLayoutCreate(&p.d, element_type<T>(), u(g.n), u(g.m), g.ldc), "cublasLtMatrixLayoutCreate (C)");
    const cublasStatus_t st = cublasLtMatmul(ctx.lt, p.desc, &alpha, b, p.a, a, p.b, &beta, c, p.d, c, p.d, nullptr, ctx.workspace,
                                             blas_workspace_bytes, stream());
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) return false;
    check(st, "cublasLtMatmul (epilogue)");
    note_gemm(g);
    return true;
}
/// The product with epilogue e in one cuBLASLt call (under bf16, after converting the
/// operands); false where cuBLASLt has no kernel for it.
template <class T>
bool lt_matmul_fused(const gemm_args& g, const lt_epilogue& e, T alpha, const T* a, const T* b, T beta, T* c) {
    if constexpr (std::is_same_v<T, float>) {
        if (bf16_product(g)) {
            const bf16_operands ops(g, a, b);
            return lt_matmul<__nv_bfloat16, float>(g, e, alpha, ops.a.get(), ops.b.get(), beta, c);
        }
    }
    return lt_matmul<T, T>(g, e, alpha, a, b, beta, c);
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
    if constexpr (std::is_same_v<T, float>) {
        if (bf16_product(g)) {
            const bf16_operands ops(g, a, b);
            gemm_typed<__nv_bfloat16, float>(g, alpha, ops.a.get(), ops.b.get(), beta, c);
            return;
        }
    }
    gemm_typed<T, T>(g, alpha, a, b, beta, c);
}

}  // namespace depthlab::cuda
