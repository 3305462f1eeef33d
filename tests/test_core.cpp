// Core: shapes, tensors and views, the RNG, ISA selection, GEMM, the autodiff engine and
// the errors that bad input must raise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "depthlab/backend/index_divisor.hpp"
#include "depthlab/backend/primitive_list.hpp"
#include "harness.hpp"

using namespace depthlab;
using doctest::Contains;

TEST_CASE("Shape: extents, strides, printing, axis checks") {
    const Shape s{2, 3, 4};
    CHECK(s.rank() == 3);
    CHECK(s.numel() == 24);
    CHECK(s.rows() == 6);
    CHECK(s.dim(-1) == 4);
    CHECK(s.to_string() == "(2, 3, 4)");
    CHECK(Shape{5}.to_string() == "(5,)");
    CHECK(contiguous_strides(s) == Shape{12, 4, 1});
    CHECK_THROWS_AS((void)s.dim(3), index_error);
    CHECK_THROWS_WITH_AS(Shape({2, -3}), Contains("negative extent -3"), shape_error);
}

TEST_CASE("Tensor: factories, alignment, element access") {
    auto z = Tensor<float>::zeros({3, 5});
    CHECK(reinterpret_cast<std::uintptr_t>(z.data()) % 64 == 0);
    for (float v : z.to_vector()) CHECK(v == 0.0f);
    auto t = Tensor<double>::from({2, 3}, {1, 2, 3, 4, 5, 6});
    CHECK(t(1, 2) == 6.0);
    t(0, 1) = 9;
    CHECK(t.to_vector()[1] == 9.0);
    CHECK_THROWS_WITH_AS((void)t(2, 0), Contains("index 2 out of range for axis 0 of shape (2, 3)"), index_error);
    CHECK_THROWS_WITH_AS(Tensor<double>::from({2, 2}, {1, 2, 3}), Contains("3 values for shape (2, 2)"), shape_error);
    CHECK(Tensor<float>::full({4}, 2.5f).to_vector() == std::vector<float>(4, 2.5f));
    CHECK_THROWS_AS((void)Tensor<float>::empty({-1, 3}), shape_error);
}

