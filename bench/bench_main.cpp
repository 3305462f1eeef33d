// depthlab_bench: depthlab against raw oneDNN (here) and libtorch (bench_libtorch.cpp).
//
//   matmul/depthlab/MxKxN            depthlab::matmul op on Var<float> under no_grad (allocates
//                                    its result every call, as the op does in a model)
//   */depthlab_bf16/...              the same under matmul_precision::bf16 (bf16 GEMM inputs,
//                                    f32 accumulation; matmul, encoder_layer_train, act_encoder_train)
//   linear/depthlab[_bf16]/MxKxN     depthlab::linear with a bias (the bias epilogue), same product
//   encoder_layer_train/depthlab_dropout/<shape>  the f32 layer step with dropout 0.1
//   matmul_primitive/depthlab/MxKxN  primitives<cpu>::gemm into a preallocated output
//   matmul/onednn/MxKxN              a raw oneDNN matmul primitive made once, preallocated output
//   matmul/onednn_bf16/MxKxN         the same with bf16 operands converted once, f32 output
//   matmul/libtorch/MxKxN            at::mm_out (bench_libtorch.cpp)
//   gelu|dropout|softmax|layernorm/<isa>/... the CPU primitives with the ISA path forced
//   cross_entropy/<isa>/RxC          the loss op forward + backward, ISA path forced
//   act_encoder_train/interleaved/.. the compact, masked and fixed-depth ACT steps in turn, each
//                                    timed apart: their ratios free of the machine's drift
//                                    (DEPTHLAB_BENCH_PROFILE=K: then K steps of each under
//                                    an op_profiler, the op tables on stderr; encoder_layer_train too)
//
// Run it through scripts/bench (OMP_NUM_THREADS, the OpenBLAS library path, JSON output and
// the ratio tables of scripts/bench_ratios.py).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <benchmark/benchmark.h>

#include "depthlab/depthlab.hpp"
#include "bench_common.hpp"

