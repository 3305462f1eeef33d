#pragma once
// Host memory: 64-byte aligned blocks from a caching allocator. A training step allocates
// the same activation sizes every step; handing large blocks back to the OS and faulting
// them in again costs more than many GEMMs (a fresh 32 MiB block is ~8k page faults), so
// freed blocks are kept in size classes and reused. The cache holds at most as many bytes
// as were ever in use at once (one step's working set; at least 64 MiB) and never more than
// the hard limit (4 GiB, or DEPTHLAB_HOST_CACHE_MB): with shapes that change every batch
// (translation, adaptive depth) an uncapped cache would fill with blocks of stale sizes.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "depthlab/backend/backend.hpp"
#include "depthlab/core/error.hpp"

namespace depthlab {

namespace detail {
class block_cache {
public:
    static constexpr std::size_t alignment = 64;

    /// Size class: multiples of 64 B up to 4 KiB, then 8 steps per power of two (at most
    /// 12.5% slack), so that slightly different sizes still share blocks.
    static std::size_t size_class(std::size_t bytes) {
        if (bytes <= 4096) return std::max<std::size_t>(alignment, (bytes + alignment - 1) / alignment * alignment);
        std::size_t p = 4096;
        while (p * 2 < bytes) p *= 2;
        const std::size_t step = p / 8;
        return (bytes + step - 1) / step * step;
    }
    void* get(std::size_t bytes) {
        const std::size_t cls = size_class(bytes);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = free_.find(cls);
            if (it != free_.end() && !it->second.empty()) {
                void* p = it->second.back();
                it->second.pop_back();
                cached_ -= cls;
                note_live(cls);
                return p;
            }
        }
        void* p = std::aligned_alloc(alignment, cls);
        if (p == nullptr) {
            release_all();  // give cached blocks back and try once more
            p = std::aligned_alloc(alignment, cls);
            if (p == nullptr) throw std::bad_alloc();
        }
        std::lock_guard<std::mutex> lock(mutex_);
        note_live(cls);
        return p;
    }
    void put(void* p, std::size_t bytes) {
        const std::size_t cls = size_class(bytes);
        std::lock_guard<std::mutex> lock(mutex_);
        live_ -= cls;
        if (cached_ + cls > std::min(limit_, std::max(peak_live_, min_cap))) {
            std::free(p);
            return;
        }
        free_[cls].push_back(p);
        cached_ += cls;
    }
    /// Returns every cached block to the system.
    void release_all() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& [cls, blocks] : free_)
            for (void* p : blocks) std::free(p);
        free_.clear();
        cached_ = 0;
    }
    [[nodiscard]] std::size_t cached_bytes() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return cached_;
    }
    /// The most bytes in use at once so far (size classes, not requests).
    [[nodiscard]] std::size_t peak_live_bytes() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return peak_live_;
    }
    void set_limit(std::size_t bytes) {
        std::lock_guard<std::mutex> lock(mutex_);
        limit_ = bytes;
    }

    /// The process-wide cache. Deliberately leaked: tensors in static storage may be freed
    /// after a function-local static would have been destroyed.
    static block_cache& instance() {
        static block_cache* c = new block_cache();
        return *c;
    }

    static constexpr std::size_t min_cap = std::size_t{64} << 20;
    block_cache() {
        if (const char* e = std::getenv("DEPTHLAB_HOST_CACHE_MB")) limit_ = static_cast<std::size_t>(std::strtoull(e, nullptr, 10)) << 20;
    }
    block_cache(const block_cache&) = delete;
    block_cache& operator=(const block_cache&) = delete;
    ~block_cache() { release_all(); }

private:
    void note_live(std::size_t cls) {  // (mutex held)
        live_ += cls;
        peak_live_ = std::max(peak_live_, live_);
    }
    mutable std::mutex mutex_;
    std::unordered_map<std::size_t, std::vector<void*>> free_;
    std::size_t cached_ = 0, live_ = 0, peak_live_ = 0;
    std::size_t limit_ = std::size_t{4} << 30;  // hard limit on free blocks kept
};
}  // namespace detail

template <>
struct memory<backend::cpu> {
    static constexpr std::size_t alignment = detail::block_cache::alignment;  // a cache line; an AVX-512 register

    template <class T>
    static std::shared_ptr<T> allocate(std::size_t n) {
        const std::size_t bytes = n * sizeof(T);
        void* p = detail::block_cache::instance().get(bytes);
        return std::shared_ptr<T>(static_cast<T*>(p), [bytes](T* q) { detail::block_cache::instance().put(q, bytes); });
    }
    /// Free cached blocks (e.g. between phases with very different tensor sizes).
    static void release_cached() { detail::block_cache::instance().release_all(); }
    static std::size_t cached_bytes() { return detail::block_cache::instance().cached_bytes(); }
    // (n == 0 may come with null pointers, which memcpy must never see)
    template <class T>
    static void to_host(const T* src, T* dst, std::size_t n) {
        if (n) std::memcpy(dst, src, n * sizeof(T));
    }
    template <class T>
    static void from_host(const T* src, T* dst, std::size_t n) {
        if (n) std::memcpy(dst, src, n * sizeof(T));
    }
};

}  // namespace depthlab
