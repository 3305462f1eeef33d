// Backend primitives that the op layer does not reach through an op, on every backend under
// test (the CPU suite: cpu and host_device; the CUDA programs, real and emulated: cuda).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
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
        // written, not added (a first gradient): every row, named or not, from a NaN-filled table;
        // the bits of a zero fill followed by the accumulating form
        auto written = Tensor<float, B>::full({limit, cols}, std::numeric_limits<float>::quiet_NaN());
        auto zero_then_add = Tensor<float, B>::zeros({limit, cols});
        primitives<B>::scatter_add_rows(n, cols, tsrc.data(), limit, tids.data(), written.data(), /*accumulate=*/false);
        primitives<B>::scatter_add_rows(n, cols, tsrc.data(), limit, tids.data(), zero_then_add.data());
        CHECK(depthlab_test::to_double(written) == depthlab_test::to_double(zero_then_add));
    }
}

namespace {
/// bf16 rounding (nearest even) of a float, as the test's own reference.
double round_bf16(double v) {
    const auto f = static_cast<float>(v);
    std::uint32_t u = 0;
    std::memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    float r = 0;
    std::memcpy(&r, &u, sizeof r);
    return r;
}
/// C = alpha op(A) op(B) + beta C over both batches, in double, operands passed through `in`.
template <class In>
std::vector<double> reference_product(const gemm_args& g, double alpha, const std::vector<double>& a, const std::vector<double>& b, double beta,
                                      std::vector<double> c, In in) {
    for (index_t o = 0; o < g.batch2; ++o)
        for (index_t q = 0; q < g.batch; ++q)
            for (index_t i = 0; i < g.m; ++i)
                for (index_t j = 0; j < g.n; ++j) {
                    double s = 0;
                    for (index_t l = 0; l < g.k; ++l) {
                        const index_t ia = o * g.stride_a2 + q * g.stride_a + (g.trans_a ? l * g.lda + i : i * g.lda + l);
                        const index_t ib = o * g.stride_b2 + q * g.stride_b + (g.trans_b ? j * g.ldb + l : l * g.ldb + j);
                        s += in(a[static_cast<std::size_t>(ia)]) * in(b[static_cast<std::size_t>(ib)]);
                    }
                    double& y = c[static_cast<std::size_t>(o * g.stride_c2 + q * g.stride_c + i * g.ldc + j)];
                    y = alpha * s + beta * y;
                }
    return c;
}
}  // namespace

// Under bf16 precision a float GEMM multiplies its operands rounded to bf16 (nearest even)
// and accumulates in f32: equal to the rounded operands' product in double up to f32
// accumulation, and measurably apart from the unrounded product (so a backend that ignored
// the setting fails). Plain, transposed with padded leading dimensions, strided batches
// with a broadcast operand, and the (sequence, head) two-stride batches of attention.
TEST_CASE_TEMPLATE("primitives: bf16 GEMMs multiply bf16-rounded operands and accumulate in f32", B, DEPTHLAB_TEST_BACKENDS) {
    const std::vector<gemm_args> shapes = {
        {.m = 37, .n = 29, .k = 70, .lda = 70, .ldb = 29, .ldc = 29},
        {.trans_a = true, .trans_b = true, .m = 21, .n = 33, .k = 64, .lda = 25, .ldb = 70, .ldc = 40},
        {.m = 16, .n = 24, .k = 48, .lda = 48, .ldb = 24, .ldc = 24, .batch = 3, .stride_a = 0, .stride_b = 48 * 24, .stride_c = 16 * 24},
        {.trans_b = true, .m = 12, .n = 10, .k = 32, .lda = 4 * 32, .ldb = 4 * 32, .ldc = 10, .batch = 4, .stride_a = 32, .stride_b = 32,
         .stride_c = 12 * 10, .batch2 = 2, .stride_a2 = 12 * 4 * 32, .stride_b2 = 10 * 4 * 32, .stride_c2 = 4 * 12 * 10},
    };
    const auto extent = [](index_t rows, index_t cols, index_t ld, index_t batch, index_t stride, index_t batch2, index_t stride2) {
        return static_cast<std::size_t>((batch2 - 1) * stride2 + (batch - 1) * stride + (rows - 1) * ld + cols);
    };
    std::uint64_t seed = 40;
    for (const gemm_args& g : shapes) {
        CAPTURE(g.m);
        CAPTURE(g.batch2);
        const auto na = extent(g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.batch, g.stride_a, g.batch2, g.stride_a2);
        const auto nb = extent(g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.batch, g.stride_b, g.batch2, g.stride_b2);
        const auto nc = extent(g.m, g.n, g.ldc, g.batch, g.stride_c, g.batch2, g.stride_c2);
        std::vector<double> a = random_values(na, seed++), b = random_values(nb, seed++), c = random_values(nc, seed++);
        for (std::vector<double>* v : {&a, &b, &c})
            for (double& e : *v) e = static_cast<float>(e);  // exact in float: the references see the device's inputs
        const double alpha = 1.25, beta = 0.5;
        const auto rounded = reference_product(g, alpha, a, b, beta, c, round_bf16);
        const auto exact = reference_product(g, alpha, a, b, beta, c, [](double v) { return v; });
        const auto ta = depthlab_test::from_double<float, B>({static_cast<index_t>(na)}, a);
        const auto tb = depthlab_test::from_double<float, B>({static_cast<index_t>(nb)}, b);
        auto tc = depthlab_test::from_double<float, B>({static_cast<index_t>(nc)}, c);
        {
            matmul_precision_scope bf16(matmul_precision::bf16);
            primitives<B>::gemm(g, 1.25f, ta.data(), tb.data(), 0.5f, tc.data());
        }
        const auto got = depthlab_test::to_double(tc);
        depthlab_test::check_close("bf16 gemm vs bf16-rounded operands in double", got, rounded, 1e-4, 1e-4);
        double apart = 0;
        for (std::size_t i = 0; i < got.size(); ++i) apart = std::max(apart, std::abs(got[i] - exact[i]));
        CHECK_MESSAGE(apart > 1e-3, "the bf16 product is within ", apart, " of the unrounded one: were the operands rounded?");
    }
}

