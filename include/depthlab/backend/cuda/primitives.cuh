#pragma once
// primitives<backend::cuda>: the routines of primitives<cpu> (same names, same arguments,
// same semantics: see backend/cpu/cpu.hpp for each contract) as CUDA kernels on this
// thread's stream. Element formulas shared with the CPU come from backend/elementwise.hpp,
// backend/update_rules.hpp and core/rng.hpp (dropout masks equal the CPU's bit for bit).
// Reductions are deterministic: fixed grids and fixed orders, never atomics on floats.
// Nothing here synchronises with the host.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/cuda/gemm.cuh"
#include "depthlab/backend/cuda/launch.cuh"
#include "depthlab/backend/cuda/cuda.hpp"
#include "depthlab/backend/cuda/memory.cuh"
#include "depthlab/backend/elementwise.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/core/shape.hpp"
#include "depthlab/backend/update_rules.hpp"

namespace depthlab {

namespace cuda {
/// Shape and strides of a strided copy, by value into the kernel.
struct strided_desc {
    int rank = 0;
    index_divisor dims[Shape::max_rank];  // 32-bit division of the element index where the sizes allow
    index_t src[Shape::max_rank] = {}, dst[Shape::max_rank] = {};
};
/// Scratch device memory for reductions (from the caching allocator: cheap to ask for).
inline std::shared_ptr<double> reduce_scratch() { return memory<backend::cuda>::allocate<double>(2 * reduce_blocks); }
template <class T>
__device__ inline T quiet_nan() {
    return std::numeric_limits<T>::quiet_NaN();
}
/// x *= the clipping factor, computed once per block from the k squared norms on the device.
template <class T>
__global__ void clip_scale_kernel(index_t n, T* x, const double* parts, index_t k, double max_norm) {
    __shared__ double factor;
    if (threadIdx.x == 0) factor = optim::rules::clip_factor(optim::rules::clip_total(parts, k), max_norm);
    __syncthreads();
    if (!(factor < 1.0)) return;
    const T f = static_cast<T>(factor);
    for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<index_t>(gridDim.x) * blockDim.x)
        x[i] = f * x[i];
}
// ---- multi-tensor passes: every tensor of an optimiser step in one launch. The tensors are
// cut into chunks of tensor_chunk elements, one block per chunk (grid-stride over chunks);
// the descriptions, the chunk list and each tensor's first chunk go to the device in one
// upload (no synchronisation). Per-tensor sums: each chunk's partial, then the last block
// adds each tensor's partials in chunk order (deterministic, as reduce2).
inline constexpr index_t tensor_chunk = 8192;
struct chunk_ref {
    std::int32_t tensor;
    index_t start;
};
template <class D>
struct tensor_table {
    std::shared_ptr<unsigned char> bytes;  // device memory holding the three arrays
    const D* tensors = nullptr;
    const chunk_ref* chunks = nullptr;
    const index_t* first = nullptr;  // tensor i's chunks: [first[i], first[i + 1])
    index_t count = 0, chunk_count = 0;
    [[nodiscard]] unsigned grid() const { return static_cast<unsigned>(std::clamp<index_t>(chunk_count, 1, 65535)); }
};
/// The table of `count` host descriptions d[i] with d[i].n elements, on the device.
template <class D>
tensor_table<D> upload_tensor_table(index_t count, const D* d) {
    DEPTHLAB_CHECK(count <= 2147483647, shape_error, "multi-tensor step: ", count, " tensors exceed the int32 chunk index");
    std::vector<chunk_ref> chunks;
    std::vector<index_t> first(static_cast<std::size_t>(count + 1), 0);
    for (index_t i = 0; i < count; ++i) {
        first[static_cast<std::size_t>(i)] = static_cast<index_t>(chunks.size());
        for (index_t s = 0; s < d[i].n; s += tensor_chunk) chunks.push_back({static_cast<std::int32_t>(i), s});
    }
    first[static_cast<std::size_t>(count)] = static_cast<index_t>(chunks.size());
    const auto align = [](std::size_t b) { return (b + 15) / 16 * 16; };
    const std::size_t at_chunks = align(static_cast<std::size_t>(count) * sizeof(D)), at_first = align(at_chunks + chunks.size() * sizeof(chunk_ref));
    const std::size_t bytes = at_first + first.size() * sizeof(index_t);
    std::vector<unsigned char> host(bytes, 0);
    std::memcpy(host.data(), d, static_cast<std::size_t>(count) * sizeof(D));
    if (!chunks.empty()) std::memcpy(host.data() + at_chunks, chunks.data(), chunks.size() * sizeof(chunk_ref));
    std::memcpy(host.data() + at_first, first.data(), first.size() * sizeof(index_t));
    tensor_table<D> t;
    t.bytes = memory<backend::cuda>::allocate<unsigned char>(bytes);
    memory<backend::cuda>::from_host(host.data(), t.bytes.get(), bytes);
    t.tensors = reinterpret_cast<const D*>(t.bytes.get());
    t.chunks = reinterpret_cast<const chunk_ref*>(t.bytes.get() + at_chunks);
    t.first = reinterpret_cast<const index_t*>(t.bytes.get() + at_first);
    t.count = count;
    t.chunk_count = static_cast<index_t>(chunks.size());
    return t;
}
/// f(description, i) for every element i of every tensor (one block per chunk).
template <class D, class F>
__global__ void each_tensor_element_kernel(tensor_table<D> t, F f) {
    for (index_t c = blockIdx.x; c < t.chunk_count; c += gridDim.x) {
        const chunk_ref ch = t.chunks[c];
        const D d = t.tensors[ch.tensor];
        const index_t end = std::min(d.n, ch.start + tensor_chunk);
        for (index_t i = ch.start + threadIdx.x; i < end; i += blockDim.x) f(d, i);
    }
}
template <class D, class F>
void for_each_tensor_element(const tensor_table<D>& t, F f, const char* name) {
    note_launch();
    if (t.chunk_count == 0) return;
    DEPTHLAB_CUDA_LAUNCH((each_tensor_element_kernel<D, F>), t.grid(), block_threads, 0, stream())(t, f);
    check_launch(name, t.grid(), block_threads);
}
/// {Σ f(d, i).a, Σ f(d, i).b} over each tensor's elements, then g(tensor, a, b) once per
/// tensor (in one launch: partials per chunk, the last block adds them in order).
template <class D, class F, class G>
__global__ void tensor_sums_kernel(tensor_table<D> t, F f, G g, double* partial, unsigned* ticket) {
    for (index_t c = blockIdx.x; c < t.chunk_count; c += gridDim.x) {
        const chunk_ref ch = t.chunks[c];
        const D d = t.tensors[ch.tensor];
        const index_t end = std::min(d.n, ch.start + tensor_chunk);
        double a = 0, b = 0;
        for (index_t i = ch.start + threadIdx.x; i < end; i += blockDim.x) {
            const double2_sum v = f(d, i);
            a += v.a;
            b += v.b;
        }
        a = block_sum(a);
        b = block_sum(b);
        if (threadIdx.x == 0) {
            partial[2 * c] = a;
            partial[2 * c + 1] = b;
        }
    }
    if (!last_block_arrives(ticket)) return;
    for (index_t i = threadIdx.x; i < t.count; i += blockDim.x) {
        double a = 0, b = 0;
        for (index_t c = t.first[i]; c < t.first[i + 1]; ++c) {
            a += partial[2 * c];
            b += partial[2 * c + 1];
        }
        g(t.tensors[i], i, a, b);
    }
}
template <class D, class F, class G>
void tensor_sums(const tensor_table<D>& t, F f, G g, const char* name) {
    note_launch();
    if (t.count == 0) return;
    const auto partial = memory<backend::cuda>::allocate<double>(static_cast<std::size_t>(2 * std::max<index_t>(t.chunk_count, 1)));
    DEPTHLAB_CUDA_LAUNCH((tensor_sums_kernel<D, F, G>), t.grid(), block_threads, 0, stream())(t, f, g, partial.get(), reduction_ticket());
    check_launch(name, t.grid(), block_threads);
}

/// Every tensor's elements *= the clipping factor, computed once per block from the k squared
/// norms on the device.
template <class T>
__global__ void clip_scale_many_kernel(tensor_table<optim::rules::tensor_span<T>> t, const double* parts, index_t k, double max_norm) {
    __shared__ double factor;
    if (threadIdx.x == 0) factor = optim::rules::clip_factor(optim::rules::clip_total(parts, k), max_norm);
    __syncthreads();
    if (!(factor < 1.0)) return;
    const T f = static_cast<T>(factor);
    for (index_t c = blockIdx.x; c < t.chunk_count; c += gridDim.x) {
        const chunk_ref ch = t.chunks[c];
        const optim::rules::tensor_span<T> d = t.tensors[ch.tensor];
        const index_t end = std::min(d.n, ch.start + tensor_chunk);
        for (index_t i = ch.start + threadIdx.x; i < end; i += blockDim.x) d.x[i] = f * d.x[i];
    }
}

/// f(i, mask value) for every i < n: inverted dropout's mask (0, or 1 / (1 - p)) drawn from
/// gen's counter words from `first` on, one Philox block per 4 elements, as on the CPU.
template <class T, class F>
void for_each_dropout(index_t n, T p, const Generator& gen, std::uint64_t first, F f, const char* name) {
    const depthlab::detail::dropout_constants<T> d(p);
    const std::uint64_t seed = gen.seed(), block0 = first >> 2;
    for_each((n + 3) / 4, [=] __device__(index_t blk) {
        std::uint32_t w[4];
        depthlab::detail::philox_block(seed, block0 + static_cast<std::uint64_t>(blk), w);
        for (index_t j = 0; j < 4 && blk * 4 + j < n; ++j) f(blk * 4 + j, depthlab::detail::dropout_keep(w[j], d.threshold, d.keep));
    }, name);
}
/// log Σ exp over a row (block-wide; every thread gets the result).
template <class T>
__device__ inline T row_logsumexp(const T* x, index_t n) {
    T mx = -std::numeric_limits<T>::infinity();
    for (index_t c = threadIdx.x; c < n; c += blockDim.x) mx = nan_max(mx, x[c]);
    mx = block_max(mx);
    T s = T(0);
    for (index_t c = threadIdx.x; c < n; c += blockDim.x) s += std::exp(x[c] - mx);
    return mx + std::log(block_sum(s));
}
}  // namespace cuda

