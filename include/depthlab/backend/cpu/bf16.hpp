#pragma once
// bfloat16 on the CPU: f32 -> bf16 rounding (to nearest, ties to even; NaN stays NaN) and
// the packing of a GEMM operand into a dense bf16 copy. bf16 is kept as its 16 bits
// (std::uint16_t): depthlab never does arithmetic in bf16, oneDNN does it inside the GEMM.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

#include "depthlab/backend/cpu/memory.hpp"
#include "depthlab/backend/precision.hpp"
#include "depthlab/core/parallel.hpp"
#include "depthlab/core/shape.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace depthlab::cpu {

using bf16_bits = std::uint16_t;
/// Whether GEMM inputs of type In are bf16 (else float).
template <class In>
inline constexpr bool bf16_inputs = std::is_same_v<In, bf16_bits>;

/// The bf16 nearest to x (ties to even), as its 16 bits. Same rounding as the hardware's
/// VCVTNEPS2BF16 and PyTorch's float -> bfloat16 conversion.
inline bf16_bits to_bf16(float x) {
    std::uint32_t u = 0;
    std::memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_bits>((u >> 16) | 0x40u);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<bf16_bits>(u >> 16);
}
inline float from_bf16(bf16_bits h) {
    const std::uint32_t u = std::uint32_t{h} << 16;
    float x = 0;
    std::memcpy(&x, &u, sizeof x);
    return x;
}
/// x rounded to the nearest bf16 value, as a float.
inline float round_to_bf16(float x) { return from_bf16(to_bf16(x)); }

namespace bf16_impl {
inline void to_bf16_portable(const float* src, bf16_bits* dst, index_t n) {
    for (index_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) inline void to_bf16_avx512(const float* src, bf16_bits* dst,
                                                                                            index_t n) {
    index_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        _mm256_mask_storeu_epi16(dst + i, m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i)));
    }
}
#define DEPTHLAB_HAVE_BF16_CONVERT_AVX512 1
#endif
}  // namespace bf16_impl

/// dst[i] = bf16(src[i]) for a contiguous run.
inline void to_bf16(const float* src, bf16_bits* dst, index_t n) {
#if defined(DEPTHLAB_HAVE_BF16_CONVERT_AVX512)
    static const bool native = cpu_has_avx512_bf16() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    if (native) {
        bf16_impl::to_bf16_avx512(src, dst, n);
        return;
    }
#endif
    bf16_impl::to_bf16_portable(src, dst, n);
}

/// bf16 values as floats (the GEMM input of builds without oneDNN).
inline void to_bf16(const float* src, float* dst, index_t n) {
    for (index_t i = 0; i < n; ++i) dst[i] = round_to_bf16(src[i]);
}

/// A dense copy of an operand rounded to bf16 (Out: its bits, or bf16 values as floats):
/// the same matrices with ld = cols, entries back to back (broadcast entries stored once).
/// Strided views (attention heads inside a (B, T, H*dh) activation) come out contiguous,
/// which the fastest GEMM kernels want anyway.
template <class Out>
struct packed_operand {
    std::shared_ptr<Out> data;
    operand_layout layout;
};
template <class Out>
packed_operand<Out> pack_operand(const float* src, const operand_layout& in) {
    const index_t nb = in.stride == 0 ? 1 : in.batch, nb2 = in.stride2 == 0 ? 1 : in.batch2;
    const index_t matrix = in.rows * in.cols;
    packed_operand<Out> out;
    out.layout = {in.rows, in.cols, in.cols, in.batch, in.stride == 0 ? 0 : matrix, in.batch2, in.stride2 == 0 ? 0 : nb * matrix};
    out.data = memory<backend::cpu>::allocate<Out>(static_cast<std::size_t>(std::max<index_t>(1, nb2 * nb * matrix)));
    Out* const dst = out.data.get();
    const index_t total_rows = nb2 * nb * in.rows;
    parallel_for(total_rows, std::max<index_t>(1, (index_t{1} << 14) / std::max<index_t>(in.cols, 1)), [&](index_t r0, index_t r1) {
        for (index_t r = r0; r < r1; ++r) {
            const index_t row = r % in.rows, entry = r / in.rows, i = entry % nb, j = entry / nb;
            to_bf16(src + j * in.stride2 + i * in.stride + row * in.ld, dst + r * in.cols, in.cols);
        }
    });
    return out;
}

}  // namespace depthlab::cpu