// bf16 copies made beforehand (prepare_bf16, gemm_args::a_bf16 / b_bf16): a product given
// the copies of its own operands gives the bits of the product that converts them itself and
// converts nothing (one launch on a device); a copy of another operand, or of the same one
// read in another layout, is not used (the product equals the product of its own operands);
// under f32 precision nothing is made and the product stays f32.
TEST_CASE_TEMPLATE("primitives: bf16 copies made beforehand serve the products that read the same operand, and only those", B,
                   DEPTHLAB_TEST_BACKENDS) {
    const std::vector<gemm_args> shapes = {
        {.trans_b = true, .m = 37, .n = 29, .k = 70, .lda = 70, .ldb = 70, .ldc = 29},
        {.trans_a = true, .m = 21, .n = 33, .k = 64, .lda = 25, .ldb = 40, .ldc = 40},
        {.trans_b = true, .m = 300, .n = 40, .k = 50, .lda = 53, .ldb = 50, .ldc = 41},  // CPU: A's rows rounded in the tile tasks
        {.trans_b = true, .m = 12, .n = 10, .k = 32, .lda = 4 * 32, .ldb = 4 * 32, .ldc = 10, .batch = 4, .stride_a = 32, .stride_b = 32,
         .stride_c = 12 * 10, .batch2 = 2, .stride_a2 = 12 * 4 * 32, .stride_b2 = 10 * 4 * 32, .stride_c2 = 4 * 12 * 10},
    };
    const auto extent = [](const operand_layout& l) {
        return static_cast<std::size_t>((l.batch2 - 1) * l.stride2 + (l.batch - 1) * l.stride + (l.rows - 1) * l.ld + l.cols);
    };
    std::uint64_t seed = 140;
    for (const gemm_args& g : shapes) {
        CAPTURE(g.m);
        const std::size_t na = extent(layout_a(g)), nb = extent(layout_b(g)), nc = static_cast<std::size_t>(
                                                                                    (g.batch2 - 1) * g.stride_c2 + (g.batch - 1) * g.stride_c + (g.m - 1) * g.ldc + g.n);
        std::vector<double> a = random_values(na, seed++), b = random_values(nb, seed++), other = random_values(na, seed++);
        for (std::vector<double>* v : {&a, &b, &other})
            for (double& e : *v) e = static_cast<float>(e);
        const auto ta = depthlab_test::from_double<float, B>({static_cast<index_t>(na)}, a);
        const auto tb = depthlab_test::from_double<float, B>({static_cast<index_t>(nb)}, b);
        const auto t_other = depthlab_test::from_double<float, B>({static_cast<index_t>(na)}, other);
        std::int64_t launches = 0;  // of the last product
        const auto product = [&](const gemm_args& args) {
            auto tc = Tensor<float, B>::zeros({static_cast<index_t>(nc)});
            counters<B>().reset();
            primitives<B>::gemm(args, 1.0f, ta.data(), tb.data(), 0.0f, tc.data());
            launches = counters<B>().launches.load();
            return depthlab_test::to_double(tc);
        };
        matmul_precision_scope bf16(matmul_precision::bf16);
        const std::vector<double> converting = product(g);
        const std::int64_t converting_launches = launches;
        bf16_operand a16, b16, foreign, other_layout;
        primitives<B>::prepare_bf16(layout_a(g), ta.data(), a16);
        primitives<B>::prepare_bf16(layout_b(g), tb.data(), b16);
        primitives<B>::prepare_bf16(layout_a(g), t_other.data(), foreign);
        operand_layout shifted = layout_a(g);
        shifted.cols -= 1;  // the same address read narrower: not this product's operand
        primitives<B>::prepare_bf16(shifted, ta.data(), other_layout);
        REQUIRE(a16.serves(ta.data(), layout_a(g)));
        CHECK_FALSE(foreign.serves(ta.data(), layout_a(g)));
        CHECK_FALSE(other_layout.serves(ta.data(), layout_a(g)));
        gemm_args with = g;
        with.a_bf16 = &a16;
        with.b_bf16 = &b16;
        const std::vector<double> prepared = product(with);
        CHECK(prepared == converting);
        // (a CUDA conversion is a kernel launch; the CPU's happen inside its one GEMM call)
        if constexpr (std::is_same_v<B, backend::cuda>) CHECK(converting_launches - launches == 2);
        for (const bf16_operand* wrong : {&foreign, &other_layout}) {
            gemm_args mismatched = g;
            mismatched.a_bf16 = wrong;
            mismatched.b_bf16 = &b16;
            CHECK(product(mismatched) == converting);
        }
        {
            matmul_precision_scope f32(matmul_precision::f32);
            const std::vector<double> plain = product(g);
            CHECK(product(with) == plain);  // f32 products read the float operands, copies or not
            CHECK(plain != converting);
        }
    }
}

