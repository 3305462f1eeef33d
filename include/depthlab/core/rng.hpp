#pragma once
// Seeded, reproducible random numbers. Philox4x32-10 is counter based: the n-th number of a
// stream depends only on (seed, n), so results do not depend on the thread count and the
// whole generator state is two integers (easy to checkpoint and to restore exactly).
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>

#include "depthlab/core/portable.hpp"

namespace depthlab {

namespace detail {
/// Philox4x32-10 on a counter c with key (k0, k1), in place: one function for the host and
/// for device kernels (dropout masks drawn on a GPU equal the CPU's).
DEPTHLAB_HOST_AND_GPU inline void philox4x32_10_inplace(std::uint32_t* c, std::uint32_t k0, std::uint32_t k1) {
    constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u, w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
    for (int r = 0; r < 10; ++r) {
        const std::uint64_t p0 = std::uint64_t{m0} * c[0];
        const std::uint64_t p1 = std::uint64_t{m1} * c[2];
        const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k0, n1 = static_cast<std::uint32_t>(p1);
        const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k1, n3 = static_cast<std::uint32_t>(p0);
        c[0] = n0;
        c[1] = n1;
        c[2] = n2;
        c[3] = n3;
        k0 += w0;
        k1 += w1;
    }
}
/// The four words of block `block` of the stream of `seed`.
DEPTHLAB_HOST_AND_GPU inline void philox_block(std::uint64_t seed, std::uint64_t block, std::uint32_t* out) {
    out[0] = static_cast<std::uint32_t>(block);
    out[1] = static_cast<std::uint32_t>(block >> 32);
    out[2] = 0u;
    out[3] = 0u;
    philox4x32_10_inplace(out, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}
/// Inverted dropout's mask value from one 32-bit word: keep (1 / (1 - p)) when the word is
/// at or above threshold = p * 2^32, else 0.
template <class T>
DEPTHLAB_HOST_AND_GPU inline T dropout_keep(std::uint32_t word, std::uint64_t threshold, T keep) {
    return word >= threshold ? keep : T(0);
}
/// Inverted dropout's constants for probability p: an element whose word is below `threshold`
/// (p of the 2^32 words) is dropped, the others are scaled by `keep` = 1 / (1 - p).
template <class T>
struct dropout_constants {
    explicit dropout_constants(T p)
        : keep(T(1) / (T(1) - p)), threshold(static_cast<std::uint64_t>(static_cast<double>(p) * 4294967296.0)) {}
    T keep;
    std::uint64_t threshold;
};
}  // namespace detail

/// Counter-based generator. `offset` counts 32-bit words consumed so far.
class Generator {
public:
    explicit Generator(std::uint64_t seed = 0x5eed) : seed_(seed) {}

    [[nodiscard]] std::uint64_t seed() const { return seed_; }
    [[nodiscard]] std::uint64_t offset() const { return offset_; }
    void set_state(std::uint64_t seed, std::uint64_t offset) { seed_ = seed; offset_ = offset; }

    /// Reserve n words; returns the first index. Used by parallel fills: word i of the
    /// reservation is `word(first + i)`, computable from any thread.
    std::uint64_t reserve(std::uint64_t n) {
        const std::uint64_t first = offset_;
        offset_ += (n + 3) & ~std::uint64_t{3};  // keep blocks aligned: lanes never reused
        return first;
    }
    /// Four consecutive words of block `block` (block = index / 4).
    [[nodiscard]] std::array<std::uint32_t, 4> block(std::uint64_t block) const {
        std::array<std::uint32_t, 4> out;
        detail::philox_block(seed_, block, out.data());
        return out;
    }
    [[nodiscard]] std::uint32_t word(std::uint64_t index) const { return block(index >> 2)[index & 3]; }

    // Convenience sequential draws.
    std::uint32_t next_u32() { return word(reserve(1)); }
    /// Uniform in [0, 1).
    double uniform() { return to_unit(next_u32()); }
    /// Uniform integer in [0, n).
    std::uint64_t below(std::uint64_t n) { return static_cast<std::uint64_t>(uniform() * static_cast<double>(n)) % n; }
    double normal() {
        const std::uint64_t i = reserve(2);
        return box_muller(word(i), word(i + 1));
    }

    static double to_unit(std::uint32_t w) { return static_cast<double>(w) * 0x1p-32; }
    /// Standard normal from two words (Box–Muller; u1 shifted away from 0).
    static double box_muller(std::uint32_t a, std::uint32_t b) {
        const double u1 = (static_cast<double>(a) + 0.5) * 0x1p-32;
        const double u2 = static_cast<double>(b) * 0x1p-32;
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    }

private:
    std::uint64_t seed_;
    std::uint64_t offset_ = 0;
};

}  // namespace depthlab