#if defined(DEPTHLAB_HAVE_ONEDNN)
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace {

using namespace depthlab_bench;
using depthlab::index_t;
using Tensorf = depthlab::Tensor<float>;
using Varf = depthlab::Var<float>;
using P = depthlab::primitives<depthlab::backend::cpu>;
namespace dcpu = depthlab::cpu;

Tensorf random_tensor(const depthlab::Shape& shape, std::uint64_t seed) {
    depthlab::Generator gen(seed);
    return Tensorf::uniform(shape, gen, -1.0, 1.0);
}

// ------------------------------------------------------------------ memory
/// The memory of one benchmark: on construction the allocator's cache is emptied and both
/// peaks are reset (the process's resident peak through /proc/self/clear_refs); report()
/// sets peak_rss_MiB (whole process: code, oneDNN, the cache), tensor_peak_MiB (CPU
/// tensors live at once) and, from timing_starts() on, fresh_blocks/step: blocks the cache
/// had to take from the system per timed step (0 in a steady state; each one costs page
/// faults and zeroed pages inside the timing).
struct memory_peaks {
    using host = depthlab::memory<depthlab::backend::cpu>;
    memory_peaks() {
        host::release_cached();
        std::ofstream("/proc/self/clear_refs") << "5";
        host::reset_peak();
    }
    void timing_starts() { timed_from = host::system_allocations(); }
    void report(benchmark::State& state) const {
        state.counters["peak_rss_MiB"] = host::peak_rss_mib();
        state.counters["tensor_peak_MiB"] = static_cast<double>(host::peak_bytes()) / (1 << 20);
        state.counters["fresh_blocks/step"] = static_cast<double>(host::system_allocations() - timed_from) /
                                              static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
    }
    std::size_t timed_from = 0;
};

// ------------------------------------------------------------------ matmul
depthlab::gemm_args plain_gemm(const mm_shape& s) {
    // row-major A (m, k), B (k, n), C (m, n), no transposes
    return depthlab::gemm_args{.m = s.m, .n = s.n, .k = s.k, .lda = s.k, .ldb = s.n, .ldc = s.n};
}

#if defined(DEPTHLAB_HAVE_ONEDNN)
std::string impl_info(const dnnl::primitive& prim) {
    const char* info = nullptr;
    if (dnnl_primitive_desc_query(prim.get_primitive_desc(), dnnl_query_impl_info_str, 0, &info) != dnnl_success || !info)
        return "?";
    return info;
}
#endif

/// The op, as a model calls it: checks, result allocation, GEMM.
void bm_matmul_op(benchmark::State& state, mm_shape s, depthlab::matmul_precision precision) {
    const depthlab::matmul_precision_scope scope(precision);
    depthlab::no_grad guard;
    const Varf a(random_tensor({s.m, s.k}, 1)), b(random_tensor({s.k, s.n}, 2));
    {
        Varf warm = depthlab::matmul(a, b);  // creates and caches the oneDNN primitive
        benchmark::DoNotOptimize(warm.value().data());
    }
    for (auto _ : state) {
        Varf c = depthlab::matmul(a, b);
        benchmark::DoNotOptimize(c.value().data());
        benchmark::ClobberMemory();
    }
    set_gflops(state, s.flops());
#if defined(DEPTHLAB_HAVE_ONEDNN)
    const bool bf16 = precision == depthlab::matmul_precision::bf16 && dcpu::onednn::bf16_supported();
    state.SetLabel(impl_info(dcpu::onednn::primitive_cache::instance().get(plain_gemm(s), 1.0f, 0.0f, false, bf16).prim));
#endif
}

/// The linear op with a bias (x (m, k), W (n, k), b (n)), as a layer calls it: the same
/// product as matmul/depthlab/MxKxN (transposed weight) plus the bias epilogue, so the
/// ratio of the two is what the bias costs.
void bm_linear_op(benchmark::State& state, mm_shape s, depthlab::matmul_precision precision) {
    const depthlab::matmul_precision_scope scope(precision);
    depthlab::no_grad guard;
    const Varf x(random_tensor({s.m, s.k}, 1)), w(random_tensor({s.n, s.k}, 2)), b(random_tensor({s.n}, 3));
    {
        Varf warm = depthlab::linear(x, w, b);
        benchmark::DoNotOptimize(warm.value().data());
    }
    for (auto _ : state) {
        Varf y = depthlab::linear(x, w, b);
        benchmark::DoNotOptimize(y.value().data());
        benchmark::ClobberMemory();
    }
    set_gflops(state, s.flops());
}

/// The GEMM primitive every op uses, into a preallocated output.
void bm_matmul_primitive(benchmark::State& state, mm_shape s) {
    const Tensorf a = random_tensor({s.m, s.k}, 1), b = random_tensor({s.k, s.n}, 2);
    Tensorf c = Tensorf::zeros({s.m, s.n});
    const auto g = plain_gemm(s);
    P::gemm(g, 1.0f, a.data(), b.data(), 0.0f, c.data());  // warm-up: primitive creation
    for (auto _ : state) {
        P::gemm(g, 1.0f, a.data(), b.data(), 0.0f, c.data());
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
    set_gflops(state, s.flops());
#if defined(DEPTHLAB_HAVE_ONEDNN)
    state.SetLabel(impl_info(dcpu::onednn::primitive_cache::instance().get(g, 1.0f, 0.0f).prim));
#endif
}

#if defined(DEPTHLAB_HAVE_ONEDNN)
/// Raw oneDNN: plain 2-D row-major descriptors, primitive and memory objects made once. With
/// bf16: oneDNN's own bf16 GEMM, its operands converted to bf16 once before timing (f32
/// output), the bound for depthlab's bf16 matmul op, which takes f32 operands.
void bm_matmul_onednn(benchmark::State& state, mm_shape s, bool bf16) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    if (bf16 && !dcpu::onednn::bf16_supported()) {
        state.SkipWithError("this CPU has no native bf16 products (oneDNN would emulate them)");
        return;
    }
    const Tensorf a = random_tensor({s.m, s.k}, 1), b = random_tensor({s.k, s.n}, 2);
    Tensorf c = Tensorf::zeros({s.m, s.n});

    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const dt in = bf16 ? dt::bf16 : dt::f32;
    const dnnl::memory::desc a32({s.m, s.k}, dt::f32, tag::ab), b32({s.k, s.n}, dt::f32, tag::ab);
    const dnnl::memory::desc a_md({s.m, s.k}, in, tag::ab), b_md({s.k, s.n}, in, tag::ab), c_md({s.m, s.n}, dt::f32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng);
    const dnnl::matmul prim(pd);
    dnnl::memory fa(a32, eng, const_cast<float*>(a.data())), fb(b32, eng, const_cast<float*>(b.data()));
    dnnl::memory ma = bf16 ? dnnl::memory(a_md, eng) : fa, mb = bf16 ? dnnl::memory(b_md, eng) : fb, mc(c_md, eng, c.data());
    if (bf16) {  // the operands in bf16, once
        dnnl::reorder(fa, ma).execute(strm, fa, ma);
        dnnl::reorder(fb, mb).execute(strm, fb, mb);
    }
    const std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};

    prim.execute(strm, args);  // warm-up
    strm.wait();
    for (auto _ : state) {
        prim.execute(strm, args);
        strm.wait();
        benchmark::ClobberMemory();
    }
    set_gflops(state, s.flops());
    state.SetLabel(pd.impl_info_str());
}
#endif

