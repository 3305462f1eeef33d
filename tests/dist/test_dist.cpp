// Data parallelism over MPI, run by ctest as `mpirun -np 2 depthlab_dist_tests` (each case
// also passes alone, as rank 0 of 1):
//   * the collectives of mpi_communicator (sum, average, broadcast, all-gather, barrier);
//   * 2 ranks x accumulate 1 train an ACT-ALBERT (tied weights; the ranks halt at different
//     depths) to the same bits as 1 process x accumulate 2 over the same micro-batches, and
//     every rank ends with the same parameters;
//   * a data-parallel run interrupted and resumed ends where a straight one ends, on every
//     rank, each rank's own generator included;
//   * with schedule_by_time every rank follows rank 0's clock;
//   * failure: a killed rank or a hung one ends the job with an error (tests/dist/failure.cmake
//     drives the cases whose names start with "failure:").
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <csignal>
#include <limits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <depthlab/depthlab.hpp>
#include <depthlab/dist/launch.hpp>

#include "../random_corpus.hpp"

using namespace depthlab;
namespace fs = std::filesystem;

namespace {

dist::communicator* g_world = nullptr;
dist::communicator& world() { return *g_world; }

std::vector<std::uint32_t> parameter_bits(const nn::Module<float>& m) {
    std::vector<std::uint32_t> bits;
    for (const auto& [n, p] : m.named_parameters()) {
        const auto v = p.value().to_vector();
        const std::size_t at = bits.size();
        bits.resize(at + v.size());
        std::memcpy(bits.data() + at, v.data(), v.size() * sizeof(float));
    }
    return bits;
}

/// A small ACT-ALBERT trained by train::Trainer over `comm` (micro-batches of 8 sequences).
struct albert_run {
    nn::albert_config cfg = [] {
        nn::albert_config c;
        c.vocab = 600;
        c.embed = 32;
        c.max_len = 48;
        c.depth = 4;
        c.layer.dim = 64;
        c.layer.heads = 4;
        c.layer.ff_dim = 128;
        c.layer.dropout = c.layer.attention_dropout = 0;
        return c;
    }();
    halting::ActAlbert<float, backend::cpu, halting::act> model;
    optim::Lamb<float> lamb;
    data::albert_sampler sampler;
    Generator own;  // a per-rank generator the checkpoint must give back to its rank
    std::vector<std::int64_t> iterations;  // Σ ACT iterations over the tokens of each micro-batch trained here

    explicit albert_run(std::uint64_t model_seed)
        : model(cfg, {.max_iterations = 4}, model_seed), lamb(model.named_parameters(), {.lr = 2e-3}),
          sampler(depthlab_test::random_albert_corpus(3, 60, cfg.vocab), sampler_config(cfg), 9), own(100 + static_cast<std::uint64_t>(world().rank())) {}
    static data::albert_data_config sampler_config(const nn::albert_config& c) {
        data::albert_data_config d;
        d.max_len = c.max_len;
        d.vocab = c.vocab;
        return d;
    }

    train::fit_result fit(dist::communicator& comm, std::int64_t steps, std::int64_t accumulate, const std::string& out = {},
                          bool resume = false) {
        train::Trainer<float> t(model, lamb, {.steps = steps, .accumulate = accumulate, .clip = 1.0, .log_every = 2, .save_every = 2,
                                              .out = out, .resume = resume, .comm = &comm});
        t.checkpoint().track("data", sampler);
        t.checkpoint().track("own", own);
        t.skip = [&] { (void)sampler.next(8); };
        return t.fit([&] {
            const data::albert_batch b = sampler.next(8);
            const auto l = model.losses(b);
            std::int64_t depth = 0;  // Σ over tokens of the iterations run: this micro-batch's depth
            for (int n : l.encoded.record.N) depth += n;
            iterations.push_back(depth);
            (void)own.reserve(1 + static_cast<std::uint64_t>(world().rank()));  // ranks draw different amounts
            const auto loss = add(add(l.mlm, l.sop), scale(l.encoded.ponder, 1e-3f));
            return train::micro_batch<float>{.loss = loss, .logged = {{"mlm", l.mlm}}, .tokens = b.size() * b.tokens.length};
        });
    }
};

/// Whether every rank holds the same values.
bool same_on_every_rank(const std::vector<std::uint32_t>& v) {
    auto& w = world();
    std::vector<std::int64_t> mine{static_cast<std::int64_t>(v.size()), 0};
    std::uint64_t h = 1469598103934665603ull;
    for (std::uint32_t x : v) h = (h ^ x) * 1099511628211ull;
    mine[1] = static_cast<std::int64_t>(h);
    std::vector<std::int64_t> all(2 * static_cast<std::size_t>(w.size()));
    w.all_gather(mine.data(), 2, all.data());
    for (int r = 1; r < w.size(); ++r)
        if (all[2 * r] != all[0] || all[2 * r + 1] != all[1]) return false;
    return true;
}

/// A directory every rank names the same: rank 0's choice, broadcast.
std::string shared_dir(const std::string& tag) {
    std::int64_t id = static_cast<std::int64_t>(::getpid());
    world().broadcast(&id, 1, 0);
    const fs::path p = fs::temp_directory_path() / ("depthlab_dist_" + tag + "_" + std::to_string(id));
    world().barrier();
    if (world().is_root()) fs::remove_all(p);
    world().barrier();
    return p.string();
}

}  // namespace

