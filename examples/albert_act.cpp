// albert_act: pretrains an ACT-ALBERT (one tied layer, per-token halting) with MLM + SOP +
// ponder cost, LAMB and gradient accumulation, then measures how many iterations each kind
// of token uses and whether states reach a fixed point — the study of ../shared/papers.md §A.
//
//   scripts/fetch-data english && scripts/train-tokenizer     # .data/english/{train,dev}.ids
//   build/examples/albert_act --preset tiny --steps 2000 --out runs/act_tiny
//   build/examples/albert_act --preset tiny --steps 4000 --out runs/act_tiny --resume
//   build/examples/albert_act --preset tiny --policy pondernet --beta 0.01 --lambda-p 0.2
//   build/examples/albert_act --preset small --device cuda    # pretrain on a GPU (CUDA build)
//
// Writes to --out: metrics.jsonl (training and dev records, halting table over training),
// halting.csv, fixed_point.csv, checkpoint.safetensors (parameters, LAMB state, sampler and
// RNG state: --resume continues exactly) and report.html (open it in a browser).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <depthlab/depthlab.hpp>

#include "common/cli.hpp"
#include "common/device.hpp"

using namespace depthlab;
namespace fs = std::filesystem;

namespace {

struct paper_row {
    int n_max;
    double tau, all, unmasked, mask_mask, mask_orig, cls, sep, mlm, sop;
};
// Simoulin & Crabbé 2021, dev set at the end of pretraining (../shared/papers.md §A.1).
const paper_row paper_rows[] = {{6, 1e-3, 3.8, 3.5, 5.8, 4.0, 6.0, 2.5, 55.4, 80.9},
                                {12, 5e-4, 7.1, 6.5, 10.9, 7.4, 12.0, 7.6, 57.1, 83.9},
                                {24, 2.5e-4, 10.0, 9.2, 16.0, 10.5, 22.5, 8.4, 57.4, 84.3}};
const paper_row& paper_for(int n_max) {
    const paper_row* best = &paper_rows[0];
    for (const auto& r : paper_rows)
        if (std::abs(r.n_max - n_max) < std::abs(best->n_max - n_max)) best = &r;
    return *best;
}

struct options {
    std::string preset = "tiny", data = ".data/english", out = "runs/albert_act";
    std::int64_t steps = 2000, batch = 32, accum = 1, seq_len = 128, warmup = -1, log_every = 25, eval_every = 250, dev_batches = 8,
                 save_every = 500, hidden = 0, heads = 0, ff = 0, embed = 128, max_iters = 0, tau_warmup = -1, min_iters = 0;
    double lr = 5e-3, tau = -1, halting_bias = NAN, mask_prob = 0.15, clip = 1.0, epsilon = 0.01, beta = 0.01, lambda_p = 0.2;
    std::string policy = "act", device = "cpu";
    std::uint64_t seed = 1;
    bool resume = false, dense = false;
};

struct eval_result {
    double mlm_acc = 0, sop_acc = 0, mlm_loss = 0, sop_loss = 0;
    halting::halting_stats stats;
};

template <class Model>
eval_result evaluate(const Model& model, data::albert_sampler& dev, std::int64_t batches, std::int64_t batch_size) {
    eval_result r;
    no_grad guard;
    nn::accuracy_count mlm_acc, sop_acc;
    for (std::int64_t i = 0; i < batches; ++i) {
        const auto b = dev.next(batch_size);
        const auto enc = model.encode(b.tokens);
        const auto mlm = model.mlm_logits(enc.hidden, b.mlm_positions);
        const auto sop = model.sop_logits(enc.hidden);
        r.mlm_loss += cross_entropy(mlm, b.mlm_labels).value().item() / batches;
        r.sop_loss += cross_entropy(sop, b.sop_labels).value().item() / batches;
        mlm_acc += nn::accuracy(mlm, b.mlm_labels);
        sop_acc += nn::accuracy(sop, b.sop_labels);
        r.stats.add(enc.record, b.token_category);
    }
    r.mlm_acc = mlm_acc.percent();
    r.sop_acc = sop_acc.percent();
    return r;
}

std::string fmt(double v, int d = 2) {
    char b[32];
    std::snprintf(b, sizeof b, "%.*f", d, v);
    return b;
}

/// report.html: the halting table beside the paper's, bars per category, fixed-point curves,
/// training curves from metrics.jsonl.
void write_report(const options& o, const nn::albert_config& cfg, int n_max, double tau, const eval_result& ev,
                  const std::string& metrics_path, std::int64_t step, double seconds) {
    const paper_row& p = paper_for(n_max);
    report::html_page page("ACT-ALBERT: how many iterations does each token use?",
                           "depthlab reproduction of Simoulin & Crabbé (2021), preset " + o.preset);
    page.section("Setup");
    page.key_values({{"steps", std::to_string(step)},
                     {"model", "H " + std::to_string(cfg.layer.dim) + ", " + std::to_string(cfg.layer.heads) + " heads, FF " +
                                   std::to_string(cfg.layer.ff_dim) + ", E " + std::to_string(cfg.embed) + ", vocab " +
                                   std::to_string(cfg.vocab)},
                     {"halting policy", o.policy + (o.policy == "pondernet" ? " (beta " + fmt(o.beta, 4) + ", lambda_p " + fmt(o.lambda_p, 3) +
                                                                                  "; N = median halting step)"
                                                                            : "")},
                     {o.policy == "pondernet" ? "N_max / beta / epsilon" : "N_max / tau / epsilon",
                      std::to_string(n_max) + " / " + fmt(tau, 6) + " / " + fmt(o.epsilon, 3)},
                     {"batch x accumulation x length", std::to_string(o.batch) + " x " + std::to_string(o.accum) + " x " +
                                                            std::to_string(o.seq_len)},
                     {"training time", train::format_duration(seconds)},
                     {"dev MLM / SOP accuracy", fmt(ev.mlm_acc, 1) + "% / " + fmt(ev.sop_acc, 1) + "%"}},
                    "run");
    page.section("Mean iterations per token category (dev)");
    const std::vector<std::string> cats{"all", "unmasked", "mask_to_mask", "mask_to_random", "mask_to_original", "cls", "sep"};
    const std::vector<std::string> labels{"all", "unmasked", "[MASK]→[MASK]", "[MASK]→random", "[MASK]→original", "[CLS]", "[SEP]"};
    const std::vector<double> paper_vals{p.all, p.unmasked, p.mask_mask, NAN, p.mask_orig, p.cls, p.sep};
    std::vector<std::vector<std::string>> rows;
    std::vector<double> ours;
    for (std::size_t i = 0; i < cats.size(); ++i) {
        ours.push_back(ev.stats.mean_iterations(cats[i]));
        rows.push_back({labels[i], std::to_string(ev.stats.count(cats[i])), fmt(ours.back()), fmt(ev.stats.mean_remainder(cats[i]), 3),
                        std::isnan(paper_vals[i]) ? "—" : fmt(paper_vals[i], 1)});
    }
    rows.push_back({"MLM accuracy (%)", "", fmt(ev.mlm_acc, 1), "", fmt(p.mlm, 1)});
    rows.push_back({"SOP accuracy (%)", "", fmt(ev.sop_acc, 1), "", fmt(p.sop, 1)});
    page.table({"category", "tokens", "mean N (ours)", "mean R", "paper (N_max " + std::to_string(p.n_max) + ")"}, rows,
               {.caption = "Ours after " + std::to_string(step) + " steps vs the paper at the end of pretraining (its model is far larger and trained far longer)",
                .decimals = -1,
                .highlight_column = 2});
    page.figure(report::bar_chart(labels, {{"ours", ours, {}}, {"paper", paper_vals, {}}},
                                  {.title = "Mean iterations per token category", .y_label = "iterations"}),
                "The paper's shape: [CLS] iterates most, masked tokens more than unmasked ones.");
    page.section("Fixed point: cosine similarity of successive states");
    std::vector<report::line_series> series;
    for (std::size_t i = 0; i < cats.size(); ++i) {
        if (cats[i] == "mask_to_random" || cats[i] == "mask_to_original") continue;
        report::line_series s{labels[i], {}, {}};
        for (int n = 1; n <= ev.stats.max_iteration(); ++n) {
            s.x.push_back(n);
            s.y.push_back(ev.stats.mean_cosine(cats[i], n));
        }
        series.push_back(s);
    }
    page.figure(report::line_chart(series, {.title = "cos(s^{n-1}, s^n) per category", .x_label = "iteration n", .y_label = "mean cosine",
                                            .integer_x = true}),
                "Averaged over the tokens still running at iteration n. The paper: tokens converge; unmasked and [SEP] faster "
                "than [MASK]; [CLS] oscillates before settling.");
    // training curves
    std::vector<double> st, mlm, sop, ponder, meann, dst, dmeann;
    std::ifstream in(metrics_path);
    std::string line;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.contains("step")) continue;
        if (j.contains("mlm") && j["mlm"].is_number()) {
            st.push_back(j["step"].get<double>());
            mlm.push_back(j["mlm"].get<double>());
            sop.push_back(j.value("sop", NAN));
            ponder.push_back(j.value("ponder", NAN));
            meann.push_back(j.value("mean_N", NAN));
        }
        if (j.contains("dev_mean_N") && j["dev_mean_N"].is_number()) {
            dst.push_back(j["step"].get<double>());
            dmeann.push_back(j["dev_mean_N"].get<double>());
        }
    }
    page.section("Training");
    page.figure(report::line_chart({{"MLM loss", st, mlm}, {"SOP loss", st, sop}}, {.title = "Losses", .x_label = "step", .y_label = "loss"}), "");
    page.figure(report::line_chart({{"train mean N", st, meann}, {"dev mean N", dst, dmeann}},
                                   {.title = "Mean iterations over training (collapse shows as a fall to 1)", .x_label = "step",
                                    .y_label = "iterations"}),
                "");
    page.paragraph("Outputs next to this page: halting.csv, fixed_point.csv, metrics.jsonl, checkpoint.safetensors.");
    page.provenance("depthlab examples/albert_act, preset " + o.preset + ", seed " + std::to_string(o.seed));
    page.write(o.out + "/report.html");
}

}  // namespace