// Address tables of two-level batches built together (gemm_address_tables): one launch for
// all of them on a device; a product given its own table gives the same bits and builds none;
// given another product's table (another result) it builds its own; under bf16 a table is made
// only where the product's bf16 copies exist already. The CPU needs none and makes none.
TEST_CASE_TEMPLATE("primitives: address tables built together serve the products they were built for, and only those", B,
                   DEPTHLAB_TEST_BACKENDS) {
    const gemm_args g{.trans_b = true, .m = 12, .n = 10, .k = 32, .lda = 4 * 32, .ldb = 4 * 32, .ldc = 10, .batch = 4, .stride_a = 32,
                      .stride_b = 32, .stride_c = 12 * 10, .batch2 = 2, .stride_a2 = 12 * 4 * 32, .stride_b2 = 10 * 4 * 32,
                      .stride_c2 = 4 * 12 * 10};
    const index_t na = 2 * 12 * 4 * 32, nb = 2 * 10 * 4 * 32, nc = 2 * 4 * 12 * 10;
    const auto ta = depthlab_test::from_double<float, B>({na}, random_values(static_cast<std::size_t>(na), 190));
    const auto tb = depthlab_test::from_double<float, B>({nb}, random_values(static_cast<std::size_t>(nb), 191));
    auto c1 = Tensor<float, B>::zeros({nc}), c2 = Tensor<float, B>::zeros({nc}), plain = Tensor<float, B>::zeros({nc});
    constexpr bool device = std::is_same_v<B, backend::cuda>;
    const gemm_table_request<float> requests[2] = {{g, ta.data(), tb.data(), c1.data()}, {g, ta.data(), tb.data(), c2.data()}};
    gemm_addresses tables[2];
    counters<B>().reset();
    primitives<B>::gemm_address_tables(2, requests, tables);
    if constexpr (device) CHECK(counters<B>().launches.load() == 1);
    CHECK(static_cast<bool>(tables[0].table) == device);
    const auto launches_of = [&](const gemm_addresses* table, Tensor<float, B>& c) {
        gemm_args with = g;
        with.addresses = table;
        counters<B>().reset();
        primitives<B>::gemm(with, 1.0f, ta.data(), tb.data(), 0.0f, c.data());
        return counters<B>().launches.load();
    };
    const auto own = launches_of(nullptr, plain);
    const auto given = launches_of(&tables[0], c1);
    CHECK(depthlab_test::to_double(c1) == depthlab_test::to_double(plain));
    if constexpr (device) CHECK(own - given == 1);
    auto c3 = Tensor<float, B>::zeros({nc});
    const auto foreign = launches_of(&tables[1], c3);  // built for c2, asked for c3
    CHECK(depthlab_test::to_double(c3) == depthlab_test::to_double(plain));
    CHECK(foreign == own);
    matmul_precision_scope bf16(matmul_precision::bf16);
    gemm_addresses none;
    primitives<B>::gemm_address_tables(1, requests, &none);  // (no bf16 copies made beforehand)
    CHECK_FALSE(none.table);
}

// A linear layer's forward product with its bias, f32 and bf16: against the reference in
// double (operands rounded under bf16), with transposed and padded operands, and k = 0 (the
// bias alone). On CUDA it is one cuBLASLt call with the bias epilogue: no other launch.
TEST_CASE_TEMPLATE("primitives: gemm_bias adds the bias to every row of the product", B, DEPTHLAB_TEST_BACKENDS) {
    const std::vector<gemm_args> shapes = {
        {.trans_b = true, .m = 33, .n = 20, .k = 48, .lda = 48, .ldb = 48, .ldc = 20},
        {.trans_a = true, .m = 17, .n = 24, .k = 40, .lda = 19, .ldb = 30, .ldc = 27},
        {.m = 5, .n = 6, .k = 0, .lda = 1, .ldb = 6, .ldc = 6},
    };
    std::uint64_t seed = 70;
    for (const bool bf16 : {false, true})
        for (const gemm_args& g : shapes) {
            CAPTURE(bf16);
            CAPTURE(g.k);
            CAPTURE(g.trans_a);
            const auto na = static_cast<std::size_t>(std::max<index_t>(1, (g.trans_a ? g.k : g.m) * g.lda));
            const auto nb = static_cast<std::size_t>(std::max<index_t>(1, (g.trans_b ? g.n : g.k) * g.ldb));
            const auto nc = static_cast<std::size_t>(g.m * g.ldc);
            std::vector<double> a = random_values(na, seed++), b = random_values(nb, seed++), c = random_values(nc, seed++),
                                bias = random_values(static_cast<std::size_t>(g.n), seed++);
            for (std::vector<double>* v : {&a, &b, &bias})
                for (double& e : *v) e = static_cast<float>(e);
            const auto in = [bf16](double v) { return bf16 ? round_bf16(v) : v; };
            std::vector<double> want = reference_product(g, 1.0, a, b, 0.0, c, in);
            for (index_t i = 0; i < g.m; ++i)
                for (index_t j = 0; j < g.n; ++j) want[static_cast<std::size_t>(i * g.ldc + j)] += bias[static_cast<std::size_t>(j)];
            const auto ta = depthlab_test::from_double<float, B>({static_cast<index_t>(na)}, a);
            const auto tb = depthlab_test::from_double<float, B>({static_cast<index_t>(nb)}, b);
            const auto tbias = depthlab_test::from_double<float, B>({g.n}, bias);
            auto tc = depthlab_test::from_double<float, B>({static_cast<index_t>(nc)}, c);
            counters<B>().reset();
            {
                matmul_precision_scope scope(bf16 ? matmul_precision::bf16 : matmul_precision::f32);
                primitives<B>::gemm_bias(g, ta.data(), tb.data(), tbias.data(), tc.data());
            }
            const auto launches = counters<B>().launches.load(), gemms = counters<B>().gemms.load();
            depthlab_test::check_close("gemm_bias", depthlab_test::to_double(tc), want, 1e-4, 1e-4);
            if constexpr (std::is_same_v<B, backend::cuda>) {
                if (g.k > 0) {
                    CHECK(gemms == 1);
                    CHECK(launches == (bf16 ? 3 : 1));  // the GEMM, and under bf16 one conversion per operand
                }
            }
        }
}