TEST_CASE("Tensor: views share storage; contiguous and clone copy") {
    auto t = Tensor<double>::from({2, 3}, {0, 1, 2, 3, 4, 5});
    auto tt = t.transpose(0, 1);
    CHECK(tt.shape() == Shape{3, 2});
    CHECK(!tt.is_contiguous());
    CHECK(tt.shares_storage(t));
    CHECK(tt.contiguous().to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
    auto s = t.slice(1, 1, 3);
    CHECK(s.to_vector() == std::vector<double>{1, 2, 4, 5});
    s(0, 0) = 10;  // writes through the view
    CHECK(t(0, 1) == 10.0);
    CHECK(t.select(0, 1).to_vector() == std::vector<double>{3, 4, 5});
    CHECK(t.reshape({3, -1}).shape() == Shape{3, 2});
    CHECK(tt.reshape({6}).to_vector() == std::vector<double>{0, 3, 10, 4, 2, 5});  // non-contiguous: copies
    auto c = t.clone();
    c(0, 0) = 42;
    CHECK(t(0, 0) == 0.0);
    CHECK_THROWS_WITH_AS((void)t.reshape({4, 2}), Contains("cannot reshape (2, 3)"), shape_error);
    CHECK_THROWS_WITH_AS((void)t.slice(1, 2, 4), Contains("out of bounds for axis 1 of shape (2, 3)"), index_error);
    auto dst = Tensor<double>::zeros({3, 2});
    CHECK_THROWS_WITH_AS(dst.copy_(t), Contains("copy_: source shape (2, 3) != destination shape (3, 2)"), shape_error);
    dst.copy_(tt);
    CHECK(dst.to_vector() == tt.contiguous().to_vector());
}

TEST_CASE("Tensor: Eigen maps and printing") {
    auto t = Tensor<float>::from({2, 3}, {1, 2, 3, 4, 5, 6});
    CHECK(eigen_matrix(t)(1, 2) == 6.0f);
    CHECK(eigen_matrix(t.transpose(0, 1))(2, 1) == 6.0f);  // strided map, no copy
    CHECK(eigen_vector(t).sum() == 21.0f);
    std::ostringstream os;
    os << t;
    CHECK(os.str().find("Tensor(2, 3) cpu") != std::string::npos);
}

TEST_CASE("Generator: reproducible, counter based, sane distributions") {
    Generator a(7), b(7), c(8);
    const auto x = Tensor<double>::randn({1000}, a).to_vector();
    CHECK(x == Tensor<double>::randn({1000}, b).to_vector());
    CHECK(x != Tensor<double>::randn({1000}, c).to_vector());
    // the state is two integers: restoring it replays the stream
    Generator d(3);
    (void)d.normal();
    const auto saved_offset = d.offset();
    const double next = d.normal();
    d.set_state(3, saved_offset);
    CHECK(d.normal() == next);
    Generator e(11);
    const auto big = Tensor<double>::randn({200000}, e).to_vector();
    const double mean = std::accumulate(big.begin(), big.end(), 0.0) / big.size();
    double var = 0;
    for (double v : big) var += (v - mean) * (v - mean) / big.size();
    CHECK(std::abs(mean) < 0.01);
    CHECK(std::abs(var - 1) < 0.02);
}

TEST_CASE("dropout masks do not depend on the thread count") {
    auto mask_with = [](int threads) {
        const scoped_num_threads use(threads);
        Generator gen(5);
        auto m = Tensor<float>::empty({300000});
        primitives<backend::cpu>::dropout_mask<float>(m.numel(), 0.25f, gen, gen.reserve(300000), m.data());
        return m.to_vector();
    };
    const auto one = mask_with(1), two = mask_with(2);
    CHECK(one == two);
    const auto dropped = std::count(one.begin(), one.end(), 0.0f);
    CHECK(std::abs(static_cast<double>(dropped) / one.size() - 0.25) < 0.01);
}

// The mask kernels run Philox in vector lanes (cpu/kernels.inl, dropout_keep_mask): on every
// ISA path, every element's value is the one its Generator word defines, from any offset and for
// any length (chunks start anywhere within a 4-word block), on one thread and on two.
TEST_CASE("index_divisor: the quotient and remainder of / and % for every divisor width") {
    // edge divisors (1, powers of two and their neighbours, the largest 32-bit ones, 64-bit
    // ones) and random ones, against edge indices (0, around multiples, around 2^31 and 2^32,
    // 64-bit ones) and random ones
    std::vector<index_t> divisors{1, 2, 3, 5, 7, 255, 256, 257, 1000, 1024, 65535, 65536, 65537, 0x7ffffffe, 0x7fffffff, 0x80000000LL,
                                  0xffffffffLL, 0x100000001LL, (index_t{1} << 40) + 3};
    Generator gen(17);
    for (int k = 0; k < 200; ++k) divisors.push_back(1 + static_cast<index_t>(gen.below(k % 2 ? 5000 : 0x7fffffff)));
    std::vector<index_t> indices{0, 1, 2, 0x7ffffffe, 0x7fffffff, 0x80000000LL, 0xfffffffeLL, 0xffffffffLL, 0x100000000LL, 0x100000001LL,
                                 (index_t{1} << 45) + 12345};
    for (int k = 0; k < 300; ++k) indices.push_back(static_cast<index_t>(gen.below(k % 3 ? 0xffffffffULL + 1 : 1000000)));
    for (const index_t d : divisors) {
        const index_divisor div(d);
        std::vector<index_t> near = indices;
        for (const index_t m : {index_t{1}, index_t{2}, index_t{1000}, index_t{0xffffffff} / d})
            for (const index_t off : {index_t{-1}, index_t{0}, index_t{1}})
                if (m * d + off >= 0) near.push_back(m * d + off);
        for (const index_t i : near) {
            if (div.div(i) != i / d || div.mod(i) != i % d) {
                FAIL_CHECK("index_divisor(", d, "): ", i, " gives ", div.div(i), " r ", div.mod(i), ", want ", i / d, " r ", i % d);
                return;
            }
        }
    }
    CHECK_THROWS_AS(index_divisor(0), usage_error);
    const index_divisor one;  // a descriptor's unused slot divides by 1
    CHECK(one.divisor() == 1);
    for (const index_t i : {index_t{0}, index_t{7}, index_t{0xffffffff}, index_t{1} << 40}) CHECK((one.div(i) == i && one.mod(i) == 0));
}

TEST_CASE("dropout masks are the Generator's words on every ISA path") {
    const Generator gen(0x0123456789abcdefULL);
    const float p = 0.3f, keep = 1.0f / (1.0f - p);
    const auto threshold = static_cast<std::uint64_t>(static_cast<double>(p) * 4294967296.0);
    for (const cpu::isa path : {cpu::isa::scalar, cpu::isa::avx2, cpu::isa::avx512}) {
        if (!cpu::cpu_supports(path)) continue;
        const cpu::isa_scope scope(path);
        for (const int threads : {1, 2}) {
            const scoped_num_threads use(threads);
            for (const std::uint64_t first : {std::uint64_t{0}, std::uint64_t{4}, (std::uint64_t{1} << 34) + 8})
                for (const index_t n : {1, 3, 4, 5, 63, 64, 65, 1000, 70001}) {
                    CAPTURE(cpu::to_string(path));
                    CAPTURE(threads);
                    CAPTURE(first);
                    CAPTURE(n);
                    auto m = Tensor<float>::empty({n});
                    primitives<backend::cpu>::dropout_mask<float>(n, p, gen, first, m.data());
                    std::int64_t wrong = 0;
                    for (index_t i = 0; i < n; ++i)
                        wrong += m.data()[i] != detail::dropout_keep(gen.word(first + static_cast<std::uint64_t>(i)), threshold, keep);
                    CHECK(wrong == 0);
                }
        }
    }
}

TEST_CASE("ISA selection: parse, support, forcing") {
    CHECK(cpu::parse_isa("avx2") == cpu::isa::avx2);
    CHECK_THROWS_WITH_AS(cpu::parse_isa("sse9"), Contains("unknown value 'sse9'"), usage_error);
    CHECK(cpu::cpu_supports(cpu::isa::scalar));
    CHECK(cpu::cpu_supports(cpu::best_isa()));
    {
        cpu::isa_scope scope(cpu::isa::scalar);
        CHECK(cpu::active_isa() == cpu::isa::scalar);
    }
    if (!cpu::cpu_supports(cpu::isa::avx512)) CHECK_THROWS_AS(cpu::set_isa(cpu::isa::avx512), usage_error);
    MESSAGE("best ISA on this CPU: ", cpu::to_string(cpu::best_isa()), "; active: ", cpu::to_string(cpu::active_isa()));
}

TEST_CASE_TEMPLATE("GEMM: strides, transposes, alpha/beta, batches against a loop reference", T, float, double) {
    Generator gen(3);
    const index_t M = 5, N = 7, K = 9, batch = 3;
    for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2;
        const index_t lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
        const index_t sa = (ta ? K : M) * lda, sb = (tb ? N : K) * ldb, sc = M * ldc;
        auto A = Tensor<T>::randn({batch * sa}, gen), Bm = Tensor<T>::randn({batch * sb}, gen), C = Tensor<T>::randn({batch * sc}, gen);
        const auto C0 = C.to_vector();
        const T alpha = T(0.5), beta = T(2);
        primitives<backend::cpu>::gemm<T>(gemm_args{.trans_a = ta, .trans_b = tb, .m = M, .n = N, .k = K, .lda = lda, .ldb = ldb,
                                                    .ldc = ldc, .batch = batch, .stride_a = sa, .stride_b = sb, .stride_c = sc},
                                          alpha, A.data(), Bm.data(), beta, C.data());
        const auto a = A.to_vector(), b = Bm.to_vector(), c = C.to_vector();
        double worst = 0;
        for (index_t i = 0; i < batch; ++i)
            for (index_t m = 0; m < M; ++m)
                for (index_t n = 0; n < N; ++n) {
                    double s = 0;
                    for (index_t k = 0; k < K; ++k)
                        s += double(a[i * sa + (ta ? k * lda + m : m * lda + k)]) * double(b[i * sb + (tb ? n * ldb + k : k * ldb + n)]);
                    const double want = alpha * s + beta * C0[i * sc + m * ldc + n];
                    worst = std::max(worst, std::abs(want - c[i * sc + m * ldc + n]));
                }
        CAPTURE(ta);
        CAPTURE(tb);
        CHECK(worst < (std::is_same_v<T, float> ? 1e-4 : 1e-12));
        // padding between rows is never written
        CHECK(c[N] == C0[N]);
    }
}

