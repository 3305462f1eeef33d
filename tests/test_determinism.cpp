// Determinism: a whole training step (forward, backward, clipping, optimiser update) gives
// the same bits at 1 and at 2 threads, for the ACT-ALBERT (LAMB, ponder cost) and
// the translation model (Adam, label smoothing, dropout). Every reduction — sums, norms,
// losses, LAMB's trust ratios, the k-reduction of weight-gradient GEMMs — must split its
// work by the data, never by the thread count. The shapes are large enough that every
// parallel primitive really splits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "harness.hpp"
#include "random_corpus.hpp"

using namespace depthlab;

namespace {

#if defined(_OPENMP)
constexpr bool threaded_build = true;
#else
constexpr bool threaded_build = false;  // (clang -fopenmp=libgomp: depthlab's loops are serial)
#endif

/// Every parameter's bits, in name order.
template <class M>
std::vector<std::uint32_t> parameter_bits(const M& model) {
    std::vector<std::uint32_t> bits;
    for (const auto& [name, p] : model.named_parameters()) {
        const std::vector<float> v = p.value().to_vector();
        const std::size_t at = bits.size();
        bits.resize(at + v.size());
        std::memcpy(bits.data() + at, v.data(), v.size() * sizeof(float));
    }
    return bits;
}

/// Two training steps of a small ACT-ALBERT with `threads` threads; the parameters after.
std::vector<std::uint32_t> albert_steps(int threads) {
    const scoped_num_threads use(threads);
    nn::albert_config cfg;
    cfg.vocab = 1200;
    cfg.embed = 32;
    cfg.max_len = 64;
    cfg.depth = 4;
    cfg.layer.dim = 64;
    cfg.layer.heads = 4;
    cfg.layer.ff_dim = 128;
    cfg.layer.dropout = cfg.layer.attention_dropout = 0;  // (as ALBERT; the compact path has none)
    halting::ActAlbert<float, backend::cpu, halting::act> model(cfg, {.max_iterations = 4}, 5);
    model.train();
    optim::Lamb<float> lamb(model.named_parameters(), {.lr = 1e-3});
    data::albert_data_config dcfg;
    dcfg.max_len = 64;
    dcfg.vocab = cfg.vocab;
    data::albert_sampler sampler(depthlab_test::random_albert_corpus(3, 60, cfg.vocab), dcfg, 9);
    for (int step = 0; step < 2; ++step) {
        const data::albert_batch b = sampler.next(24);
        const auto l = model.losses(b);
        lamb.zero_grad();
        add(add(l.mlm, l.sop), scale(l.encoded.ponder, 1e-3f)).backward();
        optim::clip_grad_norm(lamb.parameters(), 1.0);
        lamb.step();
    }
    return parameter_bits(model);
}

/// Two training steps of a small encoder-decoder with `threads` threads.
std::vector<std::uint32_t> seq2seq_steps(int threads) {
    const scoped_num_threads use(threads);
    nn::seq2seq_config cfg = depthlab_test::tiny_seq2seq(600, 40, 64, 4, 128);
    cfg.layer.dropout = cfg.layer.attention_dropout = 0.1;
    nn::Seq2SeqTransformer<float> model(cfg, 3);
    model.train();
    optim::Adam<float> adam(model.named_parameters(), {.lr = 1e-3});
    Generator data_rng(4);
    for (int step = 0; step < 2; ++step) {
        const auto b = data::reverse_task_batch(data_rng, 48, 32, 600);
        auto loss = cross_entropy(model.decode(model.encode(b.src), b.src, b.tgt_in), b.tgt_out, -100, 0.1f);
        adam.zero_grad();
        loss.backward();
        optim::clip_grad_norm(adam.parameters(), 1.0);
        adam.step();
    }
    return parameter_bits(model);
}

}  // namespace

TEST_CASE("determinism: an ACT-ALBERT training step gives the same bits at 1 and 2 threads") {
    if (!threaded_build) return;
    const auto one = albert_steps(1), two = albert_steps(2);
    REQUIRE(one.size() == two.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < one.size(); ++i) differ += one[i] != two[i];
    CHECK_MESSAGE(differ == 0, differ, " of ", one.size(), " parameter values differ");
}

TEST_CASE("determinism: a translation-model training step gives the same bits at 1 and 2 threads") {
    if (!threaded_build) return;
    const auto one = seq2seq_steps(1), two = seq2seq_steps(2);
    REQUIRE(one.size() == two.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < one.size(); ++i) differ += one[i] != two[i];
    CHECK_MESSAGE(differ == 0, differ, " of ", one.size(), " parameter values differ");
}