// A feed-forward layer's first half: pre = op(A) op(B) + bias and c = gelu(pre) (tanh form),
// against the reference in double, f32 and bf16, a width that cuBLASLt's GELU epilogue takes
// (a multiple of 8: one call on CUDA) and one it does not (20: the unfused path).
TEST_CASE_TEMPLATE("primitives: gemm_bias_gelu writes the GELU of the biased product and keeps its input", B, DEPTHLAB_TEST_BACKENDS) {
    const std::vector<gemm_args> shapes = {
        {.trans_b = true, .m = 33, .n = 24, .k = 48, .lda = 48, .ldb = 48, .ldc = 24},
        {.trans_b = true, .m = 9, .n = 20, .k = 16, .lda = 19, .ldb = 16, .ldc = 20},
    };
    std::uint64_t seed = 90;
    for (const bool bf16 : {false, true})
        for (const gemm_args& g : shapes) {
            CAPTURE(bf16);
            CAPTURE(g.n);
            const auto na = static_cast<std::size_t>(g.m * g.lda), nb = static_cast<std::size_t>(g.n * g.ldb);
            const auto nc = static_cast<std::size_t>(g.m * g.ldc);
            std::vector<double> a = random_values(na, seed++), b = random_values(nb, seed++), bias = random_values(static_cast<std::size_t>(g.n), seed++);
            for (std::vector<double>* v : {&a, &b, &bias})
                for (double& e : *v) e = static_cast<float>(e);
            const auto in = [bf16](double v) { return bf16 ? round_bf16(v) : v; };
            std::vector<double> pre = reference_product(g, 1.0, a, b, 0.0, std::vector<double>(nc, 0.0), in), out(nc);
            for (std::size_t i = 0; i < nc; ++i) {
                pre[i] += bias[i % static_cast<std::size_t>(g.n)];
                out[i] = 0.5 * pre[i] * (1 + std::tanh(0.7978845608028654 * (pre[i] + 0.044715 * pre[i] * pre[i] * pre[i])));
            }
            const auto ta = depthlab_test::from_double<float, B>({static_cast<index_t>(na)}, a);
            const auto tb = depthlab_test::from_double<float, B>({static_cast<index_t>(nb)}, b);
            const auto tbias = depthlab_test::from_double<float, B>({g.n}, bias);
            auto tpre = Tensor<float, B>::full({static_cast<index_t>(nc)}, std::nanf("")), tc = tpre.clone();
            counters<B>().reset();
            {
                matmul_precision_scope scope(bf16 ? matmul_precision::bf16 : matmul_precision::f32);
                primitives<B>::gemm_bias_gelu(g, ta.data(), tb.data(), tbias.data(), tpre.data(), tc.data());
            }
            const auto launches = counters<B>().launches.load(), gemms = counters<B>().gemms.load();
            depthlab_test::check_close("gemm_bias_gelu pre", depthlab_test::to_double(tpre), pre, 1e-4, 1e-4);
            depthlab_test::check_close("gemm_bias_gelu out", depthlab_test::to_double(tc), out, 1e-4, 1e-4);
            CHECK(gemms == (std::is_same_v<B, backend::cpu> ? 0 : 1));
            if constexpr (std::is_same_v<B, backend::cuda>) {
                const int conversions = bf16 ? 2 : 0;
                CHECK(launches == conversions + (g.n % 8 == 0 ? 1 : 2));  // fused, or the bias product and a GELU pass
            } else if constexpr (!B::host_accessible) {
                CHECK(launches == 1);  // the counting device: one primitive, one launch
            }
        }
    CHECK_THROWS_WITH_AS(primitives<B>::template gemm_bias_gelu<float>(gemm_args{.m = 2, .n = 3, .k = 1, .lda = 1, .ldb = 3, .ldc = 4},
                                                                         nullptr, nullptr, nullptr, nullptr, nullptr),
                         doctest::Contains("gemm_bias_gelu: no bias for 3 columns"), usage_error);
}

// A linear layer's weight gradient with its bias gradient: c = dY^T X + beta c and db = the
// column sums of dY (written over whatever db held), f32 and bf16 (dY's sums stay f32: from
// the unrounded dY), accumulating (beta 1) and writing (beta 0). On CUDA an f32 product is one
// cuBLASLt call with the BGRADB epilogue.
TEST_CASE_TEMPLATE("primitives: gemm_bias_grad writes the bias gradient beside the weight gradient", B, DEPTHLAB_TEST_BACKENDS) {
    const gemm_args g{.trans_a = true, .m = 12, .n = 10, .k = 37, .lda = 12, .ldb = 10, .ldc = 10};
    std::uint64_t seed = 110;
    for (const bool bf16 : {false, true})
        for (const double beta : {0.0, 1.0}) {
            CAPTURE(bf16);
            CAPTURE(beta);
            const auto na = static_cast<std::size_t>(g.k * g.m), nb = static_cast<std::size_t>(g.k * g.n), nc = static_cast<std::size_t>(g.m * g.n);
            std::vector<double> a = random_values(na, seed++), b = random_values(nb, seed++), c = random_values(nc, seed++);
            for (std::vector<double>* v : {&a, &b, &c})
                for (double& e : *v) e = static_cast<float>(e);
            const auto in = [bf16](double v) { return bf16 ? round_bf16(v) : v; };
            const std::vector<double> want = reference_product(g, 1.0, a, b, beta, c, in);
            std::vector<double> want_db(static_cast<std::size_t>(g.m), 0.0);
            for (index_t r = 0; r < g.k; ++r)
                for (index_t i = 0; i < g.m; ++i) want_db[static_cast<std::size_t>(i)] += a[static_cast<std::size_t>(r * g.m + i)];
            const auto ta = depthlab_test::from_double<float, B>({static_cast<index_t>(na)}, a);
            const auto tb = depthlab_test::from_double<float, B>({static_cast<index_t>(nb)}, b);
            auto tc = depthlab_test::from_double<float, B>({static_cast<index_t>(nc)}, c);
            auto tdb = Tensor<float, B>::full({g.m}, std::nanf(""));
            counters<B>().reset();
            {
                matmul_precision_scope scope(bf16 ? matmul_precision::bf16 : matmul_precision::f32);
                primitives<B>::gemm_bias_grad(g, ta.data(), tb.data(), static_cast<float>(beta), tc.data(), tdb.data());
            }
            const auto launches = counters<B>().launches.load();
            depthlab_test::check_close("gemm_bias_grad c", depthlab_test::to_double(tc), want, 1e-4, 1e-4);
            depthlab_test::check_close("gemm_bias_grad db", depthlab_test::to_double(tdb), want_db, 1e-5, 1e-5);
            if constexpr (std::is_same_v<B, backend::cuda>) CHECK(launches == (bf16 ? 4 : 1));  // fused, or conversions + GEMM + column sums
            else if constexpr (!B::host_accessible) CHECK(launches == 1);
        }
    CHECK_THROWS_WITH_AS(primitives<B>::template gemm_bias_grad<float>(gemm_args{.m = 4, .n = 3, .k = 5, .lda = 5, .ldb = 3, .ldc = 3},
                                                                         nullptr, nullptr, 0.0f, nullptr, nullptr),
                         doctest::Contains("gemm_bias_grad: A must be dY stored (k, m) = (5, 4) and transposed"), shape_error);
}