// Attention's products read and write per-head views: dense (B, T, H*dh) tensors or column
// slices of a packed [q | k | v] projection (row stride 3*H*dh). The strided output must be
// written exactly where it belongs, beta 0 never reading it.
TEST_CASE("GEMM: per-head products on packed projections") {
    const index_t Bn = 2, T_ = 5, H = 3, dh = 4, d = H * dh;
    Generator gen(11);
    const auto S = Tensor<float>::randn({Bn * H * T_ * T_}, gen);  // (B, H, T, T) scores, dense
    const auto packed = Tensor<float>::randn({Bn * T_ * 3 * d}, gen);  // [q | k | v]: the k slice is read
    const index_t off_k = d;
    // C (the dQ slice of a packed gradient) = alpha S k + beta C, heads of (B, T, 3d)
    const gemm_args g{.m = T_, .n = dh, .k = T_, .lda = T_, .ldb = 3 * d, .ldc = 3 * d,
                      .batch = H, .stride_a = T_ * T_, .stride_b = dh, .stride_c = dh,
                      .batch2 = Bn, .stride_a2 = H * T_ * T_, .stride_b2 = T_ * 3 * d, .stride_c2 = T_ * 3 * d};
    const auto reference = [&](const std::vector<float>& c0, float alpha, float beta) {
        std::vector<double> want(c0.begin(), c0.end());
        for (index_t b = 0; b < Bn; ++b)
            for (index_t h = 0; h < H; ++h)
                for (index_t i = 0; i < T_; ++i)
                    for (index_t x = 0; x < dh; ++x) {
                        double s = 0;
                        for (index_t j = 0; j < T_; ++j)
                            s += double(S.data()[((b * H + h) * T_ + i) * T_ + j]) * double(packed.data()[(b * T_ + j) * 3 * d + off_k + h * dh + x]);
                        const index_t at = (b * T_ + i) * 3 * d + h * dh + x;
                        want[at] = alpha * s + (beta == 0 ? 0.0 : beta * double(c0[at]));
                    }
        return want;
    };
    for (const float beta : {0.0f, 1.0f, 0.5f}) {
        CAPTURE(beta);
        auto C = Tensor<float>::randn({Bn * T_ * 3 * d}, gen);
        if (beta == 0) C.fill_(std::numeric_limits<float>::quiet_NaN());  // beta 0 never reads C
        const auto c0 = C.to_vector();
        primitives<backend::cpu>::gemm<float>(g, 0.5f, S.data(), packed.data() + off_k, beta, C.data());
        const auto want = reference(c0, 0.5f, beta);
        const auto got = C.to_vector();
        double worst = 0;
        index_t untouched = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
            if (static_cast<index_t>(i % (3 * d)) >= d) untouched += std::isnan(c0[i]) ? std::isnan(got[i]) : got[i] == c0[i];
            else worst = std::max(worst, std::abs(double(got[i]) - want[i]));
        }
        CHECK(worst < 1e-5);
        CHECK(untouched == Bn * T_ * 2 * d);  // the k and v columns of the gradient are left alone
    }
}

