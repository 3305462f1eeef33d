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
inline constexpr std::int64_t softmax_rows = 4096, softmax_cols = 128;
inline constexpr std::int64_t layernorm_rows = 4096, layernorm_cols = 512;

// Bytes each kernel moves per call (float): input read + output written; layer norm also
// reads gamma/beta and writes the per-row mean and rstd.
inline double gelu_bytes() { return 2.0 * 4.0 * gelu_n; }
inline double softmax_bytes() { return 2.0 * 4.0 * softmax_rows * softmax_cols; }
inline double layernorm_bytes() {
    return 4.0 * (2.0 * layernorm_rows * layernorm_cols + 2.0 * layernorm_cols + 2.0 * layernorm_rows);
}

/// GFLOP/s: `flops` per iteration, reported per second (of real time with UseRealTime).
inline void set_gflops(benchmark::State& state, double flops) {
    state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
/// GB/s: `bytes` per iteration, decimal gigabytes.
inline void set_gbytes(benchmark::State& state, double bytes) {
    state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

#if defined(DEPTHLAB_BENCH_HAVE_LIBTORCH)
/// Registers matmul/libtorch/... and the libtorch baselines of the memory-bound kernels;
/// sets libtorch's intra-op threads to `threads`. Returns context lines (key, value).
std::vector<std::pair<std::string, std::string>> register_libtorch_benchmarks(int threads);
#endif

}  // namespace depthlab_bench
