#pragma once
// Division of element indices by a size fixed at launch (a row width, a batch count): the
// quotient and remainder that kernels take of every index. A 64-bit division is a long
// software sequence on a GPU; where the divisor and the index fit in 32 bits (checked for
// each index, so a tensor past 2^32 elements still divides right), the quotient is a 32-bit
// multiply-high and a shift by a magic number computed once on the host (Granlund and
// Montgomery, "Division by invariant integers using multiplication", 1994). The same code
// runs on the CPU (tests/test_core.cpp checks it against / and % over edge cases and random
// sizes) and in the CUDA kernels.
#include <cstdint>

#include "depthlab/core/error.hpp"
#include "depthlab/core/portable.hpp"
#include "depthlab/core/shape.hpp"

namespace depthlab {

class index_divisor {
public:
    /// Division by 1 (a slot of a descriptor that a launch fills in).
    index_divisor() : index_divisor(1) {}
    /// d >= 1.
    explicit index_divisor(index_t d) : d_(d) {
        DEPTHLAB_CHECK(d >= 1, usage_error, "index_divisor: divisor ", d, " < 1");
        narrow_ = d <= index_t{0x7fffffff};
        if (!narrow_) return;
        // shift = ceil(log2 d), magic = floor(2^32 (2^shift - d) / d) + 1 (< 2^32 for d < 2^31)
        while ((std::uint64_t{1} << shift_) < static_cast<std::uint64_t>(d)) ++shift_;
        magic_ = static_cast<std::uint32_t>(((std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift_) - static_cast<std::uint64_t>(d))) /
                                                static_cast<std::uint64_t>(d) +
                                            1);
    }
    /// i / d for 0 <= i.
    DEPTHLAB_HOST_AND_GPU index_t div(index_t i) const {
        if (narrow_ && static_cast<std::uint64_t>(i) <= 0xffffffffu) {
            const auto n = static_cast<std::uint64_t>(i);
            const std::uint64_t hi = (n * magic_) >> 32;  // the multiply-high of two 32-bit numbers
            return static_cast<index_t>((hi + n) >> shift_);
        }
        return i / d_;
    }
    /// i % d for 0 <= i.
    DEPTHLAB_HOST_AND_GPU index_t mod(index_t i) const { return i - div(i) * d_; }
    [[nodiscard]] DEPTHLAB_HOST_AND_GPU index_t divisor() const { return d_; }

private:
    index_t d_;
    std::uint32_t magic_ = 0;
    unsigned shift_ = 0;
    bool narrow_ = false;
};

}  // namespace depthlab
