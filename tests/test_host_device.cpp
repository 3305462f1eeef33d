// backend::host_device: the op layer runs on a backend that is not host-accessible, gives
// the CPU's bits, and a training step synchronises with the "device" only where the
// algorithm needs a host decision. Counts are exact: host_device counts every primitive
// call (launch) and every device-to-host copy (sync).
#include <cstring>

#include "harness.hpp"

using namespace depthlab;
using depthlab_test::to_double;
using hd = backend::host_device;

namespace {

device_counters& hd_counters() { return counters<hd>(); }

nn::transformer_config layer_config() {
    nn::transformer_config c;
    c.dim = 32;
    c.heads = 4;
    c.ff_dim = 64;
    c.dropout = c.attention_dropout = 0;
    return c;
}

/// The parameters' values on the host, in order.
template <class M>
std::vector<std::vector<float>> values(const M& m) {
    std::vector<std::vector<float>> out;
    for (const auto& [name, p] : m.named_parameters()) out.push_back(p.value().to_host());
    return out;
}

/// One dense encoder-layer training step: forward, mse loss, backward, clip, AdamW step.
template <class B>
void encoder_step(nn::EncoderLayer<float, B>& layer, optim::AdamW<float, B>& opt, const Tensor<float, B>& x,
                  const Tensor<float, B>& target, const Tensor<float, B>& mask) {
    opt.zero_grad();
    const Var<float, B> y = layer(Var<float, B>::constant(x), mask);
    const Var<float, B> loss = mse(y, Var<float, B>::constant(target));
    loss.backward();
    optim::clip_grad_norm_on_device(opt.parameters(), 1.0);
    opt.step();
}

}  // namespace

TEST_CASE("host_device: element access is refused at compile time; values leave only through to_host") {
    static_assert(!hd::host_accessible);
    auto t = Tensor<float, hd>::from({2, 2}, {1, 2, 3, 4});
    hd_counters().reset();
    CHECK(t.to_host() == std::vector<float>{1, 2, 3, 4});
    CHECK(hd_counters().syncs == 1);
    CHECK(t.to<backend::cpu>()(1, 0) == 3.0f);
    CHECK(hd_counters().syncs == 2);
}

TEST_CASE("host_device: a dense encoder-layer training step makes no host synchronisation and gives the CPU's bits") {
    Generator g1(11), g2(11);
    nn::EncoderLayer<float, backend::cpu> cpu_layer(layer_config(), g1);
    nn::EncoderLayer<float, hd> dev_layer(layer_config(), g2);
    optim::AdamW<float, backend::cpu> cpu_opt(cpu_layer.named_parameters(), {.lr = 1e-2});
    optim::AdamW<float, hd> dev_opt(dev_layer.named_parameters(), {.lr = 1e-2});
    Generator gx(3);
    const auto x = Tensor<float>::randn({3, 8, 32}, gx);
    const auto target = Tensor<float>::randn({3, 8, 32}, gx);
    const std::vector<index_t> lengths{8, 5, 2};
    const auto mask = nn::padding_mask<float, backend::cpu>(lengths, 8);
    const auto xd = x.to<hd>(), td = target.to<hd>(), md = mask.to<hd>();
    for (int step = 0; step < 2; ++step) {
        encoder_step(cpu_layer, cpu_opt, x, target, mask);
        hd_counters().reset();
        encoder_step(dev_layer, dev_opt, xd, td, md);
        CHECK(hd_counters().syncs == 0);
        MESSAGE("dense encoder-layer step (d32, B3 T8, AdamW, clipping): ", hd_counters().launches.load(), " launches, ",
                hd_counters().syncs.load(), " syncs, ", hd_counters().uploads.load(), " uploads");
        CHECK(hd_counters().launches > 0);
    }
    const auto a = values(cpu_layer), b = values(dev_layer);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) == 0);
}

TEST_CASE("host_device: an ACT step synchronises twice (a read of the running tokens and the record), compact or dense, plus the loss it prints") {
    using halting::act;
    nn::transformer_config c = layer_config();
    c.init = nn::init_scheme::bert;
    Generator g1(5), g2(5);
    halting::ActEncoder<float, backend::cpu, act> cpu_enc(c, g1, {.max_iterations = 6});
    halting::ActEncoder<float, hd, act> dev_enc(c, g2, {.max_iterations = 6});
    optim::Lamb<float, backend::cpu> cpu_opt(cpu_enc.named_parameters(), {.lr = 1e-2});
    optim::Lamb<float, hd> dev_opt(dev_enc.named_parameters(), {.lr = 1e-2});
    Generator gx(9);
    const auto x = Tensor<float>::randn({3, 8, 32}, gx);
    const auto w = Tensor<float>::randn({3, 8, 32}, gx);
    const std::vector<index_t> lengths{8, 6, 3};
    const auto xd = x.to<hd>(), wd = w.to<hd>();
    for (const bool compact : {true, false}) {
        CAPTURE(compact);
        cpu_enc.opt.compact = dev_enc.opt.compact = compact;
        // cpu
        cpu_opt.zero_grad();
        auto rc = cpu_enc(Var<float>::constant(x), lengths);
        auto lc = add(sum(mul(rc.hidden, Var<float>::constant(w))), scale(rc.ponder, 0.01f));
        lc.backward();
        cpu_opt.step();
        // host_device
        hd_counters().reset();
        dev_opt.zero_grad();
        auto rd = dev_enc(Var<float, hd>::constant(xd), lengths);
        auto ld = add(sum(mul(rd.hidden, Var<float, hd>::constant(wd))), scale(rd.ponder, 0.01f));
        ld.backward();
        dev_opt.step();
        const float printed = checked_item(ld);
        CHECK(rd.record.iterations >= 2);
        CHECK(rd.record.compact == compact);
        CHECK(hd_counters().syncs == dev_enc.opt.host_reads + 2);
        MESSAGE("ACT step (", std::string(compact ? "compact" : "dense"), ", ", rd.record.iterations, " iterations): ", hd_counters().launches.load(),
                " launches, ", hd_counters().syncs.load(), " syncs");
        CHECK(printed == lc.value().item());
        CHECK(rd.record.N == rc.record.N);
    }
    const auto a = values(cpu_enc), b = values(dev_enc);
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) == 0);
}

