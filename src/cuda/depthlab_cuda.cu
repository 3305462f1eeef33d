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

// One explicit instantiation per routine and element type; the declaration's type is the
// definition's, so a signature is written once (in cuda.hpp).
#define DEPTHLAB_CUDA_INSTANTIATE(name, T) template decltype(primitives<backend::cuda>::name<T>) primitives<backend::cuda>::name<T>;
#define DEPTHLAB_CUDA_INSTANTIATE_ALL(T) \
    DEPTHLAB_CUDA_INSTANTIATE(fill, T) \
    DEPTHLAB_CUDA_INSTANTIATE(copy_strided, T) \
    DEPTHLAB_CUDA_INSTANTIATE(add, T) \
    DEPTHLAB_CUDA_INSTANTIATE(mul, T) \
    DEPTHLAB_CUDA_INSTANTIATE(mul_acc, T) \
    DEPTHLAB_CUDA_INSTANTIATE(axpby, T) \
    DEPTHLAB_CUDA_INSTANTIATE(add_row_vector, T) \
    DEPTHLAB_CUDA_INSTANTIATE(mul_row_vector, T) \
    DEPTHLAB_CUDA_INSTANTIATE(mul_row_vector_acc, T) \
    DEPTHLAB_CUDA_INSTANTIATE(sum_rows_acc, T) \
    DEPTHLAB_CUDA_INSTANTIATE(sum_rows_mul_acc, T) \
    DEPTHLAB_CUDA_INSTANTIATE(scale_rows, T) \
    DEPTHLAB_CUDA_INSTANTIATE(scale_rows_bwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(interpolate_rows, T) \
    DEPTHLAB_CUDA_INSTANTIATE(interpolate_rows_bwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(gelu_fwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(gelu_bwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(gelu_erf_fwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(gelu_erf_bwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(relu_fwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(relu_bwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(tanh_fwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(tanh_bwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(sigmoid_fwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(sigmoid_bwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(log_sigmoid_fwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(log_sigmoid_bwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(sum_to, T) \
    DEPTHLAB_CUDA_INSTANTIATE(add_scaled_by, T) \
    DEPTHLAB_CUDA_INSTANTIATE(nonfinite_flag, T) \
    DEPTHLAB_CUDA_INSTANTIATE(softmax_fwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(softmax_bwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(log_softmax_fwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(log_softmax_bwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(layernorm_fwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(layernorm_bwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(cross_entropy_fwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(cross_entropy_mean, T) \
    DEPTHLAB_CUDA_INSTANTIATE(cross_entropy_bwd, T) \
    DEPTHLAB_CUDA_INSTANTIATE(gather_rows, T) \
    DEPTHLAB_CUDA_INSTANTIATE(gather_rows_strided, T) \
    DEPTHLAB_CUDA_INSTANTIATE(scatter_add_rows, T) \
    DEPTHLAB_CUDA_INSTANTIATE(scatter_rows_set, T) \
    DEPTHLAB_CUDA_INSTANTIATE(rows_axpy, T) \
    DEPTHLAB_CUDA_INSTANTIATE(dropout_mask, T) \
    DEPTHLAB_CUDA_INSTANTIATE(sgd_update, T) \
    DEPTHLAB_CUDA_INSTANTIATE(adam_update, T) \
    DEPTHLAB_CUDA_INSTANTIATE(lamb_moments, T) \
    DEPTHLAB_CUDA_INSTANTIATE(lamb_apply, T) \
    DEPTHLAB_CUDA_INSTANTIATE(sum_squares_to, T) \
    DEPTHLAB_CUDA_INSTANTIATE(clip_scale, T) \
    DEPTHLAB_CUDA_INSTANTIATE(gemm, T) \
    DEPTHLAB_CUDA_INSTANTIATE(gemm_bias, T)
DEPTHLAB_CUDA_INSTANTIATE_ALL(float)
DEPTHLAB_CUDA_INSTANTIATE_ALL(double)
// index and flag tensors are only filled and copied
DEPTHLAB_CUDA_INSTANTIATE(fill, std::int64_t)
DEPTHLAB_CUDA_INSTANTIATE(copy_strided, std::int64_t)
DEPTHLAB_CUDA_INSTANTIATE(fill, std::int32_t)
DEPTHLAB_CUDA_INSTANTIATE(copy_strided, std::int32_t)

}  // namespace depthlab
