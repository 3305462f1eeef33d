#pragma once
// The emulated CUDA device (test code: -DDEPTHLAB_CUDA_EMULATION=ON, g++, no nvcc, no GPU).
// The real backend sources (include/depthlab/backend/cuda/*.cuh, src/cuda/depthlab_cuda.cu)
// compile as C++ against the headers of this folder, which provide the subset of the CUDA
// runtime and of cuBLAS that the backend calls, with CUDA's documented semantics:
//
//   - kernels: every block's threads run as cooperative fibers of one host thread, so
//     __shared__ memory is the block's and __syncthreads() / __shfl_down_sync() are real
//     barriers; threads run in reverse index order between barriers, so a missing barrier
//     before reading what thread 0 wrote reads a stale value instead of passing by luck;
//     a barrier some threads of the block never reach is an error naming the kernel;
//   - streams: work is queued and runs at the next synchronisation of its stream (or a
//     query of it): device memory is mapped PROT_NONE outside that, so a host read of device
//     memory without a download faults, and the fault handler names the allocation;
//   - cuBLAS gemm calls are plain reference loops with NVIDIA's column-major conventions,
//     leading dimensions and strides checked as documented (a wrong lda fails here);
//   - counters of kernels, GEMMs, copies and synchronisations, and a way to make the next
//     allocation or launch fail.
// Never linked into a real CUDA build (CMake refuses both options together).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace depthlab_emulation {

/// What the emulated device did since the last reset().
struct stats {
    std::int64_t kernels = 0;          // kernel launches (cuBLAS calls not included)
    std::int64_t gemms = 0;            // cuBLAS gemm calls (one per strided batch)
    std::int64_t uploads = 0;          // host-to-device copies
    std::int64_t downloads = 0;        // device-to-host copies
    std::int64_t synchronizations = 0; // stream, event and device synchronisations
    std::int64_t fibers = 0;           // device threads run
};
stats& counters();
void reset_counters();

/// The next `count` cudaMalloc / cudaHostAlloc calls return cudaErrorMemoryAllocation (a
/// caching allocator retries once after giving its cache back: 2 fails it for good).
void fail_next_allocations(int count = 1);
/// Installs the SIGSEGV handler that names emulated device memory the host touched (done at
/// the first cudaMalloc; call again after a framework replaced it, e.g. doctest per test case).
void install_fault_handler();
/// The next kernel launch fails (cudaGetLastError returns cudaErrorLaunchFailure).
void fail_next_launch();
/// The next kernel launched faults when it runs, as an out-of-bounds access does on a GPU:
/// cudaErrorIllegalAddress, sticky (every later synchronisation and allocation returns it)
/// until clear_sticky_error(), the emulation's cudaDeviceReset for tests.
void fault_next_kernel();
void clear_sticky_error();

// ---- kernel execution (used by the launch macro and the device intrinsics)
struct dim3_value {
    unsigned x = 1, y = 1, z = 1;
};
/// Queues `body` (one device thread's work, run once per thread of every block) on `stream`.
void launch(const char* kernel, dim3_value grid, dim3_value block, std::size_t shared_bytes, void* stream, std::function<void()> body);
/// __syncthreads(): every thread of the block waits here for the others.
void block_barrier();
/// The 32 lanes of the calling thread's warp exchange 8-byte values (lane i gets lane
/// i + delta's, or its own when that lane does not exist): __shfl_down_sync's core.
std::uint64_t warp_shuffle_down(std::uint64_t value, unsigned delta);

}  // namespace depthlab_emulation