// The definitions of primitives<backend::cuda> (declared in cuda.hpp).

template <class T>
void primitives<backend::cuda>::fill(index_t n, T v, T* y) {
    cuda::for_each(n, [=] __device__(index_t i) { y[i] = v; }, "fill");
}

template <class T>
void primitives<backend::cuda>::copy_strided(const Shape& shape, const T* src, const Shape& sst, T* dst, const Shape& dst_st, bool accumulate) {
    cuda::strided_desc d;
    d.rank = shape.rank();
    for (int k = 0; k < d.rank; ++k) {
        d.dims[k] = cuda::divisor_of(shape[k]);
        d.src[k] = sst[k];
        d.dst[k] = dst_st[k];
    }
    cuda::for_each(shape.numel(), [=] __device__(index_t i) {
        index_t so = 0, doff = 0, rem = i;
        for (int k = d.rank - 1; k >= 0; --k) {
            const index_t q = d.dims[k].div(rem), c = rem - q * d.dims[k].divisor();
            rem = q;
            so += c * d.src[k];
            doff += c * d.dst[k];
        }
        dst[doff] = accumulate ? dst[doff] + src[so] : src[so];
    }, "copy_strided");
}

template <class T>
void primitives<backend::cuda>::add(index_t n, const T* a, const T* b, T* y) {
    cuda::for_each(n, [=] __device__(index_t i) { y[i] = a[i] + b[i]; }, "add");
}

template <class T>
void primitives<backend::cuda>::mul(index_t n, const T* a, const T* b, T* y) {
    cuda::for_each(n, [=] __device__(index_t i) { y[i] = a[i] * b[i]; }, "mul");
}

template <class T>
void primitives<backend::cuda>::mul_acc(index_t n, const T* a, const T* b, T* y) {
    cuda::for_each(n, [=] __device__(index_t i) { y[i] += a[i] * b[i]; }, "mul_acc");
}

template <class T>
void primitives<backend::cuda>::axpby(index_t n, T alpha, const T* x, T beta, T* y) {
    if (beta == T(0)) cuda::for_each(n, [=] __device__(index_t i) { y[i] = alpha * x[i]; }, "axpby");
    else cuda::for_each(n, [=] __device__(index_t i) { y[i] = alpha * x[i] + beta * y[i]; }, "axpby");
}

template <class T>
void primitives<backend::cuda>::add_row_vector(index_t rows, index_t cols, const T* x, const T* v, T* y) {
    const auto col = cuda::divisor_of(cols);
    cuda::for_each(rows * cols, [=] __device__(index_t i) { y[i] = x[i] + v[col.mod(i)]; }, "add_row_vector");
}

template <class T>
void primitives<backend::cuda>::mul_row_vector(index_t rows, index_t cols, const T* x, const T* v, T* y) {
    const auto col = cuda::divisor_of(cols);
    cuda::for_each(rows * cols, [=] __device__(index_t i) { y[i] = x[i] * v[col.mod(i)]; }, "mul_row_vector");
}

template <class T>
void primitives<backend::cuda>::mul_row_vector_acc(index_t rows, index_t cols, const T* dy, const T* v, T* dx) {
    const auto col = cuda::divisor_of(cols);
    cuda::for_each(rows * cols, [=] __device__(index_t i) { dx[i] += dy[i] * v[col.mod(i)]; }, "mul_row_vector_acc");
}

template <class T>
void primitives<backend::cuda>::sum_rows_acc(index_t rows, index_t cols, const T* x, T* v, bool accumulate) {
    cuda::column_reduce<T, 1>(rows, cols, [=] __device__(index_t r, index_t c) { return cuda::column_sums<T, 1>{{x[r * cols + c]}}; },
                              [=] __device__(index_t c, const cuda::column_sums<T, 1>& s) { v[c] = (accumulate ? v[c] : T(0)) + s.v[0]; },
                              "sum_rows_acc");
}

