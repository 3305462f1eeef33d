// Component-value analyses (paper B): contribution (ablation), criticality (rewinding by
// interpolation, grid and bisection), pruning and rewinding curves, Spearman, CSV contracts,
// and that every analysis leaves the model as it found it — also when the metric throws.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness.hpp"

#include "depthlab/analysis/component_value.hpp"
#include "depthlab/analysis/pipeline.hpp"

using namespace depthlab;
using namespace depthlab::nn;
using namespace depthlab::analysis;
using doctest::Approx;
using doctest::Contains;

namespace {

/// Vocabulary 10, max_len 8, D=8, 2 heads, FF=16.
seq2seq_config tiny_cv() { return depthlab_test::tiny_seq2seq(10, 8, 8, 2, 16); }

/// A "trained" model: θᶠ = θ⁰ + noise on every parameter; eval mode; a fixed batch; the
/// metric is −MSE of the decoder logits against those of the full model at θᶠ (base = 0).
struct cv_fixture {
    Seq2SeqTransformer<double> model{tiny_cv(), 5};
    Snapshot<double> theta0{model};
    Snapshot<double> thetaf;
    data::seq2seq_batch batch;
    std::vector<double> ref;

    cv_fixture() {
        Generator g(9);
        for (auto& [name, p] : model.named_parameters()) {
            const auto noise = Tensor<double>::randn(p.value().shape(), g, 0.3);
            for (index_t i = 0; i < p.value().numel(); ++i) p.value().data()[i] += noise.data()[i];
        }
        thetaf = Snapshot<double>(model);
        model.eval();
        Generator gb(3);
        batch = data::reverse_task_batch(gb, 4, 5, 10);
        ref = logits();
    }
    std::vector<double> logits() {
        no_grad guard;
        return model.decode(model.encode(batch.src), batch.src, batch.tgt_in).value().to_vector();
    }
    double neg_mse() {
        const auto l = logits();
        double s = 0;
        for (std::size_t i = 0; i < l.size(); ++i) s += (l[i] - ref[i]) * (l[i] - ref[i]);
        return -s / static_cast<double>(l.size());
    }
    /// Every parameter bitwise equal to θᶠ, every sub-layer switched on.
    bool pristine() {
        for (auto& [name, p] : model.named_parameters())
            if (p.value().to_vector() != thetaf.at(name).to_vector()) return false;
        for (auto& [name, r] : sublayers(model))
            if (!r->enabled) return false;
        return true;
    }
};

/// Modules without a model: ablate flips a flag; the metric reads the flags.
struct fake_modules {
    std::vector<bool> off;
    std::vector<module_ref> modules;
    explicit fake_modules(std::size_t n) : off(n, false) {
        for (std::size_t i = 0; i < n; ++i)
            modules.push_back({"m" + std::to_string(i), "X", static_cast<int>(i), "", [this, i](bool o) { off[i] = o; }, {}, {}, {}, {}});
    }
};

}  // namespace

TEST_CASE("component value: default modules carry the paper's types and layers (untied and tied)") {
    Seq2SeqTransformer<double> model(tiny_cv(), 1);
    const auto mods = default_modules(model);
    const std::vector<std::tuple<std::string, std::string, int>> want{
        {"encoder.0.self_attention", "E:SA", 0},  {"encoder.0.feed_forward", "E:FF", 0},  {"encoder.1.self_attention", "E:SA", 1},
        {"encoder.1.feed_forward", "E:FF", 1},    {"decoder.0.self_attention", "D:SA", 0}, {"decoder.0.cross_attention", "D:EA", 0},
        {"decoder.0.feed_forward", "D:FF", 0},    {"decoder.1.self_attention", "D:SA", 1}, {"decoder.1.cross_attention", "D:EA", 1},
        {"decoder.1.feed_forward", "D:FF", 1}};
    REQUIRE(mods.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        CHECK(mods[i].name == std::get<0>(want[i]));
        CHECK(mods[i].type == std::get<1>(want[i]));
        CHECK(mods[i].layer == std::get<2>(want[i]));
        CHECK(mods[i].prefix == mods[i].name);
        REQUIRE(mods[i].kept_prefixes.size() == 1);  // post-LN: the LayerNorm still runs when ablated
        CHECK(mods[i].kept_prefixes[0] == mods[i].name + ".norm");
    }
    // ablate flips the sub-layer's switch
    auto subs = sublayers(model);
    mods[5].ablate(true);
    CHECK(!subs[5].second->enabled);
    mods[5].ablate(false);
    CHECK(subs[5].second->enabled);
    // parameters a removed attention branch stops using: in_proj (3D·D + 3D) and out_proj (D·D + D)
    const index_t D = 8;
    CHECK(parameters_removed(model, std::vector<module_ref>{mods[0]}) == 4 * D * D + 4 * D);
    CHECK(parameters_removed(model, std::vector<module_ref>{mods[1]}) == 2 * D * 16 + 16 + D);

    // pre-LN: the whole sub-layer goes, LayerNorm included
    auto pre = tiny_cv();
    pre.layer.norm_first = true;
    Seq2SeqTransformer<double> pre_model(pre, 1);
    const auto pre_mods = default_modules(pre_model);
    CHECK(pre_mods[0].kept_prefixes.empty());
    CHECK(parameters_removed(pre_model, std::vector<module_ref>{pre_mods[0]}) == 4 * D * D + 4 * D + 2 * D);

    // tied ALBERT: one shared set of sub-layers, layer -1
    albert_config ac;
    ac.vocab = 20;
    ac.embed = 4;
    ac.max_len = 6;
    ac.depth = 3;
    ac.layer.dim = 8;
    ac.layer.heads = 2;
    ac.layer.ff_dim = 16;
    ac.layer.dropout = ac.layer.attention_dropout = 0;
    Albert<double> albert(ac, 2);
    albert.eval();
    const auto amods = default_modules(albert);
    REQUIRE(amods.size() == 2);
    CHECK(amods[0].name == "encoder.shared.self_attention");
    CHECK(amods[0].type == "E:SA");
    CHECK(amods[0].layer == -1);
    CHECK(amods[1].type == "E:FF");
    // the analyses run on it: removing the shared sub-layer changes every iteration
    token_batch b{1, 5, {2, 5, 7, 9, 3}, {0, 0, 0, 0, 0}, {5}};
    const auto h_ref = albert.encode(b).value().to_vector();
    auto metric = [&] {
        const auto h = albert.encode(b).value().to_vector();
        double s = 0;
        for (std::size_t i = 0; i < h.size(); ++i) s += (h[i] - h_ref[i]) * (h[i] - h_ref[i]);
        return -s;
    };
    contribution_options co;
    co.clip = std::numeric_limits<double>::infinity();
    const auto r = contribution(albert, metric, co);
    REQUIRE(r.modules.size() == 2);
    CHECK(r.max_drop > 0);
    CHECK(std::max(r.modules[0].score, r.modules[1].score) == 1.0);
    CHECK(albert.encode(b).value().to_vector() == h_ref);
    // the paper-type rule on names of other shapes
    CHECK(paper_type("decoder.shared.cross_attention", sublayer_type::cross_attention) == std::pair<std::string, int>{"D:EA", -1});
    CHECK(paper_type("act.encoder.12.feed_forward", sublayer_type::feed_forward) == std::pair<std::string, int>{"E:FF", 12});
}

