// train::Trainer and train::checkpointer (exact resume, accumulation, the NaN guard, the
// time budget, bad options) and io::save_config / load_config (every field round-trips).
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <unistd.h>
#include <vector>

#include <depthlab/depthlab.hpp>

#include <doctest/doctest.h>
#include "temp_dir.hpp"

using namespace depthlab;
namespace fs = std::filesystem;

namespace {

struct scratch : depthlab_test::temp_dir {
    scratch() : depthlab_test::temp_dir("trainer", /*create=*/false) {}
};

/// y = x A for a fixed A: a linear layer learns it with Adam. The data generator is part
/// of the checkpoint, so a resumed run draws the same batches.
struct regression {
    Generator init{7}, data{11};
    nn::Linear<float> model{8, 4, init};
    optim::Adam<float> opt{model.named_parameters(), {.lr = 1e-2}};
    Tensor<float> A = Tensor<float>::randn({8, 4}, init);

    train::micro_batch<float> next(float poison = 1.0f) { return on(Tensor<float>::randn({16, 8}, data), poison); }
    train::micro_batch<float> on(const Tensor<float>& xs, float poison = 1.0f) {
        const auto x = Var<float>::constant(xs);
        const auto y = Var<float>::constant(matmul(x, Var<float>::constant(A)).value());
        auto loss = scale(mse(model(x), y), poison);
        return {.loss = loss, .logged = {{"loss", loss}}, .tokens = 16};
    }
    train::Trainer<float> trainer(train::trainer_options o) {
        train::Trainer<float> t(model, opt, std::move(o));
        t.checkpoint().track("data", data);
        t.schedule = [](std::int64_t done) { return 1e-2 / std::sqrt(1.0 + static_cast<double>(done)); };
        return t;
    }
    [[nodiscard]] std::vector<float> parameters() const {
        std::vector<float> out;
        for (const auto& [n, p] : model.named_parameters())
            for (float v : p.value().to_vector()) out.push_back(v);
        return out;
    }
};

std::vector<std::int64_t> logged_steps(const std::string& path) {
    std::vector<std::int64_t> steps;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) steps.push_back(nlohmann::json::parse(line).at("step").get<std::int64_t>());
    return steps;
}

}  // namespace

TEST_CASE("trainer: an interrupted and resumed run ends exactly where a straight run ends") {
    scratch d1, d2;
    regression straight;
    auto t1 = straight.trainer({.steps = 8, .log_every = 2, .save_every = 4, .out = d1.str()});
    const auto r1 = t1.fit([&] { return straight.next(); });
    CHECK(r1.steps == 8);
    CHECK(logged_steps(d1.str() + "/metrics.jsonl") == std::vector<std::int64_t>{2, 4, 6, 8});

    {
        regression first;
        auto t = first.trainer({.steps = 4, .log_every = 2, .save_every = 4, .out = d2.str()});
        t.fit([&] { return first.next(); });
    }
    regression resumed;  // a fresh process: other parameters, other data position until restore
    auto t2 = resumed.trainer({.steps = 8, .log_every = 2, .save_every = 4, .out = d2.str(), .resume = true});
    CHECK(t2.restore() == 4);
    const auto r2 = t2.fit([&] { return resumed.next(); });
    CHECK(r2.first_step == 4);
    CHECK(r2.steps == 8);
    CHECK(resumed.parameters() == straight.parameters());  // bit for bit
    CHECK(logged_steps(d2.str() + "/metrics.jsonl") == std::vector<std::int64_t>{2, 4, 6, 8});
    CHECK(r2.last_log == r1.last_log);  // the means of steps 7 and 8, grad_norm, lr
}

TEST_CASE("trainer: two micro-batches of the same data equal one (the loss is divided by accumulate)") {
    regression one, two;
    auto t1 = one.trainer({.steps = 3, .clip = 0, .log_every = 3});
    auto t2 = two.trainer({.steps = 3, .accumulate = 2, .clip = 0, .log_every = 3});
    t1.fit([&] { return one.next(); });
    std::int64_t calls = 0;
    Tensor<float> held;
    t2.fit([&] {
        if (calls++ % 2 == 0) held = Tensor<float>::randn({16, 8}, two.data);
        return two.on(held);  // the second micro-batch repeats the first one's data
    });
    CHECK(calls == 6);
    CHECK(one.parameters() == two.parameters());
}