TEST_CASE("bf16: rounding to nearest even, NaN and infinity kept") {
    CHECK(cpu::to_bf16(1.0f) == 0x3f80);
    CHECK(cpu::round_to_bf16(1.0f + 0x1p-8f) == 1.0f);                  // a tie: to the even neighbour below
    CHECK(cpu::round_to_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);    // a tie: to the even neighbour above
    CHECK(cpu::round_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);  // past the tie: up
    CHECK(cpu::round_to_bf16(-2.5f) == -2.5f);                           // exactly representable
    CHECK(std::isnan(cpu::round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
    CHECK(std::isnan(cpu::round_to_bf16(std::numeric_limits<float>::signaling_NaN())));
    CHECK(cpu::round_to_bf16(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
    CHECK(cpu::round_to_bf16(std::numeric_limits<float>::max()) == std::numeric_limits<float>::infinity());  // as torch
    // the vector conversion (AVX512_BF16 where the CPU has it) agrees with the scalar one, tails included
    Generator gen(4);
    for (index_t n : {1, 15, 16, 17, 100}) {
        const auto x = Tensor<float>::randn({n}, gen, 3.0);
        std::vector<cpu::bf16_bits> got(static_cast<std::size_t>(n) + 1, 0xdead);
        cpu::to_bf16(x.data(), got.data(), n);
        for (index_t i = 0; i < n; ++i) CHECK(got[i] == cpu::to_bf16(x.data()[i]));
        CHECK(got[n] == 0xdead);  // nothing written past n
    }
}

TEST_CASE("matmul precision: parse, scope, preferred") {
    CHECK(parse_matmul_precision("f32") == matmul_precision::f32);
    CHECK(parse_matmul_precision("bf16") == matmul_precision::bf16);
    CHECK(parse_matmul_precision("auto") == preferred_matmul_precision());
    CHECK_THROWS_WITH_AS(parse_matmul_precision("fp8", "--precision"), Contains("--precision: unknown precision 'fp8'"), usage_error);
    CHECK(active_matmul_precision() == matmul_precision::f32);  // the library default
    {
        matmul_precision_scope scope(matmul_precision::bf16);
        CHECK(active_matmul_precision() == matmul_precision::bf16);
    }
    CHECK(active_matmul_precision() == matmul_precision::f32);
    MESSAGE("native bf16 on this CPU: ", std::string(cpu_has_native_bf16() ? "yes" : "no"));
}

/// The k-groups of a single f32 product's fixed grid (1: output tiles only).
static index_t grid_k_groups(const gemm_args& g) { return cpu::grid_of<float, float>(g).groups; }

// bf16 precision: every float GEMM shape class (batched and strided, broadcast, transposed,
// tiled, k-grouped) equals the exact product of the bf16-rounded operands up to f32
// accumulation, and differs from the f32 product by what the rounding explains; products
// with a vector operand stay f32.
TEST_CASE("GEMM bf16: bf16-rounded operands, f32 accumulation, on every path") {
    struct shape_case {
        const char* name;
        gemm_args g;
    };
    // (m, n, k, lda, ldb, ldc, batch, stride a/b/c) with padding; k-grouped: k >= 2 min_group_k, k >= 2 max(m, n);
    // tiled: m >= 128
    const std::vector<shape_case> cases{
        {"batched, padded, B shared", {false, false, 5, 7, 9, 11, 8, 10, 3, 5 * 11, 0, 5 * 10}},
        {"A^T B^T", {true, true, 6, 5, 8, 7, 9, 5, 1, 0, 0, 0}},
        {"tiled", {false, true, 260, 40, 24, 24, 24, 40, 1, 0, 0, 0}},
        {"tiled, A rounded in the tile tasks, padded", {false, false, 300, 40, 50, 53, 41, 41, 1, 0, 0, 0}},
        {"k-grouped", {true, false, 16, 12, 4500, 16, 12, 12, 1, 0, 0, 0}},
        {"k-grouped tiles, padded", {true, false, 300, 12, 6300, 301, 14, 13, 1, 0, 0, 0}},
        {"k-grouped, larger output", {true, false, 80, 60, 4200, 80, 60, 60, 1, 0, 0, 0}},
        {"k-grouped, one tile (a weight gradient: dense A^T and B, C padded)", {true, false, 130, 140, 4100, 130, 140, 141, 1, 0, 0, 0}},
        // vector operands stay f32 (depthlab::vector_product)
        {"vector: n = 1", {false, true, 300, 1, 256, 256, 256, 1, 1, 0, 0, 0}},
        {"vector: m = 1, k-grouped", {true, false, 1, 256, 2000, 1, 256, 256, 1, 0, 0, 0}},
        {"outer product: k = 1", {false, false, 300, 256, 1, 1, 256, 256, 1, 0, 0, 0}},
        {"outer batch", {false, false, 4, 6, 8, 8, 6, 6, 2, 32, 48, 24, 3, 64, 96, 48}},
    };
    Generator gen(9);
    for (const auto& sc : cases) {
        const std::string name = sc.name;
        CAPTURE(name);
        const gemm_args& g = sc.g;
        if (name.starts_with("k-grouped")) REQUIRE(grid_k_groups(g) > 1);  // (the path really runs)
        const cpu::tile_grid bf16_grid = cpu::grid_of<float, cpu::bf16_bits>(g);
        if (name.find("one tile") != std::string::npos) REQUIRE((bf16_grid.rows == 1 && bf16_grid.cols == 1 && bf16_grid.groups == 4));
        if (name.find("tile tasks") != std::string::npos) REQUIRE(cpu::rows_of_a_in_tiles<cpu::bf16_bits>(g, nullptr));
        const index_t nb = g.batch * g.batch2;
        const auto extent = [&](index_t rows, index_t ld, index_t s, index_t s2) {
            return (g.batch2 - 1) * s2 + (g.batch - 1) * s + rows * ld;
        };
        const auto A = Tensor<float>::randn({extent(g.trans_a ? g.k : g.m, g.lda, g.stride_a, g.stride_a2)}, gen);
        const auto Bm = Tensor<float>::randn({extent(g.trans_b ? g.n : g.k, g.ldb, g.stride_b, g.stride_b2)}, gen);
        auto C = Tensor<float>::randn({extent(g.m, g.ldc, g.stride_c, g.stride_c2)}, gen);
        const auto C0 = C.to_vector();
        const float alpha = 0.5f, beta = 1.5f;
        {
            matmul_precision_scope bf16(matmul_precision::bf16);
            primitives<backend::cpu>::gemm<float>(g, alpha, A.data(), Bm.data(), beta, C.data());
        }
        const auto cv = C.to_vector();
        double worst_rounded = 0, worst_f32 = 0;
        for (index_t e = 0; e < nb; ++e) {
            const index_t i = e % g.batch, j = e / g.batch;
            const float* a = A.data() + j * g.stride_a2 + i * g.stride_a;
            const float* b = Bm.data() + j * g.stride_b2 + i * g.stride_b;
            const index_t c0 = j * g.stride_c2 + i * g.stride_c;
            for (index_t m = 0; m < g.m; ++m)
                for (index_t n = 0; n < g.n; ++n) {
                    double rounded = 0, exact = 0, magnitude = 0;
                    for (index_t k = 0; k < g.k; ++k) {
                        const float av = a[g.trans_a ? k * g.lda + m : m * g.lda + k], bv = b[g.trans_b ? n * g.ldb + k : k * g.ldb + n];
                        rounded += double(cpu::round_to_bf16(av)) * double(cpu::round_to_bf16(bv));
                        exact += double(av) * double(bv);
                        magnitude += std::abs(double(av) * double(bv));
                    }
                    const index_t at = c0 + m * g.ldc + n;
                    const double base = beta * C0[at], got = cv[at];
                    const double scale = std::abs(alpha) * magnitude + std::abs(base);
                    worst_rounded = std::max(worst_rounded, std::abs(got - (alpha * rounded + base)) / scale);
                    worst_f32 = std::max(worst_f32, std::abs(got - (alpha * exact + base)) / scale);
                }
        }
        if (depthlab::vector_product(g)) {
            CHECK(worst_f32 < 1e-6);  // not rounded: an f32 product
            continue;
        }
        CHECK(worst_rounded < 1e-5);  // f32 accumulation of the exact bf16 products
        CHECK(worst_f32 > 1e-4);      // and the operands really were rounded (f32 would be ~1e-7)
        CHECK(worst_f32 < 1e-2);      // by no more than bf16's 2^-8
    }
}

// gemm_bias (a linear layer's forward): C = op(A) op(B) + bias in every row, on every path
// (small, tiled, k-grouped; f32, bf16 and double through Eigen), C never read (it starts as
// NaN), row padding never written, and batches refused.
TEST_CASE_TEMPLATE("GEMM with a bias epilogue: every path writes the product plus the bias", T, float, double) {
    struct bias_case {
        const char* name;
        gemm_args g;
    };
    const std::vector<bias_case> cases{
        {"small, padded", {false, true, 5, 7, 9, 9, 9, 10}},
        {"A^T B", {true, false, 6, 5, 8, 6, 5, 5}},
        {"tiled", {false, true, 300, 600, 24, 24, 24, 600}},
        {"k-grouped", {true, false, 16, 12, 4500, 16, 12, 12}},
        {"k-grouped tiles, padded", {true, false, 300, 12, 6300, 301, 14, 13}},
    };
    const T nan = std::numeric_limits<T>::quiet_NaN();
    Generator gen(11);
    for (const auto& bc : cases)
        for (const bool bf16 : {false, true}) {
            if (bf16 && !std::is_same_v<T, float>) continue;
            const std::string name = bc.name;
            CAPTURE(name);
            CAPTURE(bf16);
            const gemm_args& g = bc.g;
            if (name.starts_with("k-grouped")) REQUIRE(grid_k_groups(g) > 1);
            const auto A = Tensor<T>::randn({(g.trans_a ? g.k : g.m) * g.lda}, gen);
            const auto Bm = Tensor<T>::randn({(g.trans_b ? g.n : g.k) * g.ldb}, gen);
            const auto bias = Tensor<T>::randn({g.n}, gen);
            auto C = Tensor<T>::full({g.m * g.ldc}, nan);
            {
                matmul_precision_scope precision(bf16 ? matmul_precision::bf16 : matmul_precision::f32);
                primitives<backend::cpu>::gemm_bias<T>(g, A.data(), Bm.data(), bias.data(), C.data());
            }
            const auto round = [&](T v) { return bf16 ? static_cast<T>(cpu::round_to_bf16(static_cast<float>(v))) : v; };
            double worst = 0;
            bool padding_untouched = true;
            for (index_t m = 0; m < g.m; ++m) {
                for (index_t n = 0; n < g.n; ++n) {
                    double s = 0, magnitude = 0;
                    for (index_t k = 0; k < g.k; ++k) {
                        const double p = double(round(A.data()[g.trans_a ? k * g.lda + m : m * g.lda + k])) *
                                         double(round(Bm.data()[g.trans_b ? n * g.ldb + k : k * g.ldb + n]));
                        s += p;
                        magnitude += std::abs(p);
                    }
                    const double want = s + bias.data()[n];
                    const double err = std::abs(double(C.data()[m * g.ldc + n]) - want) / (magnitude + 1);
                    if (!(err <= worst)) worst = err;  // (NaN kept: std::max would drop it)
                }
                for (index_t n = g.n; n < g.ldc; ++n) padding_untouched = padding_untouched && std::isnan(C.data()[m * g.ldc + n]);
            }
            CHECK(worst < (std::is_same_v<T, float> ? 1e-5 : 1e-13));  // (NaN, and a failure, if C was read)
            CHECK(padding_untouched);
        }
    auto C = Tensor<T>::zeros({2 * 4 * 4});
    const auto X = Tensor<T>::zeros({2 * 4 * 4}), bias = Tensor<T>::zeros({4});
    CHECK_THROWS_WITH_AS(primitives<backend::cpu>::gemm_bias<T>(gemm_args{.m = 4, .n = 4, .k = 4, .lda = 4, .ldb = 4, .ldc = 4,
                                                                          .batch = 2, .stride_a = 16, .stride_b = 16,
                                                                          .stride_c = 16}, X.data(),
                                                                X.data(), bias.data(), C.data()),
                         Contains("gemm_bias: one product (batch 1), got batch 2"), shape_error);
}

/// Hands blocks of these shapes, full of NaN, back to the cache: the next allocations of those
/// sizes start with NaN, so a backward that reads a buffer it should only write shows.
namespace {
void fill_cache_with_nan(const std::vector<Shape>& shapes) {
    std::vector<Tensor<float>> blocks;
    for (const auto& shape : shapes) blocks.push_back(Tensor<float>::full(shape, std::numeric_limits<float>::quiet_NaN()));
}
}  // namespace

// A GEMM that produces a gradient first writes it (beta 0) into a buffer that was never
// zero-filled: a cached block that held NaN must not leak into the gradients.
TEST_CASE("autodiff: gradients written by their first GEMM ignore what their buffer held") {
    Generator gen(12);
    const auto x0 = Tensor<float>::randn({33, 20}, gen), w0 = Tensor<float>::randn({40, 20}, gen), b0 = Tensor<float>::randn({40}, gen);
    const auto grads = [&] {
        auto x = Var<float>::parameter(x0.clone()), w = Var<float>::parameter(w0.clone()), b = Var<float>::parameter(b0.clone());
        sum(linear(x, w, b)).backward();
        // and a matmul whose both operands are one variable: written, then accumulated
        auto m = Var<float>::parameter(x0.clone());
        sum(matmul(m, m, false, true)).backward();
        return std::vector<std::vector<float>>{x.grad().to_vector(), w.grad().to_vector(), b.grad().to_vector(), m.grad().to_vector()};
    };
    const auto clean = grads();
    fill_cache_with_nan({{33, 20}, {40, 20}, {33, 20}, {40, 20}});
    const auto again = grads();
    CHECK(again == clean);
    // against the closed forms: dx = 1 W (rows of column sums of W), dW = 1^T x, dm = 2 * 1 m (sum over rows, twice)
    for (index_t j = 0; j < 20; ++j) {
        double col = 0, xs = 0;
        for (index_t o = 0; o < 40; ++o) col += w0(o, j);
        for (index_t r = 0; r < 33; ++r) xs += x0(r, j);
        CHECK(clean[0][j] == doctest::Approx(col).epsilon(1e-5));
        CHECK(clean[1][j] == doctest::Approx(xs).epsilon(1e-5));
        CHECK(clean[3][j] == doctest::Approx(2 * xs).epsilon(1e-5));
    }
    for (float v : clean[2]) CHECK(v == 33.0f);
}

// The elementwise backwards that cover their parent whole (add, mul, scale, reshape,
// interpolate_rows) write the first gradient to arrive the same way.
TEST_CASE("autodiff: gradients written by their first elementwise backward ignore what their buffer held") {
    Generator gen(14);
    const auto a0 = Tensor<float>::randn({33, 20}, gen), b0 = Tensor<float>::randn({33, 20}, gen);
    const auto w0 = Tensor<float>::randn({33}, gen), v0 = Tensor<float>::randn({20}, gen);
    const auto grads = [&] {
        auto a = Var<float>::parameter(a0.clone()), b = Var<float>::parameter(b0.clone());
        auto w = Var<float>::parameter(w0.clone()), v = Var<float>::parameter(v0.clone());
        // a and b reach the loss by several ops each (one by both arguments): the first
        // gradient to arrive is written, the others added
        const auto loss = sum(mul(a, b)) + sum(scale(a, 3.0f)) + sum(reshape(b, {660})) + sum(interpolate_rows(a, b, w)) +
                          sum(add(a, a)) + sum(interpolate_rows(b, b, w)) + sum(mul(a, v));
        loss.backward();
        return std::vector<std::vector<float>>{a.grad().to_vector(), b.grad().to_vector(), w.grad().to_vector(), v.grad().to_vector()};
    };
    const auto clean = grads();
    std::vector<Shape> shapes(12, Shape{33, 20});
    shapes.insert(shapes.end(), {Shape{33}, Shape{20}});
    fill_cache_with_nan(shapes);
    const auto again = grads();
    CHECK(again == clean);
    // closed forms: da = b + 3 + (1 - w_r) + 2 + v_c, db = a + 1 + w_r + 1, dw_r = sum_c (b - a), dv_c = sum_r a
    for (index_t r = 0; r < 33; ++r) {
        double diff = 0;
        for (index_t c = 0; c < 20; ++c) {
            const std::size_t i = static_cast<std::size_t>(r * 20 + c);
            CHECK(clean[0][i] == doctest::Approx(b0(r, c) + 3 + (1 - w0(r)) + 2 + v0(c)).epsilon(1e-5));
            CHECK(clean[1][i] == doctest::Approx(a0(r, c) + 1 + w0(r) + 1).epsilon(1e-5));
            diff += b0(r, c) - a0(r, c);
        }
        CHECK(clean[2][static_cast<std::size_t>(r)] == doctest::Approx(diff).epsilon(1e-4));
    }
    for (index_t c = 0; c < 20; ++c) {
        double col = 0;
        for (index_t r = 0; r < 33; ++r) col += a0(r, c);
        CHECK(clean[3][static_cast<std::size_t>(c)] == doctest::Approx(col).epsilon(1e-4));
    }
}

// matmul's batch is the batched operand's leading extents: an empty batch gives an empty
// result and zero gradients (it once became a batch of 1 and wrote past the result), and an
// empty inner dimension gives zeros.
TEST_CASE("matmul: empty batches and empty inner dimensions") {
    Generator gen(13);
    auto a = Var<float>::parameter(Tensor<float>::randn({3, 4}, gen));
    auto b = Var<float>::parameter(Tensor<float>::empty({0, 4, 5}));
    const auto c = matmul(a, b);
    CHECK(c.shape() == Shape{0, 3, 5});
    sum(c).backward();
    CHECK(a.grad().to_vector() == std::vector<float>(12, 0.0f));
    CHECK(b.grad().numel() == 0);
    auto p = Var<float>::parameter(Tensor<float>::empty({2, 3, 0}));
    auto q = Var<float>::parameter(Tensor<float>::empty({2, 0, 4}));
    const auto r = matmul(p, q);
    CHECK(r.shape() == Shape{2, 3, 4});
    CHECK(r.value().to_vector() == std::vector<float>(24, 0.0f));
}

// k = 0 (an empty sum) in float does not reach Eigen when oneDNN is there (cpu::gemm_empty_k):
// the bias is broadcast, beta scales C, beta 0 clears it.
TEST_CASE("gemm: an empty inner dimension in float gives the bias, beta C or zeros") {
    const float bias[3] = {1.0f, -2.0f, 0.5f};
    std::vector<float> c(6, 7.0f);
    cpu::gemm_bias(gemm_args{.m = 2, .n = 3, .k = 0, .lda = 1, .ldb = 3, .ldc = 3}, static_cast<const float*>(nullptr),
                   static_cast<const float*>(nullptr), bias, c.data());
    CHECK(c == std::vector<float>{1.0f, -2.0f, 0.5f, 1.0f, -2.0f, 0.5f});
    cpu::gemm(gemm_args{.m = 2, .n = 3, .k = 0, .lda = 1, .ldb = 3, .ldc = 3}, 1.0f, static_cast<const float*>(nullptr),
              static_cast<const float*>(nullptr), 2.0f, c.data());
    CHECK(c == std::vector<float>{2.0f, -4.0f, 1.0f, 2.0f, -4.0f, 1.0f});
    cpu::gemm(gemm_args{.m = 2, .n = 3, .k = 0, .lda = 1, .ldb = 3, .ldc = 3}, 1.0f, static_cast<const float*>(nullptr),
              static_cast<const float*>(nullptr), 0.0f, c.data());
    CHECK(c == std::vector<float>(6, 0.0f));
}

TEST_CASE("autodiff: tied weights accumulate, DAGs, retain_grad, no_grad") {
    Generator gen(9);
    using V = Var<double>;
    auto W = V::parameter(Tensor<double>::randn({4, 4}, gen));
    auto x = V::constant(Tensor<double>::randn({3, 4}, gen));
    // the same weight applied twice (a tied 2-layer stack)
    auto h1 = linear(x, W);
    h1.retain_grad();
    auto h2 = linear(depthlab::tanh(h1), W);
    auto loss = sum(mul(h2, h2));
    loss.backward();
    const auto g_tied = W.grad().to_vector();
    CHECK(h1.grad().defined());  // kept on request
    // the gradient equals the sum of the two uses' gradients, computed separately
    auto W1 = V::parameter(W.value().clone()), W2 = V::parameter(W.value().clone());
    auto l2 = sum(mul(linear(depthlab::tanh(linear(x, W1)), W2), linear(depthlab::tanh(linear(x, W1)), W2)));
    l2.backward();
    const auto g1 = W1.grad().to_vector(), g2 = W2.grad().to_vector();
    for (std::size_t i = 0; i < g_tied.size(); ++i) CHECK(g_tied[i] == doctest::Approx(g1[i] + g2[i]).epsilon(1e-12));
    {
        no_grad guard;
        auto y = linear(x, W);
        CHECK(!y.requires_grad());
        CHECK_THROWS_WITH_AS(sum(y).backward(), Contains("does not depend on any parameter"), usage_error);
    }
    CHECK_THROWS_WITH_AS(h2.backward(), Contains("needs a scalar output or an explicit seed, got shape (3, 4)"), shape_error);
}

TEST_CASE("autodiff: reshape hands its gradient buffer to its input only when nothing else holds it") {
    Generator gen(4);
    using V = Var<double>;
    auto x = V::parameter(Tensor<double>::randn({2, 6}, gen));
    const auto w = Tensor<double>::randn({3, 4}, gen);
    // the only gradient x gets comes through the reshape: handed over, in x's shape
    sum(mul(reshape(x, {3, 4}), V::constant(w))).backward();
    CHECK(x.grad().shape() == Shape{2, 6});
    CHECK(x.grad().to_vector() == w.to_vector());
    // a retained gradient of the reshape stays its own: x's is a separate buffer
    x.zero_grad();
    auto r = reshape(x, {3, 4});
    r.retain_grad();
    sum(mul(r, V::constant(w))).backward();
    CHECK(!x.grad().shares_storage(r.grad()));
    x.grad().fill_(0.0);
    CHECK(r.grad().to_vector() == w.to_vector());
    // x used directly too: both gradients add up, whichever reaches x first
    x.zero_grad();
    sum(add(mul(reshape(x, {3, 4}), V::constant(w)), reshape(scale(x, 2.0), {3, 4}))).backward();
    for (std::size_t i = 0; i < 12; ++i) CHECK(x.grad().to_vector()[i] == doctest::Approx(w.to_vector()[i] + 2.0));
}

TEST_CASE("autodiff: a second backward through a freed graph is an error; retain_graph keeps it") {
    Generator gen(3);
    using V = Var<double>;
    auto W = V::parameter(Tensor<double>::randn({3, 3}, gen));
    const auto x = V::constant(Tensor<double>::randn({2, 3}, gen));
    auto loss = sum(mul(linear(x, W), linear(x, W)));
    loss.backward();
    const auto once = W.grad().to_vector();
    // PyTorch raises here too; before, the gradient silently doubled
    CHECK_THROWS_WITH_AS(loss.backward(), Contains("backward: the graph through sum (shape ()) was freed by an earlier backward()"),
                         usage_error);
    CHECK(W.grad().to_vector() == once);  // the failed call changed nothing
    // a sub-graph shared by two losses: the second loss fails at the shared node
    auto h = depthlab::tanh(linear(x, W));
    auto l1 = sum(h), l2 = sum(mul(h, h));
    l1.backward();
    CHECK_THROWS_WITH_AS(l2.backward(), Contains("graph through tanh (shape (2, 3)) was freed"), usage_error);

    // retained: two backward() calls add up, exactly twice one call
    W.zero_grad();
    auto kept = sum(mul(linear(x, W), linear(x, W)));
    kept.backward(retain_graph);
    kept.backward();
    const auto twice = W.grad().to_vector();
    for (std::size_t i = 0; i < once.size(); ++i) CHECK(twice[i] == doctest::Approx(2 * once[i]).epsilon(1e-14));
    CHECK_THROWS_AS(kept.backward(), usage_error);  // the second call freed it
}

TEST_CASE("autodiff: a Var prints its shape, op and values") {
    auto W = Var<double>::parameter(Tensor<double>::ones({2, 2}));
    std::ostringstream os;
    os << W;
    CHECK(os.str().rfind("Var(2, 2), op leaf, requires_grad\nTensor(2, 2) cpu\n  1 1\n  1 1\n", 0) == 0);
    os.str("");
    os << sum(W);
    CHECK(os.str().find("op sum, requires_grad") != std::string::npos);
    os.str("");
    os << Var<double>();
    CHECK(os.str() == "Var (undefined)\n");
}

TEST_CASE("bad input: errors name the op and the shapes") {
    Generator gen(1);
    using V = Var<float>;
    auto a = V::parameter(Tensor<float>::randn({2, 3}, gen));
    auto b = V::parameter(Tensor<float>::randn({4, 5}, gen));
    CHECK_THROWS_WITH_AS(matmul(a, b), Contains("matmul: inner dimensions differ: (2, 3) x (4, 5)"), shape_error);
    CHECK_THROWS_WITH_AS(linear(a, b), Contains("linear: input (2, 3) does not fit weight (4, 5)"), shape_error);
    CHECK_THROWS_WITH_AS(add(a, b), Contains("add: shapes (2, 3) and (4, 5) do not broadcast"), shape_error);
    CHECK_THROWS_WITH_AS(bias(a, V::constant(Tensor<float>::zeros({2}))), Contains("bias: bias (2,) does not fit input (2, 3)"),
                         shape_error);
    const std::vector<std::int64_t> bad_target{0, 3};
    CHECK_THROWS_WITH_AS(cross_entropy(a, bad_target), Contains("cross_entropy: target 3 at row 1 out of range [0, 3)"), index_error);
    const std::vector<std::int64_t> one_target{0};
    CHECK_THROWS_WITH_AS(cross_entropy(a, one_target), Contains("1 targets for logits (2, 3)"), shape_error);
    const std::vector<std::int64_t> bad_ids{0, 7};
    CHECK_THROWS_WITH_AS(embedding(b, bad_ids, {2}), Contains("embedding: id 7 at position 1 out of range [0, 4)"), index_error);
    CHECK_THROWS_WITH_AS(softmax(a, 1.0f, Tensor<float>::zeros({3, 3})), Contains("softmax: mask (3, 3) does not broadcast to scores (2, 3)"),
                         shape_error);
    CHECK_THROWS_WITH_AS(concat(std::vector{a, b}, 0), Contains("concat: shape (4, 5) does not match (2, 3)"), shape_error);
    CHECK_THROWS_WITH_AS(layer_norm(a, b, b), Contains("layer_norm: input (2, 3), gamma (4, 5)"), shape_error);
    CHECK_THROWS_WITH_AS(split(a, {1, 1}, 1), Contains("split: sizes add up to 2 but axis 1 of (2, 3) has 3"), shape_error);
    CHECK_THROWS_AS(dropout(a, 1.5f, gen), usage_error);
    auto nan_logits = V::parameter(Tensor<float>::from({1, 2}, {NAN, 0.f}));
    CHECK_THROWS_WITH_AS(cross_entropy(nan_logits, one_target), Contains("cross_entropy: non-finite loss"), numeric_error);
}

TEST_CASE("host allocator: aligned, size classes, blocks reused") {
    using cache = depthlab::detail::host_block_cache;
    CHECK(cache::size_class(1) == 64);
    CHECK(cache::size_class(4096) == 4096);
    CHECK(cache::size_class(4097) == 4096 + 512);
    CHECK(cache::size_class((1 << 20) + 1) == (1 << 20) + (1 << 17));
    for (std::size_t bytes : {std::size_t{100}, std::size_t{5000}, std::size_t{3} << 20}) {
        const std::size_t cls = cache::size_class(bytes);
        CHECK(cls >= bytes);
        CHECK(cls <= bytes + bytes / 8 + 64);
    }
    const float* first;
    {
        auto t = Tensor<float>::empty({1 << 20});
        first = t.data();
        CHECK(reinterpret_cast<std::uintptr_t>(first) % 64 == 0);
    }
    auto again = Tensor<float>::empty({(1 << 20) - 10});  // same size class: the freed block comes back
    CHECK(again.data() == first);
    // blocks of >= 2 MiB come straight from the system on a huge-page boundary, whole and
    // writable to their last byte, and go back to it
    using source = depthlab::detail::host_memory_source;
    for (std::size_t bytes : {source::huge_page, source::huge_page + 1, (std::size_t{5} << 20) + 12345}) {
        auto* p = static_cast<unsigned char*>(source::allocate(bytes));
        REQUIRE(p != nullptr);
        CHECK(reinterpret_cast<std::uintptr_t>(p) % source::huge_page == 0);
        p[0] = 1;
        p[bytes - 1] = 2;
        CHECK(p[0] + p[bytes - 1] == 3);
        source::release(p, bytes);
    }
}

TEST_CASE("host allocator: the cache stays within twice the peak working set when shapes keep changing") {
    depthlab::detail::host_block_cache c;  // a private cache, not the process-wide one
    const std::size_t MiB = std::size_t{1} << 20;
    // 200 batches of different sizes (each a new size class), 3 blocks live at once: an
    // uncapped cache would end up holding every size ever seen (~2.4 GiB)
    for (std::size_t i = 0; i < 200; ++i) {
        const std::size_t bytes = 2 * MiB + i * 64 * 1024;
        void* a = c.get(bytes);
        void* b = c.get(bytes + 1024);
        void* d = c.get(bytes / 2);
        c.put(a, bytes);
        c.put(b, bytes + 1024);
        c.put(d, bytes / 2);
        // the cap: the working set plus the slack learnt from misses, at most twice it
        CHECK(c.cached_bytes() <= 2 * std::max(c.peak_live_bytes(), depthlab::detail::host_block_cache::min_cap));
    }
    CHECK(c.peak_live_bytes() < 40 * MiB);
    CHECK(c.cached_bytes() <= 128 * MiB);
    // a steady shape is served from the cache (emptied first: a full cache frees what it
    // cannot keep, and then the block that comes back is a new one)
    c.release_all();
    void* x = c.get(5 * MiB);
    c.put(x, 5 * MiB);
    void* y = c.get(5 * MiB);
    CHECK(y == x);
    c.put(y, 5 * MiB);  // the block actually held: never put one back twice
}

TEST_CASE("host allocator: a repeating step reaches a steady state without fresh blocks") {
    // A step whose peak (two 60 MiB blocks) finds a 30 MiB block, too small to serve them,
    // waiting in the cache: a cap of exactly the peak gave blocks back and mapped them again
    // every step (51 fresh blocks in 25 steps instead of 4).
    depthlab::detail::host_block_cache c;
    const std::size_t MiB = std::size_t{1} << 20;
    const auto step = [&] {
        void* x = c.get(30 * MiB);
        c.put(x, 30 * MiB);
        void* y = c.get(60 * MiB);
        void* z = c.get(60 * MiB);
        c.put(y, 60 * MiB);
        c.put(z, 60 * MiB);
    };
    for (int i = 0; i < 5; ++i) step();
    const std::size_t warm = c.system_allocations();
    for (int i = 0; i < 20; ++i) step();
    CHECK(c.system_allocations() == warm);
    CHECK(c.cached_bytes() <= 2 * c.peak_live_bytes());  // the learnt slack stays bounded
}

#if defined(DEPTHLAB_HAVE_ONEDNN)
TEST_CASE("oneDNN primitive cache: bounded, least recently used evicted, results unchanged") {
    auto& cache = depthlab::cpu::onednn::primitive_cache::instance();
    const std::size_t saved = cache.capacity();
    cache.set_capacity(4);
    Generator gen(3);
    const std::size_t made_before = cache.made();
    // ten shapes, twice: every product stays right while the cache holds at most four
    for (int round = 0; round < 2; ++round)
        for (index_t m = 1; m <= 10; ++m) {
            const auto a = Tensor<float>::randn({m, 7}, gen), b = Tensor<float>::randn({7, 5}, gen);
            const auto c = matmul(Var<float>::constant(a), Var<float>::constant(b)).value();
            for (index_t i = 0; i < m; ++i)
                for (index_t j = 0; j < 5; ++j) {
                    double want = 0;
                    for (index_t k = 0; k < 7; ++k) want += double(a(i, k)) * b(k, j);
                    CHECK(c(i, j) == doctest::Approx(want).epsilon(1e-5));
                }
            CHECK(cache.size() <= 4);
        }
    CHECK(cache.made() - made_before == 20);  // ten shapes cycling through four entries: every product made anew
    // with room for all ten, the second round makes none
    cache.set_capacity(64);
    const std::size_t made_roomy = cache.made();
    for (int round = 0; round < 2; ++round)
        for (index_t m = 11; m <= 20; ++m)
            (void)matmul(Var<float>::constant(Tensor<float>::randn({m, 7}, gen)), Var<float>::constant(Tensor<float>::randn({7, 5}, gen)));
    CHECK(cache.made() - made_roomy == 10);
    CHECK(cache.making_seconds() > 0);
    cache.set_capacity(saved);
}
#endif

// The CPU's primitives (defined in a header, host_primitives) have exactly the signatures of
// backend/primitive_list.hpp, the list the CUDA backend is declared and instantiated from: a
// primitive changed on one side only fails here, at compile time, not at the CUDA link.
namespace test_core_primitive_list {
struct listed {
#define TEST_CORE_DECLARE(name, params) \
    template <class T>                  \
    static void name params;
    DEPTHLAB_PRIMITIVES(TEST_CORE_DECLARE)
#undef TEST_CORE_DECLARE
};
#define TEST_CORE_SAME_SIGNATURE(name, params)                                                                                  \
    static_assert(std::is_same_v<decltype(&listed::name<float>), decltype(&primitives<backend::cpu>::name<float>)> &&          \
                      std::is_same_v<decltype(&listed::name<double>), decltype(&primitives<backend::host_device>::name<double>)>, \
                  "primitives<cpu> and backend/primitive_list.hpp differ on " #name);
DEPTHLAB_PRIMITIVES(TEST_CORE_SAME_SIGNATURE)
#undef TEST_CORE_SAME_SIGNATURE
}  // namespace test_core_primitive_list