template <class T>
void primitives<backend::cuda>::sum_rows_mul_acc(index_t rows, index_t cols, const T* a, const T* b, T* v) {
    cuda::column_reduce<T, 1>(rows, cols, [=] __device__(index_t r, index_t c) { return cuda::column_sums<T, 1>{{a[r * cols + c] * b[r * cols + c]}}; },
                              [=] __device__(index_t c, const cuda::column_sums<T, 1>& s) { v[c] += s.v[0]; }, "sum_rows_mul_acc");
}

template <class T>
void primitives<backend::cuda>::scale_rows(index_t rows, index_t cols, const T* x, const T* w, T* y) {
    const auto row = cuda::divisor_of(cols);
    cuda::for_each(rows * cols, [=] __device__(index_t i) { y[i] = w[row.div(i)] * x[i]; }, "scale_rows");
}

template <class T>
void primitives<backend::cuda>::scale_rows_bwd(index_t rows, index_t cols, const T* x, const T* w, const T* dy, T* dx, T* dw) {
    const auto row = cuda::divisor_of(cols);
    if (dx) cuda::for_each(rows * cols, [=] __device__(index_t i) { dx[i] += w[row.div(i)] * dy[i]; }, "scale_rows_bwd (dx)");
    if (dw)
        cuda::for_each_row(rows, cols, [=] __device__(index_t r) {
            T s = T(0);
            for (index_t c = threadIdx.x; c < cols; c += blockDim.x) s += dy[r * cols + c] * x[r * cols + c];
            s = cuda::block_sum(s);
            if (threadIdx.x == 0) dw[r] += s;
        }, "scale_rows_bwd (dw)");
}

template <class T>
void primitives<backend::cuda>::interpolate_rows(index_t rows, index_t cols, const T* a, const T* b, const T* w, T* y) {
    const auto row = cuda::divisor_of(cols);
    cuda::for_each(rows * cols, [=] __device__(index_t i) { y[i] = a[i] + w[row.div(i)] * (b[i] - a[i]); }, "interpolate_rows");
}

template <class T>
void primitives<backend::cuda>::interpolate_rows_bwd(index_t rows, index_t cols, const T* a, const T* b, const T* w, const T* dy, T* da,
                                                     T beta_a, T* db, T beta_b, T* dw, T beta_w) {
    // (beta 0 never reads the gradient: a fresh buffer may hold anything, NaN included)
    const auto row = cuda::divisor_of(cols);
    if (da)
        cuda::for_each(rows * cols, [=] __device__(index_t i) {
            const T g = (T(1) - w[row.div(i)]) * dy[i];
            da[i] = beta_a == T(0) ? g : g + beta_a * da[i];
        }, "interpolate_rows_bwd (da)");
    if (db)
        cuda::for_each(rows * cols, [=] __device__(index_t i) {
            const T g = w[row.div(i)] * dy[i];
            db[i] = beta_b == T(0) ? g : g + beta_b * db[i];
        }, "interpolate_rows_bwd (db)");
    if (dw)
        cuda::for_each_row(rows, cols, [=] __device__(index_t r) {
            T s = T(0);
            for (index_t c = threadIdx.x; c < cols; c += blockDim.x) s += dy[r * cols + c] * (b[r * cols + c] - a[r * cols + c]);
            s = cuda::block_sum(s);
            if (threadIdx.x == 0) dw[r] = beta_w == T(0) ? s : dw[r] + s;
        }, "interpolate_rows_bwd (dw)");
}

template <class T>
void primitives<backend::cuda>::act_halting_fwd(index_t n, const T* p, const T* cum, const T* r, const T* ra, const T* nh, T* w, T* cum_out,
                                                T* r_out) {
    cuda::for_each(n, [=] __device__(index_t i) {
        const auto o = elementwise::act_halting(p[i], cum[i], r[i], ra[i], nh[i]);
        w[i] = o.w;
        cum_out[i] = o.cum;
        r_out[i] = o.r;
    }, "act_halting_fwd");
}

template <class T>
void primitives<backend::cuda>::act_decide(index_t n, const T* p, const T* cum, const T* active, T threshold, int iteration, int min_iterations,
                                           T* ra, T* nh, T* state) {
    cuda::for_each(n, [=] __device__(index_t i) {
        elementwise::act_decide(p[i], cum[i], active[i], threshold, iteration, min_iterations, ra[i], nh[i], state[2 * i], state[2 * i + 1]);
    }, "act_decide");
}

template <class T>
void primitives<backend::cuda>::act_halting_bwd(index_t n, const T* ra, const T* nh, const T* dy, elementwise::halting_coefficient<T> ca, T* da,
                                                T beta_a, elementwise::halting_coefficient<T> cb, T* db, T beta_b) {
    // (beta 0 never reads the gradient: a fresh buffer may hold anything, NaN included)
    cuda::for_each(n, [=] __device__(index_t i) {
        if (da) da[i] = elementwise::halting_grad(ca, ra[i], nh[i], dy[i], beta_a, da[i]);
        if (db) db[i] = elementwise::halting_grad(cb, ra[i], nh[i], dy[i], beta_b, db[i]);
    }, "act_halting_bwd");
}

template <class T>
void primitives<backend::cuda>::gelu_fwd(index_t n, const T* x, T* y) {
    cuda::for_each(n, [=] __device__(index_t i) { y[i] = elementwise::gelu(x[i]); }, "gelu_fwd");
}

template <class T>
void primitives<backend::cuda>::gelu_bwd(index_t n, const T* x, const T* dy, T* dx, bool accumulate) {
    cuda::for_each(n, [=] __device__(index_t i) { dx[i] = (accumulate ? dx[i] : T(0)) + (dy[i] * elementwise::gelu_grad(x[i])); }, "gelu_bwd");
}

template <class T>
void primitives<backend::cuda>::gelu_erf_fwd(index_t n, const T* x, T* y) {
    cuda::for_each(n, [=] __device__(index_t i) { y[i] = elementwise::gelu_erf(x[i]); }, "gelu_erf_fwd");
}

template <class T>
void primitives<backend::cuda>::gelu_erf_bwd(index_t n, const T* x, const T* dy, T* dx, bool accumulate) {
    cuda::for_each(n, [=] __device__(index_t i) { dx[i] = (accumulate ? dx[i] : T(0)) + (dy[i] * elementwise::gelu_erf_grad(x[i])); }, "gelu_erf_bwd");
}

template <class T>
void primitives<backend::cuda>::relu_fwd(index_t n, const T* x, T* y) {
    cuda::for_each(n, [=] __device__(index_t i) { y[i] = elementwise::relu(x[i]); }, "relu_fwd");
}

template <class T>
void primitives<backend::cuda>::relu_bwd(index_t n, const T* x, const T* dy, T* dx, bool accumulate) {
    cuda::for_each(n, [=] __device__(index_t i) { dx[i] = (accumulate ? dx[i] : T(0)) + (x[i] > T(0) ? dy[i] : T(0)); }, "relu_bwd");
}

template <class T>
void primitives<backend::cuda>::tanh_fwd(index_t n, const T* x, T* y) {
    cuda::for_each(n, [=] __device__(index_t i) { y[i] = std::tanh(x[i]); }, "tanh_fwd");
}

