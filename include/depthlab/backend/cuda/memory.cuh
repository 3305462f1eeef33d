#pragma once
// memory<backend::cuda>: device memory from the caching allocator of backend/block_cache.hpp
// (size classes, a bounded cache: DEPTHLAB_CUDA_CACHE_MB, default 8 GiB), because cudaMalloc
// and cudaFree synchronise the device. A freed block goes back to the cache at once; the
// next user of the block is ordered after the kernels still reading it by the stream (one
// stream per thread: a tensor must not be shared between threads without a synchronisation).
//
// Transfers go through pinned staging buffers, so that an upload is truly asynchronous (a
// pageable cudaMemcpyAsync waits for the stream) and a download is one copy and one wait.
// Every download is a host synchronisation, counted in counters<backend::cuda>().
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/block_cache.hpp"
#include "depthlab/backend/cuda/runtime.cuh"

namespace depthlab {

namespace cuda {
struct device_memory_source {
    static constexpr std::size_t alignment = 256;  // cudaMalloc's
    static constexpr const char* limit_env = "DEPTHLAB_CUDA_CACHE_MB";
    static constexpr std::size_t default_limit = std::size_t{8} << 30;
    static void* allocate(std::size_t bytes) {
        void* p = nullptr;
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
            (void)cudaGetLastError();
            return nullptr;
        }
        return p;
    }
    static void release(void* p) { cudaFree(p); }
};
using device_block_cache = depthlab::detail::block_cache<device_memory_source>;

/// A ring of pinned host buffers for uploads: slot k is reused only after the copy that last
/// read it has completed (its event), so uploads never wait for the stream.
class staging_ring {
public:
    static constexpr int slots = 8;
    static constexpr std::size_t slot_bytes = std::size_t{4} << 20;

    /// Copies n bytes from host src to device dst asynchronously on this thread's stream.
    void upload(void* dst, const void* src, std::size_t n) {
        const cudaStream_t s = stream();
        for (std::size_t done = 0; done < n;) {
            slot& sl = slot_[next_];
            next_ = (next_ + 1) % slots;
            if (!sl.buffer) {
                check(cudaHostAlloc(&sl.buffer, slot_bytes, cudaHostAllocDefault), "cudaHostAlloc (staging)");
                check(cudaEventCreateWithFlags(&sl.done, cudaEventDisableTiming), "cudaEventCreate");
            } else {
                check(cudaEventSynchronize(sl.done), "cudaEventSynchronize (staging slot)");
            }
            const std::size_t part = std::min(slot_bytes, n - done);
            std::memcpy(sl.buffer, static_cast<const char*>(src) + done, part);
            check(cudaMemcpyAsync(static_cast<char*>(dst) + done, sl.buffer, part, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync (upload)");
            check(cudaEventRecord(sl.done, s), "cudaEventRecord");
            done += part;
        }
    }
    /// Copies n bytes from device src to host dst: waits for the stream (a synchronisation).
    void download(void* dst, const void* src, std::size_t n) {
        const cudaStream_t s = stream();
        if (!down_ || down_bytes_ < n) {
            if (down_) cudaFreeHost(down_);
            down_bytes_ = std::max(n, slot_bytes);
            check(cudaHostAlloc(&down_, down_bytes_, cudaHostAllocDefault), "cudaHostAlloc (download)");
        }
        check(cudaMemcpyAsync(down_, src, n, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync (download)");
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        std::memcpy(dst, down_, n);
    }
    static staging_ring& for_this_thread() {
        thread_local staging_ring r;
        return r;
    }

private:
    struct slot {
        void* buffer = nullptr;
        cudaEvent_t done = nullptr;
    };
    slot slot_[slots];
    int next_ = 0;
    void* down_ = nullptr;
    std::size_t down_bytes_ = 0;
};
}  // namespace cuda

template <>
struct memory<backend::cuda> {
    static constexpr std::size_t alignment = cuda::device_memory_source::alignment;

    template <class T>
    static std::shared_ptr<T> allocate(std::size_t n) {
        const std::size_t bytes = std::max<std::size_t>(n * sizeof(T), 1);
        void* p = cuda::device_block_cache::instance().get(bytes);
        return std::shared_ptr<T>(static_cast<T*>(p), [bytes](T* q) { cuda::device_block_cache::instance().put(q, bytes); });
    }
    static void release_cached() { cuda::device_block_cache::instance().release_all(); }
    static std::size_t cached_bytes() { return cuda::device_block_cache::instance().cached_bytes(); }

    template <class T>
    static void to_host(const T* src, T* dst, std::size_t n) {
        counters<backend::cuda>().syncs.fetch_add(1, std::memory_order_relaxed);
        if (n) cuda::staging_ring::for_this_thread().download(dst, src, n * sizeof(T));
    }
    template <class T>
    static void from_host(const T* src, T* dst, std::size_t n) {
        counters<backend::cuda>().uploads.fetch_add(1, std::memory_order_relaxed);
        if (n) cuda::staging_ring::for_this_thread().upload(dst, src, n * sizeof(T));
    }
};

}  // namespace depthlab