TEST_CASE("component value: ablation equals zeroing the branch's last linear; scores in [0, 1]; state restored") {
    cv_fixture f;
    const auto mods = default_modules(f.model);
    contribution_options opts;
    opts.clip = std::numeric_limits<double>::infinity();
    std::vector<progress_event> events;
    opts.run.progress = [&](const progress_event& e) { events.push_back(e); };
    const auto r = contribution(mods, [&] { return f.neg_mse(); }, opts);
    CHECK(r.base == 0.0);
    CHECK(r.evaluations == mods.size() + 1);
    REQUIRE(r.modules.size() == mods.size());
    CHECK(f.pristine());
    CHECK(f.logits() == f.ref);

    // by hand: zero the branch's output projection (attention out_proj / FF linear2), weight and bias
    for (std::size_t i = 0; i < mods.size(); ++i) {
        const std::string last = mods[i].type.ends_with("FF") ? ".linear2" : ".out_proj";
        for (const char* what : {".weight", ".bias"}) f.model.parameter(mods[i].name + last + what).value().zero_();
        const double zeroed = f.neg_mse();
        f.thetaf.restore(f.model);
        INFO(mods[i].name);
        CHECK(r.modules[i].metric_without == Approx(zeroed).epsilon(1e-12));
        CHECK(r.modules[i].metric_without < 0);  // every branch matters a little in a random model
    }
    double top = 0;
    for (const auto& e : r.modules) {
        CHECK(e.score >= 0.0);
        CHECK(e.score <= 1.0);
        CHECK(e.drop == Approx(-e.metric_without));
        top = std::max(top, e.score);
    }
    CHECK(top == 1.0);
    CHECK(!r.all_zero);

    // progress: one event per module, 1-based, with the evaluation count so far
    REQUIRE(events.size() == mods.size());
    for (std::size_t i = 0; i < events.size(); ++i) {
        CHECK(events[i].stage == "contribution");
        CHECK(events[i].index == i + 1);
        CHECK(events[i].total == mods.size());
        CHECK(events[i].module == mods[i].name);
        CHECK(events[i].evaluations == i + 1);
    }
    CHECK(events[0].eta_s == -1);
    CHECK(events[1].eta_s >= 0);

    // default C = |base| / 10 = 0 here: every drop is clipped to 0, said so, no division
    const auto z = contribution(mods, [&] { return f.neg_mse(); });
    CHECK(z.clip == 0.0);
    CHECK(z.all_zero);
    for (const auto& e : z.modules) CHECK(e.score == 0.0);
}

namespace {
/// Every sequence of a token batch replaced by its first.
data::token_batch repeat_first(const data::token_batch& b) {
    data::token_batch r = b;
    for (index_t i = 1; i < b.batch; ++i) {
        std::copy(b.ids.begin(), b.ids.begin() + b.length, r.ids.begin() + i * b.length);
        std::copy(b.segments.begin(), b.segments.begin() + b.length, r.segments.begin() + i * b.length);
        r.lengths[static_cast<std::size_t>(i)] = b.lengths[0];
    }
    return r;
}
}  // namespace

// Known by construction: when every sequence of the batch is the same sentence, a module's
// mean output over that batch is its output, and another sequence's output is its own, so
// mean and resample ablation leave every logit as it is, while zero ablation does not.
TEST_CASE("component value: ablation kinds on a batch of one repeated sentence; kinds in the table; refusals") {
    cv_fixture f;
    f.batch.src = repeat_first(f.batch.src);
    f.batch.tgt_in = repeat_first(f.batch.tgt_in);
    f.ref = f.logits();
    const auto mods = default_modules(f.model);
    CHECK_THROWS_WITH_AS(contribution(mods, [&] { return f.neg_mse(); }, {.clip = 1e9, .ablation = ablation_kind::mean}),
                         doctest::Contains("record_ablation_means"), usage_error);
    record_ablation_means(mods, 2, [&](std::size_t) { (void)f.logits(); });
    for (const auto& m : mods) CHECK(m.target->means().has_mean());
    for (const auto kind : {ablation_kind::mean, ablation_kind::resample, ablation_kind::zero}) {
        CAPTURE(to_string(kind));
        const auto r = contribution(mods, [&] { return f.neg_mse(); }, {.clip = 1e9, .ablation = kind});
        CHECK(r.ablation == kind);
        for (const auto& e : r.modules) {
            CAPTURE(e.name);
            if (kind == ablation_kind::zero) CHECK(e.metric_without < 0);
            else CHECK(std::abs(e.metric_without) < 1e-24);
        }
        CHECK(f.pristine());
        for (const auto& [name, sub] : sublayers(f.model)) CHECK(sub->ablation == ablation_kind::zero);
        std::ostringstream csv;
        csv_table(r).write(csv);
        const std::string header = csv.str().substr(0, csv.str().find('\n'));
        CHECK(header == (kind == ablation_kind::zero ? "module,type,layer,metric_without,score"
                                                     : std::string("module,type,layer,metric_without_") + to_string(kind) + ",score"));
    }
    // pruning under a kind: k modules replaced together
    const auto p = pruning_curve(f.model, mods, std::vector<double>(mods.size(), 0.0), [&] { return f.neg_mse(); }, 3, {}, ablation_kind::mean);
    for (const auto& pt : p.curve) CHECK(std::abs(pt.metric) < 1e-24);
    // a hand-built module knows only zero
    fake_modules fm(2);
    CHECK_THROWS_WITH_AS(contribution(fm.modules, [] { return 1.0; }, {.ablation = ablation_kind::resample}),
                         doctest::Contains("only zero ablation"), usage_error);
    CHECK_THROWS_WITH_AS(parse_ablation_kind("half", "--ablation"), "--ablation: 'half' is not an ablation kind (zero, mean or resample)", usage_error);

    // heads, the same way: mean and resample leave every logit as it is, zero does not; in
    // greedy and beam decoding, resampled heads decode the same hypotheses
    const auto heads = head_modules(f.model);
    CHECK_THROWS_WITH_AS(contribution(heads.modules, [&] { return f.neg_mse(); }, {.clip = 1e9, .ablation = ablation_kind::mean}),
                         doctest::Contains("record_ablation_means"), usage_error);
    record_ablation_means(heads.modules, 2, [&](std::size_t) { (void)f.logits(); });
    for (const auto kind : {ablation_kind::mean, ablation_kind::resample, ablation_kind::zero}) {
        CAPTURE(to_string(kind));
        const auto r = contribution(heads.modules, [&] { return f.neg_mse(); }, {.clip = 1e9, .ablation = kind});
        for (const auto& e : r.modules) {
            CAPTURE(e.name);
            if (kind == ablation_kind::zero) CHECK(e.metric_without < 0);
            else CHECK(std::abs(e.metric_without) < 1e-24);
        }
        for (auto* a : heads.attention) CHECK(a->heads_off() == 0);
    }
    const auto hp = pruning_curve(f.model, heads.modules, std::vector<double>(heads.modules.size(), 0.0), [&] { return f.neg_mse(); }, 5, {},
                                  ablation_kind::resample);
    for (const auto& pt : hp.curve) CHECK(std::abs(pt.metric) < 1e-24);
    no_grad guard;
    for (const int beam : {1, 3}) {
        CAPTURE(beam);
        const nn::search_options o{.beam = beam, .max_len_a = 0, .max_len_b = 6};
        const auto clean = nn::generate(f.model, f.batch.src, o);
        scoped_ablation off;
        for (const auto& m : heads.modules)
            if (m.type != "E:SA") off.add(m, ablation_kind::resample);  // every decoder head
        const auto got = nn::generate(f.model, f.batch.src, o);
        for (std::size_t i = 0; i < got.size(); ++i) {
            CHECK(got[i].tokens == clean[i].tokens);
            CHECK(got[i].score == Approx(clean[i].score).epsilon(1e-9));
        }
    }
}

