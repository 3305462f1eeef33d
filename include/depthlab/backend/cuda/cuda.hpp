#pragma once
// backend::cuda as any C++ compiler sees it: memory<cuda> and primitives<cuda> declared, no
// CUDA header, no kernel. This is what lets a program compiled by g++ or clang (with the CPU
// backend, oneDNN and OpenMP in the same translation unit) hold Tensor<T, backend::cuda>,
// models and optimisers on a GPU and pick the backend at run time, e.g. `--device cuda`:
//
//     #include <depthlab/depthlab.hpp>
//     #include <depthlab/backend/cuda/cuda.hpp>      // link depthlab::cuda
//     nn::EncoderLayer<float, backend::cuda> layer(cfg, gen);
//
// The definitions are the kernels of backend/cuda/*.cuh, compiled by nvcc once into the
// depthlab_cuda library (src/cuda/depthlab_cuda.cu) for float and double; CMake target
// depthlab::cuda (-DDEPTHLAB_WITH_CUDA=ON). A .cu translation unit may instead include
// depthlab/backend/cuda/cuda.cuh and instantiate the kernels itself (other element types).
// Contracts: every routine has the name, arguments and semantics of primitives<cpu>
// (backend/cpu/cpu.hpp); nothing here synchronises with the host except memory::to_host.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "depthlab/backend/backend.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/core/shape.hpp"
#include "depthlab/optim/rules.hpp"

namespace depthlab {

namespace cuda {
/// The number of CUDA devices (0 without a driver or a GPU; never throws).
int device_count();
/// "NVIDIA H200 (sm_90, 139 GiB)" for device `index`, or "no CUDA device".
std::string device_description(int index = 0);
/// Waits for this thread's stream (for timing; counted as a synchronisation).
void synchronize();
/// This thread's stream as an opaque handle (a cudaStream_t), for libraries that enqueue on
/// it, e.g. NCCL collectives (dist/nccl.hpp).
void* stream_handle();
}  // namespace cuda

/// Device memory from a per-thread caching allocator (size classes, bound
/// DEPTHLAB_CUDA_CACHE_MB, default 8 GiB); transfers through pinned staging buffers on this
/// thread's stream. Every download is a host synchronisation, counted in counters<cuda>().
template <>
struct memory<backend::cuda> {
    static constexpr std::size_t alignment = 256;  // cudaMalloc's

    template <class T>
    static std::shared_ptr<T> allocate(std::size_t n) {
        return std::static_pointer_cast<T>(allocate_bytes(std::max<std::size_t>(n * sizeof(T), 1)));
    }
    template <class T>
    static void to_host(const T* src, T* dst, std::size_t n) {
        counters<backend::cuda>().syncs.fetch_add(1, std::memory_order_relaxed);
        if (n) download_bytes(dst, src, n * sizeof(T));
    }
    template <class T>
    static void from_host(const T* src, T* dst, std::size_t n) {
        counters<backend::cuda>().uploads.fetch_add(1, std::memory_order_relaxed);
        if (n) upload_bytes(dst, src, n * sizeof(T));
    }
    /// Frees this thread's cached blocks.
    static void release_cached();
    static std::size_t cached_bytes();

    /// A block of at least `bytes` from this thread's cache; it goes back there when the last
    /// owner lets go. Throws device_error when the device is out of memory.
    static std::shared_ptr<void> allocate_bytes(std::size_t bytes);
    /// Device -> host, waiting for this thread's stream.
    static void download_bytes(void* dst, const void* src, std::size_t bytes);
    /// Host -> device, asynchronous on this thread's stream (the source may be reused at once).
    static void upload_bytes(void* dst, const void* src, std::size_t bytes);
};

/// The numerical routines of primitives<cpu> as kernels on this thread's stream.
template <>
struct primitives<backend::cuda> {
    // ---- elementwise ----
    template <class T>
    static void fill(index_t n, T v, T* y);
    template <class T>
    static void copy_strided(const Shape& shape, const T* src, const Shape& sst, T* dst, const Shape& dst_st, bool accumulate);
    template <class T>
    static void add(index_t n, const T* a, const T* b, T* y);
    template <class T>
    static void mul(index_t n, const T* a, const T* b, T* y);
    template <class T>
    static void mul_acc(index_t n, const T* a, const T* b, T* y);
    template <class T>
    static void axpby(index_t n, T alpha, const T* x, T beta, T* y);

    // ---- row broadcast: x (rows, cols), v (cols) ----
    template <class T>
    static void add_row_vector(index_t rows, index_t cols, const T* x, const T* v, T* y);
    template <class T>
    static void mul_row_vector(index_t rows, index_t cols, const T* x, const T* v, T* y);
    template <class T>
    static void mul_row_vector_acc(index_t rows, index_t cols, const T* dy, const T* v, T* dx);
    // column sums: one thread per column walks the rows in order (deterministic, coalesced)
    template <class T>
    static void sum_rows_acc(index_t rows, index_t cols, const T* x, T* v);
    template <class T>
    static void sum_rows_mul_acc(index_t rows, index_t cols, const T* a, const T* b, T* v);
    template <class T>
    static void scale_rows(index_t rows, index_t cols, const T* x, const T* w, T* y);
    template <class T>
    static void scale_rows_bwd(index_t rows, index_t cols, const T* x, const T* w, const T* dy, T* dx, T* dw);
    template <class T>
    static void interpolate_rows(index_t rows, index_t cols, const T* a, const T* b, const T* w, T* y);
    template <class T>
    static void interpolate_rows_bwd(index_t rows, index_t cols, const T* a, const T* b, const T* w, const T* dy, T* da, T beta_a,
                                     T* db, T beta_b, T* dw);