/// The whole job for one halting policy and backend (compile-time choices, picked by
/// --policy and --device).
template <class Policy, class B>
int run(options o) {
    try {
        // ---- preset ----
        int n_max = 6;
        double tau = 1e-3;
        index_t H = 256, heads = 4, ff = 1024;
        if (o.preset == "small") { n_max = 12; tau = 5e-4; H = 384; heads = 6; ff = 1536; }
        else if (o.preset == "base") { n_max = 24; tau = 2.5e-4; H = 768; heads = 12; ff = 3072; }
        else if (o.preset != "tiny") throw usage_error("--preset: expected tiny, small or base, got '" + o.preset + "'");
        if (o.max_iters > 0) n_max = static_cast<int>(o.max_iters);
        if (o.tau >= 0) tau = o.tau;
        if (o.hidden > 0) H = o.hidden;
        if (o.heads > 0) heads = o.heads;
        if (o.ff > 0) ff = o.ff;
        const std::int64_t warmup = o.warmup >= 0 ? o.warmup : o.steps / 10;
        const std::int64_t tau_warmup = o.tau_warmup >= 0 ? o.tau_warmup : (3 * o.steps) / 10;

        // ---- data ----
        for (const char* f : {"train.ids", "dev.ids", "spm.vocab"})
            DEPTHLAB_CHECK(fs::exists(fs::path(o.data) / f), io_error, "albert_act: missing ", (fs::path(o.data) / f).string(),
                           " — run scripts/fetch-data english && scripts/train-tokenizer");
        const auto pieces = data::read_spm_vocab((fs::path(o.data) / "spm.vocab").string());
        data::albert_data_config dcfg;
        dcfg.max_len = o.seq_len;
        dcfg.mask_prob = o.mask_prob;
        if (o.mask_prob > 0.15) dcfg.max_predictions = static_cast<index_t>(std::ceil(o.mask_prob * o.seq_len)) + 1;
        dcfg.vocab = static_cast<std::int64_t>(pieces.size());
        dcfg.word_start = data::word_start_table(pieces);
        data::albert_sampler sampler(data::read_id_corpus((fs::path(o.data) / "train.ids").string()), dcfg, o.seed);
        data::albert_data_config dev_cfg = dcfg;
        dev_cfg.shuffle_instances = true;
        const data::corpus dev_corpus = data::read_id_corpus((fs::path(o.data) / "dev.ids").string());

        // ---- model ----
        nn::albert_config cfg;
        cfg.vocab = dcfg.vocab;
        cfg.embed = o.embed;
        cfg.max_len = o.seq_len;
        cfg.depth = n_max;
        cfg.layer.dim = H;
        cfg.layer.heads = static_cast<int>(heads);
        cfg.layer.ff_dim = ff;
        cfg.layer.dropout = cfg.layer.attention_dropout = 0.0;  // ALBERT removes dropout
        halting::act_options aopt;
        aopt.max_iterations = n_max;
        aopt.epsilon = o.epsilon;
        aopt.min_iterations = static_cast<int>(o.min_iters);
        aopt.compact = !o.dense;
        aopt.lambda_p = o.lambda_p;
        aopt.halting_bias = o.halting_bias;  // NaN: the policy's
        const bool ponder_net = std::is_same_v<Policy, halting::pondernet>;
        if (ponder_net) tau = o.beta;  // the ponder term is the KL, weighted by β
        halting::ActAlbert<float, B, Policy> model(cfg, aopt, o.seed);
        const double halting_bias = model.encoder->halting_unit->bias.value().item();
        optim::LambOptions lopt;
        lopt.lr = o.lr;
        optim::Lamb<float, B> lamb(model.named_parameters(), lopt);
        const optim::warmup_linear schedule(o.lr, warmup, o.steps);

        // ---- the training loop (train::Trainer: accumulation, clipping, logs, checkpoints, resume)
        train::Trainer<float, B> trainer(model, lamb, {.steps = o.steps, .accumulate = o.accum, .clip = o.clip, .log_every = o.log_every,
                                                       .eval_every = o.eval_every, .save_every = o.save_every, .out = o.out,
                                                       .resume = o.resume});
        auto& ckpt = trainer.checkpoint();
        ckpt.track("sampler", sampler);
        ckpt.track("model", model.rng());
        io::save_config(ckpt.metadata(), "config.", cfg);
        io::save_config(ckpt.metadata(), "act.", aopt);
        ckpt.metadata()["policy"] = Policy::name;
        ckpt.metadata()["preset"] = o.preset;
        trainer.schedule = [&](std::int64_t done) { return schedule.lr(done); };
        double tau_now = 0;
        trainer.before_step = [&](std::int64_t done) { tau_now = halting::ponder_weight(tau, tau_warmup, done); };
        trainer.log_extra = [&](std::int64_t) { return train::log_values{{"tau", tau_now}}; };
        bool warned = false;
        trainer.on_log = [&](std::int64_t, const train::log_values& line) {
            const auto it = std::find_if(line.begin(), line.end(), [](const auto& kv) { return kv.first == "mean_N"; });
            const double mean_n = it->second;  // logged by every micro-batch below
            if (mean_n < 1.05 && !warned) {
                std::printf("warning: halting collapse — mean iterations %.3f: every token halts at the first iteration, and with R = 1 "
                            "no gradient reaches the halting unit. Remedies: --tau-warmup (longer), --halting-bias -2, --min-iters 2, "
                            "a smaller --tau.\n", mean_n);
                warned = true;
            } else if (mean_n >= 1.05) {
                warned = false;
            }
        };
        eval_result final_ev;
        trainer.evaluate = [&](std::int64_t step, bool final) {
            data::albert_sampler dev(dev_corpus, dev_cfg, 4242);  // the same dev batches every time
            const auto ev = evaluate(model, dev, final ? o.dev_batches * 4 : o.dev_batches, o.batch);
            nlohmann::ordered_json j;
            j["dev_mlm_acc"] = ev.mlm_acc;
            j["dev_sop_acc"] = ev.sop_acc;
            j["dev_mlm_loss"] = ev.mlm_loss;
            j["dev_mean_N"] = ev.stats.mean_iterations("all");
            for (const auto& c : ev.stats.ordered_names()) j["dev_halting"][c] = ev.stats.mean_iterations(c);
            std::printf("  dev @ %lld: MLM acc %.1f%%  SOP acc %.1f%%  mean N: all %.2f unmasked %.2f [MASK]->[MASK] %.2f [CLS] %.2f [SEP] %.2f\n",
                        static_cast<long long>(step), ev.mlm_acc, ev.sop_acc, ev.stats.mean_iterations("all"),
                        ev.stats.mean_iterations("unmasked"), ev.stats.mean_iterations("mask_to_mask"), ev.stats.mean_iterations("cls"),
                        ev.stats.mean_iterations("sep"));
            if (final) final_ev = ev;
            return j;
        };
        trainer.restore();

        const bool compact = std::is_same_v<Policy, halting::act> && !o.dense;
        std::printf("albert_act: preset %s, policy %s, %lld parameters, N_max %d, %s %g (warm-up %lld steps)%s, halting bias %g, %s path; "
                    "device %s, ISA %s, %d threads\n",
                    o.preset.c_str(), Policy::name, static_cast<long long>(model.parameter_count()), n_max, ponder_net ? "beta" : "tau", tau,
                    static_cast<long long>(tau_warmup), ponder_net ? (", lambda_p " + fmt(o.lambda_p, 3)).c_str() : "", halting_bias,
                    compact ? "compact" : "dense", B::name, cpu::to_string(cpu::active_isa()), max_threads());
        std::printf("data: %lld training examples per epoch, vocab %lld\n", static_cast<long long>(sampler.epoch_size()),
                    static_cast<long long>(dcfg.vocab));

        const train::fit_result fit = trainer.fit([&] {
            const auto b = sampler.next(o.batch);
            auto losses = model.losses(b);
            const auto& enc = losses.encoded;
            double n = 0, c = 0;  // mean iterations over real tokens
            for (const int t : enc.record.N)
                if (t > 0) {
                    n += t;
                    ++c;
                }
            std::int64_t tokens = 0;
            for (auto l : b.tokens.lengths) tokens += l;
            return train::micro_batch<float, B>{.loss = add(add(losses.mlm, losses.sop), scale(enc.ponder, static_cast<float>(tau_now))),
                                                .logged = {{"mlm", losses.mlm}, {"sop", losses.sop}, {"ponder", enc.ponder}},
                                                .host_logged = {{"mean_N", n / std::max(c, 1.0)}},
                                                .tokens = tokens};
        });
        final_ev.stats.write_halting_csv(o.out + "/halting.csv");
        final_ev.stats.write_fixed_point_csv(o.out + "/fixed_point.csv");
        write_report(o, cfg, n_max, tau, final_ev, trainer.metrics_path(), fit.steps, fit.seconds);
        std::printf("halting table: %s/halting.csv\nfixed point: %s/fixed_point.csv\nreport: %s/report.html\n", o.out.c_str(), o.out.c_str(),
                    o.out.c_str());
        return 0;
    } catch (const std::exception& e) {  // depthlab::error and the standard library's (bad_alloc, filesystem)
        std::fprintf(stderr, "albert_act: %s\n", e.what());
        return 1;
    }
}