TEST_CASE("trainer: a non-finite loss stops the run and keeps the last good checkpoint") {
    scratch dir;
    regression r;
    auto t = r.trainer({.steps = 10, .log_every = 1, .save_every = 2, .out = dir.str()});
    std::int64_t calls = 0;
    std::string message;
    try {
        t.fit([&] { return r.next(++calls == 5 ? std::numeric_limits<float>::quiet_NaN() : 1.0f); });
    } catch (const numeric_error& e) {
        message = e.what();
    }
    CHECK(message.find("trainer: step 5") != std::string::npos);
    CHECK(message.find("last checkpoint (step 4") != std::string::npos);
    regression back;
    train::checkpointer<float> reader(dir.str() + "/checkpoint.safetensors");
    CHECK(reader.load(back.model, &back.opt) == 4);
    CHECK(logged_steps(dir.str() + "/metrics.jsonl") == std::vector<std::int64_t>{1, 2, 3, 4});
}

TEST_CASE("trainer: a finite blow-up of the loss stops the run, naming the step and the bound") {
    scratch dir;
    regression r;
    auto t = r.trainer({.steps = 20, .log_every = 1, .save_every = 100, .out = dir.str()});
    std::int64_t calls = 0;
    // Step 8's loss is 1e6 times the others: finite, so only the divergence guard can see it.
    CHECK_THROWS_WITH_AS(t.fit([&] { return r.next(++calls == 8 ? 1e6f : 1.0f); }),
                         doctest::Contains("trainer: step 8: diverged: the loss"), numeric_error);
    CHECK(t.step() == 7);
    // The same run with the guard's loss test off trains through it.
    regression free;
    auto u = free.trainer({.steps = 10, .log_every = 5, .save_every = 100, .divergence = {.loss_factor = 0}});
    calls = 0;
    CHECK(u.fit([&] { return free.next(++calls == 8 ? 1e6f : 1.0f); }).steps == 10);
    CHECK_THROWS_AS(free.trainer({.divergence = {.loss_factor = 0.5}}), usage_error);
    CHECK_THROWS_AS(free.trainer({.divergence = {.max_parameter_rms = -1}}), usage_error);
}

TEST_CASE("trainer: runaway weights stop the run, and the checkpoint on disk is the last known-good one") {
    scratch dir;
    regression r;
    auto t = r.trainer({.steps = 40, .log_every = 1, .save_every = 1, .out = dir.str(), .divergence = {.confirm_steps = 3}});
    // From step 13 on the learning rate is 1e30: Adam moves every weight by ~1e30 at once.
    t.schedule = [](std::int64_t done) { return done >= 12 ? 1e30 : 1e-2; };
    std::string message;
    try {
        t.fit([&] { return r.next(); });
    } catch (const numeric_error& e) {
        message = e.what();
    }
    CHECK(message.find("trainer: step 13: diverged: the parameters' root mean square") != std::string::npos);
    CHECK(message.find("max_parameter_rms 1000") != std::string::npos);
    // Checkpoints of steps 1..12 were written every step; known good: those 3 steps older than
    // the trip, so the newest is step 12 (unconfirmed) and the one put back is from step 9 or
    // earlier (the candidate promoted at most confirm_steps later).
    CHECK(message.find("is again the last known-good checkpoint (step ") != std::string::npos);
    regression back;
    train::checkpointer<float> reader(dir.str() + "/checkpoint.safetensors");
    const std::int64_t kept = reader.load(back.model, &back.opt);
    CHECK(kept >= 4);
    CHECK(kept <= 9);
    train::checkpointer<float> suspect(dir.str() + "/checkpoint.suspect.safetensors");
    CHECK(suspect.load(back.model, &back.opt) == 12);
    CHECK_FALSE(fs::exists(dir.str() + "/checkpoint.previous.safetensors"));
    CHECK_FALSE(fs::exists(dir.str() + "/checkpoint.candidate.safetensors"));

    // A run that ends normally leaves one checkpoint, whatever it kept on the way.
    scratch clean;
    regression ok;
    auto c = ok.trainer({.steps = 10, .log_every = 5, .save_every = 1, .out = clean.str(), .divergence = {.confirm_steps = 4}});
    c.fit([&] { return ok.next(); });
    CHECK(fs::exists(clean.str() + "/checkpoint.safetensors"));
    CHECK_FALSE(fs::exists(clean.str() + "/checkpoint.previous.safetensors"));
    CHECK_FALSE(fs::exists(clean.str() + "/checkpoint.candidate.safetensors"));
}

