// depthlab_bench_dist: one data-parallel training step of ACT-ALBERT (the study's presets,
// synthetic text of the corpus's size, a global batch of 32 sequences of 128 tokens), run
// either as one process with its threads or as N ranks under mpirun:
//     OMP_NUM_THREADS=2 build/bench/depthlab_bench_dist
//     OMP_NUM_THREADS=1 mpirun -np 2 build/bench/depthlab_bench_dist
// scripts/bench-dist runs both and prints the ratio. Every rank runs the same fixed number
// of iterations (the collectives must line up), and rank 0 reports: the step time, tokens/s
// over all ranks, the gradient all-reduce per step (its bytes per rank and its time), the
// time a rank waits for the slower one before it, and the model's parameter count.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include <depthlab/depthlab.hpp>
#include <depthlab/dist/launch.hpp>

using namespace depthlab;

namespace {

constexpr index_t global_batch = 32, seq_len = 128;
constexpr std::int64_t vocab = 8000;

data::corpus synthetic_corpus(std::uint64_t seed) {
    Generator g(seed);
    data::corpus c;
    for (int d = 0; d < 400; ++d) {
        std::vector<std::vector<std::int32_t>> doc(4 + g.below(12));
        for (auto& s : doc) {
            s.resize(8 + g.below(30));
            for (auto& t : s) t = static_cast<std::int32_t>(5 + g.below(static_cast<std::uint64_t>(vocab - 5)));
        }
        c.add_document(doc);
    }
    return c;
}

void albert_step(benchmark::State& state, const std::string& preset) {
    dist::communicator& comm = dist::world();
    const int ranks = comm.size();
    auto setup = halting::act_albert_preset(preset, vocab, seq_len);
    halting::ActAlbert<float> model(setup.model, setup.act, 1);
    model.train();
    optim::Lamb<float> lamb(model.named_parameters(), {.lr = 1e-3});
    data::albert_data_config dcfg;
    dcfg.max_len = seq_len;
    dcfg.vocab = vocab;
    data::albert_sampler sampler(synthetic_corpus(3), dcfg, 9);
    const index_t local = global_batch / ranks;
    std::optional<dist::gradient_buckets<float, backend::cpu>> buckets;
    if (ranks > 1) buckets.emplace(comm, dist::distinct_parameters(lamb.parameters()));
    dist::broadcast_parameters(comm, dist::distinct_parameters(lamb.parameters()));
    std::int64_t tokens = 0;
    double wait_s = 0, reduce_s = 0;
    const auto step = [&] {
        lamb.zero_grad();
        if (buckets) buckets->zero();
        for (int r = 0; r < comm.rank(); ++r) (void)sampler.next(local);  // the lower ranks' shares
        const auto b = sampler.next(local);
        for (index_t l : b.tokens.lengths) tokens += l;
        const auto l = model.losses(b);
        auto loss = add(add(l.mlm, l.sop), scale(l.encoded.ponder, 1e-3f));
        if (ranks > 1) loss = scale(loss, 1.0f / static_cast<float>(ranks));
        loss.backward();
        if (buckets) {
            buckets->add_gradients();
            for (int r = comm.rank() + 1; r < ranks; ++r) (void)sampler.next(local);  // the higher ranks'
            // (measured apart: waiting for the slower rank, then the all-reduce itself)
            const auto t0 = std::chrono::steady_clock::now();
            comm.barrier();
            const auto t1 = std::chrono::steady_clock::now();
            buckets->finish();
            wait_s += std::chrono::duration<double>(t1 - t0).count();
            reduce_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
        }
        optim::clip_grad_norm(lamb.parameters(), 1.0);
        lamb.step();
    };
    step();  // warm-up: primitives planned, the allocator's working set held
    step();
    comm.reset_stats();
    tokens = 0;
    wait_s = reduce_s = 0;
    for (auto _ : state) step();
    const dist::traffic reduced = comm.stats();  // (before the tokens' own all-reduce below; barriers count no bytes)
    std::int64_t all_tokens = tokens;
    comm.all_reduce(&all_tokens, 1);
    const double iters = static_cast<double>(state.iterations());
    state.counters["ranks"] = ranks;
    state.counters["threads/rank"] = max_threads();
    state.counters["params"] = static_cast<double>(model.parameter_count());
    state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(all_tokens), benchmark::Counter::kIsRate);
    state.counters["allreduce_MB/step"] = static_cast<double>(reduced.bytes) / iters * 1e-6;
    state.counters["allreduce_ms/step"] = reduce_s / iters * 1e3;  // the gradient all-reduce and the copy back into the gradients
    state.counters["wait_ms/step"] = wait_s / iters * 1e3;         // waiting for the slower rank (ACT ranks halt at different depths)
}

}  // namespace

int main(int argc, char** argv) {
    dist::communicator& comm = dist::world(&argc, &argv);
    for (const char* preset : {"tiny", "small"})
        benchmark::RegisterBenchmark((std::string("albert_act_step/") + preset + "/b32_s128").c_str(),
                                     [preset](benchmark::State& s) { albert_step(s, preset); })
            ->Iterations(6)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    // Rank 0 reports; the others run the same iterations quietly and write no --benchmark_out.
    std::vector<char*> args(argv, argv + argc);
    if (!comm.is_root()) {
        (void)std::freopen("/dev/null", "w", stdout);
        std::erase_if(args, [](const char* a) { return std::string_view(a).starts_with("--benchmark_out"); });
    }
    int n = static_cast<int>(args.size());
    benchmark::Initialize(&n, args.data());
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