int main(int argc, char** argv) {
    options o;
    examples::cli args("albert_act", "Pretrain an ACT-ALBERT on the English corpora and measure per-token depth.");
    args.option("preset", o.preset, "tiny | small | base (N_max 6/12/24, tau 1e-3/5e-4/2.5e-4; sizes for 2 cores)").one_of({"tiny", "small", "base"})
        .option("data", o.data, "directory with train.ids, dev.ids and spm.vocab (scripts/fetch-data, scripts/train-tokenizer)")
        .option("out", o.out, "output directory")
        .option("steps", o.steps, "optimiser steps").range<std::int64_t>(0, 1000000000)
        .option("batch", o.batch, "sequences per micro-batch").range<std::int64_t>(1, 1 << 20)
        .option("accum", o.accum, "micro-batches per step (gradient accumulation)").range<std::int64_t>(1, 1 << 16)
        .option("seq-len", o.seq_len, "maximum sequence length").range<std::int64_t>(5, 1 << 16)
        .option("hidden", o.hidden, "H (0: preset)").range<std::int64_t>(0, 1 << 16)
        .option("heads", o.heads, "attention heads (0: preset)").range<std::int64_t>(0, 1024)
        .option("ff", o.ff, "feed-forward width (0: preset)").range<std::int64_t>(0, 1 << 18)
        .option("embed", o.embed, "factorised embedding size E").range<std::int64_t>(1, 1 << 16)
        .option("max-iters", o.max_iters, "N_max (0: preset)").range<std::int64_t>(0, 1024)
        .option("tau", o.tau, "ponder weight (negative: preset)").range(-1.0, 1e3)
        .option("tau-warmup", o.tau_warmup, "steps over which tau ramps up from 0 (negative: 30% of the steps)").range<std::int64_t>(-1, 1000000000)
        .option("halting-bias", o.halting_bias, "initial halting bias (default: the policy's, 0 as the paper, 1 for act_graves; negative: more iterations at first)").range(-100.0, 100.0)
        .option("min-iters", o.min_iters, "no token halts before this iteration").range<std::int64_t>(0, 1024)
        .option("epsilon", o.epsilon, "halting threshold 1 - epsilon").range(1e-6, 0.999)
        .option("mask-prob", o.mask_prob, "MLM masking rate (0.15; the thesis uses 0.20)").range(0.0, 1.0)
        .option("lr", o.lr, "LAMB peak learning rate").positive()
        .option("warmup", o.warmup, "warm-up steps (negative: 10% of the steps)").range<std::int64_t>(-1, 1000000000)
        .option("clip", o.clip, "gradient clipping by global norm (0: off)").range(0.0, 1e6)
        .option("seed", o.seed, "random seed")
        .option("log-every", o.log_every, "steps between progress lines").range<std::int64_t>(1, 1000000000)
        .option("eval-every", o.eval_every, "steps between dev evaluations").range<std::int64_t>(0, 1000000000)
        .option("dev-batches", o.dev_batches, "dev batches per evaluation").range<std::int64_t>(1, 1 << 20)
        .option("save-every", o.save_every, "steps between checkpoints").range<std::int64_t>(1, 1000000000)
        .option("policy", o.policy, "halting: act (the paper) | pondernet | act_graves | act_ut | fixed (N_max iterations)").one_of({"act", "pondernet", "act_graves", "act_ut", "fixed"})
        .option("beta", o.beta, "pondernet: weight of KL(p || geometric prior), used instead of tau").range(0.0, 1e3)
        .option("lambda-p", o.lambda_p, "pondernet: the geometric prior's halting probability per iteration").range(1e-6, 1.0)
        .option("device", o.device, examples::device_help).one_of({"cpu", "cuda", "host_device"})
        .flag("dense", o.dense, "use the dense masked reference path instead of the compact one")
        .flag("resume", o.resume, "continue from <out>/checkpoint.safetensors");
    args.parse(argc, argv);

    return examples::on_device(o.device, "albert_act", [&](auto tag) {
        using B = decltype(tag);
        if (o.policy == "pondernet") return run<halting::pondernet, B>(o);
        if (o.policy == "act_graves") return run<halting::act_graves, B>(o);
        if (o.policy == "act_ut") return run<halting::act_ut, B>(o);
        if (o.policy == "fixed") return run<halting::fixed, B>(o);
        return run<halting::act, B>(o);
    });
}