// ------------------------------------------------------------------ memory-bound kernels
const dcpu::isa all_isas[] = {dcpu::isa::scalar, dcpu::isa::avx2, dcpu::isa::avx512};

/// False (and the benchmark marked skipped) when this CPU cannot run the path.
bool usable(benchmark::State& state, dcpu::isa path) {
    if (dcpu::cpu_supports(path)) return true;
    state.SkipWithError((std::string("this CPU cannot run the ") + dcpu::to_string(path) + " path").c_str());
    return false;
}

void bm_gelu(benchmark::State& state, dcpu::isa path) {
    if (!usable(state, path)) return;
    const dcpu::isa_scope scope(path);
    const Tensorf x = random_tensor({gelu_n}, 3);
    Tensorf y = Tensorf::zeros({gelu_n});
    P::gelu_fwd(gelu_n, x.data(), y.data());
    for (auto _ : state) {
        P::gelu_fwd(gelu_n, x.data(), y.data());
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    set_gbytes(state, gelu_bytes());
}

// Inverted dropout at p = 0.1 as a training step applies it: each call draws a new mask (the
// generator's words advance) and writes y = x · mask.
void bm_dropout(benchmark::State& state, dcpu::isa path) {
    if (!usable(state, path)) return;
    const dcpu::isa_scope scope(path);
    const Tensorf x = random_tensor({dropout_n}, 3);
    Tensorf y = Tensorf::zeros({dropout_n});
    depthlab::Generator gen(7);
    P::dropout_apply(dropout_n, 0.1f, gen, gen.reserve(dropout_n), x.data(), y.data());
    for (auto _ : state) {
        P::dropout_apply(dropout_n, 0.1f, gen, gen.reserve(dropout_n), x.data(), y.data());
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    set_gbytes(state, dropout_bytes());
}

void bm_softmax(benchmark::State& state, dcpu::isa path) {
    if (!usable(state, path)) return;
    const dcpu::isa_scope scope(path);
    const index_t rows = softmax_rows, cols = softmax_cols;
    const Tensorf x = random_tensor({rows, cols}, 4);
    Tensorf y = Tensorf::zeros({rows, cols});
    const depthlab::row_broadcast no_mask{};
    P::softmax_fwd(rows, cols, x.data(), 1.0f, static_cast<const float*>(nullptr), no_mask, y.data());
    for (auto _ : state) {
        P::softmax_fwd(rows, cols, x.data(), 1.0f, static_cast<const float*>(nullptr), no_mask, y.data());
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    set_gbytes(state, softmax_bytes());
}

void bm_layernorm(benchmark::State& state, dcpu::isa path) {
    if (!usable(state, path)) return;
    const dcpu::isa_scope scope(path);
    const index_t rows = layernorm_rows, cols = layernorm_cols;
    const Tensorf x = random_tensor({rows, cols}, 5);
    const Tensorf gamma = Tensorf::ones({cols}), beta = Tensorf::zeros({cols});
    Tensorf y = Tensorf::zeros({rows, cols}), mean = Tensorf::zeros({rows}), rstd = Tensorf::zeros({rows});
    P::layernorm_fwd(rows, cols, x.data(), gamma.data(), beta.data(), 1e-5f, y.data(), mean.data(), rstd.data());
    for (auto _ : state) {
        P::layernorm_fwd(rows, cols, x.data(), gamma.data(), beta.data(), 1e-5f, y.data(), mean.data(), rstd.data());
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    set_gbytes(state, layernorm_bytes());
}

/// The cross-entropy op as a loss is used: forward (mean over rows) and backward into the
/// logits, whose gradient is dropped before each step (as torch's is in its twin).
void bm_cross_entropy(benchmark::State& state, dcpu::isa path) {
    if (!usable(state, path)) return;
    const dcpu::isa_scope scope(path);
    const Varf logits = Varf::parameter(random_tensor({cross_entropy_rows, cross_entropy_classes}, 6));
    std::vector<std::int64_t> targets(static_cast<std::size_t>(cross_entropy_rows));
    for (std::int64_t r = 0; r < cross_entropy_rows; ++r) targets[static_cast<std::size_t>(r)] = cross_entropy_target(r);
    auto step = [&] {
        logits.zero_grad();
        depthlab::cross_entropy(logits, std::span<const std::int64_t>(targets)).backward();
        benchmark::DoNotOptimize(logits.grad().data());
    };
    step();
    for (auto _ : state) step();
    set_gbytes(state, cross_entropy_bytes());
}

// ------------------------------------------------------------------ device counters
using hd = depthlab::backend::host_device;
/// Runs `step` once on backend::host_device after a warm-up run and reports its kernel
/// launches and host synchronisations per step (the numbers a GPU run would see).
template <class Step>
void set_device_counters(benchmark::State& state, Step&& step) {
    auto& c = depthlab::counters<hd>();
    step();
    c.reset();
    step();
    state.counters["launches/step"] = static_cast<double>(c.launches.load());
    state.counters["syncs/step"] = static_cast<double>(c.syncs.load());
}
/// Copies every parameter value of `from` into `to` (same architecture, any backends).
template <class A, class Bm>
void copy_parameters(const A& from, Bm& to) {
    const auto src = from.named_parameters();
    auto dst = to.named_parameters();
    for (std::size_t i = 0; i < src.size(); ++i)
        dst[i].second.value().copy_(src[i].second.value().template to<typename std::decay_t<decltype(dst[i].second.value())>::backend_type>());
}

// ------------------------------------------------------------------ encoder layer
/// DEPTHLAB_BENCH_PROFILE=K: after a benchmark's timing, K more of its steps under an
/// op_profiler, the op table on stderr (the profiler's clock reads stay out of the timed steps).
template <class Step>
void profile_steps(const char* name, Step&& step) {
    const char* env = std::getenv("DEPTHLAB_BENCH_PROFILE");
    const int steps = env ? std::atoi(env) : 0;
    if (steps <= 0) return;
    depthlab::op_profiler prof;
    for (int i = 0; i < steps; ++i) step();
    std::fprintf(stderr, "%s: %.2f ms per step\n%s", name, 1e3 * prof.seconds() / steps, prof.table(steps, 60).c_str());
}

depthlab::nn::transformer_config layer_config(const layer_shape& l, double dropout = 0.0) {
    // as torch::nn::TransformerEncoderLayer's defaults: post-LN, ReLU; dropout 0 unless asked
    return {.dim = l.d, .heads = static_cast<int>(l.h), .ff_dim = l.ff, .act = depthlab::nn::activation::relu, .dropout = dropout,
            .attention_dropout = dropout, .norm_first = false, .ln_eps = 1e-5, .init = depthlab::nn::init_scheme::pytorch};
}

/// One training step of a layer: forward, backward of sum(y * 1) into every parameter and
/// the input (as inside a stack), gradients reset each step.
void bm_encoder_layer_train(benchmark::State& state, layer_shape l, depthlab::matmul_precision precision, double dropout) {
    const depthlab::matmul_precision_scope scope(precision);
    memory_peaks memory;
    depthlab::Generator gen(1);
    depthlab::nn::EncoderLayer<float> layer(layer_config(l, dropout), gen);
    const Varf x = Varf::parameter(random_tensor({l.b, l.s, l.d}, 3));
    const Tensorf seed = Tensorf::ones({l.b, l.s, l.d});
    auto step = [&] {
        layer.zero_grad();
        x.zero_grad();
        Varf y = layer(x);
        y.backward(seed);
        benchmark::DoNotOptimize(x.grad().data());
    };
    step();  // warm-up: primitives created, allocator cache filled
    memory.timing_starts();
    for (auto _ : state) step();
    profile_steps(("encoder_layer_train " + l.name() + (precision == depthlab::matmul_precision::bf16 ? " bf16" : " f32") +
                   (dropout > 0 ? " dropout" : "") + " step").c_str(), step);
    set_layer_counters(state, l, true);
    memory.report(state);
    // the same step on backend::host_device: what a GPU would be asked to do per step
    depthlab::Generator hd_gen(1);
    depthlab::nn::EncoderLayer<float, hd> hd_layer(layer_config(l, dropout), hd_gen);
    const auto hd_x = depthlab::Var<float, hd>::parameter(x.value().to<hd>());
    const auto hd_seed = seed.to<hd>();
    set_device_counters(state, [&] {
        hd_layer.zero_grad();
        hd_x.zero_grad();
        hd_layer(hd_x).backward(hd_seed);
    });
}
void bm_encoder_layer_forward(benchmark::State& state, layer_shape l) {
    depthlab::Generator gen(1);
    depthlab::nn::EncoderLayer<float> layer(layer_config(l), gen);
    layer.eval();
    depthlab::no_grad guard;
    const Varf x(random_tensor({l.b, l.s, l.d}, 3));
    { Varf warm = layer(x); }
    for (auto _ : state) {
        Varf y = layer(x);
        benchmark::DoNotOptimize(y.value().data());
    }
    set_layer_counters(state, l, false);
}

// ------------------------------------------------------------------ ACT encoder
// A tied layer iterated with ACT at controlled halting profiles: the halting unit gets small
// random weights and a bias found by bisection so that the mean number of iterations is the
// target fraction of N_max. depthlab = the compact path, masked = the dense reference (every
// position through the layer until the last token halts), fixed = N_max plain iterations.
constexpr int act_max_iterations = 6;

template <class Policy>
struct act_setup {
    depthlab::Generator gen{1};
    depthlab::halting::ActEncoder<float, depthlab::backend::cpu, Policy> enc;
    Varf x;
    std::vector<index_t> lengths;
    double mean_iterations = 0;
    act_setup(const layer_shape& l, double target_fraction)
        : enc(layer_config(l), gen, {.max_iterations = act_max_iterations}),
          x(Varf::parameter(random_tensor({l.b, l.s, l.d}, 3))),
          lengths(static_cast<std::size_t>(l.b), l.s) {
        if constexpr (std::is_same_v<Policy, depthlab::halting::fixed>) return;
        depthlab::Generator g(5);
        enc.halting_unit->weight.value().copy_(Tensorf::randn({1, l.d}, g, 0.05));
        double lo = -12, hi = 12;  // bias: high => halt early
        for (int it = 0; it < 30; ++it) {
            const double mid = 0.5 * (lo + hi);
            if (measure(mid) > target_fraction * act_max_iterations) lo = mid;
            else hi = mid;
        }
        mean_iterations = measure(0.5 * (lo + hi));
    }
    double measure(double bias) {
        enc.halting_unit->bias.value().fill_(static_cast<float>(bias));
        depthlab::no_grad guard;
        const auto r = enc(x, lengths);
        double n = 0;
        for (int v : r.record.N) n += v;
        return n / static_cast<double>(r.record.N.size());
    }
};

/// One training step of the encoder: forward, backward of sum(hidden) + ponder into every
/// parameter and the input, gradients reset each step.
template <class Setup>
void act_train_step(Setup& su) {
    su.enc.zero_grad();
    su.x.zero_grad();
    auto r = su.enc(su.x, su.lengths);
    depthlab::add(depthlab::sum(r.hidden), r.ponder).backward();
    benchmark::DoNotOptimize(su.x.grad().data());
}

template <class Policy>
void bm_act_train(benchmark::State& state, layer_shape l, double fraction, bool compact, depthlab::matmul_precision precision) {
    const depthlab::matmul_precision_scope scope(precision);
    memory_peaks memory;
    act_setup<Policy> su(l, fraction);
    su.enc.opt.compact = compact;
    act_train_step(su);
    memory.timing_starts();
    for (auto _ : state) act_train_step(su);
    state.counters["tokens/s"] = benchmark::Counter(l.tokens(), benchmark::Counter::kIsIterationInvariantRate);
    memory.report(state);
    {
        depthlab::Generator hd_gen(1);
        depthlab::halting::ActEncoder<float, hd, Policy> hd_enc(layer_config(l), hd_gen, su.enc.opt);
        copy_parameters(su.enc, hd_enc);  // the calibrated halting unit too
        const auto hd_x = depthlab::Var<float, hd>::parameter(su.x.value().template to<hd>());
        set_device_counters(state, [&] {
            hd_enc.zero_grad();
            hd_x.zero_grad();
            auto r = hd_enc(hd_x, su.lengths);
            depthlab::add(depthlab::sum(r.hidden), r.ponder).backward();
        });
    }
    state.counters["mean_iterations"] =
        std::is_same_v<Policy, depthlab::halting::fixed> ? double(act_max_iterations) : su.mean_iterations;
}

/// The compact, the masked and the fixed-depth step in turn, each timed on its own. These
/// machines drift by 10-15% within minutes, so separate benchmarks of the three see different
/// speeds; here every ratio comes from steps run within a second of one another.
void bm_act_interleaved(benchmark::State& state, layer_shape l, double fraction) {
    namespace h = depthlab::halting;
    act_setup<h::act> su(l, fraction);
    act_setup<h::fixed> fx(l, 1.0);
    const auto step = [](auto& s, bool compact) {
        s.enc.opt.compact = compact;
        act_train_step(s);
    };
    std::array<double, 3> seconds{};  // compact, masked, fixed
    const auto timed = [&](std::size_t i, auto&& run) {
        const auto t0 = std::chrono::steady_clock::now();
        run();
        seconds[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    // warm-up: primitives, the allocator's cache
    step(su, true);
    step(su, false);
    step(fx, false);
    for (auto _ : state) {
        timed(0, [&] { step(su, true); });
        timed(1, [&] { step(su, false); });
        timed(2, [&] { step(fx, false); });
    }
    // where the compact step's time goes against the masked one's (DEPTHLAB_BENCH_PROFILE)
    const std::string at = "act_encoder_train/interleaved at " + std::to_string(static_cast<int>(100 * fraction + 0.5)) + "%, ";
    profile_steps((at + "compact step (mean " + std::to_string(su.mean_iterations) + " iterations)").c_str(), [&] { step(su, true); });
    profile_steps((at + "masked step").c_str(), [&] { step(su, false); });
    profile_steps((at + "fixed-depth step").c_str(), [&] { step(fx, false); });
    const double n = static_cast<double>(state.iterations());
    state.counters["compact_ms"] = seconds[0] / n * 1e3;
    state.counters["masked_ms"] = seconds[1] / n * 1e3;
    state.counters["fixed_ms"] = seconds[2] / n * 1e3;
    state.counters["masked_over_compact"] = seconds[1] / seconds[0];
    state.counters["compact_over_fixed"] = seconds[0] / seconds[2];
    state.counters["mean_iterations"] = su.mean_iterations;
}

// ------------------------------------------------------------------ registration, context
void register_depthlab_benchmarks() {
    const auto f32 = depthlab::matmul_precision::f32, bf16 = depthlab::matmul_precision::bf16;
    {
        namespace h = depthlab::halting;
        const layer_shape l = layer_shapes().front();
        const std::string shape = l.name() + "_n" + std::to_string(act_max_iterations);
        benchmark::RegisterBenchmark(("act_encoder_train/fixed/" + shape).c_str(), bm_act_train<h::fixed>, l, 1.0, false, f32)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
        for (const double f : {0.25, 0.5, 0.6, 0.75}) {
            char tag[32];
            std::snprintf(tag, sizeof tag, "_mean%.0fpct", f * 100);
            benchmark::RegisterBenchmark(("act_encoder_train/depthlab/" + shape + tag).c_str(), bm_act_train<h::act>, l, f, true, f32)
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
            benchmark::RegisterBenchmark(("act_encoder_train/masked/" + shape + tag).c_str(), bm_act_train<h::act>, l, f, false, f32)
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
            benchmark::RegisterBenchmark(("act_encoder_train/depthlab_bf16/" + shape + tag).c_str(), bm_act_train<h::act>, l, f, true,
                                         bf16)
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
            benchmark::RegisterBenchmark(("act_encoder_train/interleaved/" + shape + tag).c_str(), bm_act_interleaved, l, f)
                ->Iterations(8)
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
        }
    }
    for (const layer_shape& l : layer_shapes()) {
        benchmark::RegisterBenchmark(("encoder_layer_train/depthlab/" + l.name()).c_str(), bm_encoder_layer_train, l, f32, 0.0)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("encoder_layer_train/depthlab_bf16/" + l.name()).c_str(), bm_encoder_layer_train, l, bf16, 0.0)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
        // dropout 0.1 on the attention probabilities and both residual branches (BERT's places;
        // torch's layer also drops after the feed-forward's activation, so no libtorch twin)
        benchmark::RegisterBenchmark(("encoder_layer_train/depthlab_dropout/" + l.name()).c_str(), bm_encoder_layer_train, l, f32, 0.1)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("encoder_layer_forward/depthlab/" + l.name()).c_str(), bm_encoder_layer_forward, l)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
    }
    for (const mm_shape& s : matmul_shapes()) {
        benchmark::RegisterBenchmark(("matmul/depthlab/" + s.name()).c_str(), bm_matmul_op, s, f32)->UseRealTime()->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("matmul/depthlab_bf16/" + s.name()).c_str(), bm_matmul_op, s, bf16)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("linear/depthlab/" + s.name()).c_str(), bm_linear_op, s, f32)->UseRealTime()->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("linear/depthlab_bf16/" + s.name()).c_str(), bm_linear_op, s, bf16)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("matmul_primitive/depthlab/" + s.name()).c_str(), bm_matmul_primitive, s)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
#if defined(DEPTHLAB_HAVE_ONEDNN)
        benchmark::RegisterBenchmark(("matmul/onednn/" + s.name()).c_str(), bm_matmul_onednn, s, false)->UseRealTime()->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("matmul/onednn_bf16/" + s.name()).c_str(), bm_matmul_onednn, s, true)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
#endif
    }
    const std::string gelu_shape = std::to_string(gelu_n);
    const std::string softmax_shape = std::to_string(softmax_rows) + "x" + std::to_string(softmax_cols);
    const std::string layernorm_shape = std::to_string(layernorm_rows) + "x" + std::to_string(layernorm_cols);
    const std::string cross_entropy_shape = std::to_string(cross_entropy_rows) + "x" + std::to_string(cross_entropy_classes);
    for (const dcpu::isa path : all_isas) {
        const std::string isa = dcpu::to_string(path);
        benchmark::RegisterBenchmark(("gelu/" + isa + "/" + gelu_shape).c_str(), bm_gelu, path)->UseRealTime()->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("dropout/" + isa + "/" + std::to_string(dropout_n)).c_str(), bm_dropout, path)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("softmax/" + isa + "/" + softmax_shape).c_str(), bm_softmax, path)->UseRealTime()->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("layernorm/" + isa + "/" + layernorm_shape).c_str(), bm_layernorm, path)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("cross_entropy/" + isa + "/" + cross_entropy_shape).c_str(), bm_cross_entropy, path)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
    }
}