    // ---- activations ----
    template <class T>
    static void gelu_fwd(index_t n, const T* x, T* y);
    template <class T>
    static void gelu_bwd(index_t n, const T* x, const T* dy, T* dx);
    template <class T>
    static void gelu_erf_fwd(index_t n, const T* x, T* y);
    template <class T>
    static void gelu_erf_bwd(index_t n, const T* x, const T* dy, T* dx);
    template <class T>
    static void relu_fwd(index_t n, const T* x, T* y);
    template <class T>
    static void relu_bwd(index_t n, const T* x, const T* dy, T* dx);
    template <class T>
    static void tanh_fwd(index_t n, const T* x, T* y);
    template <class T>
    static void tanh_bwd(index_t n, const T* y, const T* dy, T* dx);
    template <class T>
    static void sigmoid_fwd(index_t n, const T* x, T* y);
    template <class T>
    static void sigmoid_bwd(index_t n, const T* y, const T* dy, T* dx);
    template <class T>
    static void log_sigmoid_fwd(index_t n, const T* x, T* y);
    template <class T>
    static void log_sigmoid_bwd(index_t n, const T* x, const T* dy, T* dx);

    // ---- reductions (into device memory) ----
    template <class T>
    static void sum_to(index_t n, const T* x, T scale, T* out);
    template <class T>
    static void add_scaled_by(index_t n, const T* s, T factor, const T* x, T* y);
    template <class T>
    static void nonfinite_flag(index_t n, const T* x, std::int32_t* flag);

    // ---- softmax family (last axis), one block per row ----
    template <class T>
    static void softmax_fwd(index_t rows, index_t cols, const T* x, T scale, const T* mask, const row_broadcast& map, T* y);
    template <class T>
    static void softmax_bwd(index_t rows, index_t cols, const T* y, const T* dy, T scale, T* dx, bool accumulate = true);
    template <class T>
    static void log_softmax_fwd(index_t rows, index_t cols, const T* x, T* y);
    template <class T>
    static void log_softmax_bwd(index_t rows, index_t cols, const T* y, const T* dy, T* dx);

    // ---- layer norm (last axis) ----
    template <class T>
    static void layernorm_fwd(index_t rows, index_t cols, const T* x, const T* gamma, const T* beta, T eps, T* y, T* mean, T* rstd);
    template <class T>
    static void layernorm_bwd(index_t rows, index_t cols, const T* x, const T* dy, const T* gamma, const T* mean, const T* rstd, T* dx, T* dgamma, T* dbeta);

    // ---- cross-entropy over rows of logits (rows, V) ----
    template <class T>
    static void cross_entropy_fwd(index_t rows, index_t V, const T* logits, const std::int64_t* target, std::int64_t ignore, T smoothing, T* loss, T* lse);
    template <class T>
    static void cross_entropy_mean(index_t rows, const T* loss, const std::int64_t* target, std::int64_t ignore, T* mean, T* inv_count);
    template <class T>
    static void cross_entropy_bwd(index_t rows, index_t V, const T* logits, const std::int64_t* target, std::int64_t ignore, T smoothing, const T* lse, const T* g, index_t g_stride, const T* g_scale, T* dlogits);

    // ---- rows by index ----
    template <class T>
    static void gather_rows(index_t n, index_t cols, const T* table, index_t limit, const std::int64_t* ids, T* out, bool accumulate = false);
    template <class T>
    static void gather_rows_strided(index_t n, index_t cols, index_t src_stride, index_t dst_stride, const T* table, index_t limit, const std::int64_t* ids, T* out, bool accumulate = false);
    // repeated ids accumulate in index order: one thread per column walks the ids
    template <class T>
    static void scatter_add_rows(index_t n, index_t cols, const T* src, index_t limit, const std::int64_t* ids, T* table);
    template <class T>
    static void scatter_rows_set(index_t n, index_t cols, const T* src, index_t limit, const std::int64_t* ids, T* dst);
    template <class T>
    static void rows_axpy(index_t n, index_t cols, T alpha, const T* src, index_t limit, const std::int64_t* ids, T* dst);

    // ---- dropout (the CPU's masks: the same Philox words) ----
    template <class T>
    static void dropout_mask(index_t n, T p, const Generator& gen, std::uint64_t first, T* mask);

    // ---- optimiser updates ----
    template <class T>
    static void sgd_update(index_t n, T* w, const T* g, T* buf, const optim::rules::sgd<T>& rule);
    template <class T>
    static void adam_update(index_t n, T* w, const T* g, T* m, T* v, const optim::rules::adam<T>& rule);
    template <class T>
    static void lamb_moments(index_t n, const T* w, const T* g, T* m, T* v, const optim::rules::adam_moments<T>& am, T wd, double* sums);
    template <class T>
    static void lamb_apply(index_t n, T* w, const T* m, const T* v, const optim::rules::adam_moments<T>& am, T wd, double lr, const double* sums);
    template <class T>
    static void sum_squares_to(index_t n, const T* x, double* out);
    template <class T>
    static void clip_scale(index_t n, T* x, const double* parts, index_t k, double max_norm);

    // ---- GEMM ----
    template <class T>
    static void gemm(const gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c);
    template <class T>
    static void gemm_bias(const gemm_args& g, const T* a, const T* b, const T* bias, T* c);
};

}  // namespace depthlab
