#pragma once
// A random ALBERT corpus for tests: `docs` documents of 2–11 sentences of 4–33 ids drawn from
// [5, vocab), the same for the same seed.
#include <cstdint>
#include <vector>

#include <depthlab/depthlab.hpp>

namespace depthlab_test {

inline depthlab::data::corpus random_albert_corpus(std::uint64_t seed, int docs, std::int64_t vocab) {
    depthlab::Generator g(seed);
    depthlab::data::corpus c;
    for (int d = 0; d < docs; ++d) {
        std::vector<std::vector<std::int32_t>> doc(2 + g.below(10));
        for (auto& s : doc) {
            s.resize(4 + g.below(30));
            for (auto& t : s) t = static_cast<std::int32_t>(5 + g.below(static_cast<std::uint64_t>(vocab - 5)));
        }
        c.add_document(doc);
    }
    return c;
}

}  // namespace depthlab_test
