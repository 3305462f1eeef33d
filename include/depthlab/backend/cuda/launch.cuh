#pragma once
// Kernel launch helpers of primitives<backend::cuda>: grid-stride loops over elements, one
// block per row with block reductions, and deterministic two-pass reductions over a fixed
// grid (the same bits on every run, whatever the GPU's scheduling). nvcc only; device
// lambdas need --extended-lambda (the CMake target sets it).
#include <algorithm>
#include <cstdint>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/cuda/runtime.cuh"
#include "depthlab/core/shape.hpp"

namespace depthlab::cuda {

inline constexpr int block_threads = 256;
// Partials of a full-array reduction: a fixed grid, more blocks than SMs. The emulated device
// (emulation/cuda) runs every device thread as a fiber on the CPU and sets a smaller grid: the
// same kernels and the same two-pass order, 32x fewer idle threads to switch through.
#if !defined(DEPTHLAB_CUDA_REDUCE_BLOCKS)
#define DEPTHLAB_CUDA_REDUCE_BLOCKS 1024
#endif
inline constexpr int reduce_blocks = DEPTHLAB_CUDA_REDUCE_BLOCKS;

inline unsigned grid_for(index_t n) {
    return static_cast<unsigned>(std::clamp<index_t>((n + block_threads - 1) / block_threads, 1, 65535));
}
inline void note_launch() { counters<backend::cuda>().launches.fetch_add(1, std::memory_order_relaxed); }
/// A cuBLAS call: a launch, and a GEMM.
inline void note_gemm() {
    note_launch();
    counters<backend::cuda>().gemms.fetch_add(1, std::memory_order_relaxed);
}

template <class F>
__global__ void each_kernel(index_t n, F f) {
    for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<index_t>(gridDim.x) * blockDim.x)
        f(i);
}
/// f(i) for every i in [0, n), one thread per element (grid-stride).
template <class F>
void for_each(index_t n, F f, const char* name) {
    note_launch();
    if (n <= 0) return;
    DEPTHLAB_CUDA_LAUNCH(each_kernel<F>, grid_for(n), block_threads, 0, stream())(n, f);
    check_launch(name, grid_for(n), block_threads);
}

template <class F>
__global__ void rows_kernel(index_t rows, F f) {
    for (index_t r = blockIdx.x; r < rows; r += gridDim.x) f(r);
}
/// Threads of a row block for rows of `cols` columns: whole warps, at most block_threads (a
/// softmax over 20 keys or a layer norm over 128 features leaves no warp without work).
inline unsigned row_threads(index_t cols) {
    return static_cast<unsigned>(std::clamp<index_t>((cols + 31) / 32 * 32, 32, block_threads));
}
/// f(row) for every row, one block of row_threads(cols) threads per row; inside f,
/// threadIdx.x strides over the row's columns (by blockDim.x) and block_sum() reduces (all
/// threads of the block call f with the same row, so block_sum is reached uniformly).
template <class F>
void for_each_row(index_t rows, index_t cols, F f, const char* name) {
    note_launch();
    if (rows <= 0) return;
    const auto grid = static_cast<unsigned>(std::min<index_t>(rows, 65535));
    const unsigned threads = row_threads(cols);
    DEPTHLAB_CUDA_LAUNCH(rows_kernel<F>, grid, threads, 0, stream())(rows, f);
    check_launch(name, grid, threads);
}

/// The sum of v over the block (whole warps, at most block_threads), returned to every
/// thread (fixed order for a given block size: deterministic).
template <class A>
__device__ inline A block_sum(A v) {
    __shared__ A warp_part[block_threads / 32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    __syncthreads();  // warp_part may still be read by a previous call
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    A s = A(0);
    for (int w = 0; w < warps; ++w) s += warp_part[w];
    return s;
}
/// max that propagates NaN (CUDA's max/fmaxf drop it; the CPU's softmax keeps it).
template <class A>
__device__ inline A nan_max(A a, A b) {
    return (a > b || a != a) ? a : b;
}
template <class A>
__device__ inline A block_max(A v) {
    __shared__ A warp_part[block_threads / 32];
    for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_down_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    A s = warp_part[0];
    for (int w = 1; w < warps; ++w) s = nan_max(s, warp_part[w]);
    return s;
}

struct double2_sum {
    double a = 0, b = 0;
};

template <class F>
__global__ void reduce2_partial_kernel(index_t n, F f, double* partial) {
    double a = 0, b = 0;
    for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<index_t>(gridDim.x) * blockDim.x) {
        const double2_sum v = f(i);
        a += v.a;
        b += v.b;
    }
    a = block_sum(a);
    b = block_sum(b);
    if (threadIdx.x == 0) {
        partial[2 * blockIdx.x] = a;
        partial[2 * blockIdx.x + 1] = b;
    }
}
template <class G>
__global__ void reduce2_final_kernel(const double* partial, int parts, G g) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double a = 0, b = 0;
    for (int p = 0; p < parts; ++p) {
        a += partial[2 * p];
        b += partial[2 * p + 1];
    }
    g(a, b);
}
/// {Σ f(i).a, Σ f(i).b} over [0, n) in double on a fixed grid, then g(a, b) on one device
/// thread (which writes the results). Two launches; partials in `scratch` (2 reduce_blocks
/// doubles of device memory).
template <class F, class G>
void reduce2(index_t n, F f, G g, double* scratch, const char* name) {
    note_launch();
    DEPTHLAB_CUDA_LAUNCH(reduce2_partial_kernel<F>, reduce_blocks, block_threads, 0, stream())(n, f, scratch);
    check_launch(name, reduce_blocks, block_threads);
    note_launch();
    DEPTHLAB_CUDA_LAUNCH(reduce2_final_kernel<G>, 1, 32, 0, stream())(scratch, reduce_blocks, g);
    check_launch(name, 1, 32);
}

}  // namespace depthlab::cuda
