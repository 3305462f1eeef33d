#pragma once
// The CUDA runtime subset depthlab's backend uses, on the emulated device
// (depthlab_cuda_emulation.hpp says how it behaves). Test code: -DDEPTHLAB_CUDA_EMULATION=ON.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "depthlab_cuda_emulation.hpp"

// ---- the language: qualifiers vanish, __shared__ is the block's (its fibers share the host
// thread that runs the block, and one block runs at a time on it)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local

struct uint3 {
    unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
extern thread_local uint3 threadIdx, blockIdx;
extern thread_local dim3 blockDim, gridDim;

// CUDA's math library puts these in the global namespace for device code
using std::isfinite;
using std::isinf;
using std::isnan;
inline float max(float a, float b) { return std::fmax(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
inline float min(float a, float b) { return std::fmin(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }

inline void __syncthreads() { depthlab_emulation::block_barrier(); }
// The blocks of a kernel run one after another on one host thread and a block's threads
// switch only at barriers, so a read-modify-write is atomic as written, and every write is
// visible to the blocks that run later (__threadfence orders nothing more).
inline unsigned atomicAdd(unsigned* address, unsigned value) {
    const unsigned old = *address;
    *address = old + value;
    return old;
}
inline void __threadfence() {}
/// CUDA's __shfl_down_sync for the full mask (the only mask the backend passes).
template <class T>
inline T __shfl_down_sync(unsigned mask, T value, unsigned delta) {
    static_assert(sizeof(T) <= sizeof(std::uint64_t) && std::is_trivially_copyable_v<T>, "__shfl_down_sync: up to 8-byte values");
    (void)mask;
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    bits = depthlab_emulation::warp_shuffle_down(bits, delta);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}

// ---- errors
enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchFailure = 719,
};
using cudaError = cudaError_t;
const char* cudaGetErrorName(cudaError_t e);
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

// ---- devices
struct cudaDeviceProp {
    char name[256];
    std::size_t totalGlobalMem;
    int major, minor, multiProcessorCount, warpSize, maxThreadsPerBlock;
};
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();

// ---- memory
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
inline constexpr unsigned cudaHostAllocDefault = 0;
cudaError_t cudaMalloc(void** ptr, std::size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaHostAlloc(void** ptr, std::size_t bytes, unsigned flags);
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes);
cudaError_t cudaFreeHost(void* ptr);
template <class T>
cudaError_t cudaMalloc(T** ptr, std::size_t bytes) {
    return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}

// ---- streams and events
struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
inline constexpr unsigned cudaStreamDefault = 0, cudaStreamNonBlocking = 1;
inline constexpr unsigned cudaEventDefault = 0, cudaEventDisableTiming = 2;
cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t s = nullptr);
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t s = nullptr);

// ---- kernel launches: DEPTHLAB_CUDA_LAUNCH(kernel, grid, block, shared, stream)(args...),
// the emulation's spelling of kernel<<<grid, block, shared, stream>>>(args...)
namespace depthlab_emulation {
inline dim3_value to_dim(dim3 d) { return {d.x, d.y, d.z}; }
template <class... P>
struct launcher {
    const char* name;
    void (*kernel)(P...);
    dim3 grid, block;
    std::size_t shared;
    cudaStream_t stream;
    template <class... A>
    void operator()(A&&... args) const {
        launch(name, to_dim(grid), to_dim(block), shared, stream,
               [k = kernel, ... a = static_cast<P>(std::forward<A>(args))]() { k(a...); });
    }
};
template <class... P>
launcher<P...> make_launcher(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, std::size_t shared, cudaStream_t stream) {
    return {name, kernel, grid, block, shared, stream};
}
}  // namespace depthlab_emulation
#define DEPTHLAB_CUDA_LAUNCH(kernel, grid, block, shared, stream) \
    ::depthlab_emulation::make_launcher(#kernel, kernel, grid, block, shared, stream)
