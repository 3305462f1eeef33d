#pragma once
// A batch of token sequences as the data pipelines produce it and the models read it; it
// lives on the data floor so that data/ needs nothing from nn/ (nn::token_batch names it too).
#include <cstdint>
#include <vector>

#include "depthlab/core/shape.hpp"  // index_t

namespace depthlab::data {

/// A batch of token sequences: ids and segment ids (B*T, row-major) plus lengths.
struct token_batch {
    index_t batch = 0, length = 0;
    std::vector<std::int64_t> ids, segments;
    std::vector<index_t> lengths;  // real tokens per sequence; the rest is padding
};

}  // namespace depthlab::data