// A head's kinds by hand. Its share of the attention's output is linear in its columns before
// the output projection, so with y the output with every head on and z with head 1 zeroed:
// mean ablation gives z + the recorded mean of y − z per position (a position past the
// reference: over all of them), resample gives z[b] + (y − z)[b + 1]. Incremental decoding
// (DecoderLayer::step) gives row t of the full forward with heads ablated.
TEST_CASE("component value: a head's mean and resample ablation by hand, and in incremental decoding") {
    const nn::transformer_config cfg{.dim = 8, .heads = 2, .ff_dim = 16, .dropout = 0, .attention_dropout = 0};
    Generator g(6);
    nn::DecoderLayer<double> layer(cfg, g);
    layer.eval();
    no_grad guard;
    auto& att = layer.self_attention.branch;
    const auto x = Var<double>::constant(Tensor<double>::randn({3, 4, 8}, g));
    const auto x2 = Var<double>::constant(Tensor<double>::randn({2, 2, 8}, g));
    const auto x5 = Var<double>::constant(Tensor<double>::randn({2, 5, 8}, g));
    const auto out = [&](const Var<double>& in) { return att(in, nn::causal_mask<double>(in.shape()[1])).value().to_vector(); };
    const auto y = out(x), y2 = out(x2), y5 = out(x5);
    att.set_head_off(1, true);
    const auto z = out(x), z2 = out(x2), z5 = out(x5);
    att.set_head_off(1, false);
    att.record_mean(true);
    (void)out(x);
    (void)out(x2);
    att.record_mean(false);
    std::vector<double> mean(5 * 8, 0.0);  // of y − z: positions 0, 1 over 5 sequences, 2, 3 over 3, then all 16
    for (index_t t = 0; t < 4; ++t)
        for (index_t d = 0; d < 8; ++d) {
            double s = 0, n = 3;
            for (index_t b = 0; b < 3; ++b) s += y[static_cast<std::size_t>((b * 4 + t) * 8 + d)] - z[static_cast<std::size_t>((b * 4 + t) * 8 + d)];
            if (t < 2) {
                for (index_t b = 0; b < 2; ++b) s += y2[static_cast<std::size_t>((b * 2 + t) * 8 + d)] - z2[static_cast<std::size_t>((b * 2 + t) * 8 + d)];
                n = 5;
            }
            mean[static_cast<std::size_t>(t * 8 + d)] = s / n;
            mean[static_cast<std::size_t>(4 * 8 + d)] += s / 16.0;
        }
    att.set_head_ablation(1, ablation_kind::mean);
    att.set_head_off(1, true);
    const auto m5 = out(x5);
    for (std::size_t i = 0; i < m5.size(); ++i) CHECK(m5[i] == Approx(z5[i] + mean[i % 40]).epsilon(1e-12));
    att.set_head_ablation(1, ablation_kind::resample);
    const auto r = out(x);
    for (std::size_t i = 0; i < r.size(); ++i) CHECK(r[i] == Approx(z[i] + y[(i + 32) % 96] - z[(i + 32) % 96]).epsilon(1e-12));
    CHECK_THROWS_WITH_AS(att.set_head_off(2, true), "MultiHeadAttention::set_head_off: head 2 of 2", index_error);

    // incremental decoding: self-attention head 1 mean-ablated, cross-attention head 0 resampled
    att.set_head_ablation(1, ablation_kind::mean);
    auto& cross = layer.cross_attention.branch;
    cross.set_head_ablation(0, ablation_kind::resample);
    cross.set_head_off(0, true);
    const auto memory = Var<double>::constant(Tensor<double>::randn({3, 3, 8}, g));
    const auto want = layer(x, memory, nn::causal_mask<double>(4)).value().to_vector();
    auto self_kv = Tensor<double>::empty({3, 4, 16});
    const auto memory_kv = cross.project_memory(memory);
    for (index_t t = 0; t < 4; ++t) {
        CAPTURE(t);
        const auto xt = Var<double>::constant(x.value().slice(1, t, t + 1).contiguous());
        const auto got = layer.step(xt, self_kv, memory_kv, Tensor<double>(), t).value().to_vector();  // (3, 1, 8)
        for (index_t b = 0; b < 3; ++b)
            for (index_t d = 0; d < 8; ++d)
                CHECK(got[static_cast<std::size_t>(b * 8 + d)] == Approx(want[static_cast<std::size_t>((b * 4 + t) * 8 + d)]).epsilon(1e-12));
    }
}

// The kinds' definitions on one layer, by hand: mean = the recorded per-position mean (a
// position past the reference takes the mean over all positions); resample = sequence b
// takes sequence b + 1's branch output, cyclically.
TEST_CASE("component value: mean and resample ablation are the per-position mean and the next sequence's output") {
    const nn::transformer_config cfg{.dim = 8, .heads = 2, .ff_dim = 16, .dropout = 0, .attention_dropout = 0};
    Generator g(4);
    nn::EncoderLayer<double> layer(cfg, g);
    layer.eval();
    no_grad guard;
    const auto x = Var<double>::constant(Tensor<double>::randn({3, 4, 8}, g));
    auto& ff = layer.feed_forward;
    const auto h = layer.self_attention(x);
    const auto branch = ff.branch(h).value().to_vector();  // (3, 4, 8)
    ff.record_mean(true);
    (void)layer(x);
    const auto x2 = Var<double>::constant(Tensor<double>::randn({2, 2, 8}, g));  // a shorter batch: positions 0, 1 count 5 sequences
    const auto branch2 = ff.branch(layer.self_attention(x2)).value().to_vector();
    (void)layer(x2);
    ff.record_mean(false);
    ff.enabled = false;
    ff.ablation = ablation_kind::mean;
    const auto x5 = Var<double>::constant(Tensor<double>::randn({2, 5, 8}, g));  // position 4: past the reference
    const auto h5 = layer.self_attention(x5).value().to_vector();
    const auto got = ff(layer.self_attention(x5)).value();
    std::vector<double> mean(5 * 8, 0.0), pooled(8, 0.0);
    for (index_t t = 0; t < 4; ++t)
        for (index_t d = 0; d < 8; ++d) {
            double s = 0;
            for (index_t b = 0; b < 3; ++b) s += branch[static_cast<std::size_t>((b * 4 + t) * 8 + d)];
            double n = 3;
            if (t < 2) {
                for (index_t b = 0; b < 2; ++b) s += branch2[static_cast<std::size_t>((b * 2 + t) * 8 + d)];
                n = 5;
            }
            mean[static_cast<std::size_t>(t * 8 + d)] = s / n;
            pooled[static_cast<std::size_t>(d)] += s;
        }
    for (index_t d = 0; d < 8; ++d) mean[static_cast<std::size_t>(4 * 8 + d)] = pooled[static_cast<std::size_t>(d)] / 16.0;
    std::vector<double> pre(h5.size());
    for (std::size_t i = 0; i < pre.size(); ++i) pre[i] = h5[i] + mean[i % 40];
    const auto want = ff.norm(Var<double>::constant(Tensor<double>::from({2, 5, 8}, pre))).value().to_vector();
    const auto g1 = got.to_vector();
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(g1[i] == Approx(want[i]).epsilon(1e-12));

    ff.ablation = ablation_kind::resample;
    const auto h3 = layer.self_attention(x).value().to_vector();
    const auto r = ff(layer.self_attention(x)).value();
    std::vector<double> pre3(h3.size());
    for (index_t b = 0; b < 3; ++b)
        for (index_t i = 0; i < 32; ++i)
            pre3[static_cast<std::size_t>(b * 32 + i)] = h3[static_cast<std::size_t>(b * 32 + i)] + branch[static_cast<std::size_t>(((b + 1) % 3) * 32 + i)];
    const auto want3 = ff.norm(Var<double>::constant(Tensor<double>::from({3, 4, 8}, pre3))).value().to_vector();
    const auto g3 = r.to_vector();
    for (std::size_t i = 0; i < want3.size(); ++i) CHECK(g3[i] == Approx(want3[i]).epsilon(1e-12));
}