TEST_CASE("mpi communicator: sum, average, broadcast, all-gather and barrier") {
    auto& w = world();
    const int r = w.rank(), n = w.size();
    std::vector<float> f{1.0f + static_cast<float>(r), -2.0f * static_cast<float>(r), 0.5f};
    w.all_reduce(f.data(), f.size());
    CHECK(f[0] == doctest::Approx(n + n * (n - 1) / 2.0));
    CHECK(f[1] == doctest::Approx(-1.0 * n * (n - 1)));
    CHECK(f[2] == doctest::Approx(0.5 * n));
    std::vector<double> d{static_cast<double>(r)};
    w.all_reduce(d.data(), 1, dist::reduce_op::average);
    CHECK(d[0] == doctest::Approx((n - 1) / 2.0));
    std::int64_t big = r == n - 1 ? (std::int64_t{1} << 40) + 7 : 0;
    w.broadcast(&big, 1, n - 1);
    CHECK(big == (std::int64_t{1} << 40) + 7);
    std::vector<std::int32_t> mine{r, 10 * r}, all(2 * static_cast<std::size_t>(n));
    w.all_gather(mine.data(), 2, all.data());
    for (int k = 0; k < n; ++k) CHECK((all[2 * k] == k && all[2 * k + 1] == 10 * k));
    w.barrier();
    CHECK_THROWS_AS(w.broadcast(&big, 1, n), usage_error);  // (checked before any rank communicates)
}

TEST_CASE("data parallel: 2 ranks x accumulate 1 equal 1 process x accumulate 2, bit for bit, on every rank") {
    auto& w = world();
    // Every rank starts from other parameters: the trainer's broadcast makes them rank 0's.
    albert_run dp(5 + static_cast<std::uint64_t>(w.rank()));
    const auto r = dp.fit(w, 3, 1);
    CHECK(r.steps == 3);
    const auto dp_bits = parameter_bits(dp.model);
    CHECK(same_on_every_rank(dp_bits));

    albert_run alone(5);  // one process over the same global batches: w.size() micro-batches a step
    alone.fit(dist::local(), 3, w.size());
    const auto ref_bits = parameter_bits(alone.model);
    REQUIRE(dp_bits.size() == ref_bits.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < dp_bits.size(); ++i) differ += dp_bits[i] != ref_bits[i];
    if (w.size() <= 2) {  // one commutative addition per element: the same bits
        CHECK_MESSAGE(differ == 0, differ, " of ", dp_bits.size(), " parameter values differ from the single-process run");
    } else {  // MPI's summation order: the sums equal to rounding (checked on one step's gradient below);
              // LAMB's normalised update then amplifies last-bit differences of near-zero gradients
        MESSAGE(w.size(), " ranks: after 3 LAMB steps ", differ, " of ", dp_bits.size(), " parameter values differ");
        albert_run a(5), b(5);
        const auto reduced_gradient = [](albert_run& r, dist::communicator& c, int micro_batches) {
            dist::gradient_buckets<float, backend::cpu> g(c, dist::distinct_parameters(r.lamb.parameters()));
            g.zero();
            for (int i = 0; i < c.rank(); ++i) (void)r.sampler.next(8);  // the lower ranks' micro-batches
            for (int m = 0; m < micro_batches; ++m) {
                const auto l = r.model.losses(r.sampler.next(8));
                add(add(l.mlm, l.sop), scale(l.encoded.ponder, 1e-3f)).backward();
                g.add_gradients();
            }
            g.finish();
            std::vector<double> out;
            for (const auto& p : g.parameters())
                for (float v : p.grad().to_vector()) out.push_back(v);
            return out;
        };
        const auto dp = reduced_gradient(a, w, 1), ref = reduced_gradient(b, dist::local(), w.size());
        REQUIRE(dp.size() == ref.size());
        double diff = 0, norm = 0;
        for (std::size_t i = 0; i < dp.size(); ++i) {
            diff += (dp[i] - ref[i]) * (dp[i] - ref[i]);
            norm += ref[i] * ref[i];
        }
        const double rel = std::sqrt(diff / norm);
        MESSAGE(w.size(), " ranks: one step's all-reduced gradient is within ", rel, " (relative, 2-norm) of one process's sum");
        CHECK(rel <= 1e-6);
    }
    // Rank r trained on micro-batches r, r + W, ... of the single process's sequence, and the
    // ranks ran different depths (the all-reduce waits for the deeper one, outside the loop).
    REQUIRE(dp.iterations.size() == 3);
    for (std::size_t s = 0; s < dp.iterations.size(); ++s)
        CHECK(dp.iterations[s] == alone.iterations[s * static_cast<std::size_t>(w.size()) + static_cast<std::size_t>(w.rank())]);
    if (w.size() == 2) {
        std::vector<std::int64_t> both(6);
        w.all_gather(dp.iterations.data(), 3, both.data());
        CHECK_MESSAGE((both[0] != both[3] || both[1] != both[4] || both[2] != both[5]), "the ranks ran the same depths");
    }
}

