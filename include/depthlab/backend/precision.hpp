#pragma once
// The precision of float matrix products, a process-wide run-time choice (as PyTorch's
// torch.set_float32_matmul_precision / CPU autocast):
//   f32   every GEMM reads and multiplies f32 (the default: bits match the f32 reference);
//   bf16  GEMM inputs are rounded to bfloat16 (round to nearest even), products are
//         accumulated and written in f32. Everything else — master weights, optimiser
//         state, softmax, layer norm, losses, the non-GEMM kernels — stays f32.
// bf16 is fast where the CPU multiplies bf16 natively (AVX512_BF16 or AMX: about twice the
// f32 rate); elsewhere it gives the same numbers, slowly (oneDNN's emulation, or bf16-rounded
// operands in an f32 GEMM), so it can be tested on any machine. double GEMMs (gradient
// checks) ignore the setting.
#include <atomic>
#include <string_view>

#include "depthlab/core/error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace depthlab {

enum class matmul_precision : int { f32 = 0, bf16 = 1 };

inline const char* to_string(matmul_precision p) { return p == matmul_precision::bf16 ? "bf16" : "f32"; }

namespace detail {
/// CPUID leaf 7, sub-leaf `sub` (zeros where the CPU has no such leaf).
struct cpuid7 {
    unsigned a = 0, b = 0, c = 0, d = 0;
    explicit cpuid7(unsigned sub) {
#if defined(__x86_64__) || defined(__i386__)
        if (__get_cpuid_max(0, nullptr) >= 7) __cpuid_count(7, sub, a, b, c, d);
#else
        (void)sub;
#endif
    }
};
}  // namespace detail

/// True when this CPU has AVX512_BF16 (and the OS keeps AVX-512 state: avx512f says so).
inline bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool has = ((detail::cpuid7(1).a >> 5) & 1u) && __builtin_cpu_supports("avx512f");
    return has;
#else
    return false;
#endif
}

/// True when this CPU multiplies bf16 in hardware (AVX512_BF16 or AMX-BF16).
inline bool cpu_has_native_bf16() {
    static const bool native = cpu_has_avx512_bf16() || ((detail::cpuid7(0).d >> 22) & 1u);
    return native;
}

/// The precision a program gets by default: bf16 where the CPU has it natively, else f32.
inline matmul_precision preferred_matmul_precision() {
    return cpu_has_native_bf16() ? matmul_precision::bf16 : matmul_precision::f32;
}

/// "f32", "bf16" or "auto" (= preferred_matmul_precision()); `what` names the flag in errors.
inline matmul_precision parse_matmul_precision(std::string_view s, std::string_view what = "--precision") {
    if (s == "f32" || s == "fp32" || s == "float32") return matmul_precision::f32;
    if (s == "bf16" || s == "bfloat16") return matmul_precision::bf16;
    if (s == "auto") return preferred_matmul_precision();
    throw usage_error(detail::cat(what, ": unknown precision '", s, "' (expected f32, bf16 or auto)"));
}

namespace detail {
inline std::atomic<int>& matmul_precision_slot() {
    static std::atomic<int> slot{static_cast<int>(matmul_precision::f32)};
    return slot;
}
}  // namespace detail

/// The precision float GEMMs use now.
inline matmul_precision active_matmul_precision() {
    return static_cast<matmul_precision>(detail::matmul_precision_slot().load(std::memory_order_relaxed));
}
inline void set_matmul_precision(matmul_precision p) {
    detail::matmul_precision_slot().store(static_cast<int>(p), std::memory_order_relaxed);
}

/// RAII: a precision for a scope (tests, one phase of a program).
class matmul_precision_scope {
public:
    explicit matmul_precision_scope(matmul_precision p) : saved_(active_matmul_precision()) { set_matmul_precision(p); }
    ~matmul_precision_scope() { set_matmul_precision(saved_); }
    matmul_precision_scope(const matmul_precision_scope&) = delete;
    matmul_precision_scope& operator=(const matmul_precision_scope&) = delete;

private:
    matmul_precision saved_;
};

}  // namespace depthlab