// The multi-tensor optimiser and clipping routines (one call for every parameter) against the
// per-element rules applied on the host, over tensors that fill no chunk, one, and several
// (a device cuts them into 8192-element chunks); one launch per pass on a device.
TEST_CASE_TEMPLATE("primitives: multi-tensor Adam, LAMB and clipping equal the per-element rules", B, DEPTHLAB_TEST_BACKENDS) {
    namespace rules = optim::rules;
    const std::vector<index_t> sizes = {5, 0, 8192, 8193, 20000, 1};
    const auto count = static_cast<index_t>(sizes.size());
    std::uint64_t seed = 90;
    struct host_tensor {
        std::vector<float> w, g, m, v;
    };
    std::vector<host_tensor> h;
    for (const index_t n : sizes) {
        host_tensor t;
        for (std::vector<float>* x : {&t.w, &t.g, &t.m, &t.v}) {
            const auto r = random_values(static_cast<std::size_t>(n), seed++);
            x->assign(r.begin(), r.end());
        }
        for (float& e : t.v) e = std::abs(e);  // second moments
        h.push_back(t);
    }
    const auto device = [](const std::vector<float>& x) { return Tensor<float, B>::from({static_cast<index_t>(x.size())}, x); };
    const auto launches = [] { return counters<B>().launches.load(); };
    const bool counted = !B::host_accessible;
    const auto close = [](const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
        depthlab_test::check_close(what, {got.begin(), got.end()}, {want.begin(), want.end()}, 1e-5, 1e-6);
    };

    SUBCASE("Adam") {
        std::vector<Tensor<float, B>> w, g, m, v;
        std::vector<rules::adam_tensor<float>> t;
        for (index_t i = 0; i < count; ++i) {
            const auto& x = h[static_cast<std::size_t>(i)];
            w.push_back(device(x.w)), g.push_back(device(x.g)), m.push_back(device(x.m)), v.push_back(device(x.v));
            const rules::adam<float> rule{rules::adam_moments<float>::make(0.9, 0.999, 1e-8, 3 + i), 0.01f, 0.0f, 0.999f};
            t.push_back({sizes[static_cast<std::size_t>(i)], w.back().data(), g.back().data(), m.back().data(), v.back().data(), rule});
        }
        const auto before = launches();
        primitives<B>::adam_update_many(count, t.data());
        if (counted) CHECK(launches() - before == 1);
        for (index_t i = 0; i < count; ++i) {
            auto x = h[static_cast<std::size_t>(i)];
            for (std::size_t e = 0; e < x.w.size(); ++e) t[static_cast<std::size_t>(i)].rule(x.w[e], x.g[e], x.m[e], x.v[e]);
            close("adam w", w[static_cast<std::size_t>(i)].to_vector(), x.w);
            close("adam v", v[static_cast<std::size_t>(i)].to_vector(), x.v);
        }
    }
    SUBCASE("LAMB") {
        std::vector<Tensor<float, B>> w, g, m, v;
        std::vector<Tensor<double, B>> sums;
        std::vector<rules::lamb_tensor<float>> t;
        for (index_t i = 0; i < count; ++i) {
            const auto& x = h[static_cast<std::size_t>(i)];
            w.push_back(device(x.w)), g.push_back(device(x.g)), m.push_back(device(x.m)), v.push_back(device(x.v));
            sums.push_back(Tensor<double, B>::zeros({2}));
            t.push_back({.n = sizes[static_cast<std::size_t>(i)], .w = w.back().data(), .g = g.back().data(), .m = m.back().data(),
                         .v = v.back().data(), .am = rules::adam_moments<float>::make(0.9, 0.999, 1e-6, 2), .wd = 0.01f, .lr = 0.05,
                         .sums = sums.back().data(), .adapt = i % 2 == 0});
        }
        const auto before = launches();
        primitives<B>::lamb_step_many(count, t.data());
        if (counted) CHECK(launches() - before == 2);
        for (index_t i = 0; i < count; ++i) {
            auto x = h[static_cast<std::size_t>(i)];
            const auto& d = t[static_cast<std::size_t>(i)];
            double s[2] = {0, 0};
            for (std::size_t e = 0; e < x.w.size(); ++e) {
                const float u = d.am.update(x.g[e], x.m[e], x.v[e]) + d.wd * x.w[e];
                s[0] += static_cast<double>(x.w[e]) * x.w[e];
                s[1] += static_cast<double>(u) * u;
            }
            const auto step = static_cast<float>(d.lr * rules::lamb_trust_ratio(d.adapt ? s : nullptr));
            for (std::size_t e = 0; e < x.w.size(); ++e) x.w[e] -= step * (d.am.direction(x.m[e], x.v[e]) + d.wd * x.w[e]);
            depthlab_test::check_close("lamb sums", depthlab_test::to_double(sums[static_cast<std::size_t>(i)]), {s[0], s[1]}, 1e-9, 1e-9);
            close("lamb w", w[static_cast<std::size_t>(i)].to_vector(), x.w);
        }
    }
    SUBCASE("clipping") {
        for (const double max_norm : {1e9, 3.0}) {  // no clipping, then clipping
            CAPTURE(max_norm);
            std::vector<Tensor<float, B>> x;
            std::vector<rules::tensor_span<float>> t;
            for (index_t i = 0; i < count; ++i) {
                x.push_back(device(h[static_cast<std::size_t>(i)].g));
                t.push_back({sizes[static_cast<std::size_t>(i)], x.back().data()});
            }
            auto parts = Tensor<double, B>::empty({count});
            const auto before = launches();
            primitives<B>::sum_squares_many(count, t.data(), parts.data());
            primitives<B>::clip_scale_many(count, t.data(), parts.data(), count, max_norm);
            if (counted) CHECK(launches() - before == 2);
            std::vector<double> want(static_cast<std::size_t>(count), 0.0);
            for (index_t i = 0; i < count; ++i)
                for (const float e : h[static_cast<std::size_t>(i)].g) want[static_cast<std::size_t>(i)] += static_cast<double>(e) * e;
            depthlab_test::check_close("sum_squares_many", depthlab_test::to_double(parts), want, 1e-9, 1e-9);
            const double f = rules::clip_factor(rules::clip_total(want.data(), count), max_norm);
            CHECK((max_norm > 1e8) == (f == 1.0));
            for (index_t i = 0; i < count; ++i) {
                auto y = h[static_cast<std::size_t>(i)].g;
                if (f < 1.0)
                    for (float& e : y) e = static_cast<float>(f) * e;
                close("clip_scale_many", x[static_cast<std::size_t>(i)].to_vector(), y);
            }
        }
    }
}

