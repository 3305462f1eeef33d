#pragma once
// Kernel launch helpers of primitives<backend::cuda>: grid-stride loops over elements, one
// block per row with block reductions, and deterministic two-pass reductions over a fixed
// grid (the same bits on every run, whatever the GPU's scheduling). nvcc only; device
// lambdas need --extended-lambda (the CMake target sets it).
#include <algorithm>
#include <cstdint>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/index_divisor.hpp"
#include "depthlab/backend/cuda/memory.cuh"
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
/// Division of element indices by d in a kernel (index_divisor: 32-bit where the sizes allow);
/// d 0 (an empty launch, whose kernel never runs) divides by 1.
inline index_divisor divisor_of(index_t d) { return index_divisor(std::max<index_t>(d, 1)); }
inline void note_launch() { counters<backend::cuda>().launches.fetch_add(1, std::memory_order_relaxed); }
/// A cuBLAS call: a launch, and a GEMM.
inline void note_gemm(const gemm_args& g) {
    note_launch();
    count_gemm_flops(g);
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

/// True in exactly one block of the grid, the last to arrive here, after every block's
/// writes before this call are visible to it (the threadFenceReduction pattern): a two-pass
/// reduction in one launch. The last block resets the ticket for the next reduction.
__device__ inline bool last_block_arrives(unsigned* ticket) {
    __shared__ bool last;
    __threadfence();  // this thread's partials reach device memory before its block's ticket
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned grid = gridDim.x;
        last = atomicAdd(ticket, 1u) == grid - 1;
        if (last) *ticket = 0;
    }
    __syncthreads();
    return last;
}

template <class F, class G>
__global__ void reduce2_kernel(index_t n, F f, G g, double* partial, unsigned* ticket) {
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
    if (!last_block_arrives(ticket) || threadIdx.x != 0) return;
    a = 0;
    b = 0;
    for (unsigned p = 0; p < gridDim.x; ++p) {  // block order: the same bits whichever block is last
        a += partial[2 * p];
        b += partial[2 * p + 1];
    }
    g(a, b);
}
/// {Σ f(i).a, Σ f(i).b} over [0, n) in double on a fixed grid, then g(a, b) on one device
/// thread (which writes the results). One launch: the blocks' partials go to `scratch` (2
/// reduce_blocks doubles of device memory), the last block to finish adds them in block
/// order.
template <class F, class G>
void reduce2(index_t n, F f, G g, double* scratch, const char* name) {
    note_launch();
    DEPTHLAB_CUDA_LAUNCH((reduce2_kernel<F, G>), reduce_blocks, block_threads, 0, stream())(n, f, g, scratch, reduction_ticket());
    check_launch(name, reduce_blocks, block_threads);
}

/// K sums of one column (layer norm's dgamma and dbeta are two over the same rows).
template <class A, int K>
struct column_sums {
    A v[K] = {};
};
/// Rows per tile of a column reduction: about sqrt(rows), so the per-tile pass and the pass
/// over tiles walk about as far; at least 16 (fewer would only add partials). A function of
/// the shape alone: the summation order, hence the bits, never depend on the GPU.
inline index_t column_tile_rows(index_t rows) {
    index_t t = 16;
    while (t * t < rows) t *= 2;
    return t;
}
template <class A, int K, class Term, class Finish>
__global__ void column_reduce_kernel(index_t rows, index_divisor cols_div, index_t tile, Term term, Finish finish, A* partial, unsigned* ticket) {
    const index_t cols = cols_div.divisor(), tiles = (rows + tile - 1) / tile;
    for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < tiles * cols; i += static_cast<index_t>(gridDim.x) * blockDim.x) {
        const index_t t = cols_div.div(i), c = i - t * cols, end = std::min(rows, (t + 1) * tile);
        column_sums<A, K> s;
        for (index_t r = t * tile; r < end; ++r) {
            const column_sums<A, K> v = term(r, c);
            for (int k = 0; k < K; ++k) s.v[k] += v.v[k];
        }
        for (int k = 0; k < K; ++k) partial[(k * tiles + t) * cols + c] = s.v[k];
    }
    if (!last_block_arrives(ticket)) return;
    for (index_t c = threadIdx.x; c < cols; c += blockDim.x) {
        column_sums<A, K> s;
        for (int k = 0; k < K; ++k)
            for (index_t t = 0; t < tiles; ++t) s.v[k] += partial[(k * tiles + t) * cols + c];
        finish(c, s);
    }
}
/// Column reductions (bias, layer-norm and scale gradients) over the whole grid, in one
/// launch: each thread sums a tile of column_tile_rows(rows) rows of one column (neighbouring
/// threads on neighbouring columns: coalesced), and the last block to finish adds the tiles
/// in order and calls finish(c, sums) once per column. A thread per column walking every row
/// would leave all but a few SMs idle at a bias's 256–3072 columns. Deterministic: fixed
/// tiles, fixed order, no float atomics. term(r, c) returns column_sums<A, K>.
template <class A, int K, class Term, class Finish>
void column_reduce(index_t rows, index_t cols, Term term, Finish finish, const char* name) {
    note_launch();
    if (cols <= 0) return;
    const index_t tile = column_tile_rows(rows), tiles = std::max<index_t>(1, (rows + tile - 1) / tile);
    const auto partial = memory<backend::cuda>::allocate<A>(static_cast<std::size_t>(K * tiles * cols));
    const unsigned grid = grid_for(tiles * cols);
    DEPTHLAB_CUDA_LAUNCH((column_reduce_kernel<A, K, Term, Finish>), grid, block_threads, 0, stream())(rows, index_divisor(cols), tile, term, finish, partial.get(),
                                                                                                    reduction_ticket());
    check_launch(name, grid, block_threads);
}

}  // namespace depthlab::cuda
