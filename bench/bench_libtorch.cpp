// libtorch baselines for depthlab_bench. Compiled alone (torch's flags, C++17) and never
// with depthlab headers; bench_main.cpp calls register_libtorch_benchmarks().
//
//   encoder_layer_train/libtorch/<shape>       forward + backward of torch::nn::TransformerEncoderLayer
//   encoder_layer_train/libtorch_bf16/<shape>  the same with the forward under CPU bf16 autocast
//   matmul/libtorch/MxKxN        at::mm_out into a preallocated output (BLAS sgemm: OpenBLAS
//                                on Debian, hence LD_LIBRARY_PATH=.../openblas-openmp)
//   gelu/libtorch/N              at::gelu_out(..., "tanh")  (depthlab's GELU is the tanh form)
//   dropout/libtorch/N           at::native_dropout(x, 0.1, train) (what F.dropout runs in training;
//                                allocates its output and its mask)
//   softmax/libtorch/RxC         at::_softmax_out over the last axis
//   layernorm/libtorch/RxC       at::native_layer_norm (allocates its three results; its
//                                out= variant is a functional call plus a copy in 1.13)
//   cross_entropy/libtorch/RxC   at::cross_entropy_loss (mean) forward + autograd backward
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/modules/transformer.h>
#include <torch/nn/modules/transformerlayer.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>

#include "bench_common.hpp"

