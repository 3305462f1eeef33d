#pragma once
// CUDA's bfloat16 type on the emulated device: storage, round-to-nearest-even conversion from
// float (NaN stays NaN), exact conversion back. Written from the format's definition (the top
// 16 bits of an IEEE binary32), independently of depthlab's CPU bf16 code.
#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
    unsigned short x;
};

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    std::uint32_t u = 0;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<unsigned short>((u >> 16) | 0x0040u)};  // NaN: quiet, sign kept
    u += 0x7fffu + ((u >> 16) & 1u);  // ties to the even upper half
    return {static_cast<unsigned short>(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
    const std::uint32_t u = static_cast<std::uint32_t>(h.x) << 16;
    float f = 0;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
