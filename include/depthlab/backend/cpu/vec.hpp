#pragma once
// Vec<T, ISA>: the SIMD register a kernel is written against. Kernels are written once over
// `V` (see kernels.inl) and compiled once per ISA inside a target region, so no translation
// unit needs -mavx2 / -mavx512f and the binary still runs on any x86-64 CPU.
// Tails are handled with masked loads/stores: kernels never read or write past `n`.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "depthlab/backend/cpu/isa.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DEPTHLAB_X86 1
#else
#define DEPTHLAB_X86 0
#endif

// Target regions: every function defined between BEGIN and END is compiled for that ISA.
#if DEPTHLAB_X86 && defined(__clang__)
#define DEPTHLAB_TARGET_AVX2_BEGIN _Pragma("clang attribute push(__attribute__((target(\"avx2,fma\"))), apply_to = function)")
#define DEPTHLAB_TARGET_AVX512_BEGIN \
    _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512dq,avx512vl,avx2,fma\"))), apply_to = function)")
#define DEPTHLAB_TARGET_END _Pragma("clang attribute pop")
#elif DEPTHLAB_X86 && defined(__GNUC__)
#define DEPTHLAB_TARGET_AVX2_BEGIN \
    _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma\")") _Pragma("GCC diagnostic push")
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own `__Y = __Y`
// placeholders (a known false positive), so the region silences both warnings.
#define DEPTHLAB_TARGET_AVX512_BEGIN                                                              \
    _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512dq,avx512vl,avx2,fma\")") \
        _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")              \
            _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define DEPTHLAB_TARGET_END _Pragma("GCC diagnostic pop") _Pragma("GCC pop_options")
#endif

#define DEPTHLAB_VEC_INLINE inline __attribute__((always_inline))

namespace depthlab::cpu {

template <class T, class ISA>
struct Vec;

/// One lane: the reference path, used for double and as the last fallback for float.
template <class T>
struct Vec<T, isa_scalar> {
    using scalar = T;
    static constexpr int width = 1;
    T v;

    static Vec set1(T x) { return {x}; }
    static Vec zero() { return {T(0)}; }
    static Vec load(const T* p) { return {*p}; }
    static Vec load(const T* p, int n) { return {n > 0 ? *p : T(0)}; }
    void store(T* p) const { *p = v; }
    void store(T* p, int n) const { if (n > 0) *p = v; }

    friend Vec operator+(Vec a, Vec b) { return {a.v + b.v}; }
    friend Vec operator-(Vec a, Vec b) { return {a.v - b.v}; }
    friend Vec operator*(Vec a, Vec b) { return {a.v * b.v}; }
    friend Vec operator/(Vec a, Vec b) { return {a.v / b.v}; }
    static Vec fma(Vec a, Vec b, Vec c) { return {a.v * b.v + c.v}; }
    static Vec max(Vec a, Vec b) { return {std::max(a.v, b.v)}; }
    static Vec min(Vec a, Vec b) { return {std::min(a.v, b.v)}; }
    /// (a > b) ? x : y, lane-wise.
    static Vec gt_select(Vec a, Vec b, Vec x, Vec y) { return {a.v > b.v ? x.v : y.v}; }
    static Vec round(Vec a) { return {std::nearbyint(a.v)}; }
    /// 2^n for integer-valued n in the normal range.
    static Vec pow2i(Vec n) { return {std::ldexp(T(1), static_cast<int>(n.v))}; }
    T reduce_add() const { return v; }
    T reduce_max() const { return v; }
};

#if DEPTHLAB_X86
DEPTHLAB_TARGET_AVX2_BEGIN
template <>
struct Vec<float, isa_avx2> {
    using scalar = float;
    static constexpr int width = 8;
    __m256 v;

    static DEPTHLAB_VEC_INLINE __m256i tail_mask(int n) {
        return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }
    static DEPTHLAB_VEC_INLINE Vec set1(float x) { return {_mm256_set1_ps(x)}; }
    static DEPTHLAB_VEC_INLINE Vec zero() { return {_mm256_setzero_ps()}; }
    static DEPTHLAB_VEC_INLINE Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
    // Full vectors take the plain load/store: AVX2's masked moves are slow on some CPUs (AMD's
    // VMASKMOVPS store is microcoded, ~10x a plain store), and kernels call these with n == W
    // for every vector but the tail (the branch folds away once inlined).
    static DEPTHLAB_VEC_INLINE Vec load(const float* p, int n) {
        return {n >= width ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask(n))};
    }
    DEPTHLAB_VEC_INLINE void store(float* p) const { _mm256_storeu_ps(p, v); }
    DEPTHLAB_VEC_INLINE void store(float* p, int n) const {
        if (n >= width) _mm256_storeu_ps(p, v);
        else _mm256_maskstore_ps(p, tail_mask(n), v);
    }