// The compact path's reads of which tokens run (act_options::host_reads) decide only which rows
// are computed: halted tokens among them have weight 0, so every schedule computes the CPU's
// values (which reads after every iteration) — bit for bit with a read after every iteration;
// with fewer reads the products and the gradients' sums over rows meet other row counts, so the
// last bits may differ. One synchronisation per read made, plus the record.
TEST_CASE("host_device: the compact ACT path computes the CPU's values whatever its read schedule") {
    nn::transformer_config c = layer_config();
    c.init = nn::init_scheme::bert;
    Generator gx(9);
    const auto x = Tensor<float>::uniform({4, 8, 32}, gx, -1, 1);
    const std::vector<index_t> lengths{8, 6, 3, 8};
    const auto run = [&]<class Bk>(Bk, int host_reads) {
        Generator g(5);
        halting::ActEncoder<float, Bk, halting::act> enc(c, g, {.max_iterations = 6, .min_iterations = 2, .host_reads = host_reads});
        enc.halting_unit->bias.value().fill_(-0.6f);
        hd_counters().reset();
        auto r = enc(Var<float, Bk>::constant(x.to<Bk>()), lengths);
        const std::int64_t syncs = hd_counters().syncs.load();
        add(sum(r.hidden), scale(r.ponder, 0.01f)).backward();
        std::vector<std::vector<float>> out{r.hidden.value().to_host(), r.ponder.value().to_host()};
        for (const auto& v : values(enc)) out.push_back(v);
        for (auto& [name, p] : enc.named_parameters()) out.push_back(p.grad().to_host());
        return std::tuple{out, r.record, syncs};
    };
    [[maybe_unused]] const auto [want, want_record, cpu_syncs] = run(backend::cpu{}, 1);
    REQUIRE(want_record.iterations >= 3);  // a profile that the schedules below cut differently
    for (const int reads : {-1, 0, 1, 2, 5}) {
        CAPTURE(reads);
        const auto [got, record, syncs] = run(hd{}, reads);
        CHECK(record.N == want_record.N);
        CHECK(record.R == want_record.R);
        CHECK(record.running_per_iteration == want_record.running_per_iteration);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
            REQUIRE(got[i].size() == want[i].size());
            if (reads < 0) CHECK(std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)) == 0);
            else
                for (std::size_t j = 0; j < got[i].size(); ++j) CHECK(got[i][j] == doctest::Approx(want[i][j]).epsilon(1e-5).scale(1.0));
        }
        // the reads made: after each scheduled iteration before N_max, up to the first that finds
        // no token running (one at or after the last iteration a token ran)
        int made = 0;
        for (int n = 1; n < 6; ++n) {
            bool scheduled = reads < 0;
            for (int i = 1; i <= reads; ++i) scheduled = scheduled || n == (i * 6 + reads) / (reads + 1);
            if (!scheduled) continue;
            ++made;
            if (n >= want_record.iterations) break;
        }
        CHECK(syncs == made + 1);
    }
}

TEST_CASE("host_device: greedy and beam decoding synchronise once per output position") {
    nn::seq2seq_config c = depthlab_test::tiny_seq2seq(14, 12, 16, 2, 32);
    nn::Seq2SeqTransformer<float, hd> model(c, 4);
    nn::Seq2SeqTransformer<float, backend::cpu> ref(c, 4);
    model.eval();
    ref.eval();
    const nn::token_batch src = depthlab_test::two_sentence_source();
    no_grad guard;
    const auto memory = model.encode(src);
    for (const int beam : {1, 3}) {
        CAPTURE(beam);
        const nn::search_options o{.beam = beam, .max_len_a = 0, .max_len_b = 6};
        hd_counters().reset();
        const auto hyps = nn::generate(model, memory, src, o);
        const std::int64_t syncs = hd_counters().syncs;
        const auto want = nn::generate(ref, ref.encode(src), src, o);
        std::size_t positions = 0;
        for (const auto& h : hyps) positions = std::max(positions, h.tokens.size() + 1);
        if (beam == 1) CHECK(syncs == static_cast<std::int64_t>(positions));
        else CHECK((syncs >= static_cast<std::int64_t>(positions) && syncs <= 6));  // one a position run: at most the limit
        for (std::size_t i = 0; i < hyps.size(); ++i) {
            CHECK(hyps[i].tokens == want[i].tokens);
            CHECK(hyps[i].score == want[i].score);
        }
    }
}

