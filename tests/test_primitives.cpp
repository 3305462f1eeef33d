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

namespace {
std::vector<double> random_values(std::size_t n, std::uint64_t seed) {
    depthlab::Generator gen(seed);
    std::vector<double> v(n);
    for (double& e : v) e = gen.normal();
    return v;
}
}  // namespace

// Column reductions (bias, scale and layer-norm gradients) at heights that give one tile, a
// ragged last tile and many tiles: sums in double by plain loops, and accumulation into the
// output's previous value.
TEST_CASE_TEMPLATE("primitives: column sums and layer-norm parameter gradients against loops", B, DEPTHLAB_TEST_BACKENDS) {
    for (const index_t rows : {1, 15, 17, 300, 4099})
        for (const index_t cols : {1, 3, 257}) {
            CAPTURE(rows);
            CAPTURE(cols);
            const auto n = static_cast<std::size_t>(rows * cols);
            const auto x = random_values(n, 11), y = random_values(n, 12), v0 = random_values(static_cast<std::size_t>(cols), 13);
            const auto rstats = random_values(static_cast<std::size_t>(rows), 14);
            std::vector<double> sum(v0), prod(v0), dgamma(v0), dbeta(v0), mean(rstats), rstd(rstats);
            for (double& r : rstd) r = 0.5 + std::abs(r);
            for (index_t r = 0; r < rows; ++r)
                for (index_t c = 0; c < cols; ++c) {
                    const auto i = static_cast<std::size_t>(r * cols + c), cc = static_cast<std::size_t>(c), rr = static_cast<std::size_t>(r);
                    sum[cc] += x[i];
                    prod[cc] += x[i] * y[i];
                    dgamma[cc] += y[i] * (x[i] - mean[rr]) * rstd[rr];
                    dbeta[cc] += y[i];
                }
            const Shape sx{rows, cols}, sv{cols}, sr{rows};
            const auto tx = depthlab_test::from_double<float, B>(sx, x), ty = depthlab_test::from_double<float, B>(sx, y);
            const auto tm = depthlab_test::from_double<float, B>(sr, mean), ts = depthlab_test::from_double<float, B>(sr, rstd);
            auto tsum = depthlab_test::from_double<float, B>(sv, v0), tprod = depthlab_test::from_double<float, B>(sv, v0);
            auto tg = depthlab_test::from_double<float, B>(sv, v0), tb = depthlab_test::from_double<float, B>(sv, v0);
            primitives<B>::sum_rows_acc(rows, cols, tx.data(), tsum.data());
            primitives<B>::sum_rows_mul_acc(rows, cols, tx.data(), ty.data(), tprod.data());
            primitives<B>::layernorm_bwd(rows, cols, tx.data(), ty.data(), static_cast<const float*>(nullptr), tm.data(), ts.data(),
                                         static_cast<float*>(nullptr), tg.data(), tb.data());
            const double tol = 1e-5 * std::sqrt(static_cast<double>(rows)) * 4;
            depthlab_test::check_close("sum_rows_acc", depthlab_test::to_double(tsum), sum, tol, tol);
            depthlab_test::check_close("sum_rows_mul_acc", depthlab_test::to_double(tprod), prod, tol, tol);
            depthlab_test::check_close("layernorm_bwd dgamma", depthlab_test::to_double(tg), dgamma, tol, tol);
            depthlab_test::check_close("layernorm_bwd dbeta", depthlab_test::to_double(tb), dbeta, tol, tol);
        }
}

// An embedding gradient: repeated ids, ids outside the table skipped, every table row that
// no id names left as it was.
TEST_CASE_TEMPLATE("primitives: scatter_add_rows sums repeated ids and skips ids outside the table", B, DEPTHLAB_TEST_BACKENDS) {
    for (const index_t cols : {1, 40, 300}) {
        CAPTURE(cols);
        const index_t n = 500, limit = 97;
        std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
        for (index_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = (i * 37) % 101 - 2;  // -2 .. 98: some outside [0, 97)
        const auto src = random_values(static_cast<std::size_t>(n * cols), 21), table0 = random_values(static_cast<std::size_t>(limit * cols), 22);
        std::vector<double> want(table0);
        for (index_t i = 0; i < n; ++i) {
            const std::int64_t id = ids[static_cast<std::size_t>(i)];
            if (id < 0 || id >= limit) continue;
            for (index_t c = 0; c < cols; ++c) want[static_cast<std::size_t>(id * cols + c)] += src[static_cast<std::size_t>(i * cols + c)];
        }
        const auto tids = Tensor<std::int64_t, B>::from({n}, ids);
        const auto tsrc = depthlab_test::from_double<float, B>({n, cols}, src);
        auto table = depthlab_test::from_double<float, B>({limit, cols}, table0);
        primitives<B>::scatter_add_rows(n, cols, tsrc.data(), limit, tids.data(), table.data());
        depthlab_test::check_close("scatter_add_rows", depthlab_test::to_double(table), want, 1e-5, 1e-4);
    }
}
