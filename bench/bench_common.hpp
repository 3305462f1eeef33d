#pragma once
// Shared by bench_main.cpp (depthlab, oneDNN) and bench_libtorch.cpp (libtorch). Includes
// neither depthlab nor torch headers: the two translation units only meet through here.
//
// Benchmark names are <what>/<impl>/<shape>, e.g. matmul/onednn/4096x512x2048; Google
// Benchmark appends /real_time. scripts/bench_ratios.py groups runs by <what> and <shape>.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

namespace depthlab_bench {

/// A matmul problem: A (m, k) times B (k, n), float.
struct mm_shape {
    std::int64_t m, k, n;
    [[nodiscard]] std::string name() const {
        return std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
    }
    [[nodiscard]] double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n); }
};

inline const std::vector<mm_shape>& matmul_shapes() {
    static const std::vector<mm_shape> shapes{{4096, 512, 2048}, {4096, 1024, 256}};
    return shapes;
}

// Memory-bound kernels: elements of the GELU, (rows, cols) of softmax and layer norm.
inline constexpr std::int64_t gelu_n = 1048576;
inline constexpr std::int64_t dropout_n = 1048576;  // inverted dropout, p = 0.1, in training
inline constexpr std::int64_t softmax_rows = 4096, softmax_cols = 128;
inline constexpr std::int64_t layernorm_rows = 4096, layernorm_cols = 512;
// Cross-entropy forward + backward: the MLM loss of an albert_act step (batch 32 of 64
// tokens, 20% masked = 410 rows) over the 8 000-piece vocabulary, mean over rows.
inline constexpr std::int64_t cross_entropy_rows = 410, cross_entropy_classes = 8000;
inline std::int64_t cross_entropy_target(std::int64_t row) { return (row * 7919) % cross_entropy_classes; }

// Bytes each kernel moves per call (float): input read + output written; layer norm also
// reads gamma/beta and writes the per-row mean and rstd.
inline double gelu_bytes() { return 2.0 * 4.0 * gelu_n; }
inline double dropout_bytes() { return 2.0 * 4.0 * dropout_n; }
inline double softmax_bytes() { return 2.0 * 4.0 * softmax_rows * softmax_cols; }
inline double layernorm_bytes() {
    return 4.0 * (2.0 * layernorm_rows * layernorm_cols + 2.0 * layernorm_cols + 2.0 * layernorm_rows);
}
/// Forward reads the logits; backward reads them again and writes their gradient.
inline double cross_entropy_bytes() { return 3.0 * 4.0 * cross_entropy_rows * cross_entropy_classes; }

/// GFLOP/s: `flops` per iteration, reported per second (of real time with UseRealTime).
inline void set_gflops(benchmark::State& state, double flops) {
    state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
/// GB/s: `bytes` per iteration, decimal gigabytes.
inline void set_gbytes(benchmark::State& state, double bytes) {
    state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

/// One post-LN transformer encoder layer on a (b, s, d) batch: h heads, ff hidden units.
struct layer_shape {
    std::int64_t d, h, ff, b, s;
    [[nodiscard]] std::string name() const {
        return "d" + std::to_string(d) + "_h" + std::to_string(h) + "_ff" + std::to_string(ff) + "_b" + std::to_string(b) + "_s" +
               std::to_string(s);
    }
    [[nodiscard]] double tokens() const { return static_cast<double>(b * s); }
    /// Forward FLOPs: QKV (6d^2) + output projection (2d^2) + feed-forward (4 d ff) per
    /// token, plus scores and probabilities x values (4 s d) per token.
    [[nodiscard]] double forward_flops() const {
        const double D = static_cast<double>(d), F = static_cast<double>(ff), S = static_cast<double>(s);
        return tokens() * (8.0 * D * D + 4.0 * D * F + 4.0 * S * D);
    }
};
inline const std::vector<layer_shape>& layer_shapes() {
    static const std::vector<layer_shape> shapes{{256, 4, 1024, 32, 128}, {512, 8, 2048, 16, 128}};
    return shapes;
}
/// tokens/s and GFLOP/s counters of a layer benchmark (train: forward + backward = 3x).
inline void set_layer_counters(benchmark::State& state, const layer_shape& l, bool train) {
    state.counters["tokens/s"] = benchmark::Counter(l.tokens(), benchmark::Counter::kIsIterationInvariantRate);
    set_gflops(state, l.forward_flops() * (train ? 3.0 : 1.0));
}

#if defined(DEPTHLAB_BENCH_HAVE_LIBTORCH)
/// Registers matmul/libtorch/... and the libtorch baselines of the memory-bound kernels;
/// sets libtorch's intra-op threads to `threads`. Returns context lines (key, value).
std::vector<std::pair<std::string, std::string>> register_libtorch_benchmarks(int threads);
#endif

}  // namespace depthlab_bench
