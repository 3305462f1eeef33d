#pragma once
// backend::host_device: the CPU's memory and kernels behind the interface of a device.
//
// Its memory is host memory (the same caching allocator as backend::cpu), but Tensor
// refuses element access at compile time (host_accessible = false), so code that compiles
// for it can only reach values through primitives<B> and explicit copies (to_host). Each
// primitive call counts as a kernel launch and each device-to-host copy as a host
// synchronisation, in counters<backend::host_device>(): the numbers a GPU run would show,
// measured on any machine. Results are bit for bit those of backend::cpu.
#include <cstring>
#include <memory>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/cpu/cpu.hpp"
#include "depthlab/backend/cpu/memory.hpp"

namespace depthlab {

template <>
struct memory<backend::host_device> {
    static constexpr std::size_t alignment = memory<backend::cpu>::alignment;

    template <class T>
    static std::shared_ptr<T> allocate(std::size_t n) {
        return memory<backend::cpu>::allocate<T>(n);
    }
    /// Device to host: a synchronisation of the host with the device.
    template <class T>
    static void to_host(const T* src, T* dst, std::size_t n) {
        counters<backend::host_device>().syncs.fetch_add(1, std::memory_order_relaxed);
        if (n) std::memcpy(dst, src, n * sizeof(T));
    }
    /// Host to device: an upload (asynchronous on a real device).
    template <class T>
    static void from_host(const T* src, T* dst, std::size_t n) {
        counters<backend::host_device>().uploads.fetch_add(1, std::memory_order_relaxed);
        if (n) std::memcpy(dst, src, n * sizeof(T));
    }
};

template <>
struct primitives<backend::host_device> : cpu::host_primitives<backend::host_device> {};

}  // namespace depthlab