// The backward routines that write the first gradient (accumulate = false) instead of adding
// to a zero-filled buffer: equal to adding to zeros, and they never read the output first (a
// fresh buffer may hold anything: here NaN).
TEST_CASE_TEMPLATE("primitives: backward routines write a first gradient without reading the buffer", B, DEPTHLAB_TEST_BACKENDS) {
    const index_t rows = 37, cols = 70, n = rows * cols;
    const auto x = depthlab_test::from_double<float, B>({n}, random_values(static_cast<std::size_t>(n), 120));
    const auto y = depthlab_test::from_double<float, B>({n}, random_values(static_cast<std::size_t>(n), 121));
    const auto dy = depthlab_test::from_double<float, B>({n}, random_values(static_cast<std::size_t>(n), 122));
    const auto s = [&](index_t len) {
        auto t = Tensor<float, B>::empty({len});
        primitives<B>::fill(len, std::numeric_limits<float>::quiet_NaN(), t.data());
        return t;
    };
    const auto z = [](index_t len) { return Tensor<float, B>::zeros({len}); };
    using P = primitives<B>;
    using unary = void (*)(index_t, const float*, const float*, float*, bool);
    const std::vector<std::pair<const char*, unary>> ops = {
        {"gelu_bwd", &P::template gelu_bwd<float>},       {"gelu_erf_bwd", &P::template gelu_erf_bwd<float>},
        {"relu_bwd", &P::template relu_bwd<float>},       {"tanh_bwd", &P::template tanh_bwd<float>},
        {"sigmoid_bwd", &P::template sigmoid_bwd<float>}, {"log_sigmoid_bwd", &P::template log_sigmoid_bwd<float>}};
    for (const auto& entry : ops) {  // (no structured binding: clang 14 cannot capture those)
        const char* name = entry.first;
        const unary op = entry.second;
        CAPTURE(name);
        auto written = s(n), added = z(n);
        op(n, y.data(), dy.data(), written.data(), false);
        op(n, y.data(), dy.data(), added.data(), true);
        CHECK(written.to_vector() == added.to_vector());
    }
    auto sum_written = s(cols), sum_added = z(cols);
    P::sum_rows_acc(rows, cols, x.data(), sum_written.data(), false);
    P::sum_rows_acc(rows, cols, x.data(), sum_added.data(), true);
    CHECK(sum_written.to_vector() == sum_added.to_vector());
    const auto gamma = depthlab_test::from_double<float, B>({cols}, random_values(static_cast<std::size_t>(cols), 123));
    auto mean = Tensor<float, B>::empty({rows}), rstd = Tensor<float, B>::empty({rows}), out = Tensor<float, B>::empty({n});
    P::layernorm_fwd(rows, cols, x.data(), gamma.data(), gamma.data(), 1e-5f, out.data(), mean.data(), rstd.data());
    auto dx_w = s(n), dg_w = s(cols), db_w = s(cols), dx_a = z(n), dg_a = z(cols), db_a = z(cols);
    P::layernorm_bwd(rows, cols, x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), dx_w.data(), dg_w.data(), db_w.data(), false, false);
    P::layernorm_bwd(rows, cols, x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), dx_a.data(), dg_a.data(), db_a.data(), true, true);
    CHECK(dx_w.to_vector() == dx_a.to_vector());
    CHECK(dg_w.to_vector() == dg_a.to_vector());
    CHECK(db_w.to_vector() == db_a.to_vector());
    // the interpolation weights' gradient (ACT's state update); the halting step's gradients
    const auto w = depthlab_test::from_double<float, B>({rows}, random_values(static_cast<std::size_t>(rows), 124));
    auto dw_w = s(rows), dw_a = z(rows);
    float* const none = nullptr;
    P::interpolate_rows_bwd(rows, cols, x.data(), y.data(), w.data(), dy.data(), none, 0.0f, none, 0.0f, dw_w.data(), 0.0f);
    P::interpolate_rows_bwd(rows, cols, x.data(), y.data(), w.data(), dy.data(), none, 0.0f, none, 0.0f, dw_a.data(), 1.0f);
    CHECK(dw_w.to_vector() == dw_a.to_vector());
    std::vector<double> ra(static_cast<std::size_t>(rows)), nh(static_cast<std::size_t>(rows));
    for (std::size_t i = 0; i < ra.size(); ++i) (i % 3 == 0 ? ra : i % 3 == 1 ? nh : ra)[i] = i % 3 == 2 ? 0.0 : 1.0;
    const auto tra = depthlab_test::from_double<float, B>({rows}, ra), tnh = depthlab_test::from_double<float, B>({rows}, nh);
    auto dp_w = s(rows), dc_w = s(rows), dp_a = z(rows), dc_a = z(rows);
    const elementwise::halting_coefficient<float> cp{.run = 1}, cc{.halt = -1, .one = 1};
    P::act_halting_bwd(rows, tra.data(), tnh.data(), dy.data(), cp, dp_w.data(), 0.0f, cc, dc_w.data(), 0.0f);
    P::act_halting_bwd(rows, tra.data(), tnh.data(), dy.data(), cp, dp_a.data(), 1.0f, cc, dc_a.data(), 1.0f);
    CHECK(dp_w.to_vector() == dp_a.to_vector());
    CHECK(dc_w.to_vector() == dc_a.to_vector());
}