TEST_CASE("trainer: resuming a good checkpoint with a learning rate that blows up leaves that checkpoint untouched") {
    scratch dir;
    {
        regression first;
        auto t = first.trainer({.steps = 6, .log_every = 3, .save_every = 3, .out = dir.str()});
        t.fit([&] { return first.next(); });
    }
    const auto bytes = [&] {
        std::ifstream in(dir.str() + "/checkpoint.safetensors", std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string before = bytes();
    regression resumed;
    auto t = resumed.trainer({.steps = 20, .log_every = 1, .save_every = 1, .out = dir.str(), .resume = true});
    t.schedule = [](std::int64_t) { return 1e30; };
    CHECK_THROWS_WITH_AS(t.fit([&] { return resumed.next(); }), doctest::Contains("the last checkpoint (step 6"), numeric_error);
    CHECK(bytes() == before);
}

TEST_CASE("trainer: a run killed between progress lines resumes to the same metrics records") {
    // log_every 4, save_every 3: the checkpoint of step 6 is written halfway through the
    // line of steps 5-8, whose means must still cover all four steps after the resume.
    const auto without_times = [](const std::string& path) {
        std::vector<nlohmann::json> out;
        std::ifstream in(path);
        for (std::string line; std::getline(in, line);) {
            auto j = nlohmann::json::parse(line);
            j.erase("tokens_per_s");
            j.erase("elapsed_s");
            out.push_back(j);
        }
        return out;
    };
    scratch d1, d2;
    regression straight;
    straight.trainer({.steps = 8, .log_every = 4, .save_every = 3, .out = d1.str()}).fit([&] { return straight.next(); });
    {
        regression killed;
        auto t = killed.trainer({.steps = 8, .log_every = 4, .save_every = 3, .out = d2.str()});
        std::int64_t calls = 0;
        CHECK_THROWS_AS(t.fit([&] {
            if (++calls == 7) throw std::runtime_error("killed");
            return killed.next();
        }), std::runtime_error);
    }
    regression resumed;
    auto t = resumed.trainer({.steps = 8, .log_every = 4, .save_every = 3, .out = d2.str(), .resume = true});
    CHECK(t.restore() == 6);
    t.fit([&] { return resumed.next(); });
    const auto a = without_times(d1.str() + "/metrics.jsonl"), b = without_times(d2.str() + "/metrics.jsonl");
    REQUIRE(a.size() == 2);
    CHECK(a == b);
}

TEST_CASE("trainer: the time budget stops after the step that crosses it, and saves") {
    scratch dir;
    regression r;
    auto t = r.trainer({.steps = 1000, .log_every = 100, .save_every = 100, .max_train_minutes = 1e-12, .out = dir.str()});
    int evaluations = 0;
    t.evaluate = [&](std::int64_t step, bool final) {
        ++evaluations;
        CHECK(final);
        CHECK_FALSE(r.model.is_training());
        return nlohmann::ordered_json{{"evaluated_at", step}};
    };
    const auto res = t.fit([&] { return r.next(); });
    CHECK(res.stopped_by_time);
    CHECK(res.steps == 1);
    CHECK(evaluations == 1);
    regression back;
    train::checkpointer<float> reader(dir.str() + "/checkpoint.safetensors");
    CHECK(reader.load(back.model, nullptr) == 1);
    CHECK(logged_steps(dir.str() + "/metrics.jsonl") == std::vector<std::int64_t>{1, 1});  // the progress line and the evaluation
}

TEST_CASE("trainer: schedule_by_time hands the hooks max(steps done, the time budget's share of the steps)") {
    const auto seen_by_hooks = [](train::trainer_options o) {
        regression r;
        auto t = r.trainer(std::move(o));
        std::vector<std::int64_t> scheduled, before;
        t.schedule = [&](std::int64_t s) { scheduled.push_back(s); return 1e-3; };
        t.before_step = [&](std::int64_t s) { before.push_back(s); };
        t.fit([&] { return r.next(); });
        CHECK(scheduled == before);  // both hooks see the same position
        return scheduled;
    };
    // A budget spent at once: the schedule is at its end (step 1000 of 1000) from the first step.
    CHECK(seen_by_hooks({.steps = 1000, .log_every = 100, .max_train_minutes = 1e-12, .schedule_by_time = true}) ==
          std::vector<std::int64_t>{1000});
    // Without schedule_by_time the same budget leaves the hooks on the step count.
    CHECK(seen_by_hooks({.steps = 1000, .log_every = 100, .max_train_minutes = 1e-12}) == std::vector<std::int64_t>{0});
    // A budget far from spent: the steps lead.
    CHECK(seen_by_hooks({.steps = 3, .log_every = 100, .max_train_minutes = 1e6, .schedule_by_time = true}) ==
          std::vector<std::int64_t>{0, 1, 2});
}

TEST_CASE("trainer: the time budget counts the minutes of the run a resume continues") {
    scratch dir;
    {
        regression first;
        auto t = first.trainer({.steps = 4, .log_every = 2, .save_every = 4, .max_train_minutes = 1e6, .out = dir.str()});
        t.fit([&] { return first.next(); });
        CHECK(t.minutes_trained() > 0);
    }
    regression probe;
    train::checkpointer<float> reader(dir.str() + "/checkpoint.safetensors");
    CHECK(reader.load(probe.model, nullptr) == 4);
    REQUIRE(reader.metadata().count("train.minutes") == 1);
    const double before = std::stod(reader.metadata().at("train.minutes"));
    CHECK(before > 0);
    // A budget smaller than what the first run already trained: the resumed run stops after one step.
    regression resumed;
    auto t = resumed.trainer({.steps = 100, .log_every = 1, .save_every = 100, .max_train_minutes = before / 2, .out = dir.str(), .resume = true});
    const auto res = t.fit([&] { return resumed.next(); });
    CHECK(res.stopped_by_time);
    CHECK(res.first_step == 4);
    CHECK(res.steps == 5);
    CHECK(t.minutes_trained() > before);

    // Without a budget nothing time-dependent is saved: the same run writes the same bytes.
    scratch plain;
    regression unbudgeted;
    auto u = unbudgeted.trainer({.steps = 2, .log_every = 2, .save_every = 2, .out = plain.str()});
    u.fit([&] { return unbudgeted.next(); });
    train::checkpointer<float> plain_reader(plain.str() + "/checkpoint.safetensors");
    CHECK(plain_reader.load(probe.model, nullptr) == 2);
    CHECK(plain_reader.metadata().count("train.minutes") == 0);
}

TEST_CASE("trainer: bad options and bad tracking are usage errors") {
    regression r;
    CHECK_THROWS_AS(r.trainer({.log_every = 0}), usage_error);
    CHECK_THROWS_AS(r.trainer({.save_every = 0}), usage_error);
    CHECK_THROWS_AS(r.trainer({.accumulate = 0}), usage_error);
    CHECK_THROWS_AS(r.trainer({.clip = -1}), usage_error);
    CHECK_THROWS_AS(r.trainer({.max_train_minutes = std::nan("")}), usage_error);
    CHECK_THROWS_AS(r.trainer({.resume = true}), usage_error);  // nowhere to resume from
    CHECK_THROWS_AS(r.trainer({.schedule_by_time = true}), usage_error);  // no time budget to schedule by
    scratch dir;
    fs::create_directories(dir.path);
    std::ofstream(dir.str() + "/file") << "x";
    CHECK_THROWS_AS(r.trainer({.out = dir.str() + "/file"}), io_error);  // a file, not a directory
    train::checkpointer<float> c("unused");
    Generator g(1);
    c.track("data", g);
    CHECK_THROWS_AS(c.track("data", g), usage_error);
    CHECK_THROWS_AS(c.track("step", [] { return io::metadata_map{}; }, [](const io::metadata_map&) {}), usage_error);
    CHECK_THROWS_AS(c.track("optim", [] { return io::metadata_map{}; }, [](const io::metadata_map&) {}), usage_error);
}

TEST_CASE("checkpointer: a resume without the stream state it tracks names the missing key") {
    scratch dir;
    regression r;
    fs::create_directories(dir.path);
    train::checkpointer<float> w(dir.str() + "/c.safetensors");
    w.save(r.model, &r.opt, 3);
    train::checkpointer<float> c(dir.str() + "/c.safetensors");
    c.track("sampler", [] { return io::metadata_map{}; }, [](const io::metadata_map&) {});
    CHECK_THROWS_WITH_AS(c.load(r.model, &r.opt), doctest::Contains("no metadata 'sampler.*'"), io_error);
    CHECK_THROWS_WITH_AS(train::state_u64({{"epoch", "x1"}}, "epoch"), doctest::Contains("'epoch' = 'x1'"), io_error);
    CHECK_THROWS_WITH_AS(train::state_u64({}, "epoch"), doctest::Contains("no 'epoch'"), io_error);
}

TEST_CASE("checkpointer: a tracked translation_stream continues exactly after a load") {
    scratch dir;
    regression r;
    fs::create_directories(dir.path);
    std::vector<data::token_pair> pairs;
    for (std::int64_t i = 0; i < 40; ++i) pairs.push_back({{4 + i % 7, 5, 6}, {7, 8 + i % 5}});
    const data::translation_batcher batcher(pairs, {.max_tokens = 24});
    data::translation_stream stream(batcher, 5);
    for (int i = 0; i < 7; ++i) (void)stream.next();  // into the second epoch
    train::checkpointer<float> w(dir.str() + "/c.safetensors");
    w.track("data", stream);
    w.save(r.model, nullptr, 7);
    const data::stream_state at_save = stream.state();
    const auto want = stream.next().src.ids;

    data::translation_stream fresh(batcher, 99);
    train::checkpointer<float> c(dir.str() + "/c.safetensors");
    c.track("data", fresh);
    c.load(r.model, nullptr);
    CHECK(fresh.state() == at_save);
    CHECK(fresh.next().src.ids == want);
    // the keys are the field names, as the examples wrote them by hand before
    const io::safetensors_file f(dir.str() + "/c.safetensors");
    for (const char* k : {"data.epoch_seed", "data.epoch_offset", "data.next_batch", "data.epoch"}) CHECK(f.metadata().count(k) == 1);
}

// ---- configs in checkpoint metadata ----
// A new field must be added to its struct's config_fields (next to the struct); these sizes make the
// round trip below fail to compile until it is (update them with the field).
static_assert(sizeof(nn::transformer_config) == 72, "transformer_config changed: add the field to its config_fields");
static_assert(sizeof(nn::seq2seq_config) == 112, "seq2seq_config changed: add the field to its config_fields");
static_assert(sizeof(nn::albert_config) == 120, "albert_config changed: add the field to its config_fields");
static_assert(sizeof(nn::gpt2_config) == 96, "gpt2_config changed: add the field to its config_fields");
// (act_options::row_quantum is left out on purpose: how the compact path groups its rows on
// this machine, not a property of the model, and exact either way; a key for it would make
// every older checkpoint unloadable)
static_assert(sizeof(halting::act_options) == 56, "act_options changed: add the field to its config_fields");

TEST_CASE("config: every field of every model config round-trips through checkpoint metadata") {
    nn::seq2seq_config s;
    s.src_vocab = 123;
    s.tgt_vocab = 456;
    s.share_embeddings = true;
    s.tie_output = false;
    s.encoder_layers = 3;
    s.decoder_layers = 2;
    s.max_len = 77;
    s.layer = {.dim = 96, .heads = 3, .ff_dim = 200, .act = nn::activation::gelu, .dropout = 0.1 + 1e-17, .attention_dropout = 1.0 / 3,
               .norm_first = true, .ln_eps = 1e-12, .init = nn::init_scheme::bert};
    nn::albert_config a;
    a.vocab = 999;
    a.embed = 24;
    a.max_len = 64;
    a.segments = 3;
    a.depth = 9;
    a.layer = s.layer;
    a.layer.act = nn::activation::relu;
    a.layer.init = nn::init_scheme::xavier;
    a.sop_dropout = 0.15;
    halting::act_options h;
    h.max_iterations = 11;
    h.epsilon = 0.037;
    h.min_iterations = 2;
    h.compact = false;
    h.fixed_point_trace = halting::act_options::trace::always;
    h.lambda_p = 0.3;
    h.halting_bias = -2.5;

    nn::gpt2_config g{.vocab = 321, .positions = 48, .depth = 5, .layer = s.layer};
    g.layer.dropout = 0.0;

    io::metadata_map md;
    io::save_config(md, "gpt2.", g);
    io::save_config(md, "config.", s);
    io::save_config(md, "albert.", a);
    io::save_config(md, "act.", h);
    const auto s2 = io::load_config<nn::seq2seq_config>(md, "config.");
    const auto a2 = io::load_config<nn::albert_config>(md, "albert.");
    const auto h2 = io::load_config<halting::act_options>(md, "act.");
    const auto same_layer = [](const nn::transformer_config& x, const nn::transformer_config& y) {
        return x.dim == y.dim && x.heads == y.heads && x.ff_dim == y.ff_dim && x.act == y.act && x.dropout == y.dropout &&
               x.attention_dropout == y.attention_dropout && x.norm_first == y.norm_first && x.ln_eps == y.ln_eps && x.init == y.init;
    };
    const auto g2 = io::load_config<nn::gpt2_config>(md, "gpt2.");
    CHECK(g2.vocab == 321);
    CHECK(g2.positions == 48);
    CHECK(g2.depth == 5);
    CHECK(same_layer(g2.layer, g.layer));
    CHECK(s2.src_vocab == 123);
    CHECK(s2.tgt_vocab == 456);
    CHECK(s2.share_embeddings);
    CHECK_FALSE(s2.tie_output);
    CHECK(s2.encoder_layers == 3);
    CHECK(s2.decoder_layers == 2);
    CHECK(s2.max_len == 77);
    CHECK(same_layer(s2.layer, s.layer));
    CHECK(a2.vocab == 999);
    CHECK(a2.embed == 24);
    CHECK(a2.max_len == 64);
    CHECK(a2.segments == 3);
    CHECK(a2.sop_dropout == 0.15);
    CHECK(a2.depth == 9);
    CHECK(same_layer(a2.layer, a.layer));
    CHECK(h2.max_iterations == 11);
    CHECK(h2.epsilon == 0.037);
    CHECK(h2.min_iterations == 2);
    CHECK_FALSE(h2.compact);
    CHECK(h2.fixed_point_trace == halting::act_options::trace::always);
    CHECK(h2.lambda_p == 0.3);
    CHECK(h2.halting_bias == -2.5);
    CHECK(std::isnan(io::load_config<halting::act_options>([] {
        io::metadata_map m;
        io::save_config(m, "", halting::act_options{});
        return m;
    }(), "").halting_bias));  // the default (the policy's bias) survives as NaN
    CHECK(md.at("config.layer.activation") == "gelu");
    CHECK(md.at("albert.layer.init") == "xavier");

    SUBCASE("a missing or malformed key is an io_error naming it") {
        auto bad = md;
        bad.erase("config.layer.heads");
        CHECK_THROWS_WITH_AS((void)io::load_config<nn::seq2seq_config>(bad, "config."), doctest::Contains("'config.layer.heads'"), io_error);
        bad = md;
        bad["config.max_len"] = "77x";
        CHECK_THROWS_WITH_AS((void)io::load_config<nn::seq2seq_config>(bad, "config."), doctest::Contains("'config.max_len' = '77x'"), io_error);
        bad = md;
        bad["config.layer.activation"] = "swish";
        CHECK_THROWS_WITH_AS((void)io::load_config<nn::seq2seq_config>(bad, "config."), doctest::Contains("'swish'"), io_error);
        bad = md;
        bad["act.compact"] = "1";
        CHECK_THROWS_AS((void)io::load_config<halting::act_options>(bad, "act."), io_error);
    }
}

TEST_CASE("data parallel on one process: the shard arithmetic, sharded ranges and gathers, the buckets") {
    const dist::shard_of s{.rank = 1, .world = 3, .accumulate = 2};
    CHECK(s.micro_batches() == 6);
    CHECK(s.before() == 2);
    CHECK(s.after() == 2);
    dist::communicator& one = dist::local();
    CHECK((one.rank() == 0 && one.size() == 1 && !one.distributed()));
    CHECK(dist::shard_range(7, one) == std::pair<std::size_t, std::size_t>{0, 7});
    CHECK(dist::all_gather_strings(one, {"a", "", "b"}) == std::vector<std::string>{"a", "", "b"});
    double v = 3;
    one.all_reduce(&v, 1, dist::reduce_op::average);  // a mean over one rank is the value
    CHECK(v == 3);

    // The buckets sum micro-batch gradients in order and leave a parameter without any
    // gradient without one.
    Generator g(1);
    nn::Linear<float> used(3, 2, g), unused(3, 2, g);
    std::vector<Var<float>> params{used.weight, used.bias, unused.weight};
    dist::gradient_buckets<float, backend::cpu> buckets(one, params);
    CHECK(buckets.bytes() == (6 + 2 + 6 + 3 + 1) * sizeof(float));  // values, a flag per parameter, the poison flag
    buckets.zero();
    for (float k : {1.0f, 2.0f}) {
        used.weight.grad() = Tensor<float>::full({2, 3}, k);
        used.bias.grad() = Tensor<float>::full({2}, -k);
        buckets.add_gradients();
        CHECK(!used.weight.grad().defined());  // cleared for the next micro-batch
    }
    buckets.finish();
    CHECK(used.weight.grad().to_vector() == std::vector<float>(6, 3.0f));
    CHECK(used.bias.grad().to_vector() == std::vector<float>(2, -3.0f));
    CHECK(!unused.weight.grad().defined());
}

TEST_CASE("trainer: a communicator of one rank needs no skip hook and changes nothing") {
    regression a, b;
    auto t1 = a.trainer({.steps = 3, .accumulate = 2, .clip = 0, .log_every = 3});
    auto t2 = b.trainer({.steps = 3, .accumulate = 2, .clip = 0, .log_every = 3, .comm = &dist::local()});
    CHECK(t2.is_root());
    CHECK(t2.shard().micro_batches() == 2);
    t1.fit([&] { return a.next(); });
    t2.fit([&] { return b.next(); });
    CHECK(a.parameters() == b.parameters());
}

TEST_CASE("trainer: resuming a checkpoint beyond steps is an error; steps 0 writes the untrained model's checkpoint") {
    scratch dir;
    {
        regression first;
        first.trainer({.steps = 5, .log_every = 5, .save_every = 5, .out = dir.str()}).fit([&] { return first.next(); });
    }
    regression again;
    auto t = again.trainer({.steps = 3, .log_every = 1, .save_every = 1, .out = dir.str(), .resume = true});
    CHECK_THROWS_WITH_AS(t.fit([&] { return again.next(); }), doctest::Contains("is at step 5, beyond steps 3: nothing to train"), usage_error);
    scratch zero;
    regression untrained;
    const auto r = untrained.trainer({.steps = 0, .out = zero.str()}).fit([&] { return untrained.next(); });
    CHECK(r.steps == 0);
    train::checkpointer<float> reader(zero.str() + "/checkpoint.safetensors");
    regression back;
    CHECK(reader.load(back.model, &back.opt) == 0);
    CHECK(back.parameters() == untrained.parameters());
}

TEST_CASE("checkpointer: resuming from a parameters-only file says it is not a training checkpoint") {
    scratch dir;
    regression r;
    fs::create_directories(dir.path);
    io::save_parameters(dir.str() + "/params.safetensors", r.model);
    train::checkpointer<float> c(dir.str() + "/params.safetensors");
    CHECK_THROWS_WITH_AS(c.load(r.model, &r.opt), doctest::Contains("is not a training checkpoint"), io_error);
}
