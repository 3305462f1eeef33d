#pragma once
// The CUDA runtime as depthlab uses it: one stream per host thread (non-blocking, so work of
// different threads overlaps and nothing waits on the legacy default stream), a cuBLAS
// handle bound to it with a 32 MiB workspace, and errors turned into device_error naming the
// call. nvcc only: include through depthlab/backend/cuda/cuda.cuh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "depthlab/core/error.hpp"

/// kernel<<<grid, block, shared, stream>>>(args...), written DEPTHLAB_CUDA_LAUNCH(kernel, grid,
/// block, shared, stream)(args...) so that the emulated device (emulation/cuda, whose
/// cuda_runtime.h defines it first) can run the same sources compiled by g++.
#if !defined(DEPTHLAB_CUDA_LAUNCH)
#define DEPTHLAB_CUDA_LAUNCH(kernel, grid, block, shared, stream) kernel<<<grid, block, shared, stream>>>
#endif

namespace depthlab::cuda {

inline void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw device_error(detail::cat("cuda: ", what, " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")"));
}
inline void check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) throw device_error(detail::cat("cublas: ", what, " failed with status ", static_cast<int>(s)));
}
/// This thread's stream.
inline cudaStream_t stream() {
    struct owner {
        cudaStream_t s = nullptr;
        owner() { check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }
        ~owner() { cudaStreamDestroy(s); }
    };
    thread_local owner o;
    return o.s;
}

/// DEPTHLAB_CUDA_SYNC=1: synchronise after every kernel launch, so that a fault is reported by
/// the launch that caused it (the kernel's name and grid) instead of by a later call — what
/// CUDA_LAUNCH_BLOCKING=1 does for the runtime, with depthlab's names. Read at each launch.
inline bool sync_every_launch() {
    const char* v = std::getenv("DEPTHLAB_CUDA_SYNC");
    return v && v[0] == '1';
}
/// Throws device_error when the last kernel launch failed (bad configuration, no device), and
/// under DEPTHLAB_CUDA_SYNC=1 when the kernel itself failed, naming it with its grid.
inline void check_launch(const char* kernel, unsigned grid = 0, unsigned block = 0) {
    check(cudaGetLastError(), kernel);
    if (!sync_every_launch()) return;
    const cudaError_t e = cudaStreamSynchronize(stream());
    if (e != cudaSuccess)
        throw device_error(detail::cat("cuda: kernel ", kernel, " (grid ", grid, ", block ", block, ") failed: ", cudaGetErrorName(e), " (",
                                       cudaGetErrorString(e), ") [DEPTHLAB_CUDA_SYNC=1]"));
}

/// DEPTHLAB_CUDA_TF32=1: float products on the tensor cores in TF32 (f32 is full fp32 otherwise).
inline bool tf32_requested() {
    const char* v = std::getenv("DEPTHLAB_CUDA_TF32");
    return v && v[0] == '1';
}
/// This thread's cuBLAS and cuBLASLt handles, on this thread's stream, sharing one 32 MiB
/// workspace (their calls are ordered on the stream), cuBLAS in the default math mode (no
/// TF32 unless tf32_requested()).
inline constexpr std::size_t blas_workspace_bytes = std::size_t{32} << 20;
struct blas_context {
    cublasHandle_t h = nullptr;
    cublasLtHandle_t lt = nullptr;
    void* workspace = nullptr;
};
inline const blas_context& blas_handles() {
    struct owner : blas_context {
        owner() {
            check(cublasCreate(&h), "cublasCreate");
            check(cublasSetStream(h, stream()), "cublasSetStream");
            check(cudaMalloc(&workspace, blas_workspace_bytes), "cudaMalloc (cuBLAS workspace)");
            check(cublasSetWorkspace(h, workspace, blas_workspace_bytes), "cublasSetWorkspace");
            check(cublasSetMathMode(h, tf32_requested() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
            check(cublasLtCreate(&lt), "cublasLtCreate");
        }
        ~owner() {
            cublasLtDestroy(lt);
            cublasDestroy(h);
            cudaFree(workspace);
        }
    };
    thread_local owner o;
    return o;
}
inline cublasHandle_t blas() { return blas_handles().h; }

/// This thread's reduction ticket: one device counter, zero between kernels, that lets the
/// last block of a reduction find out it is last (see launch.cuh's last_block_arrives) and
/// finish the reduction in the same launch. Kernels on a stream run in order, so one counter
/// per stream (per thread) serves every reduction on it.
inline unsigned* reduction_ticket() {
    struct owner {
        unsigned* p = nullptr;
        owner() {
            check(cudaMalloc(reinterpret_cast<void**>(&p), sizeof(unsigned)), "cudaMalloc (reduction ticket)");
            check(cudaMemsetAsync(p, 0, sizeof(unsigned), stream()), "cudaMemsetAsync (reduction ticket)");
        }
        ~owner() { cudaFree(p); }
    };
    thread_local owner o;
    return o.p;
}

}  // namespace depthlab::cuda
