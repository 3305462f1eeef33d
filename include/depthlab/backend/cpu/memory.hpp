#pragma once
// Host memory: 64-byte aligned blocks from the caching allocator of backend/block_cache.hpp.
// Handing large blocks back to the OS and faulting them in again costs more than many GEMMs
// (a fresh 32 MiB block is ~8k page faults). Hard limit on cached bytes: 4 GiB, or
// DEPTHLAB_HOST_CACHE_MB.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/block_cache.hpp"
#include "depthlab/core/error.hpp"

namespace depthlab {

namespace detail {
/// Host memory for the block cache: 64-byte aligned (a cache line; an AVX-512 register).
/// Blocks of 1 MiB and more are mapped from the system directly, so that a block the cache
/// gives back is returned to the system at once: freed to malloc, it would stay resident in
/// malloc's heap (below its mmap threshold, which glibc raises up to 32 MiB as blocks are
/// freed) and the process would hold its peak twice.
struct host_memory_source {
    static constexpr std::size_t alignment = 64;
    static constexpr std::size_t map_threshold = std::size_t{1} << 20;
    static constexpr const char* limit_env = "DEPTHLAB_HOST_CACHE_MB";
    static constexpr std::size_t default_limit = std::size_t{4} << 30;
    static constexpr std::size_t huge_page = std::size_t{2} << 20;
    static void* allocate(std::size_t bytes) {
        if (bytes < map_threshold) return std::aligned_alloc(alignment, bytes);
        if (bytes < huge_page) {
            void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            return p == MAP_FAILED ? nullptr : p;  // (page aligned)
        }
        // Blocks of 2 MiB and more start on a 2 MiB boundary and ask for transparent huge
        // pages: each block the cache maps afresh is then faulted in 2 MiB at a time instead
        // of 4 KiB (the adaptive-depth step's shapes change every iteration, so it maps often).
        const std::size_t span = bytes + huge_page;
        void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) return nullptr;
        const auto base = reinterpret_cast<std::uintptr_t>(raw);
        const std::uintptr_t start = (base + huge_page - 1) & ~std::uintptr_t{huge_page - 1};
        const std::uintptr_t end = start + page_round(bytes), raw_end = base + span;
        if (start > base) ::munmap(raw, start - base);
        if (raw_end > end) ::munmap(reinterpret_cast<void*>(end), raw_end - end);
#if defined(MADV_HUGEPAGE)
        ::madvise(reinterpret_cast<void*>(start), page_round(bytes), MADV_HUGEPAGE);  // (advice: failure is harmless)
#endif
        return reinterpret_cast<void*>(start);
    }
    static std::size_t page_round(std::size_t bytes) {
        static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
        return (bytes + page - 1) / page * page;
    }
    static void release(void* p, std::size_t bytes) {
        if (bytes < map_threshold) std::free(p);
        else ::munmap(p, bytes);
    }
};
using host_block_cache = block_cache<host_memory_source>;
}  // namespace detail

template <>
struct memory<backend::cpu> {
    static constexpr std::size_t alignment = detail::host_block_cache::alignment;  // a cache line; an AVX-512 register

    template <class T>
    static std::shared_ptr<T> allocate(std::size_t n) {
        const std::size_t bytes = n * sizeof(T);
        void* p = detail::host_block_cache::instance().get(bytes);
        return std::shared_ptr<T>(static_cast<T*>(p), [bytes](T* q) { detail::host_block_cache::instance().put(q, bytes); });
    }
    /// Free cached blocks (e.g. between phases with very different tensor sizes).
    static void release_cached() { detail::host_block_cache::instance().release_all(); }
    static std::size_t cached_bytes() { return detail::host_block_cache::instance().cached_bytes(); }
    /// Bytes in tensors now, and the most at once since the start (or reset_peak()).
    static std::size_t live_bytes() { return detail::host_block_cache::instance().live_bytes(); }
    static std::size_t peak_bytes() { return detail::host_block_cache::instance().peak_live_bytes(); }
    static void reset_peak() { detail::host_block_cache::instance().reset_peak(); }
    /// Fresh blocks taken from the system so far: a repeating step that has reached its steady
    /// state adds none (each one is page faults, and for a large block a zeroed huge page).
    static std::size_t system_allocations() { return detail::host_block_cache::instance().system_allocations(); }
    /// The process's peak resident memory in MiB (VmHWM of /proc/self/status; 0 where there is
    /// none). Linux resets it when "5" is written to /proc/self/clear_refs.
    static double peak_rss_mib() {
        std::FILE* f = std::fopen("/proc/self/status", "r");
        if (f == nullptr) return 0;
        char line[256];
        double kib = 0;
        while (std::fgets(line, sizeof line, f))
            if (std::sscanf(line, "VmHWM: %lf kB", &kib) == 1) break;
        std::fclose(f);
        return kib / 1024;
    }
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