namespace depthlab_bench {
namespace {

at::Tensor random_tensor(at::IntArrayRef shape) { return at::rand(shape, at::kFloat) * 2.0 - 1.0; }

torch::nn::TransformerEncoderLayer make_layer(const layer_shape& l) {
    // post-LN, ReLU (the defaults), dropout 0; input layout (S, B, D) as torch 1.13 expects
    return torch::nn::TransformerEncoderLayer(
        torch::nn::TransformerEncoderLayerOptions(l.d, l.h).dim_feedforward(l.ff).dropout(0.0));
}

/// What `with torch.autocast("cpu", dtype=torch.bfloat16):` does around a forward pass:
/// eligible ops (matmul, linear, ...) cast their inputs to bf16 and keep the casts of leaf
/// tensors (the weights) in a cache until the outermost region ends; master weights,
/// gradients and the rest stay f32.
class cpu_bf16_autocast {
public:
    cpu_bf16_autocast() : was_enabled_(at::autocast::is_cpu_enabled()), was_dtype_(at::autocast::get_autocast_cpu_dtype()) {
        at::autocast::set_cpu_enabled(true);
        at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
        at::autocast::increment_nesting();
    }
    ~cpu_bf16_autocast() {
        if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
        at::autocast::set_cpu_enabled(was_enabled_);
        at::autocast::set_autocast_cpu_dtype(was_dtype_);
    }
    cpu_bf16_autocast(const cpu_bf16_autocast&) = delete;
    cpu_bf16_autocast& operator=(const cpu_bf16_autocast&) = delete;

private:
    bool was_enabled_;
    at::ScalarType was_dtype_;
};

/// One training step: forward (under bf16 autocast when `bf16`, as a PyTorch user writes it),
/// then backward of y * 1 outside the autocast region.
void bm_encoder_layer_train(benchmark::State& state, layer_shape l, bool bf16) {
    auto layer = make_layer(l);
    layer->train();
    const at::Tensor x = random_tensor({l.s, l.b, l.d}).set_requires_grad(true);
    const at::Tensor seed = at::ones({l.s, l.b, l.d});
    auto step = [&] {
        layer->zero_grad();
        x.mutable_grad() = at::Tensor();
        at::Tensor y;
        if (bf16) {
            const cpu_bf16_autocast autocast;
            y = layer->forward(x);
        } else {
            y = layer->forward(x);
        }
        y.backward(y.scalar_type() == seed.scalar_type() ? seed : seed.to(y.scalar_type()));
        benchmark::DoNotOptimize(x.grad().data_ptr<float>());
    };
    step();
    for (auto _ : state) step();
    set_layer_counters(state, l, true);
}
void bm_encoder_layer_forward(benchmark::State& state, layer_shape l) {
    auto layer = make_layer(l);
    layer->eval();
    at::NoGradGuard no_grad;
    const at::Tensor x = random_tensor({l.s, l.b, l.d});
    layer->forward(x);
    for (auto _ : state) {
        at::Tensor y = layer->forward(x);
        benchmark::DoNotOptimize(y.data_ptr<float>());
    }
    set_layer_counters(state, l, false);
}

void bm_matmul(benchmark::State& state, mm_shape s) {
    at::NoGradGuard no_grad;
    const at::Tensor a = random_tensor({s.m, s.k}), b = random_tensor({s.k, s.n});
    at::Tensor c = at::empty({s.m, s.n}, at::kFloat);
    at::mm_out(c, a, b);  // warm-up
    for (auto _ : state) {
        at::mm_out(c, a, b);
        benchmark::DoNotOptimize(c.data_ptr<float>());
        benchmark::ClobberMemory();
    }
    set_gflops(state, s.flops());
}

void bm_dropout(benchmark::State& state) {
    at::NoGradGuard no_grad;
    const at::Tensor x = random_tensor({dropout_n});
    for (auto _ : state) {
        auto [y, mask] = at::native_dropout(x, 0.1, true);
        benchmark::DoNotOptimize(y.data_ptr<float>());
        benchmark::DoNotOptimize(mask.data_ptr());
    }
    set_gbytes(state, dropout_bytes());
}

void bm_gelu(benchmark::State& state) {
    at::NoGradGuard no_grad;
    const at::Tensor x = random_tensor({gelu_n});
    at::Tensor y = at::empty_like(x);
    at::gelu_out(y, x, "tanh");
    for (auto _ : state) {
        at::gelu_out(y, x, "tanh");
        benchmark::DoNotOptimize(y.data_ptr<float>());
        benchmark::ClobberMemory();
    }
    set_gbytes(state, gelu_bytes());
}

void bm_softmax(benchmark::State& state) {
    at::NoGradGuard no_grad;
    const at::Tensor x = random_tensor({softmax_rows, softmax_cols});
    at::Tensor y = at::empty_like(x);
    at::_softmax_out(y, x, 1, false);
    for (auto _ : state) {
        at::_softmax_out(y, x, 1, false);
        benchmark::DoNotOptimize(y.data_ptr<float>());
        benchmark::ClobberMemory();
    }
    set_gbytes(state, softmax_bytes());
}

void bm_layernorm(benchmark::State& state) {
    at::NoGradGuard no_grad;
    const at::Tensor x = random_tensor({layernorm_rows, layernorm_cols});
    const at::Tensor gamma = at::ones({layernorm_cols}, at::kFloat), beta = at::zeros({layernorm_cols}, at::kFloat);
    const std::vector<int64_t> normalized{layernorm_cols};
    benchmark::DoNotOptimize(std::get<0>(at::native_layer_norm(x, normalized, gamma, beta, 1e-5)).data_ptr<float>());
    for (auto _ : state) {
        auto out = at::native_layer_norm(x, normalized, gamma, beta, 1e-5);
        benchmark::DoNotOptimize(std::get<0>(out).data_ptr<float>());
        benchmark::ClobberMemory();
    }
    set_gbytes(state, layernorm_bytes());
}

void bm_cross_entropy(benchmark::State& state) {
    const at::Tensor logits = random_tensor({cross_entropy_rows, cross_entropy_classes}).set_requires_grad(true);
    const at::Tensor targets = at::empty({cross_entropy_rows}, at::kLong);
    for (std::int64_t r = 0; r < cross_entropy_rows; ++r) targets[r] = cross_entropy_target(r);
    auto step = [&] {
        logits.mutable_grad() = at::Tensor();
        at::cross_entropy_loss(logits, targets).backward();
        benchmark::DoNotOptimize(logits.grad().data_ptr<float>());
    };
    step();
    for (auto _ : state) step();
    set_gbytes(state, cross_entropy_bytes());
}

std::string one_line(std::string s) {
    for (char& ch : s)
        if (ch == '\n') ch = ';';
    while (!s.empty() && (s.back() == ';' || s.back() == ' ')) s.pop_back();
    return s;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> register_libtorch_benchmarks(int threads) {
    at::set_num_threads(threads);  // what torch::set_num_threads does
    for (const layer_shape& l : layer_shapes()) {
        benchmark::RegisterBenchmark(("encoder_layer_train/libtorch/" + l.name()).c_str(), bm_encoder_layer_train, l, false)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("encoder_layer_train/libtorch_bf16/" + l.name()).c_str(), bm_encoder_layer_train, l, true)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("encoder_layer_forward/libtorch/" + l.name()).c_str(), bm_encoder_layer_forward, l)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
    }
    for (const mm_shape& s : matmul_shapes())
        benchmark::RegisterBenchmark(("matmul/libtorch/" + s.name()).c_str(), bm_matmul, s)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("gelu/libtorch/" + std::to_string(gelu_n)).c_str(), bm_gelu)->UseRealTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("dropout/libtorch/" + std::to_string(dropout_n)).c_str(), bm_dropout)->UseRealTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("softmax/libtorch/" + std::to_string(softmax_rows) + "x" + std::to_string(softmax_cols)).c_str(), bm_softmax)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("layernorm/libtorch/" + std::to_string(layernorm_rows) + "x" + std::to_string(layernorm_cols)).c_str(),
                                 bm_layernorm)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(
        ("cross_entropy/libtorch/" + std::to_string(cross_entropy_rows) + "x" + std::to_string(cross_entropy_classes)).c_str(),
        bm_cross_entropy)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);

    return {
        {"libtorch_threads", std::to_string(at::get_num_threads())},
        {"libtorch_parallel", one_line(at::get_parallel_info())},
    };
}

}  // namespace depthlab_bench