template <class T>
void primitives<backend::cuda>::tanh_bwd(index_t n, const T* y, const T* dy, T* dx, bool accumulate) {
    cuda::for_each(n, [=] __device__(index_t i) { dx[i] = (accumulate ? dx[i] : T(0)) + (dy[i] * elementwise::tanh_grad_from_output(y[i])); }, "tanh_bwd");
}

template <class T>
void primitives<backend::cuda>::sigmoid_fwd(index_t n, const T* x, T* y) {
    cuda::for_each(n, [=] __device__(index_t i) { y[i] = elementwise::sigmoid(x[i]); }, "sigmoid_fwd");
}

template <class T>
void primitives<backend::cuda>::sigmoid_bwd(index_t n, const T* y, const T* dy, T* dx, bool accumulate) {
    cuda::for_each(n, [=] __device__(index_t i) { dx[i] = (accumulate ? dx[i] : T(0)) + (dy[i] * elementwise::sigmoid_grad_from_output(y[i])); }, "sigmoid_bwd");
}

template <class T>
void primitives<backend::cuda>::log_sigmoid_fwd(index_t n, const T* x, T* y) {
    cuda::for_each(n, [=] __device__(index_t i) { y[i] = elementwise::log_sigmoid(x[i]); }, "log_sigmoid_fwd");
}

template <class T>
void primitives<backend::cuda>::log_sigmoid_bwd(index_t n, const T* x, const T* dy, T* dx, bool accumulate) {
    cuda::for_each(n, [=] __device__(index_t i) { dx[i] = (accumulate ? dx[i] : T(0)) + (dy[i] * elementwise::log_sigmoid_grad(x[i])); }, "log_sigmoid_bwd");
}

template <class T>
void primitives<backend::cuda>::sum_to(index_t n, const T* x, T scale, T* out) {
    const auto scratch = cuda::reduce_scratch();
    cuda::reduce2(n, [=] __device__(index_t i) { return cuda::double2_sum{static_cast<double>(x[i]), 0.0}; },
                  [=] __device__(double a, double) { out[0] = static_cast<T>(a) * scale; }, scratch.get(), "sum_to");
}

template <class T>
void primitives<backend::cuda>::add_scaled_by(index_t n, const T* s, T factor, const T* x, T* y) {
    if (x) cuda::for_each(n, [=] __device__(index_t i) { y[i] += (factor * s[0]) * x[i]; }, "add_scaled_by");
    else cuda::for_each(n, [=] __device__(index_t i) { y[i] += factor * s[0]; }, "add_scaled_by");
}

template <class T>
void primitives<backend::cuda>::nonfinite_flag(index_t n, const T* x, std::int32_t* flag) {
    const auto scratch = cuda::reduce_scratch();
    cuda::reduce2(n, [=] __device__(index_t i) { return cuda::double2_sum{isfinite(x[i]) ? 0.0 : 1.0, 0.0}; },
                  [=] __device__(double a, double) { flag[0] = a > 0 ? 1 : 0; }, scratch.get(), "nonfinite_flag");
}

