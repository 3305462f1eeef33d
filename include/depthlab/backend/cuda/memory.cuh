#pragma once
// The machinery behind memory<backend::cuda> (declared in cuda.hpp, defined in
// src/cuda/depthlab_cuda.cu): device memory from the caching allocator of backend/block_cache.hpp
// (size classes, a bounded cache: DEPTHLAB_CUDA_CACHE_MB, default 8 GiB), because cudaMalloc
// and cudaFree synchronise the device.
//
// One cache per host thread, as there is one stream per thread: a freed block goes back to
// the cache of the thread that allocated it at once, and its next user, on the same stream,
// is ordered after the kernels still reading it. A block never moves to another thread's
// stream through the cache (a process-wide cache would hand a block still in use on stream A
// to a kernel on stream B). A tensor itself must not be used from two threads without a
// synchronisation. Each block holds a reference to its cache, so a cache outlives its thread
// until its last block is freed. When the cache is over its bound, put() returns the block
// with cudaFree, which synchronises the device: the bound is for shapes that keep changing,
// not for a steady training loop.
//
// Transfers go through pinned staging memory, so that an upload is truly asynchronous (a
// pageable cudaMemcpyAsync waits for the stream) and a download is one copy and one wait.
// Every download is a host synchronisation, counted in counters<backend::cuda>().
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/block_cache.hpp"
#include "depthlab/backend/cuda/cuda.hpp"
#include "depthlab/backend/cuda/runtime.cuh"

namespace depthlab {

namespace cuda {
struct device_memory_source {
    static constexpr std::size_t alignment = 256;  // cudaMalloc's
    static constexpr const char* limit_env = "DEPTHLAB_CUDA_CACHE_MB";
    static constexpr std::size_t default_limit = std::size_t{8} << 30;
    /// nullptr when the device is full (the cache then gives its blocks back and retries);
    /// any other error — a sticky fault of an earlier kernel — keeps its name.
    static void* allocate(std::size_t bytes) {
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, bytes);
        if (e == cudaSuccess) return p;
        (void)cudaGetLastError();
        if (e != cudaErrorMemoryAllocation)
            throw device_error(detail::cat("cuda: cudaMalloc of ", bytes, " bytes failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e),
                                           "): an earlier kernel faulted (DEPTHLAB_CUDA_SYNC=1 names it)"));
        return nullptr;
    }
    static void release(void* p, std::size_t) { cudaFree(p); }
};
using device_block_cache = depthlab::detail::block_cache<device_memory_source>;

/// This thread's device block cache (shared with the blocks it handed out).
inline const std::shared_ptr<device_block_cache>& thread_cache() {
    thread_local const std::shared_ptr<device_block_cache> c = std::make_shared<device_block_cache>();
    return c;
}

/// Pinned staging for uploads: copies are packed into the current pinned buffer (256-byte
/// aligned offsets) and sent with cudaMemcpyAsync; a buffer is reused only once the copies
/// that read it have completed (its event), and when the next one is still in use a new
/// buffer joins the ring instead of the host waiting (up to max_buffers; only then does an
/// upload wait). Downloads use one pinned buffer and one stream synchronisation.
class staging {
public:
    static constexpr std::size_t buffer_bytes = std::size_t{4} << 20;
    static constexpr std::size_t max_buffers = 64;

    staging() = default;
    staging(const staging&) = delete;
    staging& operator=(const staging&) = delete;
    ~staging() {
        for (auto& b : ring_) {
            if (b.done) cudaEventDestroy(b.done);
            if (b.host) cudaFreeHost(b.host);
        }
        if (down_) cudaFreeHost(down_);
    }

    /// Copies n bytes from host src to device dst asynchronously on this thread's stream.
    void upload(void* dst, const void* src, std::size_t n) {
        const cudaStream_t s = stream();
        for (std::size_t done = 0; done < n;) {
            if (ring_.empty() || offset_ == buffer_bytes) next_buffer();
            buffer& b = ring_[current_];
            const std::size_t part = std::min(buffer_bytes - offset_, n - done);
            std::memcpy(static_cast<char*>(b.host) + offset_, static_cast<const char*>(src) + done, part);
            check(cudaMemcpyAsync(static_cast<char*>(dst) + done, static_cast<char*>(b.host) + offset_, part, cudaMemcpyHostToDevice, s),
                  "cudaMemcpyAsync (upload)");
            check(cudaEventRecord(b.done, s), "cudaEventRecord (staging)");
            offset_ = std::min(buffer_bytes, (offset_ + part + 255) / 256 * 256);
            done += part;
        }
    }
    /// Copies n bytes from device src to host dst: waits for the stream (a synchronisation).
    void download(void* dst, const void* src, std::size_t n) {
        const cudaStream_t s = stream();
        if (!down_ || down_bytes_ < n) {
            if (down_) cudaFreeHost(down_);
            down_ = nullptr;
            down_bytes_ = std::max(n, buffer_bytes);
            check(cudaHostAlloc(&down_, down_bytes_, cudaHostAllocDefault), "cudaHostAlloc (download)");
        }
        check(cudaMemcpyAsync(down_, src, n, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync (download)");
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        std::memcpy(dst, down_, n);
    }
    static staging& for_this_thread() {
        thread_local staging st;
        return st;
    }

private:
    struct buffer {
        void* host = nullptr;
        cudaEvent_t done = nullptr;  // recorded after the last copy that reads this buffer
    };
    static buffer make_buffer() {
        buffer b;
        check(cudaHostAlloc(&b.host, buffer_bytes, cudaHostAllocDefault), "cudaHostAlloc (staging)");
        check(cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming), "cudaEventCreate (staging)");
        return b;
    }
    void next_buffer() {
        offset_ = 0;
        if (ring_.empty()) {
            ring_.push_back(make_buffer());
            current_ = 0;
            return;
        }
        const std::size_t next = (current_ + 1) % ring_.size();
        const cudaError_t q = cudaEventQuery(ring_[next].done);
        if (q == cudaSuccess) {
            current_ = next;
            return;
        }
        if (q != cudaErrorNotReady) check(q, "cudaEventQuery (staging)");
        (void)cudaGetLastError();
        if (ring_.size() < max_buffers) {  // still in flight: grow instead of waiting
            ring_.insert(ring_.begin() + static_cast<std::ptrdiff_t>(current_ + 1), make_buffer());
            current_ = current_ + 1;
            return;
        }
        check(cudaEventSynchronize(ring_[next].done), "cudaEventSynchronize (staging)");  // 256 MiB in flight
        current_ = next;
    }
    std::vector<buffer> ring_;
    std::size_t current_ = 0, offset_ = 0;
    void* down_ = nullptr;
    std::size_t down_bytes_ = 0;
};
}  // namespace cuda

}  // namespace depthlab