TEST_CASE("host_device: SGD, Adam, LAMB and clipping give the CPU's bits") {
    Generator g(21);
    const auto w0 = Tensor<float>::randn({300}, g), g0 = Tensor<float>::randn({300}, g);
    const auto run = [&]<class B>(auto make) {
        auto p = Var<float, B>::parameter(w0.to<B>());
        optim::named_parameters<float, B> params{{"w", p}};
        auto opt = make(params);
        for (int s = 0; s < 3; ++s) {
            opt.zero_grad();
            p.grad() = g0.to<B>();
            optim::clip_grad_norm_on_device(params, 2.0);
            opt.step();
        }
        return p.value().to_host();
    };
    const auto same = [&](auto make_cpu, auto make_hd) {
        const auto a = run.template operator()<backend::cpu>(make_cpu);
        const auto b = run.template operator()<hd>(make_hd);
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    };
    same([](auto& p) { return optim::SGD<float>(p, {.lr = 0.1, .momentum = 0.9, .nesterov = true}); },
         [](auto& p) { return optim::SGD<float, hd>(p, {.lr = 0.1, .momentum = 0.9, .nesterov = true}); });
    same([](auto& p) { return optim::Adam<float>(p, {.lr = 0.1, .weight_decay = 0.01}); },
         [](auto& p) { return optim::Adam<float, hd>(p, {.lr = 0.1, .weight_decay = 0.01}); });
    same([](auto& p) { return optim::Lamb<float>(p, {.lr = 0.1, .exclude_from_weight_decay = optim::exclude_none}); },
         [](auto& p) { return optim::Lamb<float, hd>(p, {.lr = 0.1, .exclude_from_weight_decay = optim::exclude_none}); });
}

namespace {
/// contribution and criticality (grid) of every sub-layer of a tiny encoder-decoder on
/// backend B; θᶠ = θ⁰ + noise; the metric is −MSE of the logits against those at θᶠ.
template <class B>
std::pair<analysis::contribution_result, analysis::criticality_result> component_values() {
    nn::Seq2SeqTransformer<double, B> model(depthlab_test::tiny_seq2seq(10, 8, 8, 2, 16), 5);
    const nn::Snapshot<double, B> theta0(model);
    Generator g(9);
    for (auto& [name, p] : model.named_parameters()) {
        const auto noise = Tensor<double>::randn(p.value().shape(), g, 0.3).template to<B>();
        p.value().add_(noise);
    }
    const nn::Snapshot<double, B> thetaf(model);
    model.eval();
    Generator gb(3);
    const auto batch = data::reverse_task_batch(gb, 4, 5, 10);
    const auto logits = [&] {
        no_grad guard;
        return model.decode(model.encode(batch.src), batch.src, batch.tgt_in).value().to_host();
    };
    const auto ref = logits();
    const auto metric = [&] {
        const auto l = logits();
        double s = 0;
        for (std::size_t i = 0; i < l.size(); ++i) s += (l[i] - ref[i]) * (l[i] - ref[i]);
        return -s / static_cast<double>(l.size());
    };
    analysis::contribution_options opt;
    opt.clip = std::numeric_limits<double>::infinity();  // the base is 0 (−MSE against itself)
    analysis::criticality_options copt;
    copt.grid_steps = 4;
    copt.epsilon = 0.05;  // (metric(0) is -0.08 to -1.05 here: some modules pass below α = 1)
    return {analysis::contribution(model, metric, opt), analysis::criticality(model, theta0, thetaf, metric, copt)};
}
}  // namespace

TEST_CASE("host_device: contribution and criticality of every sub-layer give the CPU's values") {
    // (named references, not structured bindings: clang 14 cannot capture those in doctest's macros)
    const auto on_cpu = component_values<backend::cpu>(), on_dev = component_values<hd>();
    const auto &c_cpu = on_cpu.first, &c_dev = on_dev.first;
    const auto &k_cpu = on_cpu.second, &k_dev = on_dev.second;
    REQUIRE(c_cpu.modules.size() == c_dev.modules.size());
    REQUIRE(c_cpu.modules.size() >= 10);
    CHECK(c_cpu.all_zero == false);
    const auto a = c_cpu.scores(), b = c_dev.scores(), ka = k_cpu.scores(), kb = k_dev.scores();
    CHECK(a == b);
    CHECK(ka == kb);
    CHECK(*std::max_element(a.begin(), a.end()) == 1.0);     // scores normalised by the largest drop
    CHECK(*std::min_element(ka.begin(), ka.end()) < 1.0);    // some module is not critical at α = 1

    CHECK(c_cpu.evaluations == c_dev.evaluations);
    CHECK(k_cpu.evaluations == k_dev.evaluations);
}