    friend DEPTHLAB_VEC_INLINE Vec operator+(Vec a, Vec b) { return {_mm256_add_ps(a.v, b.v)}; }
    friend DEPTHLAB_VEC_INLINE Vec operator-(Vec a, Vec b) { return {_mm256_sub_ps(a.v, b.v)}; }
    friend DEPTHLAB_VEC_INLINE Vec operator*(Vec a, Vec b) { return {_mm256_mul_ps(a.v, b.v)}; }
    friend DEPTHLAB_VEC_INLINE Vec operator/(Vec a, Vec b) { return {_mm256_div_ps(a.v, b.v)}; }
    static DEPTHLAB_VEC_INLINE Vec fma(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
    static DEPTHLAB_VEC_INLINE Vec max(Vec a, Vec b) { return {_mm256_max_ps(a.v, b.v)}; }
    static DEPTHLAB_VEC_INLINE Vec min(Vec a, Vec b) { return {_mm256_min_ps(a.v, b.v)}; }
    static DEPTHLAB_VEC_INLINE Vec gt_select(Vec a, Vec b, Vec x, Vec y) {
        return {_mm256_blendv_ps(y.v, x.v, _mm256_cmp_ps(a.v, b.v, _CMP_GT_OQ))};
    }
    static DEPTHLAB_VEC_INLINE Vec round(Vec a) { return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
    static DEPTHLAB_VEC_INLINE Vec pow2i(Vec n) {
        const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n.v), _mm256_set1_epi32(127));
        return {_mm256_castsi256_ps(_mm256_slli_epi32(e, 23))};
    }
    DEPTHLAB_VEC_INLINE float reduce_add() const {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
    DEPTHLAB_VEC_INLINE float reduce_max() const {
        __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_max_ps(s, _mm_movehl_ps(s, s));
        s = _mm_max_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
};
DEPTHLAB_TARGET_END

DEPTHLAB_TARGET_AVX512_BEGIN
template <>
struct Vec<float, isa_avx512> {
    using scalar = float;
    static constexpr int width = 16;
    __m512 v;

    static DEPTHLAB_VEC_INLINE __mmask16 tail_mask(int n) {
        return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << std::max(n, 0)) - 1u);
    }
    static DEPTHLAB_VEC_INLINE Vec set1(float x) { return {_mm512_set1_ps(x)}; }
    static DEPTHLAB_VEC_INLINE Vec zero() { return {_mm512_setzero_ps()}; }
    static DEPTHLAB_VEC_INLINE Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
    static DEPTHLAB_VEC_INLINE Vec load(const float* p, int n) { return {_mm512_maskz_loadu_ps(tail_mask(n), p)}; }
    DEPTHLAB_VEC_INLINE void store(float* p) const { _mm512_storeu_ps(p, v); }
    DEPTHLAB_VEC_INLINE void store(float* p, int n) const { _mm512_mask_storeu_ps(p, tail_mask(n), v); }

    friend DEPTHLAB_VEC_INLINE Vec operator+(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
    friend DEPTHLAB_VEC_INLINE Vec operator-(Vec a, Vec b) { return {_mm512_sub_ps(a.v, b.v)}; }
    friend DEPTHLAB_VEC_INLINE Vec operator*(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
    friend DEPTHLAB_VEC_INLINE Vec operator/(Vec a, Vec b) { return {_mm512_div_ps(a.v, b.v)}; }
    static DEPTHLAB_VEC_INLINE Vec fma(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
    static DEPTHLAB_VEC_INLINE Vec max(Vec a, Vec b) { return {_mm512_max_ps(a.v, b.v)}; }
    static DEPTHLAB_VEC_INLINE Vec min(Vec a, Vec b) { return {_mm512_min_ps(a.v, b.v)}; }
    static DEPTHLAB_VEC_INLINE Vec gt_select(Vec a, Vec b, Vec x, Vec y) {
        return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(a.v, b.v, _CMP_GT_OQ), y.v, x.v)};
    }
    static DEPTHLAB_VEC_INLINE Vec round(Vec a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
    static DEPTHLAB_VEC_INLINE Vec pow2i(Vec n) {
        const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n.v), _mm512_set1_epi32(127));
        return {_mm512_castsi512_ps(_mm512_slli_epi32(e, 23))};
    }
    DEPTHLAB_VEC_INLINE float reduce_add() const { return _mm512_reduce_add_ps(v); }
    DEPTHLAB_VEC_INLINE float reduce_max() const { return _mm512_reduce_max_ps(v); }
};
DEPTHLAB_TARGET_END
#endif  // DEPTHLAB_X86

}  // namespace depthlab::cpu