// In decoding: a decoder module whose output is the same for every input (its last linear's
// weight zeroed, its bias kept) decodes the same hypotheses under mean and resample
// ablation, and differently under zero ablation.
TEST_CASE("component value: ablation kinds in greedy and beam decoding") {
    cv_fixture f;
    const std::string ffn = "decoder.1.feed_forward";
    f.model.parameter(ffn + ".linear2.weight").value().zero_();
    Generator g(12);
    f.model.parameter(ffn + ".linear2.bias").value() = Tensor<double>::randn({tiny_cv().layer.dim}, g, 3.0);
    auto mods = default_modules(f.model);
    const auto it = std::find_if(mods.begin(), mods.end(), [&](const module_ref& m) { return m.name == ffn; });
    REQUIRE(it != mods.end());
    record_ablation_means({*it}, 1, [&](std::size_t) { (void)f.logits(); });
    no_grad guard;
    for (const int beam : {1, 3}) {
        CAPTURE(beam);
        const nn::search_options o{.beam = beam, .max_len_a = 0, .max_len_b = 6};
        const auto clean = nn::generate(f.model, f.batch.src, o);
        for (const auto kind : {ablation_kind::mean, ablation_kind::resample, ablation_kind::zero}) {
            CAPTURE(to_string(kind));
            scoped_ablation off(*it, kind);
            const auto got = nn::generate(f.model, f.batch.src, o);
            bool same = true;
            for (std::size_t i = 0; i < got.size(); ++i) same = same && got[i].tokens == clean[i].tokens && std::abs(got[i].score - clean[i].score) < 1e-9;
            CHECK(same == (kind != ablation_kind::zero));
        }
    }
}

// Heads: a planted dead head (its columns of W_o zeroed) has contribution 0 and importance 0
// exactly; switching a head off equals zeroing its W_o columns; the gradient importance of
// one batch is |finite difference of the loss in the head's gate|; pruning heads restores
// every gate.
TEST_CASE("component value: attention heads — a dead head scores 0, ablation is zeroing its W_o columns, importance by finite differences, criticality moves the head's slices") {
    cv_fixture f;
    const index_t D = tiny_cv().layer.dim, H = tiny_cv().layer.heads, width = D / H;
    const std::string dead = "decoder.0.self_attention";
    auto& wo = f.model.parameter(dead + ".out_proj.weight").value();  // (D, D): column c multiplies input feature c
    for (index_t r = 0; r < D; ++r)
        for (index_t c = width; c < 2 * width; ++c) wo.data()[r * D + c] = 0;  // head 1
    f.thetaf = Snapshot<double>(f.model);
    f.ref = f.logits();
    const auto heads = head_modules(f.model);
    CHECK(heads.modules.size() == static_cast<std::size_t>(tiny_cv().encoder_layers + 2 * tiny_cv().decoder_layers) * static_cast<std::size_t>(H));
    CHECK(heads.modules[0].name == "encoder.0.self_attention.head0");
    CHECK(heads.modules[0].type == "E:SA");
    const auto r = contribution(heads.modules, [&] { return f.neg_mse(); }, {.clip = 1e9});
    std::size_t dead_index = 0;
    for (std::size_t i = 0; i < heads.modules.size(); ++i) {
        CAPTURE(heads.modules[i].name);
        if (heads.sublayer[i] == dead && heads.head[i] == 1) {
            dead_index = i;
            CHECK(r.modules[i].metric_without == 0.0);
        } else {
            CHECK(r.modules[i].metric_without < 0);
        }
    }
    for (auto* a : heads.attention) CHECK((a->heads_off() == 0 && !a->head_gate().defined()));  // every head on again, no gate
    // switching head 0 of encoder.1's self-attention off = zeroing its columns of W_o
    {
        scoped_ablation off(heads.modules[static_cast<std::size_t>(H)]);
        REQUIRE(heads.modules[static_cast<std::size_t>(H)].name == "encoder.1.self_attention.head0");
        const double gated = f.neg_mse();
        off.restore();
        auto& w = f.model.parameter("encoder.1.self_attention.out_proj.weight").value();
        for (index_t rr = 0; rr < D; ++rr)
            for (index_t c = 0; c < width; ++c) w.data()[rr * D + c] = 0;
        CHECK(f.neg_mse() == Approx(gated).epsilon(1e-12));
        f.thetaf.restore(f.model);
    }
    // importance of one batch against finite differences of the gate
    const auto loss = [&](std::size_t) {
        return cross_entropy(f.model.decode(f.model.encode(f.batch.src), f.batch.src, f.batch.tgt_in), f.batch.tgt_out, -100, 0.0);
    };
    const auto imp = head_importance<double, backend::cpu>(f.model, heads, loss, 1);
    CHECK(imp[dead_index] == 0.0);
    for (auto* a : heads.attention) CHECK(!a->head_gate().defined());
    for (const std::size_t i : {std::size_t{0}, std::size_t{3}, heads.modules.size() - 1}) {
        CAPTURE(heads.modules[i].name);
        auto* a = heads.attention[i];
        const double h = 1e-5;
        double l[2];
        for (int s = 0; s < 2; ++s) {
            std::vector<double> gate(static_cast<std::size_t>(D), 1.0);
            for (index_t c = 0; c < width; ++c) gate[static_cast<std::size_t>(heads.head[i] * width + c)] = 1.0 + (s ? h : -h);
            a->set_head_gate(Var<double>::constant(Tensor<double>::from({D}, gate)));
            no_grad g;
            l[s] = loss(0).value().item();
        }
        a->set_head_gate(Var<double>());
        CHECK(imp[i] == Approx(std::abs(l[1] - l[0]) / (2 * h)).epsilon(1e-6));
    }
    // pruning heads in contribution order: every gate removed at the end
    const auto p = pruning_curve(f.model, heads.modules, r.scores(), [&] { return f.neg_mse(); }, 3);
    CHECK(p.curve.size() == 4);
    CHECK(p.curve[1].modules_removed.front() == heads.modules[dead_index].name);  // the dead head goes first
    CHECK(p.curve[1].metric == 0.0);
    for (auto* a : heads.attention) CHECK(a->heads_off() == 0);
    CHECK_THROWS_WITH_AS(criticality(f.model, heads.modules, f.theta0, f.thetaf, [&] { return f.neg_mse(); }), Contains("no parameter prefix"), usage_error);

    // criticality per head: interpolate moves exactly the head's rows of W_q, W_k, W_v and its
    // columns of W_o (α = 0: θ⁰ there, θᶠ elsewhere); α = 1 gives θᶠ back bit for bit
    const auto hk = head_modules(f.model, &f.theta0, &f.thetaf);
    const std::size_t j = static_cast<std::size_t>(H) + 1;  // encoder.1.self_attention.head1
    REQUIRE(hk.modules[j].name == "encoder.1.self_attention.head1");
    hk.modules[j].interpolate(0.0);
    const std::string sub = "encoder.1.self_attention";
    const auto w = f.model.parameter(sub + ".in_proj_weight").value().to_vector(), w0 = f.theta0.at(sub + ".in_proj_weight").to_vector(),
               wf = f.thetaf.at(sub + ".in_proj_weight").to_vector();
    for (index_t r = 0; r < 3 * D; ++r)
        for (index_t c = 0; c < D; ++c) {
            const auto i = static_cast<std::size_t>(r * D + c);
            CHECK(w[i] == ((r % D) / width == 1 ? w0[i] : wf[i]));
        }
    const auto o = f.model.parameter(sub + ".out_proj.weight").value().to_vector(), o0 = f.theta0.at(sub + ".out_proj.weight").to_vector(),
               of = f.thetaf.at(sub + ".out_proj.weight").to_vector();
    for (index_t r = 0; r < D; ++r)
        for (index_t c = 0; c < D; ++c) {
            const auto i = static_cast<std::size_t>(r * D + c);
            CHECK(o[i] == (c / width == 1 ? o0[i] : of[i]));
        }
    CHECK(f.model.parameter(sub + ".out_proj.bias").value().to_vector() == f.thetaf.at(sub + ".out_proj.bias").to_vector());
    hk.modules[j].interpolate(1.0);
    CHECK(f.pristine());
    const auto k = criticality(f.model, hk.modules, f.theta0, f.thetaf, [&] { return f.neg_mse(); }, {.epsilon = 0, .grid_steps = 4});
    CHECK(f.pristine());
    REQUIRE(k.modules.size() == hk.modules.size());
    for (const auto& e : k.modules) {
        CHECK(e.found);
        CHECK(e.alpha > 0);  // ε = 0: any change of the logits fails, so α = 0 does
    }
}