// ACT's halting decision on the device (the compact path's) against the host rule it stands for,
// act_state::step, over five iterations: the same masks, cumulative probabilities and counts for
// running, halting and padding tokens, with min_iterations holding halts back until iteration 2;
// a NaN probability stops its token without counting and records the iteration.
TEST_CASE_TEMPLATE("primitives: act_decide takes act_state::step's decisions", B, DEPTHLAB_TEST_BACKENDS) {
    using P = primitives<B>;
    const index_t n = 37;
    std::vector<char> tokens(static_cast<std::size_t>(n));
    std::vector<double> cum0(tokens.size()), active0(tokens.size());
    std::vector<std::int64_t> rows(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = i % 7 != 6;  // every seventh is padding
        cum0[i] = tokens[i] ? 0.0 : 1.0;
        active0[i] = tokens[i] ? 1.0 : 0.0;
        rows[i] = static_cast<std::int64_t>(i);
    }
    const double eps = 0.05;
    const int min_iterations = 2;
    halting::act_state<float> st(tokens, eps, min_iterations);
    auto cum = depthlab_test::from_double<float, B>({n}, cum0), active = depthlab_test::from_double<float, B>({n}, active0);
    auto r = Tensor<float, B>::zeros({n}), state = Tensor<float, B>::zeros({n, 2});
    for (int it = 1; it <= 5; ++it) {
        CAPTURE(it);
        std::vector<double> p(tokens.size());
        for (std::size_t i = 0; i < p.size(); ++i) p[i] = 0.4 * static_cast<double>((i * 7919 + static_cast<std::size_t>(it) * 104729) % 1000) / 1000.0;
        const auto pt = depthlab_test::from_double<float, B>({n}, p);
        auto ra = Tensor<float, B>::empty({n}), nh = Tensor<float, B>::empty({n});
        P::act_decide(n, pt.data(), cum.data(), active.data(), static_cast<float>(1.0 - eps), it, min_iterations, ra.data(), nh.data(), state.data());
        const auto host = st.step(pt.to_vector(), rows, it);
        CHECK(ra.to_vector() == host.running_after);
        CHECK(nh.to_vector() == host.new_halt);
        auto w = Tensor<float, B>::empty({n}), cum_next = Tensor<float, B>::empty({n}), r_next = Tensor<float, B>::empty({n});
        P::act_halting_fwd(n, pt.data(), cum.data(), r.data(), ra.data(), nh.data(), w.data(), cum_next.data(), r_next.data());
        const auto c = cum_next.to_vector(), counts = state.to_vector();
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            CAPTURE(i);
            if (host.running_after[i] > 0) CHECK(c[i] == st.cum[i]);  // (the running tokens' cum decides the next step)
            CHECK(counts[2 * i] == static_cast<float>(st.N[i]));
            CHECK(counts[2 * i + 1] == 0.0f);
        }
        cum = cum_next;
        r = r_next;
        active = ra;
    }
    CHECK(std::count(st.running.begin(), st.running.end(), 1) > 0);  // some still run, some halted: both rules met
    CHECK(std::count(st.N.begin(), st.N.end(), 5) < std::count(tokens.begin(), tokens.end(), 1));
    // a NaN probability: the token stops (masks 0), its count stays, the iteration is recorded
    std::vector<double> p(tokens.size(), 0.01);
    p[0] = std::numeric_limits<double>::quiet_NaN();
    const auto pt = depthlab_test::from_double<float, B>({n}, p);
    const auto before = state.to_vector();
    auto ra = Tensor<float, B>::empty({n}), nh = Tensor<float, B>::empty({n});
    auto one = Tensor<float, B>::ones({n});
    P::act_decide(n, pt.data(), cum.data(), one.data(), 0.95f, 6, 0, ra.data(), nh.data(), state.data());
    const auto after = state.to_vector();
    CHECK(ra.to_vector()[0] == 0.0f);
    CHECK(nh.to_vector()[0] == 0.0f);
    CHECK(after[0] == before[0]);
    CHECK(after[1] == 6.0f);
}

// Dropout applied where the mask is drawn: the same bits as dropout_mask then a product (or a
// product added), in place too, for a length that is no multiple of the 4 words per draw.
TEST_CASE_TEMPLATE("primitives: dropout_apply equals the stored mask's product", B, DEPTHLAB_TEST_BACKENDS) {
    const index_t n = 10003;
    const Generator gen(31);
    const std::uint64_t first = 4 * 1234;
    const auto x = depthlab_test::from_double<float, B>({n}, random_values(static_cast<std::size_t>(n), 130));
    const auto y0 = depthlab_test::from_double<float, B>({n}, random_values(static_cast<std::size_t>(n), 131));
    auto mask = Tensor<float, B>::empty({n}), want = Tensor<float, B>::empty({n}), want_acc = y0.clone();
    primitives<B>::dropout_mask(n, 0.3f, gen, first, mask.data());
    primitives<B>::mul(n, x.data(), mask.data(), want.data());
    primitives<B>::mul_acc(n, x.data(), mask.data(), want_acc.data());
    auto got = Tensor<float, B>::empty({n}), got_acc = y0.clone(), in_place = x.clone();
    primitives<B>::dropout_apply(n, 0.3f, gen, first, x.data(), got.data());
    primitives<B>::dropout_apply(n, 0.3f, gen, first, x.data(), got_acc.data(), true);
    primitives<B>::dropout_apply(n, 0.3f, gen, first, in_place.data(), in_place.data());
    CHECK(got.to_vector() == want.to_vector());
    CHECK(got_acc.to_vector() == want_acc.to_vector());
    CHECK(in_place.to_vector() == want.to_vector());
    const auto m = mask.to_vector();
    const auto dropped = std::count(m.begin(), m.end(), 0.0f);
    CHECK(dropped > n / 4);  // p = 0.3: the mask really drops
    CHECK(dropped < n * 7 / 20);
}