TEST_CASE("data parallel: an interrupted and resumed run ends where a straight one ends, on every rank") {
    auto& w = world();
    const std::string d1 = shared_dir("straight"), d2 = shared_dir("resumed");
    albert_run straight(5);
    straight.fit(w, 4, 1, d1);
    {
        albert_run first(5);
        first.fit(w, 2, 1, d2);
    }
    albert_run resumed(6);  // other parameters, data position and generator until the restore
    resumed.fit(w, 4, 1, d2, /*resume=*/true);
    CHECK(parameter_bits(resumed.model) == parameter_bits(straight.model));
    CHECK(resumed.sampler.state().epoch == straight.sampler.state().epoch);
    CHECK(resumed.sampler.state().position == straight.sampler.state().position);
    CHECK(resumed.own.offset() == straight.own.offset());  // this rank's own, not rank 0's
    CHECK(same_on_every_rank(parameter_bits(resumed.model)));
    w.barrier();
    if (w.is_root()) {
        CHECK(fs::exists(d1 + "/metrics.jsonl"));
        fs::remove_all(d1);
        fs::remove_all(d2);
    }
}

TEST_CASE("sharded analyses: contribution and criticality split across ranks equal one process, entry for entry") {
    auto& w = world();
    nn::seq2seq_config cfg;
    cfg.src_vocab = cfg.tgt_vocab = 40;
    cfg.share_embeddings = true;
    cfg.encoder_layers = cfg.decoder_layers = 2;
    cfg.max_len = 16;
    cfg.layer.dim = 32;
    cfg.layer.heads = 4;
    cfg.layer.ff_dim = 64;
    cfg.layer.dropout = cfg.layer.attention_dropout = 0;
    nn::Seq2SeqTransformer<float> model(cfg, 3);
    const nn::Snapshot<float> theta0(model);
    {  // a few steps, so that θᶠ differs from θ⁰
        optim::Adam<float> adam(model.named_parameters(), {.lr = 1e-2});
        Generator g(4);
        for (int step = 0; step < 5; ++step) {
            const auto b = data::reverse_task_batch(g, 16, 8, 40);
            adam.zero_grad();
            cross_entropy(model.decode(model.encode(b.src), b.src, b.tgt_in), b.tgt_out).backward();
            adam.step();
        }
    }
    model.eval();
    const nn::Snapshot<float> thetaf(model);
    Generator eval_g(5);
    const auto eval_batch = data::reverse_task_batch(eval_g, 32, 8, 40);
    const analysis::metric_fn metric = [&] {  // higher is better: the negated loss
        return -static_cast<double>(cross_entropy(model.decode(model.encode(eval_batch.src), eval_batch.src, eval_batch.tgt_in), eval_batch.tgt_out)
                                        .value()
                                        .item());
    };
    const auto modules = analysis::default_modules(model);
    const analysis::contribution_options copt{.clip = 0.05};
    const auto split = analysis::contribution(w, modules, metric, copt);
    const auto alone = analysis::contribution(modules, metric, copt);
    REQUIRE(split.modules.size() == alone.modules.size());
    CHECK(split.base == alone.base);
    CHECK(split.max_drop == alone.max_drop);
    for (std::size_t i = 0; i < alone.modules.size(); ++i) {
        CHECK(split.modules[i].name == alone.modules[i].name);
        CHECK(split.modules[i].metric_without == alone.modules[i].metric_without);
        CHECK(split.modules[i].score == alone.modules[i].score);
    }
    CHECK(split.evaluations == alone.evaluations + static_cast<std::size_t>(w.size() - 1));  // each rank's baseline

    const analysis::criticality_options kopt{.epsilon = 0.02, .grid_steps = 4};
    const auto ksplit = analysis::criticality(w, model, modules, theta0, thetaf, metric, kopt);
    const auto kalone = analysis::criticality(model, modules, theta0, thetaf, metric, kopt);
    REQUIRE(ksplit.modules.size() == kalone.modules.size());
    for (std::size_t i = 0; i < kalone.modules.size(); ++i) {
        CHECK(ksplit.modules[i].alpha == kalone.modules[i].alpha);
        CHECK(ksplit.modules[i].metric_at_alpha == kalone.modules[i].metric_at_alpha);
        CHECK(ksplit.modules[i].trace == kalone.modules[i].trace);
    }
}