TEST_CASE("component value: contribution clips at C and normalises by the largest drop") {
    fake_modules fm(5);
    const std::vector<double> weight{0.5, 3.0, 0.0, -1.0, 0.2};  // -1: removing it improves the metric
    auto metric = [&] {
        double m = 10;
        for (std::size_t i = 0; i < 5; ++i) m -= fm.off[i] ? weight[i] : 0.0;
        return m;
    };
    const auto r = contribution(fm.modules, metric);  // C = 10 / 10 = 1
    CHECK(r.base == 10.0);
    CHECK(r.clip == 1.0);
    const std::vector<double> want_drop{0.5, 1.0, 0.0, 0.0, 0.2}, want_score{0.5, 1.0, 0.0, 0.0, 0.2};
    for (std::size_t i = 0; i < 5; ++i) {
        CHECK(r.modules[i].drop == Approx(want_drop[i]));
        CHECK(r.modules[i].score == Approx(want_score[i]));
        CHECK(r.modules[i].layer == static_cast<int>(i));
    }
    CHECK(r.modules[3].metric_without == 11.0);
    // a known baseline saves an evaluation; C configurable
    contribution_options o;
    o.base = 10.0;
    o.clip = 0.25;
    const auto r2 = contribution(fm.modules, metric, o);
    CHECK(r2.evaluations == 5);
    CHECK(r2.modules[0].score == 1.0);
    CHECK(r2.modules[1].score == 1.0);
    CHECK(r2.modules[4].score == Approx(0.8));
    // a negated loss: C = |base| / 10
    const auto r3 = contribution(fm.modules, [&] { return metric() - 12.0; });
    CHECK(r3.clip == Approx(0.2));
    CHECK(r3.modules[0].score == 1.0);
    CHECK(r3.modules[4].score == Approx(1.0));
    // a NaN metric without a module counts as the full drop
    const auto r4 = contribution(fm.modules, [&] { return fm.off[2] ? std::nan("") : metric(); });
    CHECK(r4.modules[2].drop == 1.0);
    // misuse
    auto dup = fm.modules;
    dup[1].name = "m0";
    CHECK_THROWS_WITH_AS(contribution(dup, metric), Contains("appears twice"), usage_error);
    auto noablate = fm.modules;
    noablate[2].ablate = nullptr;
    CHECK_THROWS_WITH_AS(contribution(noablate, metric), Contains("no ablate function"), usage_error);
}

TEST_CASE("component value: criticality moves one module only; α = 0 is θ⁰ there, α = 1 is θᶠ exactly") {
    cv_fixture f;
    auto all = default_modules(f.model);
    const std::vector<module_ref> mods{all[9], all[0]};  // decoder.1.feed_forward, encoder.0.self_attention
    struct state {
        bool module_initial, module_half, others_final, all_final;
    };
    std::vector<state> seen;
    std::size_t current = 0;  // which module is being searched (set by the progress callback)
    criticality_options opts;
    opts.grid_steps = 2;
    opts.grid_full_scan = true;
    opts.epsilon = 0.0;
    opts.run.progress = [&](const progress_event& e) { current = e.index - 1; };
    auto metric = [&] {
        state s{true, true, true, true};
        const std::string& prefix = mods[current].prefix;
        for (auto& [name, p] : f.model.named_parameters()) {
            const auto v = p.value().to_vector(), v0 = f.theta0.at(name).to_vector(), vf = f.thetaf.at(name).to_vector();
            if (v != vf) s.all_final = false;
            if (is_under(name, prefix)) {
                if (v != v0) s.module_initial = false;
                for (std::size_t i = 0; i < v.size(); ++i)
                    if (std::abs(v[i] - (0.5 * v0[i] + 0.5 * vf[i])) > 1e-12) s.module_half = false;
            } else if (v != vf) {
                s.others_final = false;
            }
        }
        seen.push_back(s);
        return f.neg_mse();
    };
    const auto r = criticality(f.model, mods, f.theta0, f.thetaf, metric, opts);
    REQUIRE(seen.size() == 1 + 2 * 3);
    CHECK(r.evaluations == 7);
    CHECK(seen[0].all_final);  // the baseline
    for (std::size_t m = 0; m < 2; ++m) {
        INFO(mods[m].name);
        const state& a0 = seen[1 + 3 * m];
        const state& ah = seen[2 + 3 * m];
        const state& a1 = seen[3 + 3 * m];
        CHECK(a0.module_initial);
        CHECK(a0.others_final);
        CHECK(!a0.all_final);
        CHECK(ah.module_half);
        CHECK(ah.others_final);
        CHECK(a1.all_final);
        const auto& e = r.modules[m];
        REQUIRE(e.trace.size() == 3);
        CHECK(e.trace[0].first == 0.0);
        CHECK(e.trace[1].first == 0.5);
        CHECK(e.trace[2].first == 1.0);
        CHECK(e.trace[2].second == 0.0);  // α = 1 reproduces the trained model exactly
        CHECK(e.trace[0].second < 0.0);
        CHECK(e.alpha == 1.0);  // ε = 0: only θᶠ itself is within ε of the baseline
        CHECK(e.metric_at_alpha == 0.0);
        CHECK(e.search == "grid");
        CHECK(e.found);
    }
    CHECK(f.pristine());
    CHECK(f.logits() == f.ref);

    // scoped_interpolation at α = 1 writes θᶠ bitwise; at α = 0 θ⁰ for the module only
    {
        scoped_interpolation<double, backend::cpu> s(f.model, "decoder.0.cross_attention", f.theta0, f.thetaf);
        s.set(1.0);
        CHECK(f.pristine());
        s.set(0.0);
        for (auto& [name, p] : f.model.named_parameters())
            CHECK(p.value().to_vector() == (is_under(name, "decoder.0.cross_attention") ? f.theta0 : f.thetaf).at(name).to_vector());
    }
    CHECK(f.pristine());

    // snapshots in the wrong order: the model does not hold "θᶠ"
    CHECK_THROWS_WITH_AS(criticality(f.model, mods, f.thetaf, f.theta0, metric, opts), Contains("does not hold"), usage_error);
}

