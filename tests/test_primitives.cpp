// Backend primitives that the op layer does not reach through an op, on every backend under
// test (the CPU suite: cpu and host_device; the CUDA programs, real and emulated: cuda).
#include <cmath>
#include <cstdint>
#include <vector>

#include "harness.hpp"

using namespace depthlab;

TEST_CASE_TEMPLATE("primitives: the finiteness check writes a device flag, no synchronisation", B, DEPTHLAB_TEST_BACKENDS) {
    auto flag = Tensor<std::int32_t, B>::full({1}, 7);
    std::vector<float> v(70000, 1.0f);
    const auto x = Tensor<float, B>::from({70000}, v);
    counters<B>().reset();
    primitives<B>::nonfinite_flag(x.numel(), x.data(), flag.data());
    CHECK(counters<B>().syncs == 0);
    CHECK(flag.to_host()[0] == 0);
    for (const float bad : {NAN, INFINITY, -INFINITY}) {
        v[65537] = bad;
        const auto y = Tensor<float, B>::from({70000}, v);
        primitives<B>::nonfinite_flag(y.numel(), y.data(), flag.data());
        CHECK(flag.to_host()[0] == 1);
    }
}