TEST_CASE("sharded decoding: each rank's range of sentences, gathered, is the whole list in order") {
    auto& w = world();
    std::vector<std::string> all;
    for (int i = 0; i < 11; ++i) all.push_back(std::string(static_cast<std::size_t>(i), 'a' + static_cast<char>(i)) + "\n\0x");
    const auto [begin, end] = dist::shard_range(all.size(), w);
    const std::vector<std::string> mine(all.begin() + static_cast<std::ptrdiff_t>(begin), all.begin() + static_cast<std::ptrdiff_t>(end));
    CHECK(dist::all_gather_strings(w, mine) == all);
}

TEST_CASE("data parallel on a device backend: the buckets stage device gradients through the host for MPI") {
    auto& w = world();
    Generator g(1);
    nn::Linear<float, backend::host_device> layer(4, 3, g);
    dist::gradient_buckets<float, backend::host_device> buckets(w, dist::distinct_parameters(layer.named_parameters()));
    buckets.zero();
    for (const auto& [name, p] : layer.named_parameters())
        p.grad() = Tensor<float, backend::host_device>::full(p.shape(), static_cast<float>(w.rank() + 1));
    buckets.add_gradients();
    buckets.finish();
    const float sum = static_cast<float>(w.size() * (w.size() + 1) / 2);
    for (const auto& [name, p] : layer.named_parameters()) CHECK(p.grad().to_vector() == std::vector<float>(static_cast<std::size_t>(p.value().numel()), sum));
    // rank 0's parameters reach every rank through the device buffers too
    for (const auto& [name, p] : layer.named_parameters())
        primitives<backend::host_device>::fill(p.value().numel(), static_cast<float>(w.rank()), const_cast<float*>(p.value().data()));
    dist::broadcast_parameters(w, dist::distinct_parameters(layer.named_parameters()));
    for (const auto& [name, p] : layer.named_parameters()) CHECK(p.value().to_vector() == std::vector<float>(static_cast<std::size_t>(p.value().numel()), 0.0f));
}

