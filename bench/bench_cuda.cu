// depthlab_bench_cuda: the training-step benchmarks on backend::cuda (nvcc; built with
// -DDEPTHLAB_WITH_CUDA=ON -DDEPTHLAB_BUILD_BENCH=ON, run by scripts/device-check).
//
//   encoder_layer_train/cuda/<shape>       forward + backward of one post-LN encoder layer (f32)
//   encoder_layer_train/cuda_bf16/<shape>  the same under bf16 precision (bf16 GEMM inputs on
//                                          the tensor cores, f32 weights and accumulation)
//   act_encoder_train/cuda/<shape>         an ACT encoder (compact path, N_max 6) at ~60% depth
//
// Each iteration ends with a stream synchronisation, so the time is the device's; the
// counters report kernel launches and host synchronisations per step (counters<cuda>).
// bench/torch_gpu.py times the same steps in PyTorch eager on the same GPU.
#include <cstdio>
#include <string>

#include <benchmark/benchmark.h>

#include <depthlab/backend_free.hpp>
#include <depthlab/backend/cuda/cuda.cuh>

#include "bench_common.hpp"

namespace {

using depthlab_bench::layer_shape;
using cu = depthlab::backend::cuda;
using Var = depthlab::Var<float, cu>;
using Tensor = depthlab::Tensor<float, cu>;

const std::vector<layer_shape>& cuda_layer_shapes() {
    static const std::vector<layer_shape> shapes{{256, 4, 1024, 32, 128}, {512, 8, 2048, 32, 128}, {768, 12, 3072, 32, 128}};
    return shapes;
}

depthlab::nn::transformer_config layer_config(const layer_shape& l) {
    return {.dim = l.d, .heads = static_cast<int>(l.h), .ff_dim = l.ff, .act = depthlab::nn::activation::gelu, .dropout = 0.0,
            .attention_dropout = 0.0, .norm_first = false, .ln_eps = 1e-5, .init = depthlab::nn::init_scheme::bert};
}

void device_sync() { depthlab::cuda::check(cudaStreamSynchronize(depthlab::cuda::stream()), "cudaStreamSynchronize"); }

template <class Step>
void run_timed(benchmark::State& state, const layer_shape& l, Step&& step) {
    step();
    device_sync();
    auto& c = depthlab::counters<cu>();
    c.reset();
    step();
    device_sync();
    const double launches = static_cast<double>(c.launches.load()), syncs = static_cast<double>(c.syncs.load());
    for (auto _ : state) {
        step();
        device_sync();
    }
    state.counters["launches/step"] = launches;
    state.counters["syncs/step"] = syncs;
    depthlab_bench::set_layer_counters(state, l, true);
}

void bm_encoder_layer_train(benchmark::State& state, layer_shape l, depthlab::matmul_precision precision) {
    const depthlab::matmul_precision_scope scope(precision);
    depthlab::Generator gen(1);
    depthlab::nn::EncoderLayer<float, cu> layer(layer_config(l), gen);
    const Var x = Var::parameter(Tensor::uniform({l.b, l.s, l.d}, gen, -1, 1));
    const Tensor seed = Tensor::ones({l.b, l.s, l.d});
    run_timed(state, l, [&] {
        layer.zero_grad();
        x.zero_grad();
        layer(x).backward(seed);
    });
}

void bm_act_train(benchmark::State& state, layer_shape l) {
    depthlab::Generator gen(1);
    depthlab::halting::ActEncoder<float, cu, depthlab::halting::act> enc(layer_config(l), gen, {.max_iterations = 6});
    // a halting bias that stops tokens after ~60% of N_max on these random inputs
    enc.halting_unit->bias.value().fill_(-0.6f);
    const Var x = Var::parameter(Tensor::uniform({l.b, l.s, l.d}, gen, -1, 1));
    const std::vector<depthlab::index_t> lengths(static_cast<std::size_t>(l.b), l.s);
    double iterations = 0;
    run_timed(state, l, [&] {
        enc.zero_grad();
        x.zero_grad();
        auto r = enc(x, lengths);
        depthlab::add(depthlab::sum(r.hidden), r.ponder).backward();
        double n = 0;
        for (int v : r.record.N) n += v;
        iterations = n / static_cast<double>(r.record.N.size());
    });
    state.counters["mean_iterations"] = iterations;
}

}  // namespace

int main(int argc, char** argv) {
    if (depthlab::cuda::device_count() == 0) {
        std::puts("depthlab_bench_cuda: no CUDA device found; nothing to measure");
        return 0;
    }
    for (const layer_shape& l : cuda_layer_shapes()) {
        for (const auto p : {depthlab::matmul_precision::f32, depthlab::matmul_precision::bf16})
            benchmark::RegisterBenchmark(
                ("encoder_layer_train/" + std::string(p == depthlab::matmul_precision::bf16 ? "cuda_bf16/" : "cuda/") + l.name()).c_str(),
                bm_encoder_layer_train, l, p)
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("act_encoder_train/cuda/" + l.name() + "_n6").c_str(), bm_act_train, l)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
    }
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