// Greedy decoding's per-row choice against the host's log-softmax in double and
// std::max_element: ties go to the first maximum; a row with a NaN, or with +inf (whose
// log-probabilities are all NaN on the host), picks 0.
TEST_CASE_TEMPLATE("primitives: greedy_pick chooses the first maximum with its log-probability", B, DEPTHLAB_TEST_BACKENDS) {
    const index_t V = 300, rows = 6;
    std::vector<double> x = random_values(static_cast<std::size_t>(rows * V), 140);
    x[1 * V + 17] = x[1 * V + 250] = 9.0;  // a tie: 17 wins
    x[2 * V + 5] = std::numeric_limits<double>::quiet_NaN();
    x[3 * V + 9] = std::numeric_limits<double>::infinity();
    for (index_t c = 0; c < V; ++c) x[static_cast<std::size_t>(4 * V + c)] = -3.0;  // all equal: 0
    x[5 * V + V - 1] = 40.0;                                                         // the last column
    const std::int64_t eos = 2;
    const auto logits = depthlab_test::from_double<float, B>({rows, V}, x);
    auto out = Tensor<double, B>::empty({rows, 3});
    primitives<B>::greedy_pick(rows, V, logits.data(), eos, out.data());
    const auto got = out.to_vector();
    const std::vector<float> xf(x.begin(), x.end());
    std::vector<double> lp;
    for (index_t r = 0; r < rows; ++r) {
        CAPTURE(r);
        elementwise::log_softmax_row(xf.data() + r * V, V, lp);
        const auto best = std::max_element(lp.begin(), lp.end()) - lp.begin();
        CHECK(got[static_cast<std::size_t>(3 * r)] == static_cast<double>(best));
        for (const int k : {1, 2}) {
            const double want = lp[static_cast<std::size_t>(k == 1 ? best : eos)];
            const double g = got[static_cast<std::size_t>(3 * r + k)];
            if (std::isnan(want)) CHECK(std::isnan(g));
            else CHECK(g == doctest::Approx(want).epsilon(1e-12));
        }
    }
    CHECK(got[3 * 1] == 17);
    CHECK(got[3 * 5] == static_cast<double>(V - 1));
    CHECK_THROWS_AS(primitives<B>::greedy_pick(rows, V, logits.data(), std::int64_t{V}, out.data()), index_error);
}

// Beam search's per-row candidates against a full sort of base + log-probability on the
// host in elementwise::beam_before order: ties go to the lower id, a NaN row's candidates
// rank after every number, a −inf base ranks its row's candidates as −inf (ids ascending).
TEST_CASE_TEMPLATE("primitives: beam_pick returns each row's best candidates in beam order", B, DEPTHLAB_TEST_BACKENDS) {
    const index_t V = 300, rows = 6, take = 8;
    std::vector<double> x = random_values(static_cast<std::size_t>(rows * V), 141);
    for (const index_t c : {17, 250, 40}) x[static_cast<std::size_t>(1 * V + c)] = 9.0;  // a three-way tie: 17, 40, 250
    x[2 * V + 5] = std::numeric_limits<double>::quiet_NaN();
    for (index_t c = 0; c < V; ++c) x[static_cast<std::size_t>(4 * V + c)] = -3.0;  // all equal: ids 0..take-1
    x[5 * V + V - 1] = 40.0;
    const std::vector<double> bases = {-1.5, 0.0, -2.0, -std::numeric_limits<double>::infinity(), -0.25, -7.0};
    const std::int64_t eos = 2;
    const auto logits = depthlab_test::from_double<float, B>({rows, V}, x);
    const auto base = Tensor<double, B>::from({rows}, bases);
    auto out = Tensor<double, B>::empty({rows, 2 * take + 1});
    primitives<B>::beam_pick(rows, V, logits.data(), base.data(), take, eos, out.data());
    const auto got = out.to_vector();
    const std::vector<float> xf(x.begin(), x.end());
    std::vector<double> lp;
    for (index_t r = 0; r < rows; ++r) {
        CAPTURE(r);
        elementwise::log_softmax_row(xf.data() + r * V, V, lp);
        std::vector<double> score(lp.size());
        for (std::size_t v = 0; v < lp.size(); ++v) score[v] = bases[static_cast<std::size_t>(r)] + lp[v];
        std::vector<index_t> order(static_cast<std::size_t>(V));
        for (index_t v = 0; v < V; ++v) order[static_cast<std::size_t>(v)] = v;
        std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) {
            return elementwise::beam_before(score[static_cast<std::size_t>(a)], 0, a, score[static_cast<std::size_t>(b)], 0, b);
        });
        const double* row = got.data() + r * (2 * take + 1);
        for (index_t c = 0; c < take; ++c) {
            CAPTURE(c);
            const index_t want = order[static_cast<std::size_t>(c)];
            CHECK(row[2 * c + 1] == static_cast<double>(want));
            const double w = score[static_cast<std::size_t>(want)];
            if (std::isnan(w)) CHECK(std::isnan(row[2 * c]));
            else if (std::isinf(w)) CHECK(row[2 * c] == w);
            else CHECK(row[2 * c] == doctest::Approx(w).epsilon(1e-12));
        }
        const double w = score[static_cast<std::size_t>(eos)];
        if (std::isnan(w) || std::isinf(w)) CHECK((std::isnan(row[2 * take]) == std::isnan(w)));
        else CHECK(row[2 * take] == doctest::Approx(w).epsilon(1e-12));
    }
    const double* tie = got.data() + 1 * (2 * take + 1);
    CHECK(tie[1] == 17);
    CHECK(tie[3] == 40);
    CHECK(tie[5] == 250);
    CHECK(got[static_cast<std::size_t>(4 * (2 * take + 1) + 2 * (take - 1) + 1)] == static_cast<double>(take - 1));
    CHECK(got[static_cast<std::size_t>(5 * (2 * take + 1) + 1)] == static_cast<double>(V - 1));
    CHECK_THROWS_AS(primitives<B>::beam_pick(rows, V, logits.data(), base.data(), take, std::int64_t{V}, out.data()), index_error);
    CHECK_THROWS_AS(primitives<B>::beam_pick(rows, V, logits.data(), base.data(), V + 1, eos, out.data()), shape_error);
}
