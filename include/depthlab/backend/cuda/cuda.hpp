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
#include "depthlab/backend/primitive_list.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/core/shape.hpp"

namespace depthlab {

namespace cuda {
/// The number of CUDA devices (0 without a driver or a GPU; never throws).
int device_count();
/// "NVIDIA H200 (sm_90, 139 GiB)" for device `index`, or "no CUDA device".
std::string device_description(int index = 0);
/// True when device `index` multiplies bf16 on tensor cores (sm_80 or newer): where
/// --precision auto picks bf16 for --device cuda.
bool has_bf16_tensor_cores(int index = 0);
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

/// The numerical routines of primitives<cpu> as kernels on this thread's stream, declared
/// from the one list of backend/primitive_list.hpp (defined in backend/cuda/primitives.cuh).
template <>
struct primitives<backend::cuda> {
#define DEPTHLAB_DECLARE_PRIMITIVE(name, params) \
    template <class T>                          \
    static void name params;
    DEPTHLAB_PRIMITIVES(DEPTHLAB_DECLARE_PRIMITIVE)
#undef DEPTHLAB_DECLARE_PRIMITIVE
};

}  // namespace depthlab