// Criticality intervals where the answer is known: a metric shifted by the same amount on
// every item gives the same α on every resample (a zero-width interval); a metric whose loss
// at α = 0.5 is exactly ε on average, item by item noisy, passes on about half the resamples
// (the interval spans 0.5 to 1, the full model); BLEU with the full model's own hypotheses at
// α = 0 passes everywhere.
TEST_CASE("component value: criticality intervals by bootstrap over the evaluation set") {
    const std::size_t n = 200;
    std::vector<double> x(n), noise(n);
    Generator g(3);
    for (std::size_t i = 0; i < n; ++i) x[i] = g.uniform(), noise[i] = (i % 2 ? 1.0 : -1.0) * 0.5;  // mean 0 exactly
    const auto mean_of = [&](std::span<const std::size_t> drawn, double shift, bool noisy) {
        double s = 0;
        for (const std::size_t i : drawn) s += x[i] - shift + (noisy ? noise[i] : 0.0);
        return s / static_cast<double>(drawn.size());
    };
    const double eps = 0.1;
    const auto entry = [](const char* name, double alpha, std::vector<std::pair<double, double>> trace) {
        criticality_entry e;
        e.name = name;
        e.alpha = alpha;
        e.trace = std::move(trace);
        return e;
    };
    const criticality_entry e = entry("m", 0.5, {{0.0, 0}, {0.5, 0}});
    // a constant shift: α = 0 fails (shift 1), α = 0.5 passes (shift 0.05) on every resample
    const auto flat = criticality_interval(
        e, eps, n, [&](std::span<const std::size_t> d) { return mean_of(d, 0, false); },
        [&](std::size_t j, std::span<const std::size_t> d) { return mean_of(d, j == 0 ? 1.0 : 0.05, false); }, {.resamples = 200});
    CHECK(flat.score == 0.5);
    CHECK(flat.lo == 0.5);
    CHECK(flat.hi == 0.5);
    // α = 0.5 loses exactly ε on the whole set, with ±0.5 per item: about half the resamples fail
    const auto noisy = criticality_interval(
        e, eps, n, [&](std::span<const std::size_t> d) { return mean_of(d, 0, false); },
        [&](std::size_t j, std::span<const std::size_t> d) { return mean_of(d, j == 0 ? 1.0 : eps, j == 1); }, {.resamples = 400});
    CHECK(noisy.lo == 0.5);
    CHECK(noisy.hi == 1.0);
    // BLEU: the full model's hypotheses at α = 0 pass on every resample
    const std::vector<std::string> refs{"the cat sat on the mat", "a dog ran in the park", "it rains today", "we like green tea"};
    const std::vector<std::string> bad{"mat", "dog", "rain", "tea"};
    const criticality_entry b = entry("b", 0.0, {{0.0, 100}});
    const auto same = criticality_interval_bleu(b, 1.0, refs, {refs}, refs, {.resamples = 50});
    CHECK((same.lo == 0.0 && same.hi == 0.0));
    const criticality_entry w = entry("w", 1.0, {{0.0, 0}});
    const auto worse = criticality_interval_bleu(w, 1.0, refs, {bad}, refs, {.resamples = 50});
    CHECK((worse.lo == 1.0 && worse.hi == 1.0));
    CHECK_THROWS_WITH_AS(criticality_interval_bleu(w, 1.0, refs, {bad, bad}, refs), Contains("2 evaluations' hypotheses for 'w', whose trace has 1"), shape_error);
}

TEST_CASE("component value: bisection agrees with the grid on a monotone metric") {
    cv_fixture f;
    const auto mods = default_modules(f.model);
    // metric = −Σ_n s_n · |θ_n − θ_nᶠ| / |θ_n⁰ − θ_nᶠ|: with module n at α it is −s_n (1 − α), so
    // module n passes from α*_n = 1 − ε / s_n on (0 when s_n <= ε).
    const double eps = 0.33;
    std::vector<double> s;
    for (std::size_t n = 0; n < mods.size(); ++n) s.push_back(0.2 + 0.37 * static_cast<double>(n));
    auto metric = [&] {
        double m = 0;
        for (std::size_t n = 0; n < mods.size(); ++n) {
            double num = 0, den = 0;
            for (auto& [name, p] : f.model.named_parameters()) {
                if (!is_under(name, mods[n].prefix)) continue;
                const auto v = p.value().to_vector(), v0 = f.theta0.at(name).to_vector(), vf = f.thetaf.at(name).to_vector();
                for (std::size_t i = 0; i < v.size(); ++i) {
                    num += (v[i] - vf[i]) * (v[i] - vf[i]);
                    den += (v0[i] - vf[i]) * (v0[i] - vf[i]);
                }
            }
            m -= s[n] * std::sqrt(num / den);
        }
        return m;
    };
    criticality_options grid;
    grid.epsilon = eps;
    criticality_options bis = grid;
    bis.method = search_method::bisection;
    bis.tolerance = 1e-3;
    const auto rg = criticality(f.model, mods, f.theta0, f.thetaf, metric, grid);
    const auto rb = criticality(f.model, mods, f.theta0, f.thetaf, metric, bis);
    CHECK(rg.base == 0.0);
    for (std::size_t n = 0; n < mods.size(); ++n) {
        INFO(mods[n].name, " s = ", s[n]);
        const double star = std::max(0.0, 1.0 - eps / s[n]);
        double want_grid = 1.0;
        for (int j = 0; j <= 10; ++j)
            if (-s[n] * (1.0 - j / 10.0) >= -eps) {
                want_grid = j / 10.0;
                break;
            }
        const auto& g = rg.modules[n];
        const auto& b = rb.modules[n];
        CHECK(g.alpha == Approx(want_grid));
        CHECK(g.trace.size() == static_cast<std::size_t>(std::lround(want_grid * 10)) + 1);  // stops at the first pass
        CHECK(g.metric_at_alpha >= -eps);
        CHECK(b.search == "bisection");
        CHECK(b.alpha >= star - 1e-9);
        CHECK(b.alpha <= star + bis.tolerance);
        CHECK(b.alpha <= g.alpha + 1e-12);  // agree: the grid rounds up to its next point
        CHECK(b.alpha > g.alpha - 0.1 - 1e-12);
        CHECK(static_cast<int>(b.trace.size()) <= bis.max_evaluations);
        if (star == 0.0) {
            CHECK(b.alpha == 0.0);
            CHECK(b.trace.size() == 1);
        }
        for (const auto& [alpha, v] : b.trace) CHECK(v == Approx(-s[n] * (1 - alpha)).epsilon(1e-9));
    }
    // both orders agree: s_n grows with n, so does α*_n (the grid only adds ties)
    for (std::size_t n = 1; n < mods.size(); ++n) {
        CHECK(rg.modules[n - 1].alpha <= rg.modules[n].alpha);
        CHECK(rb.modules[n - 1].alpha < rb.modules[n].alpha);
    }
    CHECK(spearman(rg.scores(), rb.scores()) > 0.9);
    CHECK(f.pristine());
    // max_evaluations bounds the bisection
    bis.max_evaluations = 3;
    const auto rb3 = criticality(f.model, std::vector<module_ref>{mods[9]}, f.theta0, f.thetaf, metric, bis);
    CHECK(rb3.modules[0].trace.size() == 3);
    CHECK(rb3.modules[0].alpha == 1.0);  // α* ≈ 0.9: brackets [0.5, 1] then [0.75, 1]
}

TEST_CASE("component value: Spearman rank correlation with average ranks for ties") {
    CHECK(average_ranks({10, 20, 20, 5}) == std::vector<double>{2, 3.5, 3.5, 1});
    CHECK(average_ranks({1, 1, 1}) == std::vector<double>{2, 2, 2});
    CHECK(spearman({1, 2, 3, 4, 5}, {2, 4, 6, 8, 100}) == Approx(1.0));
    CHECK(spearman({1, 2, 3, 4, 5}, {5, 4, 3, 2, 1}) == Approx(-1.0));
    // ties: ranks (1..5) vs (1, 2, 3.5, 5, 3.5): ρ = 8 / sqrt(10 · 9.5)
    CHECK(spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}) == Approx(8.0 / std::sqrt(95.0)));
    // the textbook example (IQ vs hours of TV): ρ = −29/165
    CHECK(spearman({106, 86, 100, 101, 99, 103, 97, 113, 112, 110}, {7, 0, 27, 50, 28, 29, 20, 12, 6, 17}) == Approx(-29.0 / 165.0));
    CHECK(std::isnan(spearman({1, 2, 3}, {4, 4, 4})));
    CHECK_THROWS_AS(spearman({1, 2, 3}, {1, 2}), shape_error);
    CHECK_THROWS_AS(spearman({1}, {1}), usage_error);
}

