#pragma once
// The memory-bound CPU kernels, compiled once per (scalar type, ISA). `with_isa<T>(f)`
// converts the run-time ISA choice into the template argument K = kernels<T, ISA> once per
// call, so a primitive is written once and runs every path.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "depthlab/backend/cpu/vec.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/core/shape.hpp"

namespace depthlab::cpu {

template <class T, class ISA>
struct kernels;

template <>
struct kernels<double, isa_scalar> {
    using T = double;
    using V = Vec<double, isa_scalar>;
#include "depthlab/backend/cpu/kernels.inl"
};

template <>
struct kernels<float, isa_scalar> {
    using T = float;
    using V = Vec<float, isa_scalar>;
#include "depthlab/backend/cpu/kernels.inl"
};

#if DEPTHLAB_X86
DEPTHLAB_TARGET_AVX2_BEGIN
template <>
struct kernels<float, isa_avx2> {
    using T = float;
    using V = Vec<float, isa_avx2>;
#include "depthlab/backend/cpu/kernels.inl"
};
DEPTHLAB_TARGET_END

DEPTHLAB_TARGET_AVX512_BEGIN
template <>
struct kernels<float, isa_avx512> {
    using T = float;
    using V = Vec<float, isa_avx512>;
#include "depthlab/backend/cpu/kernels.inl"
};
DEPTHLAB_TARGET_END
#endif

/// Calls `f.template operator()<K>()` with `K = kernels<T, active ISA>`. double always takes
/// the one-lane path (it is the precision reference used by gradient checks).
template <class T, class F>
decltype(auto) with_isa(F&& f) {
    if constexpr (std::is_same_v<T, float>) {
#if DEPTHLAB_X86
        switch (active_isa()) {
            case isa::avx512: return f.template operator()<kernels<float, isa_avx512>>();
            case isa::avx2: return f.template operator()<kernels<float, isa_avx2>>();
            default: break;
        }
#endif
        return f.template operator()<kernels<float, isa_scalar>>();
    } else {
        return f.template operator()<kernels<T, isa_scalar>>();
    }
}

}  // namespace depthlab::cpu
