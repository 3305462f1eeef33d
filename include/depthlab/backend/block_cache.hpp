#pragma once
// A caching allocator for any memory source (host memory, device memory): freed blocks are
// kept in size classes and handed out again, because a training step allocates the same
// sizes every step and going back to the system each time costs more than the work (page
// faults on the host, cudaMalloc's implicit synchronisation on a GPU). The cache holds at
// most as many bytes as were ever in use at once (one step's working set; at least 64 MiB)
// and never more than a hard limit (Source::default_limit, or the MiB in the environment
// variable Source::limit_env): with shapes that change every batch (translation, adaptive
// depth) an uncapped cache would fill with blocks of stale sizes.
// A miss that would make the bytes held (in use + cached) exceed that peak first returns
// cached blocks of other sizes to the system, largest first: memory held stays near the
// working set (rather than up to twice it) when sizes drift from step to step, as the
// number of tokens still running does under adaptive depth.
// The peak in use is not always enough to hold: at the peak, blocks of other sizes may wait
// in the cache for requests later in the step, and a cap of exactly the peak then returns
// and re-maps them every step (the d256 encoder-layer train step ran 3.2x slower, 220 ms
// instead of 70, re-faulting ~60 MB a step). So the cap learns: each miss for a size the
// cache has given back raises it by that block, up to twice the peak. A repeating step
// needs a few such raises; sizes that drift on every call (ACT forward passes whose halting
// changes) can reach the bound and still miss: the bound is what keeps their memory finite.
//
// Source: static void* allocate(std::size_t bytes) (nullptr when out of memory),
//         static void release(void*, std::size_t bytes), static constexpr const char* limit_env,
//         static constexpr std::size_t default_limit, alignment.
#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <unordered_map>
#include <vector>

namespace depthlab::detail {

template <class Source>
class block_cache {
public:
    static constexpr std::size_t alignment = Source::alignment;

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
            // the smallest cached block of this class or up to 1.5x larger (sizes that drift
            // a little from step to step reuse blocks instead of mapping fresh pages)
            auto it = free_.lower_bound(cls);
            if (it != free_.end() && it->first <= cls + cls / 2) {
                const std::size_t got = it->first;
                void* p = it->second.back();
                it->second.pop_back();
                if (it->second.empty()) free_.erase(it);
                cached_ -= got;
                if (got != cls) larger_[p] = got;
                note_live(got);
                return p;
            }
        }
        note_miss(cls);
        trim_for(cls);
        void* p = Source::allocate(cls);
        if (p == nullptr) {
            release_all();  // give cached blocks back and try once more
            p = Source::allocate(cls);
            if (p == nullptr) throw std::bad_alloc();
        }
        std::lock_guard<std::mutex> lock(mutex_);
        note_live(cls);
        return p;
    }
    void put(void* p, std::size_t bytes) {
        std::size_t cls = size_class(bytes);
        std::lock_guard<std::mutex> lock(mutex_);
        if (auto it = larger_.find(p); it != larger_.end()) {  // served from a larger class
            cls = it->second;
            larger_.erase(it);
        }
        live_ -= cls;
        if (cached_ + cls > std::min(limit_, working_set())) {
            note_released(cls);
            Source::release(p, cls);
            return;
        }
        free_[cls].push_back(p);
        cached_ += cls;
    }
    /// Returns every cached block to the system.
    void release_all() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& [cls, blocks] : free_)
            for (void* p : blocks) Source::release(p, cls);
        free_.clear();
        cached_ = 0;
    }
    /// Bytes in use (size classes) now.
    [[nodiscard]] std::size_t live_bytes() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return live_;
    }
    /// Forget the peak (benchmarks measure one phase at a time); the cap follows it.
    void reset_peak() {
        std::lock_guard<std::mutex> lock(mutex_);
        peak_live_ = live_;
        slack_ = 0;
        released_.clear();
    }
    /// Fresh blocks taken from the system so far (a workload that repeats reaches a steady
    /// state where this stops growing).
    [[nodiscard]] std::size_t system_allocations() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return system_allocations_;
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
        if (const char* e = std::getenv(Source::limit_env)) limit_ = static_cast<std::size_t>(std::strtoull(e, nullptr, 10)) << 20;
    }
    block_cache(const block_cache&) = delete;
    block_cache& operator=(const block_cache&) = delete;
    ~block_cache() { release_all(); }

private:
    /// Before a fresh allocation of `cls` bytes: release cached blocks (largest classes
    /// first) while in use + cached + cls would exceed the cap. Blocks are released outside
    /// the lock.
    void trim_for(std::size_t cls) {
        std::vector<std::pair<void*, std::size_t>> victims;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            const std::size_t cap = working_set();
            if (live_ + cached_ + cls <= cap || cached_ == 0) return;
            while (!free_.empty() && live_ + cached_ + cls > cap) {  // largest classes first
                auto last = std::prev(free_.end());
                victims.emplace_back(last->second.back(), last->first);
                note_released(last->first);
                cached_ -= last->first;
                last->second.pop_back();
                if (last->second.empty()) free_.erase(last);
            }
        }
        for (const auto& [v, bytes] : victims) Source::release(v, bytes);
    }
    /// What the cache may hold in all: the peak in use (at least min_cap) and the slack that
    /// misses for given-back sizes added. (mutex held)
    [[nodiscard]] std::size_t working_set() const { return std::max(peak_live_, min_cap) + slack_; }
    /// A fresh allocation of class cls: if the cache gave back a block that could have served
    /// it, the cap was too small for this workload; grow it by that block (at most to twice
    /// the peak).
    void note_miss(std::size_t cls) {
        std::lock_guard<std::mutex> lock(mutex_);
        ++system_allocations_;
        // a given-back block that could have served it: the class or up to 1.5x larger, as get()
        const auto it = released_.lower_bound(cls);
        if (it == released_.end() || *it > cls + cls / 2) return;
        slack_ = std::min(slack_ + *it, std::max(peak_live_, min_cap));
        released_.erase(it);
    }
    void note_released(std::size_t cls) noexcept {  // (mutex held)
        if (released_.size() >= max_released_classes) released_.clear();  // drifting sizes: forget old ones
        try {
            released_.insert(cls);
        } catch (const std::bad_alloc&) {
            // put() runs in a tensor's deleter: out of memory, forgetting the class only
            // costs one raise of the cap
        }
    }
    void note_live(std::size_t cls) {  // (mutex held)
        live_ += cls;
        peak_live_ = std::max(peak_live_, live_);
    }
    mutable std::mutex mutex_;
    std::map<std::size_t, std::vector<void*>> free_;  // by size class; no empty lists
    std::unordered_map<void*, std::size_t> larger_;    // live blocks handed out from a larger class
    static constexpr std::size_t max_released_classes = 4096;
    std::set<std::size_t> released_;                  // classes given back to the system
    std::size_t cached_ = 0, live_ = 0, peak_live_ = 0, slack_ = 0, system_allocations_ = 0;
    std::size_t limit_ = Source::default_limit;  // hard limit on free blocks kept
};

}  // namespace depthlab::detail