TEST_CASE("component value: pruning curve (k = 0 is the baseline) and rewinding") {
    cv_fixture f;
    const auto mods = default_modules(f.model);
    contribution_options co;
    co.clip = std::numeric_limits<double>::infinity();
    const auto c = contribution(mods, [&] { return f.neg_mse(); }, co);
    const auto order = least_important_first(mods, c.scores());
    for (std::size_t i = 1; i < order.size(); ++i) CHECK(c.modules[order[i - 1]].score <= c.modules[order[i]].score);

    const auto p = pruning_curve(f.model, mods, c.scores(), [&] { return f.neg_mse(); }, 3);
    REQUIRE(p.curve.size() == 4);
    CHECK(p.evaluations == 4);
    CHECK(p.total_parameters == f.model.parameter_count());
    CHECK(p.curve[0].k == 0);
    CHECK(p.curve[0].metric == c.base);
    CHECK(p.curve[0].modules_removed.empty());
    CHECK(p.curve[0].parameters_removed == 0);
    CHECK(p.curve[1].metric == Approx(c.modules[order[0]].metric_without).epsilon(1e-12));
    index_t params = 0;
    for (int k = 1; k <= 3; ++k) {
        const auto& pt = p.curve[static_cast<std::size_t>(k)];
        CHECK(pt.k == k);
        REQUIRE(pt.modules_removed.size() == static_cast<std::size_t>(k));
        CHECK(pt.modules_removed.back() == mods[order[static_cast<std::size_t>(k - 1)]].name);
        params += parameters_removed(f.model, std::vector<module_ref>{mods[order[static_cast<std::size_t>(k - 1)]]});
        CHECK(pt.parameters_removed == params);
    }
    CHECK(f.pristine());

    // both scores on the same modules: Spearman matched by name
    criticality_options ko;
    ko.epsilon = 0.05;
    const auto k = criticality(f.model, f.theta0, f.thetaf, [&] { return f.neg_mse(); }, ko);
    const double rho = rank_correlation(c, k);
    MESSAGE("Spearman(contribution, criticality) on a random model: ", rho);
    CHECK(rho >= -1.0);
    CHECK(rho <= 1.0);
    CHECK(f.pristine());

    // ties broken by name
    fake_modules fm(3);
    fm.modules[0].name = "c";
    fm.modules[1].name = "a";
    fm.modules[2].name = "b";
    CHECK(least_important_first(fm.modules, {0.5, 0.5, 0.1}) == std::vector<std::size_t>{2, 1, 0});

    // rewinding: the 2 least important modules go back to θ⁰, the rest keep θᶠ
    bool tuned = false;
    const auto rw = rewind_and_finetune(f.model, mods, c.scores(), 2, f.theta0, [&] { return f.neg_mse(); }, [&] {
        for (auto& [name, p] : f.model.named_parameters()) {
            const bool rewound = is_under(name, mods[order[0]].prefix) || is_under(name, mods[order[1]].prefix);
            CHECK(p.value().to_vector() == (rewound ? f.theta0 : f.thetaf).at(name).to_vector());
        }
        f.thetaf.restore(f.model);  // a perfect fine-tuning
        tuned = true;
    });
    CHECK(tuned);
    CHECK(rw.k == 2);
    CHECK(rw.modules == std::vector<std::string>{mods[order[0]].name, mods[order[1]].name});
    CHECK(rw.metric_before_finetune < 0);
    CHECK(rw.metric_after_finetune == 0.0);

    std::vector<int> tuned_k;
    const auto curve = rewinding_curve(f.model, mods, c.scores(), {0, 1, 3}, f.theta0, f.thetaf, [&] { return f.neg_mse(); },
                                       [&](int k) { tuned_k.push_back(k); });
    CHECK(tuned_k == std::vector<int>{0, 1, 3});
    REQUIRE(curve.size() == 3);
    CHECK(curve[0].metric_before_finetune == 0.0);
    CHECK(curve[1].metric_before_finetune < 0);
    CHECK(curve[2].modules.size() == 3);
    CHECK(f.pristine());
}

TEST_CASE("component value study: one call equals the analyses one by one, writes each CSV as its analysis ends") {
    cv_fixture f;
    const auto mods = default_modules(f.model);
    const metric_fn metric = [&] { return f.neg_mse(); };
    const auto dir = std::filesystem::temp_directory_path() / "depthlab_test_study";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    study_options o{.prune_max_k = 3, .rewind_k = {0, 2}, .out = dir.string(), .print = false};
    o.contribution.clip = std::numeric_limits<double>::infinity();
    o.criticality.epsilon = 0.05;
    std::vector<int> tuned_k;
    const auto finetune = [&](int k) {
        tuned_k.push_back(k);
        f.model.train();            // as a trainer would; the study puts the model back in eval mode
        f.thetaf.restore(f.model);  // a perfect fine-tuning
    };
    const auto r = run_component_value_study(dist::local(), f.model, mods, f.theta0, f.thetaf, metric, finetune, o);

    // the same numbers as the analyses called by hand, in the paper's order
    const auto c = contribution(mods, metric, o.contribution);
    const auto k = criticality(f.model, mods, f.theta0, f.thetaf, metric, o.criticality);
    CHECK(r.complete);
    CHECK(r.base == c.base);
    CHECK(r.contribution.scores() == c.scores());
    CHECK(r.criticality.scores() == k.scores());
    CHECK(r.spearman == rank_correlation(c, k));
    const auto pc = pruning_curve(f.model, mods, importance_ranks(c), metric, 3), pk = pruning_curve(f.model, mods, importance_ranks(k), metric, 3);
    REQUIRE(r.pruning_by_contribution.curve.size() == 4);
    REQUIRE(r.pruning_by_criticality.curve.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(r.pruning_by_contribution.curve[i].metric == pc.curve[i].metric);
        CHECK(r.pruning_by_contribution.curve[i].modules_removed == pc.curve[i].modules_removed);
        CHECK(r.pruning_by_criticality.curve[i].modules_removed == pk.curve[i].modules_removed);
    }
    CHECK(tuned_k == std::vector<int>{0, 2});
    REQUIRE(r.rewinding.size() == 2);
    CHECK(r.rewinding[1].modules == std::vector<std::string>(pc.curve[2].modules_removed));
    CHECK(r.rewinding[1].metric_after_finetune == 0.0);
    std::vector<std::string> phases;
    for (const auto& [name, s] : r.phase_seconds) phases.push_back(name);
    CHECK(phases == std::vector<std::string>{"contribution", "criticality", "pruning", "rewinding"});
    CHECK(f.pristine());
    CHECK_FALSE(f.model.is_training());
    for (const char* name : {"contribution", "criticality", "criticality_trace", "pruning", "pruning_criticality", "rewinding"})
        CHECK_MESSAGE(std::filesystem::exists(dir / (std::string(name) + ".csv")), name);

    // a failure in criticality keeps contribution.csv, and the model is left as it was found
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    int calls = 0;
    const int contribution_calls = 1 + static_cast<int>(mods.size());  // the baseline, then one per module
    const metric_fn breaks_later = [&] {
        if (++calls > contribution_calls) throw std::runtime_error("metric broke");
        return f.neg_mse();
    };
    CHECK_THROWS_WITH_AS(run_component_value_study(dist::local(), f.model, mods, f.theta0, f.thetaf, breaks_later, finetune, o), Contains("metric broke"),
                         std::runtime_error);
    CHECK(std::filesystem::exists(dir / "contribution.csv"));
    CHECK_FALSE(std::filesystem::exists(dir / "criticality.csv"));
    CHECK(f.pristine());
    std::filesystem::remove_all(dir);

    // bad input is named
    CHECK_THROWS_WITH_AS(run_component_value_study(dist::local(), f.model, mods, f.theta0, f.thetaf, metric, {}, o),
                         Contains("rewind_k given without a fine-tuning function"), usage_error);
    CHECK_THROWS_WITH_AS(run_component_value_study(dist::local(), f.model, {}, f.theta0, f.thetaf, metric, finetune, o), Contains("no modules"),
                         usage_error);
}