TEST_CASE("data parallel: schedule_by_time gives every rank rank 0's schedule position, so the ranks stay in step") {
    // Each rank's own position, steps x minutes / budget, follows its own clock; with a huge
    // `steps` and a budget of seconds, clocks read microseconds apart give positions hundreds
    // apart. A learning rate that follows the position then differs between ranks
    // unless every rank takes rank 0's.
    auto& w = world();
    albert_run run(6);
    const std::int64_t steps = 1'000'000'000;
    train::Trainer<float> t(run.model, run.lamb,
                            {.steps = steps, .log_every = 1000, .max_train_minutes = 0.05, .schedule_by_time = true, .comm = &w});
    t.skip = [&] { (void)run.sampler.next(8); };
    std::vector<std::int64_t> agreed, own;
    t.before_step = [&](std::int64_t s) {
        agreed.push_back(s);
        own.push_back(t.schedule_step());
    };
    t.schedule = [&](std::int64_t s) { return 2e-3 * (1.0 - static_cast<double>(s) / static_cast<double>(steps)); };
    const auto r = t.fit([&] {
        const data::albert_batch b = run.sampler.next(8);
        const auto l = run.model.losses(b);
        return train::micro_batch<float>{.loss = add(l.mlm, l.sop), .logged = {{"mlm", l.mlm}}};
    });
    REQUIRE(r.stopped_by_time);
    REQUIRE(!agreed.empty());
    std::vector<std::uint32_t> words;
    for (std::int64_t s : agreed) words.insert(words.end(), {static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(s >> 32)});
    CHECK(same_on_every_rank(words));
    CHECK(same_on_every_rank(parameter_bits(run.model)));
    if (w.is_root()) CHECK(own == agreed);
    else CHECK(own != agreed);  // (the test's premise: this rank's clock alone would have led elsewhere)
}

TEST_CASE("data parallel: a non-finite loss on one rank stops every rank at the same step, with an error") {
    auto& w = world();
    albert_run run(5);
    train::Trainer<float> t(run.model, run.lamb, {.steps = 5, .log_every = 1, .comm = &w});
    t.skip = [&] { (void)run.sampler.next(8); };
    std::int64_t calls = 0;
    std::string message;
    try {
        t.fit([&] {
            const data::albert_batch b = run.sampler.next(8);
            const auto l = run.model.losses(b);
            const bool poison = ++calls == 3 && w.rank() == w.size() - 1;
            const auto loss = poison ? scale(l.mlm, std::numeric_limits<float>::quiet_NaN()) : add(l.mlm, l.sop);
            return train::micro_batch<float>{.loss = loss, .logged = {{"loss", loss}}};
        });
    } catch (const numeric_error& e) {
        message = e.what();
    }
    CHECK(t.step() == 2);  // every rank stopped at step 3
    CHECK(message.find("trainer: step 3") != std::string::npos);
    if (w.size() > 1)
        CHECK(message.find(w.rank() == w.size() - 1 ? "rank " + std::to_string(w.rank()) + ":" : std::string("another rank")) != std::string::npos);
    w.barrier();  // and every rank can go on communicating
}

// ---- failure behaviour (run by tests/dist/failure.cmake, skipped otherwise) ----

TEST_CASE("failure: a rank that dies mid-run ends the job; the checkpoint stays good") {
    const char* dir = std::getenv("DEPTHLAB_DIST_FAILURE_DIR");
    const char* mode = std::getenv("DEPTHLAB_DIST_FAILURE");
    if (!dir || !mode) return;
    auto& w = world();
    albert_run run(5);
    train::Trainer<float> t(run.model, run.lamb, {.steps = 1000, .log_every = 1, .save_every = 1, .out = dir, .comm = &w});
    t.checkpoint().track("data", run.sampler);
    t.skip = [&] { (void)run.sampler.next(8); };
    std::int64_t calls = 0;
    t.fit([&] {
        if (++calls == 4 && w.rank() == w.size() - 1) {
            if (std::strcmp(mode, "kill") == 0) std::raise(SIGKILL);                    // dies
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));              // hangs
        }
        const data::albert_batch b = run.sampler.next(8);
        const auto l = run.model.losses(b);
        return train::micro_batch<float>{.loss = add(l.mlm, l.sop)};
    });
    FAIL("the run went on without its last rank");
}

TEST_CASE("failure: the checkpoint left by a failed job loads") {
    const char* dir = std::getenv("DEPTHLAB_DIST_CHECK_DIR");
    if (!dir) return;
    albert_run back(9);
    train::checkpointer<float> reader(std::string(dir) + "/checkpoint.safetensors");
    const std::int64_t step = reader.load(back.model, &back.lamb);
    CHECK(step >= 2);
    MESSAGE("the failed job's checkpoint holds step ", step);
}

int main(int argc, char** argv) {
    dist::communicator& w = dist::world(&argc, &argv, /*force=*/dist::built_with_mpi);
    g_world = &w;
    doctest::Context ctx(argc, argv);
    const int failed = ctx.run() != 0 ? 1 : 0;
    if (ctx.shouldExit()) return failed;
    std::int32_t any = failed;
    w.all_reduce(&any, 1);  // every rank exits with the job's verdict
    return any != 0 ? 1 : 0;
}
