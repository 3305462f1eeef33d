#pragma once
// Backends are compile-time policies. A backend tag names a device; `memory<B>` allocates
// on it and `primitives<B>` holds every numerical routine the ops need (GEMM, elementwise,
// reductions, softmax, layer norm, gather/scatter, dropout...). Ops only ever call
// primitives<B>::..., so a new backend (CUDA) is a new specialisation, not a change to ops.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "depthlab/backend/precision.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/core/portable.hpp"
#include "depthlab/core/shape.hpp"

namespace depthlab {

namespace backend {
/// Host CPU: Eigen + oneDNN + OpenMP + run-time dispatched AVX2/AVX-512 kernels.
struct cpu {
    static constexpr const char* name = "cpu";
    static constexpr bool host_accessible = true;  // tensors can be read element by element
};
/// A device that is not one: memory on the host, the CPU kernels, but the tensor API
/// treats it as a GPU (no element access, `host_accessible = false`) and every primitive
/// call and device-to-host copy is counted. It proves on any machine that the op layer
/// reaches memory only through `memory<B>` and `primitives<B>`, and it counts the kernel
/// launches and host synchronisations a real device would see (device_counters()).
struct host_device {
    static constexpr const char* name = "host_device";
    static constexpr bool host_accessible = false;
};
/// NVIDIA GPU through cuBLAS (include depthlab/backend/cuda/cuda.hpp, build with CUDA).
struct cuda {
    static constexpr const char* name = "cuda";
    static constexpr bool host_accessible = false;
};
}  // namespace backend

/// What a device backend did since the last reset(): primitive calls ("kernel launches",
/// GEMM calls included), GEMM calls alone (one per BLAS call), and device-to-host copies
/// (each one a synchronisation of the host with the device). Host-to-device uploads are
/// counted apart: they do not stall the host on a stream.
struct device_counters {
    std::atomic<std::int64_t> launches{0}, gemms{0}, syncs{0}, uploads{0};
    void reset() {
        launches = 0;
        gemms = 0;
        syncs = 0;
        uploads = 0;
    }
};
/// The process-wide counters of backend B (only non-host backends count).
template <class B>
device_counters& counters() {
    static device_counters c;
    return c;
}

/// One GEMM operand as stored: per batch entry a (rows, cols) row-major matrix with leading
/// dimension ld; entry (j, i) at j * stride2 + i * stride (a stride of 0 broadcasts).
struct operand_layout {
    index_t rows = 0, cols = 0, ld = 0;
    index_t batch = 1, stride = 0, batch2 = 1, stride2 = 0;
    friend bool operator==(const operand_layout&, const operand_layout&) = default;
};

/// A float GEMM operand converted to bf16 once (primitives<B>::prepare_bf16), for the several
/// products that read it under bf16 precision: a linear layer's input and weight are read in
/// forward and again by the weight and input gradients, its output gradient by both; the
/// attention's q, k, v and probabilities likewise. A product given one converts nothing for
/// that operand — when it is the copy of this very operand (same address, same layout);
/// otherwise it converts as usual, so a stale or foreign copy is never read.
struct bf16_operand {
    const void* source = nullptr;  // the float operand converted
    operand_layout layout;         // its layout, as the products read it
    std::shared_ptr<void> data;    // the copy, in backend memory, laid out as `packed`
    operand_layout packed;
    [[nodiscard]] bool serves(const void* src, const operand_layout& l) const { return data && source == src && layout == l; }
};

struct gemm_addresses;

/// One strided-batched GEMM, row-major, in BLAS terms:
///   C[i] = alpha * op(A[i]) * op(B[i]) + beta * C[i],   op(X) = trans ? X^T : X,
/// with op(A): (m, k), op(B): (k, n), C: (m, n); A[i] = A + i * stride_a, and a stride of 0
/// shares one matrix across the batch. An optional outer batch (batch2, stride_*2) makes
/// the index (j, i) with A[j, i] = A + j * stride_a2 + i * stride_a: attention over
/// (batch, heads) reads heads straight out of a (B, T, H*dh) activation this way.
struct gemm_args {
    bool trans_a = false, trans_b = false;
    index_t m = 0, n = 0, k = 0;
    index_t lda = 0, ldb = 0, ldc = 0;
    index_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
    index_t batch2 = 1, stride_a2 = 0, stride_b2 = 0, stride_c2 = 0;
    // bf16 copies of A and B made beforehand (bf16 precision only; see bf16_operand)
    const bf16_operand* a_bf16 = nullptr;
    const bf16_operand* b_bf16 = nullptr;
    // the matrix addresses of a two-level batch, built beforehand (see gemm_addresses)
    const gemm_addresses* addresses = nullptr;
};

/// The floating-point operations of one product: 2·m·n·k (a multiply and an add per term)
/// for each of its batch × batch2 matrices.
inline std::int64_t gemm_flops(const gemm_args& g) { return 2 * g.m * g.n * g.k * g.batch * g.batch2; }

namespace detail {
inline std::int64_t& issued_flops() {
    thread_local std::int64_t n = 0;
    return n;
}
}  // namespace detail
/// Every backend's gemm and gemm_bias count their product here when they issue it (on the
/// issuing host thread): the FLOPs of what ran — an ACT encoder's compact rows, not its padded
/// batch; a pruned or ablated sub-layer's products not at all. Elementwise work, softmax and
/// norms are not counted (linear in the width, against the products' quadratic).
inline void count_gemm_flops(const gemm_args& g) { detail::issued_flops() += gemm_flops(g); }
/// The products' FLOPs this thread has issued so far; differences measure a span (flop_scope).
inline std::int64_t flops_issued() { return detail::issued_flops(); }
/// The FLOPs issued by this thread during the scope's life so far.
class flop_scope {
public:
    flop_scope() : start_(flops_issued()) {}
    [[nodiscard]] std::int64_t flops() const { return flops_issued() - start_; }

private:
    std::int64_t start_;
};

/// The matrix addresses a device needs for a product whose two batch strides do not fold into
/// one (attention over (sequence, head) views of a projection: pointer-batched cuBLAS). A
/// product builds its table itself, one launch; primitives<B>::gemm_address_tables builds the
/// tables of several products in one launch before the first of them runs (an attention's two
/// forward products, its four backward ones), and a product given one (gemm_args::addresses)
/// reads it — when it was built for this very product (operands, result and batches),
/// otherwise it builds its own. Backends that need no tables (the CPU) make none.
struct gemm_addresses {
    const void* a = nullptr;  // the operands and the result the table holds (bf16 copies under bf16)
    const void* b = nullptr;
    const void* c = nullptr;
    gemm_args batches;            // the product's batches and strides (the fields a table depends on)
    std::shared_ptr<void> table;  // device memory: [B addresses | A addresses | C addresses], batch-major
    [[nodiscard]] bool serves(const void* a_, const void* b_, const void* c_, const gemm_args& g) const {
        const gemm_args& h = batches;
        return table && a == a_ && b == b_ && c == c_ && h.batch == g.batch && h.batch2 == g.batch2 && h.stride_a == g.stride_a &&
               h.stride_b == g.stride_b && h.stride_c == g.stride_c && h.stride_a2 == g.stride_a2 && h.stride_b2 == g.stride_b2 &&
               h.stride_c2 == g.stride_c2;
    }
};
/// One product whose table gemm_address_tables is asked to build.
template <class T>
struct gemm_table_request {
    gemm_args g;
    const T* a = nullptr;
    const T* b = nullptr;
    T* c = nullptr;
};

/// The stored layouts of op(A) and op(B) of g.
inline operand_layout layout_a(const gemm_args& g) {
    return {g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.batch, g.stride_a, g.batch2, g.stride_a2};
}
inline operand_layout layout_b(const gemm_args& g) {
    return {g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.batch, g.stride_b, g.batch2, g.stride_b2};
}

/// Throws shape_error unless g describes a valid problem (every backend checks with this).
inline void check_gemm(const gemm_args& g) {
    const index_t a_cols = g.trans_a ? g.m : g.k, b_cols = g.trans_b ? g.k : g.n;
    DEPTHLAB_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 1, shape_error, "gemm: bad sizes m=", g.m, " n=", g.n,
                   " k=", g.k, " batch=", g.batch);
    DEPTHLAB_CHECK(g.lda >= a_cols && g.ldb >= b_cols && g.ldc >= g.n, shape_error, "gemm: leading dimensions lda=", g.lda,
                   " ldb=", g.ldb, " ldc=", g.ldc, " too small for m=", g.m, " n=", g.n, " k=", g.k);
    DEPTHLAB_CHECK(g.batch == 1 || g.stride_c != 0, shape_error, "gemm: batch of ", g.batch, " results with output stride 0");
    DEPTHLAB_CHECK(g.batch2 >= 1 && (g.batch2 == 1 || g.stride_c2 != 0), shape_error, "gemm: outer batch of ", g.batch2,
                   " results with output stride 0");
}
/// Products with a vector operand (m, n or k of 1: a halting unit's projection, its weight
/// gradient, an outer product) stay f32 under bf16 precision on every backend. They are
/// bound by memory, not by multiplies, so bf16 would not speed them up: converting the
/// operands would only read them once more and round them.
inline bool vector_product(const gemm_args& g) { return g.m == 1 || g.n == 1 || g.k == 1; }
/// True when a float GEMM of shape g multiplies bf16-rounded operands now (precision.hpp).
inline bool bf16_product(const gemm_args& g) {
    return g.k > 0 && active_matmul_precision() == matmul_precision::bf16 && !vector_product(g);
}
/// The fused products' common condition: one product (no batch).
inline void check_one_product(const gemm_args& g, const char* name) {
    DEPTHLAB_CHECK(g.batch == 1 && g.batch2 == 1, shape_error, name, ": one product (batch 1), got batch ", g.batch, " x ", g.batch2);
}
/// gemm_bias's extra conditions (every backend): one product and a bias pointer.
inline void check_gemm_bias(const gemm_args& g, const void* bias, const char* name = "gemm_bias") {
    check_one_product(g, name);
    DEPTHLAB_CHECK(bias != nullptr || g.n == 0, usage_error, name, ": no bias for ", g.n, " columns");
}
/// gemm_bias_gelu's: gemm_bias's, and packed rows (its GELU runs over pre and c as n-element rows).
inline void check_gemm_bias_gelu(const gemm_args& g, const void* bias) {
    check_gemm_bias(g, bias, "gemm_bias_gelu");
    DEPTHLAB_CHECK(g.ldc == g.n, shape_error, "gemm_bias_gelu: packed output rows (ldc = n = ", g.n, "), got ldc ", g.ldc);
}
/// gemm_bias_grad's: one product whose A is dY stored (k, m) with packed rows, and a db pointer.
inline void check_gemm_bias_grad(const gemm_args& g, const void* db) {
    check_one_product(g, "gemm_bias_grad");
    DEPTHLAB_CHECK(g.trans_a && g.lda == g.m, shape_error, "gemm_bias_grad: A must be dY stored (k, m) = (", g.k, ", ", g.m,
                   ") and transposed (trans_a, lda = m), got trans_a ", g.trans_a, ", lda ", g.lda);
    DEPTHLAB_CHECK(db != nullptr || g.m == 0, usage_error, "gemm_bias_grad: no bias gradient for ", g.m, " columns of dY");
}

/// Maps a row of a (..., cols) tensor to the row of a broadcast operand (e.g. an attention
/// mask (B,1,1,Tk) for scores (B,H,Tq,Tk)): offset = sum_k digit_k(row) * stride_k, where
/// the digits are the row's multi-index over `dims` and broadcast axes have stride 0.
struct row_broadcast {
    int rank = 0;
    index_t dims[Shape::max_rank] = {};
    index_t strides[Shape::max_rank] = {};
    [[nodiscard]] DEPTHLAB_HOST_AND_GPU index_t offset(index_t row) const {
        index_t off = 0;
        for (int k = rank - 1; k >= 0; --k) {
            off += (row % dims[k]) * strides[k];
            row /= dims[k];
        }
        return off;
    }
};

/// Device memory of backend B; specialised per backend.
template <class B>
struct memory;

/// Numerical primitives of backend B; specialised per backend.
template <class B>
struct primitives;

}  // namespace depthlab