/// Paths of the loaded shared objects whose file name contains one of `needles`.
std::string loaded_libraries(const std::vector<std::string>& needles) {
    std::ifstream maps("/proc/self/maps");
    std::set<std::string> found;
    std::string line;
    while (std::getline(maps, line)) {
        const auto slash = line.find('/');
        if (slash == std::string::npos) continue;
        const std::string path = line.substr(slash);
        const std::string file = path.substr(path.rfind('/') + 1);
        for (const auto& n : needles)
            if (file.find(n) != std::string::npos) found.insert(path);
    }
    std::string out;
    for (const auto& p : found) out += (out.empty() ? "" : ", ") + p;
    return out.empty() ? "(none)" : out;
}

std::string supported_isas() {
    std::string out;
    for (const dcpu::isa path : all_isas)
        if (dcpu::cpu_supports(path)) out += (out.empty() ? "" : " ") + std::string(dcpu::to_string(path));
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

    const int threads = depthlab::max_threads();
    register_depthlab_benchmarks();

    benchmark::AddCustomContext("depthlab_version", depthlab::version_string());
    benchmark::AddCustomContext("depthlab_isa", std::string(dcpu::to_string(dcpu::active_isa())) + " (this CPU runs: " + supported_isas() + ")");
    benchmark::AddCustomContext("native_bf16", depthlab::cpu_has_native_bf16() ? "yes (AVX512_BF16 or AMX)"
                                                                               : "no: depthlab_bf16 rows are oneDNN's emulation or f32");
    benchmark::AddCustomContext("omp_max_threads", std::to_string(threads));
    const char* omp_env = std::getenv("OMP_NUM_THREADS");
    benchmark::AddCustomContext("OMP_NUM_THREADS", omp_env ? omp_env : "(unset)");
#if defined(DEPTHLAB_HAVE_ONEDNN)
    const dnnl_version_t* v = dnnl_version();
    benchmark::AddCustomContext("onednn", std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
                                              " (" + v->hash + ")");
#else
    benchmark::AddCustomContext("onednn", "not built in (DEPTHLAB_WITH_ONEDNN=OFF): depthlab GEMM is Eigen");
#endif

#if defined(DEPTHLAB_BENCH_HAVE_LIBTORCH)
    for (const auto& [key, value] : register_libtorch_benchmarks(threads)) benchmark::AddCustomContext(key, value);
    benchmark::AddCustomContext("libtorch_note",
                                "libtorch uses OpenBLAS: run with LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp "
                                "(scripts/bench does this)");
    benchmark::AddCustomContext("blas_loaded", loaded_libraries({"blas", "lapack", "mkl"}));
#else
    benchmark::AddCustomContext("libtorch", "not built in (libtorch-dev not found or DEPTHLAB_BENCH_WITH_LIBTORCH=OFF)");
#endif
    // Every OpenMP runtime in the process: there must be exactly one (libgomp with g++).
    benchmark::AddCustomContext("openmp_runtime", loaded_libraries({"libgomp", "libomp", "libiomp"}));

    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
