#pragma once
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "depthlab/backend/backend.hpp"
#include "depthlab/core/error.hpp"

namespace depthlab {

template <>
struct memory<backend::cpu> {
    static constexpr std::size_t alignment = 64;  // a cache line; also an AVX-512 register

    template <class T>
    static std::shared_ptr<T> allocate(std::size_t n) {
        std::size_t bytes = (n * sizeof(T) + alignment - 1) / alignment * alignment;
        if (bytes == 0) bytes = alignment;
        void* p = std::aligned_alloc(alignment, bytes);
        if (p == nullptr) throw std::bad_alloc();
        return std::shared_ptr<T>(static_cast<T*>(p), [](T* q) { std::free(q); });
    }
    template <class T>
    static void zero(T* p, std::size_t n) { std::memset(static_cast<void*>(p), 0, n * sizeof(T)); }
    template <class T>
    static void to_host(const T* src, T* dst, std::size_t n) { std::memcpy(dst, src, n * sizeof(T)); }
    template <class T>
    static void from_host(const T* src, T* dst, std::size_t n) { std::memcpy(dst, src, n * sizeof(T)); }
};

}  // namespace depthlab
