// The compiled half of backend::cuda: memory<cuda>'s allocator and transfers, and every
// primitives<cuda> routine instantiated for float and double, so that code compiled by g++
// or clang (which sees only backend/cuda/cuda.hpp) links against kernels nvcc built once.
// Built as the depthlab_cuda library (CMake target depthlab::cuda, -DDEPTHLAB_WITH_CUDA=ON).
#include <new>

#include "depthlab/backend/cuda/cuda.cuh"

namespace depthlab {

namespace cuda {
int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky "no device" error
        return 0;
    }
    return n;
}
std::string device_description(int index) {
    if (index < 0 || index >= device_count()) return "no CUDA device";
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, index), "cudaGetDeviceProperties");
    return detail::cat(p.name, " (sm_", p.major, p.minor, ", ", p.totalGlobalMem >> 30, " GiB)");
}
bool has_bf16_tensor_cores(int index) {
    if (index < 0 || index >= device_count()) return false;
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, index), "cudaGetDeviceProperties");
    return p.major >= 8;
}
void synchronize() {
    counters<backend::cuda>().syncs.fetch_add(1, std::memory_order_relaxed);
    check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
}
void* stream_handle() { return static_cast<void*>(stream()); }
}  // namespace cuda

std::shared_ptr<void> memory<backend::cuda>::allocate_bytes(std::size_t bytes) {
    std::shared_ptr<cuda::device_block_cache> cache = cuda::thread_cache();
    void* p = nullptr;
    try {
        p = cache->get(bytes);
    } catch (const std::bad_alloc&) {
        throw device_error(detail::cat("cuda: out of device memory allocating ", bytes, " bytes (", cache->cached_bytes(),
                                       " bytes cached by this thread; DEPTHLAB_CUDA_CACHE_MB bounds the cache)"));
    }
    return std::shared_ptr<void>(p, [cache = std::move(cache), bytes](void* q) { cache->put(q, bytes); });
}
void memory<backend::cuda>::release_cached() { cuda::thread_cache()->release_all(); }
std::size_t memory<backend::cuda>::cached_bytes() { return cuda::thread_cache()->cached_bytes(); }
void memory<backend::cuda>::download_bytes(void* dst, const void* src, std::size_t bytes) {
    cuda::staging::for_this_thread().download(dst, src, bytes);
}
void memory<backend::cuda>::upload_bytes(void* dst, const void* src, std::size_t bytes) {
    cuda::staging::for_this_thread().upload(dst, src, bytes);
}

// One explicit instantiation per routine and element type, from the list that declared them
// (backend/primitive_list.hpp); the declaration's type is the definition's, so a signature is
// written once.
#define DEPTHLAB_CUDA_INSTANTIATE(name, T) template decltype(primitives<backend::cuda>::name<T>) primitives<backend::cuda>::name<T>;
#define DEPTHLAB_CUDA_INSTANTIATE_FLOATING(name, params) \
    DEPTHLAB_CUDA_INSTANTIATE(name, float)               \
    DEPTHLAB_CUDA_INSTANTIATE(name, double)
#define DEPTHLAB_CUDA_INSTANTIATE_INDEX(name)   \
    DEPTHLAB_CUDA_INSTANTIATE(name, std::int64_t) \
    DEPTHLAB_CUDA_INSTANTIATE(name, std::int32_t)
DEPTHLAB_PRIMITIVES(DEPTHLAB_CUDA_INSTANTIATE_FLOATING)
DEPTHLAB_INDEX_PRIMITIVES(DEPTHLAB_CUDA_INSTANTIATE_INDEX)

}  // namespace depthlab