template <class T>
void primitives<backend::cuda>::softmax_fwd(index_t rows, index_t cols, const T* x, T scale, const T* mask, const row_broadcast& map, T* y) {
    cuda::for_each_row(rows, cols, [=] __device__(index_t r) {
        const T* xr = x + r * cols;
        const T* mr = mask ? mask + map.offset(r) : nullptr;
        T* yr = y + r * cols;
        T mx = -std::numeric_limits<T>::infinity();
        for (index_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const T z = scale * xr[c] + (mr ? mr[c] : T(0));
            yr[c] = z;
            mx = cuda::nan_max(mx, z);
        }
        mx = cuda::block_max(mx);
        if (mx == -std::numeric_limits<T>::infinity()) {  // a fully masked row attends to nothing
            for (index_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = T(0);
            return;
        }
        T s = T(0);
        for (index_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const T e = std::exp(yr[c] - mx);
            yr[c] = e;
            s += e;
        }
        const T inv = T(1) / cuda::block_sum(s);
        for (index_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] *= inv;
    }, "softmax_fwd");
}

template <class T>
void primitives<backend::cuda>::softmax_bwd(index_t rows, index_t cols, const T* y, const T* dy, T scale, T* dx, bool accumulate) {
    cuda::for_each_row(rows, cols, [=] __device__(index_t r) {
        const T *yr = y + r * cols, *gr = dy + r * cols;
        T* dr = dx + r * cols;
        T d = T(0);
        for (index_t c = threadIdx.x; c < cols; c += blockDim.x) d += yr[c] * gr[c];
        d = cuda::block_sum(d);
        for (index_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const T v = scale * yr[c] * (gr[c] - d);
            dr[c] = accumulate ? dr[c] + v : v;
        }
    }, "softmax_bwd");
}

template <class T>
void primitives<backend::cuda>::log_softmax_fwd(index_t rows, index_t cols, const T* x, T* y) {
    cuda::for_each_row(rows, cols, [=] __device__(index_t r) {
        const T l = cuda::row_logsumexp(x + r * cols, cols);
        for (index_t c = threadIdx.x; c < cols; c += blockDim.x) y[r * cols + c] = x[r * cols + c] - l;
    }, "log_softmax_fwd");
}

template <class T>
void primitives<backend::cuda>::log_softmax_bwd(index_t rows, index_t cols, const T* y, const T* dy, T* dx) {
    cuda::for_each_row(rows, cols, [=] __device__(index_t r) {
        T s = T(0);
        for (index_t c = threadIdx.x; c < cols; c += blockDim.x) s += dy[r * cols + c];
        s = cuda::block_sum(s);
        for (index_t c = threadIdx.x; c < cols; c += blockDim.x) dx[r * cols + c] += dy[r * cols + c] - std::exp(y[r * cols + c]) * s;
    }, "log_softmax_bwd");
}

namespace cuda {
/// Inverted dropout's mask (0, or 1 / (1 - p)) over the rows of a for_each_row kernel, drawn
/// from gen's counter words from `first` on as for_each_dropout draws them: element i's word is
/// first + i, and a thread takes a row's words four at a time, aligned as the Philox blocks
/// are, so each block is computed once (a row need not start at a block's first word).
template <class T>
struct dropout_rows : depthlab::detail::dropout_constants<T> {
    dropout_rows(T p, const Generator& gen, std::uint64_t first)
        : depthlab::detail::dropout_constants<T>(p), seed(gen.seed()), first(first), none(p == T(0)) {}
    /// f(c, mask) for this thread's columns c of row r; the mask is 1 when p is 0 (no words drawn).
    template <class F>
    __device__ void for_row(index_t r, index_t cols, F f) const {
        if (none) {
            for (index_t c = threadIdx.x; c < cols; c += blockDim.x) f(c, T(1));
            return;
        }
        const std::uint64_t w0 = first + static_cast<std::uint64_t>(r * cols), w1 = w0 + static_cast<std::uint64_t>(cols);
        for (std::uint64_t b = (w0 >> 2) + threadIdx.x; b < (w1 + 3) >> 2; b += blockDim.x) {
            std::uint32_t w[4];
            depthlab::detail::philox_block(seed, b, w);
            for (unsigned j = 0; j < 4; ++j) {
                const std::uint64_t word = 4 * b + j;
                if (word >= w0 && word < w1) f(static_cast<index_t>(word - w0), depthlab::detail::dropout_keep(w[j], this->threshold, this->keep));
            }
        }
    }
    std::uint64_t seed, first;
    bool none;
};

/// The layer norm of row r by its block (for_each_row): `partial` is this thread's share of the
/// sum of xr's columns, which the caller may take while writing xr (any split of the columns
/// among the threads: block_sum's barrier comes before any column is read back).
template <class T>
__device__ inline void layernorm_row(index_t r, index_t cols, const T* xr, T partial, const T* gamma, const T* beta, T eps, T* y, T* mean,
                                     T* rstd) {
    const T m = block_sum(partial) / static_cast<T>(cols);
    T v = T(0);
    for (index_t c = threadIdx.x; c < cols; c += blockDim.x) v += (xr[c] - m) * (xr[c] - m);
    const T var = block_sum(v) / static_cast<T>(cols);
    const T rs = T(1) / std::sqrt(max(var, T(0)) + eps);
    for (index_t c = threadIdx.x; c < cols; c += blockDim.x) y[r * cols + c] = (xr[c] - m) * rs * gamma[c] + beta[c];
    if (threadIdx.x == 0) {
        mean[r] = m;
        rstd[r] = rs;
    }
}
/// Layer norm's backward means of row r by its block: {mean(g), mean(g * xhat)}, g = gamma * dy.
template <class T>
__device__ inline column_sums<T, 2> layernorm_bwd_means(index_t r, index_t cols, const T* x, const T* dy, const T* gamma, T m, T rs) {
    T sg = T(0), sgx = T(0);
    for (index_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const T g = dy[r * cols + c] * gamma[c];
        sg += g;
        sgx += g * (x[r * cols + c] - m) * rs;
    }
    return {{block_sum(sg) / static_cast<T>(cols), block_sum(sgx) / static_cast<T>(cols)}};
}
/// Layer norm's input gradient of one element (x, dy, gamma at its column) from the row's means.
template <class T>
__device__ inline T layernorm_dx(T x, T dy, T gamma, T m, T rs, const column_sums<T, 2>& means) {
    const T xh = (x - m) * rs, g = dy * gamma;
    return rs * (g - means.v[0] - xh * means.v[1]);
}
}  // namespace cuda

template <class T>
void primitives<backend::cuda>::layernorm_fwd(index_t rows, index_t cols, const T* x, const T* gamma, const T* beta, T eps, T* y, T* mean, T* rstd) {
    cuda::for_each_row(rows, cols, [=] __device__(index_t r) {
        const T* xr = x + r * cols;
        T s = T(0);
        for (index_t c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
        cuda::layernorm_row(r, cols, xr, s, gamma, beta, eps, y, mean, rstd);
    }, "layernorm_fwd");
}

template <class T>
void primitives<backend::cuda>::layernorm_bwd(index_t rows, index_t cols, const T* x, const T* dy, const T* gamma, const T* mean, const T* rstd, T* dx, T* dgamma, T* dbeta,
                                              bool accumulate_dx, bool accumulate_params) {
    if (dx)
        cuda::for_each_row(rows, cols, [=] __device__(index_t r) {
            const T m = mean[r], rs = rstd[r];
            const auto means = cuda::layernorm_bwd_means(r, cols, x, dy, gamma, m, rs);
            for (index_t c = threadIdx.x; c < cols; c += blockDim.x) {
                const index_t i = r * cols + c;
                dx[i] = (accumulate_dx ? dx[i] : T(0)) + cuda::layernorm_dx(x[i], dy[i], gamma[c], m, rs, means);
            }
        }, "layernorm_bwd (dx)");
    if (dgamma && dbeta)
        cuda::column_reduce<T, 2>(rows, cols, [=] __device__(index_t r, index_t c) {
            const T d = dy[r * cols + c];
            return cuda::column_sums<T, 2>{{d * (x[r * cols + c] - mean[r]) * rstd[r], d}};
        }, [=] __device__(index_t c, const cuda::column_sums<T, 2>& s) {
            dgamma[c] = (accumulate_params ? dgamma[c] : T(0)) + s.v[0];
            dbeta[c] = (accumulate_params ? dbeta[c] : T(0)) + s.v[1];
        }, "layernorm_bwd (dgamma, dbeta)");
}

// One block per row: z = x + y * mask written, then the row's layer norm over z (each thread
// reads back the columns it wrote).
template <class T>
void primitives<backend::cuda>::residual_layernorm_fwd(index_t rows, index_t cols, const T* x, const T* y, T p, const Generator& gen,
                                                       std::uint64_t first, const T* gamma, const T* beta, T eps, T* z, T* out, T* mean,
                                                       T* rstd) {
    const cuda::dropout_rows<T> drop(p, gen, first);
    cuda::for_each_row(rows, cols, [=] __device__(index_t r) {
        T* zr = z + r * cols;
        T s = T(0);
        drop.for_row(r, cols, [&](index_t c, T mask) {
            const index_t i = r * cols + c;
            zr[c] = x[i] + y[i] * mask;
            s += zr[c];
        });
        cuda::layernorm_row(r, cols, static_cast<const T*>(zr), s, gamma, beta, eps, out, mean, rstd);
    }, "residual_layernorm_fwd");
}

template <class T>
void primitives<backend::cuda>::residual_layernorm_bwd(index_t rows, index_t cols, const T* z, const T* dout, const T* gamma, const T* mean,
                                                       const T* rstd, T p, const Generator& gen, std::uint64_t first, T* dx, bool accumulate_dx,
                                                       T* dy, bool accumulate_dy) {
    if (!dx && !dy) return;
    const cuda::dropout_rows<T> drop(p, gen, first);
    cuda::for_each_row(rows, cols, [=] __device__(index_t r) {
        const T m = mean[r], rs = rstd[r];
        const auto means = cuda::layernorm_bwd_means(r, cols, z, dout, gamma, m, rs);
        drop.for_row(r, cols, [&](index_t c, T mask) {
            const index_t i = r * cols + c;
            const T dz = cuda::layernorm_dx(z[i], dout[i], gamma[c], m, rs, means);
            if (dy) dy[i] = (accumulate_dy ? dy[i] : T(0)) + dz * mask;  // before dx: when x and y are one variable, dx adds to what dy wrote
            if (dx) dx[i] = (accumulate_dx ? dx[i] : T(0)) + dz;
        });
    }, "residual_layernorm_bwd");
}

template <class T>
void primitives<backend::cuda>::cross_entropy_fwd(index_t rows, index_t V, const T* logits, const std::int64_t* target, std::int64_t ignore, T smoothing, T* loss, T* lse) {
    cuda::for_each_row(rows, V, [=] __device__(index_t r) {
        const T* xr = logits + r * V;
        const T l = cuda::row_logsumexp(xr, V);
        T s = T(0);
        if (smoothing != T(0))
            for (index_t c = threadIdx.x; c < V; c += blockDim.x) s += xr[c];
        s = cuda::block_sum(s);
        if (threadIdx.x != 0) return;
        lse[r] = l;
        const std::int64_t t = target[r];
        if (t == ignore) loss[r] = T(0);
        else if (t < 0 || t >= V) loss[r] = cuda::quiet_nan<T>();
        else loss[r] = (T(1) - smoothing) * (l - xr[t]) + (smoothing != T(0) ? smoothing * (l - s / static_cast<T>(V)) : T(0));
    }, "cross_entropy_fwd");
}

template <class T>
void primitives<backend::cuda>::cross_entropy_mean(index_t rows, const T* loss, const std::int64_t* target, std::int64_t ignore, T* mean, T* inv_count) {
    const auto scratch = cuda::reduce_scratch();
    cuda::reduce2(rows, [=] __device__(index_t r) { return cuda::double2_sum{static_cast<double>(loss[r]), target[r] != ignore ? 1.0 : 0.0}; },
                  [=] __device__(double s, double counted) {
                      const T denom = counted > 0 ? T(1) / static_cast<T>(counted) : T(0);
                      inv_count[0] = denom;
                      mean[0] = static_cast<T>(s) * denom;
                  },
                  scratch.get(), "cross_entropy_mean");
}

template <class T>
void primitives<backend::cuda>::cross_entropy_bwd(index_t rows, index_t V, const T* logits, const std::int64_t* target, std::int64_t ignore, T smoothing, const T* lse, const T* g, index_t g_stride, const T* g_scale, T* dlogits) {
    const auto row = cuda::divisor_of(V);
    cuda::for_each(rows * V, [=] __device__(index_t i) {
        const index_t r = row.div(i), j = i - r * V;
        const std::int64_t t = target[r];
        if (t == ignore || t < 0 || t >= V) return;
        const T gr = g_scale ? g[r * g_stride] * g_scale[0] : g[r * g_stride];
        T d = gr * (std::exp(logits[i] - lse[r]) - smoothing / static_cast<T>(V));
        if (j == t) d -= gr * (T(1) - smoothing);
        dlogits[i] += d;
    }, "cross_entropy_bwd");
}

namespace cuda {
/// The maximum (NaN ignored, as std::max on the host) and the log-sum-exp in double of a row
/// of V logits, reduced over the block (every thread gets both): decoding's log-softmax.
struct row_lse {
    double max, lse;
};
template <class T>
__device__ inline row_lse block_log_sum_exp(const T* x, index_t V) {
    double mx = -std::numeric_limits<double>::infinity();
    for (index_t c = threadIdx.x; c < V; c += blockDim.x)
        if (static_cast<double>(x[c]) > mx) mx = static_cast<double>(x[c]);
    mx = block_max(mx);
    double s = 0;
    for (index_t c = threadIdx.x; c < V; c += blockDim.x) s += std::exp(static_cast<double>(x[c]) - mx);
    return {mx, mx + std::log(block_sum(s))};
}
}  // namespace cuda

// One block per row: the log-sum-exp, the first index of the maximum; a NaN log-sum-exp (a
// NaN or +inf logit) picks 0, as the host's max_element over NaN log-probabilities does. Only
// 3 doubles a row go to the host.
template <class T>
void primitives<backend::cuda>::greedy_pick(index_t rows, index_t V, const T* logits, std::int64_t eos, double* out) {
    DEPTHLAB_CHECK(eos >= 0 && eos < V, index_error, "greedy_pick: EOS id ", eos, " outside the vocabulary [0, ", V, ")");
    cuda::for_each_row(rows, V, [=] __device__(index_t r) {
        const T* x = logits + r * V;
        const cuda::row_lse l = cuda::block_log_sum_exp(x, V);
        index_t first = V;
        for (index_t c = threadIdx.x; c < V; c += blockDim.x)
            if (static_cast<double>(x[c]) == l.max && c < first) first = c;
        first = -cuda::block_max(-first);  // the lowest index of the maximum
        if (threadIdx.x != 0) return;
        const index_t best = l.lse != l.lse ? 0 : first;
        out[3 * r] = static_cast<double>(best);
        out[3 * r + 1] = static_cast<double>(x[best]) - l.lse;
        out[3 * r + 2] = static_cast<double>(x[eos]) - l.lse;
    }, "greedy_pick");
}

// One block per row: the log-sum-exp as greedy_pick, then `take` rounds, each a block-wide
// selection of the first candidate in elementwise::beam_before order after the one the
// previous round took (rank, then the lowest id: two block reductions). 2·take + 1 doubles a
// row go to the host instead of the row's V logits.
template <class T>
void primitives<backend::cuda>::beam_pick(index_t rows, index_t V, const T* logits, const double* base, index_t take, std::int64_t eos,
                                          double* out) {
    DEPTHLAB_CHECK(eos >= 0 && eos < V, index_error, "beam_pick: EOS id ", eos, " outside the vocabulary [0, ", V, ")");
    DEPTHLAB_CHECK(take >= 1 && take <= V, shape_error, "beam_pick: ", take, " candidates a row from a vocabulary of ", V);
    cuda::for_each_row(rows, V, [=] __device__(index_t r) {
        const T* x = logits + r * V;
        const double lse = cuda::block_log_sum_exp(x, V).lse, b = base[r];
        const auto score = [=](index_t c) { return b + (static_cast<double>(x[c]) - lse); };
        double* o = out + r * (2 * take + 1);
        double prev_rank = 0;
        index_t prev = -1;
        for (index_t k = 0; k < take; ++k) {
            double best_rank = -std::numeric_limits<double>::infinity();
            index_t best = V;  // none: every thread's candidates may have been taken
            for (index_t c = threadIdx.x; c < V; c += blockDim.x) {
                const double rc = elementwise::beam_rank(score(c));
                const bool after = k == 0 || rc < prev_rank || (rc == prev_rank && c > prev);
                if (after && (best == V || rc > best_rank)) {  // columns ascend: the first of equal ranks stays
                    best_rank = rc;
                    best = c;
                }
            }
            const double top = cuda::block_max(best_rank);
            const index_t pick = -cuda::block_max(best != V && best_rank == top ? -best : -V);
            if (threadIdx.x == 0) {
                o[2 * k] = score(pick);
                o[2 * k + 1] = static_cast<double>(pick);
            }
            prev_rank = top;
            prev = pick;
        }
        if (threadIdx.x == 0) o[2 * take] = score(eos);
    }, "beam_pick");
}

template <class T>
void primitives<backend::cuda>::gather_rows(index_t n, index_t cols, const T* table, index_t limit, const std::int64_t* ids, T* out, bool accumulate) {
    gather_rows_strided(n, cols, cols, cols, table, limit, ids, out, accumulate);
}

template <class T>
void primitives<backend::cuda>::gather_rows_strided(index_t n, index_t cols, index_t src_stride, index_t dst_stride, const T* table, index_t limit, const std::int64_t* ids, T* out, bool accumulate) {
    const auto row = cuda::divisor_of(cols);
    cuda::for_each(n * cols, [=] __device__(index_t k) {
        const index_t i = row.div(k), c = k - i * cols;
        const std::int64_t id = ids[i];
        T* o = out + i * dst_stride + c;
        if (id < 0 || id >= limit) *o = cuda::quiet_nan<T>();
        else *o = accumulate ? *o + table[id * src_stride + c] : table[id * src_stride + c];
    }, "gather_rows");
}

// One thread per (column, bucket of table rows): each walks the ids in order and adds the rows
// that fall in its bucket, so every table element has one writer and a fixed order
// (deterministic, no atomics), and a vocabulary's buckets keep the grid full where one thread
// per column would leave it nearly empty. Buckets depend on the shape alone.
template <class T>
void primitives<backend::cuda>::scatter_add_rows(index_t n, index_t cols, const T* src, index_t limit, const std::int64_t* ids, T* table,
                                                 bool accumulate) {
    const index_t buckets = std::clamp<index_t>(65536 / std::max<index_t>(cols, 1), 1, std::max<index_t>(limit, 1));
    const index_t width = (limit + buckets - 1) / buckets;
    const auto row = cuda::divisor_of(cols);
    cuda::for_each(cols * buckets, [=] __device__(index_t k) {
        const index_t b = row.div(k), c = k - b * cols, lo = b * width, hi = std::min(limit, lo + width);
        if (!accumulate)  // this thread owns rows [lo, hi) of column c: zeros, then the sums
            for (index_t r = lo; r < hi; ++r) table[r * cols + c] = T(0);
        for (index_t i = 0; i < n; ++i)
            if (ids[i] >= lo && ids[i] < hi) table[ids[i] * cols + c] += src[i * cols + c];
    }, "scatter_add_rows");
}

template <class T>
void primitives<backend::cuda>::scatter_rows_set(index_t n, index_t cols, const T* src, index_t limit, const std::int64_t* ids, T* dst) {
    const auto row = cuda::divisor_of(cols);
    cuda::for_each(n * cols, [=] __device__(index_t k) {
        const index_t i = row.div(k), c = k - i * cols;
        if (ids[i] >= 0 && ids[i] < limit) dst[ids[i] * cols + c] = src[k];
    }, "scatter_rows_set");
}

template <class T>
void primitives<backend::cuda>::rows_axpy(index_t n, index_t cols, T alpha, const T* src, index_t limit, const std::int64_t* ids, T* dst) {
    const auto row = cuda::divisor_of(cols);
    cuda::for_each(n * cols, [=] __device__(index_t k) {
        const index_t i = row.div(k), c = k - i * cols;
        if (ids[i] < 0 || ids[i] >= limit) return;
        T& d = dst[ids[i] * cols + c];
        d = src ? d + alpha * src[ids[i] * cols + c] : T(0);
    }, "rows_axpy");
}

template <class T>
void primitives<backend::cuda>::dropout_mask(index_t n, T p, const Generator& gen, std::uint64_t first, T* mask) {
    cuda::for_each_dropout(n, p, gen, first, [=] __device__(index_t i, T keep) { mask[i] = keep; }, "dropout_mask");
}

template <class T>
void primitives<backend::cuda>::dropout_apply(index_t n, T p, const Generator& gen, std::uint64_t first, const T* x, T* y, bool accumulate) {
    cuda::for_each_dropout(n, p, gen, first, [=] __device__(index_t i, T keep) { y[i] = accumulate ? y[i] + x[i] * keep : x[i] * keep; },
                           "dropout_apply");
}

template <class T>
void primitives<backend::cuda>::sgd_update(index_t n, T* w, const T* g, T* buf, const optim::rules::sgd<T>& rule) {
    const optim::rules::sgd<T> r = rule;
    cuda::for_each(n, [=] __device__(index_t i) { r(w[i], g[i], buf ? buf + i : nullptr); }, "sgd_update");
}

template <class T>
void primitives<backend::cuda>::adam_update(index_t n, T* w, const T* g, T* m, T* v, const optim::rules::adam<T>& rule) {
    const optim::rules::adam<T> r = rule;
    cuda::for_each(n, [=] __device__(index_t i) { r(w[i], g[i], m[i], v[i]); }, "adam_update");
}

template <class T>
void primitives<backend::cuda>::lamb_moments(index_t n, const T* w, const T* g, T* m, T* v, const optim::rules::adam_moments<T>& am, T wd, double* sums) {
    const optim::rules::adam_moments<T> a = am;
    const auto scratch = cuda::reduce_scratch();
    cuda::reduce2(n, [=] __device__(index_t i) {
        const T u = a.update(g[i], m[i], v[i]) + wd * w[i];
        const double wi = static_cast<double>(w[i]), ui = static_cast<double>(u);
        return cuda::double2_sum{wi * wi, ui * ui};
    }, [=] __device__(double s0, double s1) {
        sums[0] = s0;
        sums[1] = s1;
    }, scratch.get(), "lamb_moments");
}

template <class T>
void primitives<backend::cuda>::lamb_apply(index_t n, T* w, const T* m, const T* v, const optim::rules::adam_moments<T>& am, T wd, double lr, const double* sums) {
    const optim::rules::adam_moments<T> a = am;
    cuda::for_each(n, [=] __device__(index_t i) {
        const T step = static_cast<T>(lr * optim::rules::lamb_trust_ratio(sums));
        w[i] -= step * (a.direction(m[i], v[i]) + wd * w[i]);
    }, "lamb_apply");
}

template <class T>
void primitives<backend::cuda>::sum_squares_to(index_t n, const T* x, double* out) {
    const auto scratch = cuda::reduce_scratch();
    cuda::reduce2(n, [=] __device__(index_t i) {
        const double v = static_cast<double>(x[i]);
        return cuda::double2_sum{v * v, 0.0};
    }, [=] __device__(double s, double) { out[0] = s; }, scratch.get(), "sum_squares_to");
}

template <class T>
void primitives<backend::cuda>::clip_scale(index_t n, T* x, const double* parts, index_t k, double max_norm) {
    cuda::note_launch();
    if (n <= 0) return;
    DEPTHLAB_CUDA_LAUNCH(cuda::clip_scale_kernel<T>, cuda::grid_for(n), cuda::block_threads, 0, cuda::stream())(n, x, parts, k, max_norm);
    cuda::check_launch("clip_scale", cuda::grid_for(n), cuda::block_threads);
}

template <class T>
void primitives<backend::cuda>::adam_update_many(index_t count, const optim::rules::adam_tensor<T>* tensors) {
    using D = optim::rules::adam_tensor<T>;
    const auto t = cuda::upload_tensor_table(count, tensors);
    cuda::for_each_tensor_element(t, [] __device__(const D& d, index_t i) { d.rule(d.w[i], d.g[i], d.m[i], d.v[i]); }, "adam_update_many");
}

// LAMB in two launches for every tensor: moments and the per-tensor sums, then the updates.
template <class T>
void primitives<backend::cuda>::lamb_step_many(index_t count, const optim::rules::lamb_tensor<T>* tensors) {
    using D = optim::rules::lamb_tensor<T>;
    const auto t = cuda::upload_tensor_table(count, tensors);
    cuda::tensor_sums(t, [] __device__(const D& d, index_t i) {
        const T u = d.am.update(d.g[i], d.m[i], d.v[i]) + d.wd * d.w[i];
        const double wi = static_cast<double>(d.w[i]), ui = static_cast<double>(u);
        return cuda::double2_sum{wi * wi, ui * ui};
    }, [] __device__(const D& d, index_t, double s0, double s1) {
        d.sums[0] = s0;
        d.sums[1] = s1;
    }, "lamb_step_many (moments)");
    cuda::for_each_tensor_element(t, [] __device__(const D& d, index_t i) {
        const T step = static_cast<T>(d.lr * optim::rules::lamb_trust_ratio(d.adapt ? d.sums : nullptr));
        d.w[i] -= step * (d.am.direction(d.m[i], d.v[i]) + d.wd * d.w[i]);
    }, "lamb_step_many (apply)");
}

template <class T>
void primitives<backend::cuda>::sum_squares_many(index_t count, const optim::rules::tensor_span<T>* tensors, double* out) {
    using D = optim::rules::tensor_span<T>;
    const auto t = cuda::upload_tensor_table(count, tensors);
    cuda::tensor_sums(t, [] __device__(const D& d, index_t i) {
        const double v = static_cast<double>(d.x[i]);
        return cuda::double2_sum{v * v, 0.0};
    }, [=] __device__(const D&, index_t i, double s, double) { out[i] = s; }, "sum_squares_many");
}

template <class T>
void primitives<backend::cuda>::clip_scale_many(index_t count, const optim::rules::tensor_span<T>* tensors, const double* parts, index_t k,
                                                double max_norm) {
    const auto t = cuda::upload_tensor_table(count, tensors);
    cuda::note_launch();
    if (t.chunk_count == 0) return;
    DEPTHLAB_CUDA_LAUNCH(cuda::clip_scale_many_kernel<T>, t.grid(), cuda::block_threads, 0, cuda::stream())(t, parts, k, max_norm);
    cuda::check_launch("clip_scale_many", t.grid(), cuda::block_threads);
}

template <class T>
void primitives<backend::cuda>::gemm(const gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    cuda::gemm(g, alpha, a, b, beta, c);
}

// One cuBLASLt call with the bias epilogue (gemm.cuh). For k = 0 (C = the bias) or a problem
// cuBLASLt has no kernel for: the bias written into C, then the product accumulated on it.
template <class T>
void primitives<backend::cuda>::gemm_bias(const gemm_args& g, const T* a, const T* b, const T* bias, T* c) {
    check_gemm_bias(g, bias);
    cuda::check_cublas_gemm(g);
    if (g.m == 0 || g.n == 0) return;
    if (g.k > 0 && cuda::lt_matmul_fused(g, {.bias = bias}, T(1), a, b, T(0), c)) return;
    const index_t n = g.n, ldc = g.ldc;
    const auto row = cuda::divisor_of(n);
    cuda::for_each(g.m * n, [=] __device__(index_t i) {
        const index_t r = row.div(i), j = i - r * n;
        c[r * ldc + j] = bias[j];
    }, "gemm_bias (bias)");
    cuda::gemm(g, T(1), a, b, T(1), c);
}

// One cuBLASLt call with the GELU_AUX_BIAS epilogue (pre is its aux output, whose leading
// dimension cuBLASLt wants a multiple of 8); else gemm_bias and a GELU pass.
template <class T>
void primitives<backend::cuda>::gemm_bias_gelu(const gemm_args& g, const T* a, const T* b, const T* bias, T* pre, T* c) {
    check_gemm_bias_gelu(g, bias);
    cuda::check_cublas_gemm(g);
    if (g.m == 0 || g.n == 0) return;
    if (g.k > 0 && g.n % 8 == 0 &&
        cuda::lt_matmul_fused(g, {.kind = CUBLASLT_EPILOGUE_GELU_AUX_BIAS, .bias = bias, .aux = pre, .aux_ld = g.n}, T(1), a, b, T(0), c))
        return;
    gemm_bias(g, a, b, bias, pre);
    gelu_fwd(g.m * g.n, pre, c);
}

// An f32 or f64 weight gradient with its bias gradient from the same cuBLASLt call (BGRADB:
// the sums of dY over k, read as the product reads it). Under bf16 the product reads dY
// rounded to bf16 while the bias gradient is an f32 reduction (backend/precision.hpp), so the
// column sums run apart, as where cuBLASLt has no kernel.
template <class T>
void primitives<backend::cuda>::gemm_bias_grad(const gemm_args& g, const T* a, const T* b, T beta, T* c, T* db) {
    check_gemm_bias_grad(g, db);
    cuda::check_cublas_gemm(g);
    if (g.m == 0) return;
    if (g.k > 0 && g.n > 0 && !bf16_product(g) && cuda::lt_matmul<T, T>(g, {.kind = CUBLASLT_EPILOGUE_BGRADB, .bias = db}, T(1), a, b, beta, c))
        return;
    gemm(g, T(1), a, b, beta, c);
    sum_rows_acc(g.k, g.m, a, db, false);
}

// The address tables of several pointer-batched products in one launch. A product under bf16
// reads bf16 copies: its table is built only when both were made beforehand (bf16_operand),
// the only copies whose addresses are known now.
template <class T>
void primitives<backend::cuda>::gemm_address_tables(index_t count, const gemm_table_request<T>* requests, gemm_addresses* out) {
    std::vector<cuda::address_table_source> sources;
    index_t entries = 0;
    for (index_t i = 0; i < count; ++i) {
        out[i] = {};
        const gemm_table_request<T>& r = requests[i];
        const gemm_args& g = r.g;
        if (g.batch2 == 1 || g.m == 0 || g.n == 0 || g.k == 0) continue;  // strided batched, or nothing to multiply: no table
        const void* a = r.a;
        const void* b = r.b;
        index_t in_size = sizeof(T);
        if constexpr (std::is_same_v<T, float>) {
            if (bf16_product(g)) {
                if (!(g.a_bf16 && g.a_bf16->serves(r.a, layout_a(g)) && g.b_bf16 && g.b_bf16->serves(r.b, layout_b(g)))) continue;
                a = g.a_bf16->data.get();
                b = g.b_bf16->data.get();
                in_size = sizeof(__nv_bfloat16);
            }
        }
        const index_t matrices = g.batch * g.batch2;
        auto table = memory<backend::cuda>::allocate<const void*>(static_cast<std::size_t>(3 * matrices));
        sources.push_back(cuda::address_source(g, a, b, r.c, in_size, sizeof(T), table.get(), entries));
        gemm_args batches = g;
        batches.a_bf16 = batches.b_bf16 = nullptr;
        batches.addresses = nullptr;
        out[i] = {.a = a, .b = b, .c = r.c, .batches = batches, .table = std::move(table)};
        entries += matrices;
    }
    if (sources.empty()) return;
    const auto described = memory<backend::cuda>::allocate<cuda::address_table_source>(sources.size());
    memory<backend::cuda>::from_host(sources.data(), described.get(), sources.size());
    const cuda::address_table_source* d = described.get();
    const index_t k = static_cast<index_t>(sources.size());
    cuda::for_each(entries, [=] __device__(index_t e) {
        index_t j = 0;
        while (j + 1 < k && e >= d[j + 1].first) ++j;  // (a handful of tables)
        d[j].write(e - d[j].first);
    }, "gemm (batch addresses)");
}

template <class T>
void primitives<backend::cuda>::prepare_bf16(const operand_layout& layout, const T* src, bf16_operand& out) {
    out = {};
    if constexpr (std::is_same_v<T, float>) out = cuda::prepare_bf16(layout, src);
}

}  // namespace depthlab
