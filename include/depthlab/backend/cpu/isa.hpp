#pragma once
// Run-time choice of the CPU instruction set. Kernels are compiled for every ISA (function
// target attributes, no -march flag needed); CPUID picks the best one once, and the
// environment variable DEPTHLAB_ISA=scalar|avx2|avx512 forces a path (tests run them all).
#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>

#include "depthlab/core/error.hpp"

namespace depthlab::cpu {

enum class isa : int { scalar = 0, avx2 = 1, avx512 = 2 };

/// ISA tags: the run-time enum is turned into one of these template arguments once.
struct isa_scalar { static constexpr isa value = isa::scalar; static constexpr const char* name = "scalar"; };
struct isa_avx2 { static constexpr isa value = isa::avx2; static constexpr const char* name = "avx2"; };
struct isa_avx512 { static constexpr isa value = isa::avx512; static constexpr const char* name = "avx512"; };

inline const char* to_string(isa i) {
    switch (i) {
        case isa::avx512: return "avx512";
        case isa::avx2: return "avx2";
        default: return "scalar";
    }
}

/// True when this CPU can run the given path.
inline bool cpu_supports(isa i) {
#if defined(__x86_64__) || defined(__i386__)
    switch (i) {
        case isa::scalar: return true;
        case isa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        case isa::avx512:
            return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                   cpu_supports(isa::avx2);
    }
    return false;
#else
    return i == isa::scalar;
#endif
}

inline isa best_isa() {
    if (cpu_supports(isa::avx512)) return isa::avx512;
    if (cpu_supports(isa::avx2)) return isa::avx2;
    return isa::scalar;
}

inline isa parse_isa(std::string_view s) {
    if (s == "scalar") return isa::scalar;
    if (s == "avx2") return isa::avx2;
    if (s == "avx512") return isa::avx512;
    throw usage_error(detail::cat("DEPTHLAB_ISA: unknown value '", s, "' (expected scalar, avx2 or avx512)"));
}

namespace detail {
inline isa initial_isa() {
    const char* env = std::getenv("DEPTHLAB_ISA");
    if (env == nullptr || *env == '\0') return best_isa();
    const isa wanted = parse_isa(env);
    DEPTHLAB_CHECK(cpu_supports(wanted), usage_error, "DEPTHLAB_ISA=", env, ": this CPU cannot run that path (best available: ",
                   to_string(best_isa()), ")");
    return wanted;
}
inline std::atomic<int>& isa_slot() {
    static std::atomic<int> slot{static_cast<int>(initial_isa())};
    return slot;
}
}  // namespace detail

/// The path kernels use now.
inline isa active_isa() { return static_cast<isa>(detail::isa_slot().load(std::memory_order_relaxed)); }

/// Force a path (tests); throws if the CPU cannot run it.
inline void set_isa(isa i) {
    DEPTHLAB_CHECK(cpu_supports(i), usage_error, "set_isa(", to_string(i), "): not supported by this CPU");
    detail::isa_slot().store(static_cast<int>(i), std::memory_order_relaxed);
}

/// RAII: use a path for a scope.
class isa_scope {
public:
    explicit isa_scope(isa i) : saved_(active_isa()) { set_isa(i); }
    ~isa_scope() { detail::isa_slot().store(static_cast<int>(saved_)); }
    isa_scope(const isa_scope&) = delete;
    isa_scope& operator=(const isa_scope&) = delete;

private:
    isa saved_;
};

}  // namespace depthlab::cpu