TEST_CASE("determinism: sum() has the same bits for any thread count") {
    Generator g(1);
    const auto x = Tensor<float>::randn({1 << 20}, g);
    float sums[3];
    for (int t = 1; t <= 3; ++t) {
        const scoped_num_threads use(t);
        primitives<backend::cpu>::sum_to(x.numel(), x.data(), 1.0f, &sums[t - 1]);
    }
    CHECK(std::memcmp(&sums[0], &sums[1], sizeof(float)) == 0);
    CHECK(std::memcmp(&sums[0], &sums[2], sizeof(float)) == 0);
}

// A single product is cut into a grid of output tiles that depends on its shape only; an odd
// grid gets one more row of tiles (so that two threads share the work evenly). Every grid —
// one tile, odd counts made even, the 8-tile cap, column tiles — gives the loop result, in
// f32 and in bf16, and the same bits at 1, 2 and 3 threads.
TEST_CASE("determinism: GEMM tile grids give the loop result and the same bits at 1, 2 and 3 threads") {
    Generator g(7);
    const index_t K = 48;
    for (const auto precision : {matmul_precision::f32, matmul_precision::bf16}) {
        const matmul_precision_scope scope(precision);
        for (const index_t M : {index_t{40}, index_t{64}, index_t{100}, index_t{200}, index_t{300}, index_t{450}, index_t{700},
                                index_t{1100}}) {
            for (const index_t N : {index_t{256}, index_t{600}}) {
                const auto A = Tensor<float>::randn({M, K}, g), Bm = Tensor<float>::randn({K, N}, g);
                std::vector<float> out[3];
                for (int t = 1; t <= 3; ++t) {
                    const scoped_num_threads use(t);
                    auto C = Tensor<float>::empty({M, N});
                    primitives<backend::cpu>::gemm<float>(gemm_args{.m = M, .n = N, .k = K, .lda = K, .ldb = N, .ldc = N},
                                                          1.0f, A.data(), Bm.data(), 0.0f,
                                                          C.data());
                    out[t - 1] = C.to_vector();
                }
                const auto a = A.to_vector(), b = Bm.to_vector();
                const auto operand = [&](float x) { return precision == matmul_precision::bf16 ? cpu::round_to_bf16(x) : x; };
                double worst = 0;
                for (index_t m = 0; m < M; m += 7)
                    for (index_t n = 0; n < N; ++n) {
                        double s = 0;
                        for (index_t k = 0; k < K; ++k) s += double(operand(a[m * K + k])) * double(operand(b[k * N + n]));
                        worst = std::max(worst, std::abs(s - out[0][m * N + n]));
                    }
                CAPTURE(M);
                CAPTURE(N);
                CAPTURE(to_string(precision));
                CHECK(worst < 1e-3);
                if (threaded_build) {
                    CHECK(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0);
                    CHECK(std::memcmp(out[0].data(), out[2].data(), out[0].size() * sizeof(float)) == 0);
                }
            }
        }
    }
}

// A weight gradient (A transposed, k the tokens) is cut into k-groups as well: row tiles and
// k-groups in f32, one tile and four k-groups under bf16 (cpu::grid_of). Both give the same
// bits at 1, 2 and 3 threads.
TEST_CASE("determinism: a weight gradient's k-groups give the same bits at 1, 2 and 3 threads") {
    Generator g(8);
    const gemm_args wgrad{.trans_a = true, .m = 130, .n = 140, .k = 4100, .lda = 130, .ldb = 140, .ldc = 140};
    REQUIRE(cpu::grid_of<float, float>(wgrad).groups > 1);
    REQUIRE(cpu::grid_of<float, cpu::bf16_bits>(wgrad).groups == 4);
    const auto A = Tensor<float>::randn({wgrad.k, wgrad.m}, g), Bm = Tensor<float>::randn({wgrad.k, wgrad.n}, g);
    for (const auto precision : {matmul_precision::f32, matmul_precision::bf16}) {
        const matmul_precision_scope scope(precision);
        std::vector<float> out[3];
        for (int t = 1; t <= 3; ++t) {
            const scoped_num_threads use(t);
            auto C = Tensor<float>::empty({wgrad.m, wgrad.n});
            primitives<backend::cpu>::gemm<float>(wgrad, 1.0f, A.data(), Bm.data(), 0.0f, C.data());
            out[t - 1] = C.to_vector();
        }
        CAPTURE(to_string(precision));
        if (threaded_build) {
            CHECK(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0);
            CHECK(std::memcmp(out[0].data(), out[2].data(), out[0].size() * sizeof(float)) == 0);
        }
    }
}