TEST_CASE("component value: the model is restored when the metric throws") {
    cv_fixture f;
    const auto mods = default_modules(f.model);
    int calls = 0, fail_at = 0;
    auto metric = [&] {
        if (++calls == fail_at) throw std::runtime_error("metric failed");
        return f.neg_mse();
    };
    auto arm = [&](int n) {
        calls = 0;
        fail_at = n;
    };
    contribution_options co;
    co.clip = 1.0;
    arm(3);
    CHECK_THROWS_WITH_AS(contribution(mods, metric, co), "metric failed", std::runtime_error);
    CHECK(f.pristine());

    criticality_options grid;
    arm(4);
    CHECK_THROWS_WITH_AS(criticality(f.model, mods, f.theta0, f.thetaf, metric, grid), "metric failed", std::runtime_error);
    CHECK(f.pristine());
    criticality_options bis;
    bis.method = search_method::bisection;
    arm(3);
    CHECK_THROWS_AS(criticality(f.model, mods, f.theta0, f.thetaf, metric, bis), std::runtime_error);
    CHECK(f.pristine());

    const std::vector<double> scores(mods.size(), 0.0);
    arm(3);  // k = 2: two modules off at once
    CHECK_THROWS_AS(pruning_curve(f.model, mods, scores, metric, 4), std::runtime_error);
    CHECK(f.pristine());

    arm(4);  // second k, after its rewinding
    CHECK_THROWS_AS(rewinding_curve(f.model, mods, scores, {1, 2}, f.theta0, f.thetaf, metric, [](int) {}), std::runtime_error);
    CHECK(f.pristine());
    arm(0);
    CHECK_THROWS_AS(rewinding_curve(f.model, mods, scores, {1, 2}, f.theta0, f.thetaf, metric, [](int k) {
                        if (k == 2) throw std::runtime_error("finetune failed");
                    }),
                    std::runtime_error);
    CHECK(f.pristine());
    CHECK(f.logits() == f.ref);
}

TEST_CASE("component value: CSV column contracts") {
    contribution_result c;
    c.modules.push_back({"encoder.0.self_attention", "E:SA", 0, -0.25, 0.25, 1.0});
    c.modules.push_back({"encoder.shared.feed_forward", "E:FF", -1, std::nan(""), 0.1, 0.4});
    std::ostringstream os;
    write_csv(os, c);
    CHECK(os.str() ==
          "module,type,layer,metric_without,score\n"
          "encoder.0.self_attention,E:SA,0,-0.25,1\n"
          "encoder.shared.feed_forward,E:FF,-1,nan,0.4\n");

    criticality_result k;
    k.modules.push_back({"decoder.1.cross_attention", "D:EA", 1, 0.3, -0.1, "grid", true, {{0.0, -1}, {0.1, -0.5}}});
    os.str("");
    write_csv(os, k);
    CHECK(os.str() == "module,type,layer,alpha,metric_at_alpha,search\ndecoder.1.cross_attention,D:EA,1,0.3,-0.1,grid\n");

    pruning_result p;
    p.curve.push_back({0, {}, 0, 27.5});
    p.curve.push_back({2, {"decoder.0.self_attention", "odd,name"}, 1234, 27.25});
    os.str("");
    write_csv(os, p);
    CHECK(os.str() == "k,modules_removed,parameters_removed,metric\n0,,0,27.5\n2,\"decoder.0.self_attention;odd,name\",1234,27.25\n");

    std::vector<rewinding_point> rw{{1, {"decoder.0.self_attention"}, 26.0, 27.75}};
    os.str("");
    write_csv(os, rw);
    CHECK(os.str() == "k,modules,metric_before_finetune,metric_after_finetune\n1,decoder.0.self_attention,26,27.75\n");

    // to a file, through a temporary and a rename
    const auto dir = std::filesystem::temp_directory_path() / ("depthlab_cv_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "contribution.csv").string();
    write_csv(path, c);
    std::ifstream in(path);
    std::string header;
    std::getline(in, header);
    CHECK(header == "module,type,layer,metric_without,score");
    std::size_t entries = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) entries += e.path().filename().string().starts_with("contribution.csv.tmp");
    CHECK(entries == 0);  // no temporary left
    CHECK_THROWS_WITH_AS(write_csv((dir / "missing" / "x.csv").string(), c), Contains("cannot create temporary file"), io_error);
    std::filesystem::remove_all(dir);
}

TEST_CASE("component value: an ACT encoder (tied layer, adaptive depth) — dense path") {
    nn::transformer_config cfg;
    cfg.dim = 8;
    cfg.heads = 2;
    cfg.ff_dim = 16;
    cfg.dropout = cfg.attention_dropout = 0;
    Generator gen(4);
    halting::act_options opt;
    opt.max_iterations = 4;
    opt.compact = false;  // the dense path; the compact one below must give the same scores
    halting::ActEncoder<double> enc(cfg, gen, opt);
    enc.eval();
    const Snapshot<double> theta0(enc);
    Generator g(8);
    for (auto& [name, p] : enc.named_parameters()) {
        const auto noise = Tensor<double>::randn(p.value().shape(), g, 0.3);
        for (index_t i = 0; i < p.value().numel(); ++i) p.value().data()[i] += noise.data()[i];
    }
    const Snapshot<double> thetaf(enc);
    const auto x = Var<double>::constant(Tensor<double>::randn({2, 5, 8}, g));
    const std::vector<index_t> lengths{5, 3};
    auto hidden = [&] { return enc(x, lengths).hidden.value().to_vector(); };
    const auto ref = hidden();
    auto metric = [&] {
        const auto h = hidden();
        double s = 0;
        for (std::size_t i = 0; i < h.size(); ++i) s += (h[i] - ref[i]) * (h[i] - ref[i]);
        return -s / static_cast<double>(h.size());
    };
    const auto mods = default_modules(enc);
    REQUIRE(mods.size() == 2);
    CHECK(mods[0].name == "shared.self_attention");
    CHECK(mods[0].type == "E:SA");
    CHECK(mods[0].layer == -1);
    contribution_options co;
    co.clip = std::numeric_limits<double>::infinity();
    const auto c = contribution(mods, metric, co);
    CHECK(!c.all_zero);
    criticality_options ko;
    ko.epsilon = 1e-2;
    const auto k = criticality(enc, mods, theta0, thetaf, metric, ko);
    CHECK(k.modules.size() == 2);
    CHECK(hidden() == ref);
    // compact = true (the default): the full model runs the compact path, an ablated one the
    // dense path; the scores are the same, and the switches are restored
    enc.opt.compact = true;
    CHECK(enc(x, lengths).record.compact);
    const auto c2 = contribution(mods, metric, co);
    CHECK(c2.scores() == c.scores());
    CHECK(enc(x, lengths).record.compact);
    CHECK(enc.layer->self_attention.enabled);
    CHECK(enc.layer->feed_forward.enabled);
}

TEST_CASE("component value: the analyses refuse a model in training mode (dropout would make every score noise)") {
    cv_fixture f;
    const auto mods = default_modules(f.model);
    f.model.train();
    CHECK_THROWS_WITH_AS((void)contribution(mods, [&] { return f.neg_mse(); }), doctest::Contains("contribution: the model is in training mode"),
                         usage_error);
    CHECK_THROWS_WITH_AS((void)criticality(f.model, mods, f.theta0, f.thetaf, [&] { return f.neg_mse(); }),
                         doctest::Contains("criticality: the model is in training mode"), usage_error);
    CHECK_THROWS_WITH_AS((void)pruning_curve(f.model, mods, std::vector<double>(mods.size(), 1.0), [&] { return f.neg_mse(); }, 1),
                         doctest::Contains("pruning: the model is in training mode"), usage_error);
    f.model.eval();
    CHECK(contribution(mods, [&] { return f.neg_mse(); }).modules.size() == mods.size());
}

TEST_CASE("an empty batch stops at the model's embedding; a batch of ignored targets has loss 0 (PyTorch: NaN)") {
    Generator g(1);
    nn::Embedding<double> table(10, 4, g);
    CHECK_THROWS_WITH_AS((void)table({}, Shape{0, 7}), doctest::Contains("Embedding: an empty batch (ids of shape (0, 7))"), usage_error);
    const auto logits = Var<double>::parameter(Tensor<double>::randn({3, 5}, g));
    const std::vector<std::int64_t> ignored{-100, -100, -100};
    const auto loss = cross_entropy(logits, std::span<const std::int64_t>(ignored));
    CHECK(loss.value().item() == 0.0);
    loss.backward();
    for (double v : logits.grad().to_vector()) CHECK(v == 0.0);
}
