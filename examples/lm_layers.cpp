// lm_layers: which blocks and sub-layers of a decoder-only language model matter. Trains a small
// GPT-2-style model on the English corpus (or loads a Hugging Face GPT-2 with --hf-checkpoint),
// reports dev perplexity, then scores every block and every sub-layer with perplexity as the
// metric — ShortGPT's block influence (blocks), contribution (ablation) and criticality (rewinding
// by interpolation towards the initial weights) — and prunes the blocks in each score's order.
//
//   scripts/fetch-data english && scripts/train-tokenizer     # .data/english/{train,dev}.ids, spm.vocab
//   build/examples/lm_layers --preset tiny --out runs/lm_tiny            # 8 minutes on 2 Zen 5 cores (docs/results/lm_layers)
//   build/examples/lm_layers --hf-checkpoint my-gpt2/ --data DIR --out runs/lm_hf
//   build/examples/lm_layers --config runs/lm_tiny/config.toml --out runs/lm_again
//
// Writes to --out (each file atomically): block_influence.csv (every block's three scores),
// contribution.csv and criticality.csv (blocks and sub-layers), contribution_ci.csv and
// criticality_ci.csv (each score's bootstrap interval), pruning.csv (perplexity and
// FLOPs per token after removing the k least important blocks by each score), summary.json,
// report.html, model/ (the trained model as a Hugging Face GPT-2 folder), and from training
// metrics.jsonl and checkpoint.safetensors (--resume continues).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <depthlab/depthlab.hpp>

#include "common/build_info.hpp"
#include "common/device.hpp"
#include "common/vocabulary.hpp"
#include "lm_layers_options.hpp"

using namespace depthlab;

namespace {

/// --hf-checkpoint names a folder, or the model.safetensors inside one.
std::string checkpoint_folder(const std::string& path) {
    const std::filesystem::path p(path);
    return p.extension() == ".safetensors" ? p.parent_path().string() : path;
}

/// Scores of one kind for the blocks, aligned with the blocks' modules.
struct block_scores {
    std::string name;            // "block_influence", "contribution", "criticality"
    std::vector<double> values;  // higher: more important
};

/// Spearman's rho, or NaN written as JSON null.
nlohmann::json rho_json(double r) { return std::isnan(r) ? nlohmann::json(nullptr) : nlohmann::json(r); }

}  // namespace

template <class B>
int run(options o, const std::string& command_line) {
    try {
        const analysis::stopwatch run_time;
        std::filesystem::create_directories(o.out);
        const bool imported = !o.hf_checkpoint.empty();

        // ---- the model: a preset sized to the tokenizer, or a Hugging Face GPT-2
        const std::vector<std::string> pieces = data::read_spm_vocab(o.data + "/spm.vocab");
        std::unique_ptr<nn::GPT2<float, B>> model;
        nn::gpt2_config cfg;
        if (imported) {
            model = io::from_pretrained_gpt2<float, B>(checkpoint_folder(o.hf_checkpoint), o.seed);
            cfg = model->cfg;
            DEPTHLAB_CHECK(static_cast<std::int64_t>(pieces.size()) <= cfg.vocab, usage_error, "--hf-checkpoint ", o.hf_checkpoint, ": a vocabulary of ",
                           cfg.vocab, ", smaller than the ", pieces.size(), " pieces of ", o.data, "/spm.vocab: the data's tokenizer is not the model's");
        } else {
            cfg = nn::gpt2_preset(o.preset, static_cast<index_t>(pieces.size()));
            if (o.layers > 0) cfg.depth = static_cast<int>(o.layers);
            if (o.dim > 0) cfg.layer.dim = o.dim;
            if (o.heads > 0) cfg.layer.heads = static_cast<int>(o.heads);
            if (o.ff > 0) cfg.layer.ff_dim = o.ff;
            if (o.dropout >= 0) cfg.layer.dropout = cfg.layer.attention_dropout = o.dropout;
            if (o.seq_len > cfg.positions) cfg.positions = o.seq_len;
            model = std::make_unique<nn::GPT2<float, B>>(cfg, o.seed);
        }
        nn::GPT2<float, B>& lm = *model;
        const index_t seq_len = o.seq_len > 0 ? o.seq_len : cfg.positions;
        for (const int d : o.shallow_layers) {
            DEPTHLAB_CHECK(!imported, usage_error, "--shallow-layers trains shallower models with this run's recipe: not with --hf-checkpoint");
            DEPTHLAB_CHECK(d < cfg.depth, usage_error, "--shallow-layers ", d, ": not shallower than the model's ", cfg.depth, " blocks");
        }
        DEPTHLAB_CHECK(seq_len <= cfg.positions, usage_error, "--seq-len ", seq_len, " exceeds the model's ", cfg.positions, " positions");
        // θ⁰: the weights at initialisation (criticality rewinds towards them); an imported model's
        // are unknown, so a fresh initialisation of its config stands in for them
        std::unique_ptr<nn::GPT2<float, B>> fresh;
        if (imported) fresh = std::make_unique<nn::GPT2<float, B>>(cfg, o.seed);
        nn::Snapshot<float, B> theta0(imported ? *fresh : lm);
        fresh.reset();

        // ---- data: documents closed by the separator, cut into sequences
        const analysis::stopwatch reading;
        const data::lm_sequences train_seq(data::read_id_corpus(o.data + "/train.ids"), seq_len, o.separator);
        const data::lm_sequences dev_seq(data::read_id_corpus(o.data + "/dev.ids"), seq_len, o.separator);
        for (const data::lm_sequences* s : {&train_seq, &dev_seq})
            DEPTHLAB_CHECK(s->max_id() < cfg.vocab, index_error, o.data, ": id ", s->max_id(), " (or --separator) is outside the model's vocabulary of ",
                           cfg.vocab);
        std::printf("data: %s: %lld training tokens in %lld sequences of %lld, %lld dev tokens; vocab %zu; read in %.1fs\n", o.data.c_str(),
                    static_cast<long long>(train_seq.tokens()), static_cast<long long>(train_seq.size()), static_cast<long long>(seq_len),
                    static_cast<long long>(dev_seq.tokens()), pieces.size(), reading.elapsed());
        std::printf("model: GPT-2 %s, %lld parameters%s; device %s, ISA %s, precision %s, %d threads\n", nn::describe(cfg).c_str(),
                    static_cast<long long>(lm.parameter_count()), imported ? (", from " + o.hf_checkpoint).c_str() : "", B::name,
                    cpu::to_string(cpu::active_isa()), examples::precision_description(B::name).c_str(), max_threads());
        const auto batches_of = [&](std::int64_t sequences) {
            return analysis::lm_eval_options{.batch = o.batch, .max_batches = sequences > 0 ? (sequences + o.batch - 1) / o.batch : 0};
        };

        // ---- training (AdamW, linear warm-up and decay) unless the model was imported; the same
        // recipe trains the shallower models of --shallow-layers, each into its own folder
        const auto train_model = [&](nn::GPT2<float, B>& m, nn::Snapshot<float, B>* initial, const std::string& out, bool resume) {
            optim::AdamW<float, B> opt(m.named_parameters(), optim::AdamWOptions{.lr = o.lr, .weight_decay = o.weight_decay});
            const optim::warmup_linear schedule(o.lr, o.warmup >= 0 ? o.warmup : o.steps / 20, o.steps);
            data::lm_sampler sampler(train_seq, o.seed + 1);
            train::Trainer<float, B> trainer(m, opt, {.steps = o.steps, .clip = o.clip, .log_every = o.log_every, .eval_every = o.eval_every,
                                                      .save_every = o.save_every, .max_train_minutes = o.max_minutes, .out = out, .resume = resume,
                                                      .divergence = {.enabled = !o.no_divergence_guard}});
            auto& ckpt = trainer.checkpoint();
            ckpt.track("sampler", sampler);
            ckpt.track("model", m.rng());
            if (initial != nullptr)
                ckpt.track_tensors("theta0", [initial] { return initial->tensors(); },
                                   [initial, &m](const auto& t0s) { *initial = nn::Snapshot<float, B>(m, t0s); });
            io::save_config(ckpt.metadata(), "config.", m.cfg);
            examples::record_vocabulary(ckpt.metadata(), pieces);
            trainer.schedule = [&](std::int64_t done) { return schedule.lr(done); };
            trainer.evaluate = [&](std::int64_t step, bool) {
                m.eval();
                const analysis::lm_eval ev = analysis::evaluate_lm(m, dev_seq, batches_of(o.dev_sequences));
                m.train();
                std::printf("  dev @ %lld: perplexity %.2f (%lld tokens)\n", static_cast<long long>(step), ev.perplexity, static_cast<long long>(ev.tokens));
                return nlohmann::ordered_json{{"dev_perplexity", ev.perplexity}, {"dev_nll", ev.nll}};
            };
            trainer.restore();
            const train::fit_result r = trainer.fit([&] {
                const data::token_batch b = sampler.next(o.batch);
                std::int64_t tokens = 0;
                for (index_t len : b.lengths) tokens += len;
                Var<float, B> loss = m.loss(b);
                return train::micro_batch<float, B>{.loss = loss, .logged = {{"loss", loss}}, .tokens = tokens};
            });
            m.eval();
            return r;
        };
        train::fit_result fit;
        if (!imported && o.steps > 0) {
            fit = train_model(lm, &theta0, o.out, o.resume);
            std::printf("%s\n", examples::memory_summary().c_str());
            io::save_pretrained_gpt2(lm, o.out + "/model");
        }
        lm.eval();

        // ---- dev perplexity and the analyses' metric: perplexity on the first --eval-sequences dev sequences
        const analysis::lm_eval dev = analysis::evaluate_lm(lm, dev_seq, batches_of(0));
        const analysis::lm_eval_options on_analysis_set = batches_of(o.eval_sequences);
        std::vector<double> flops_of_calls;  // FLOPs per token of every metric call, in order (pruning reads them)
        analysis::lm_eval last;              // the last metric call's evaluation (per-sequence losses for the intervals)
        analysis::timed_metric metric([&] {
            last = analysis::evaluate_lm(lm, dev_seq, on_analysis_set);
            flops_of_calls.push_back(last.flops_per_token);
            return -last.perplexity;
        });
        const double base = -metric();
        const analysis::lm_eval full = last;
        std::printf("dev perplexity %.3f over %lld tokens (%.2f MFLOP per token); analysis metric: perplexity on %lld dev sequences = %.3f (%.2fs per evaluation)\n",
                    dev.perplexity, static_cast<long long>(dev.tokens), dev.flops_per_token / 1e6,
                    static_cast<long long>(std::min<std::int64_t>(o.eval_sequences > 0 ? o.eval_sequences : dev_seq.size(), dev_seq.size())), base,
                    metric.seconds());

        const nn::Snapshot<float, B> thetaf(lm);
        const auto blocks = analysis::layer_modules(lm);
        const auto sublayers = analysis::default_modules(lm);
        const analysis::run_options progress{.print_progress = true};
        // contribution evaluates each module once, right after its progress event names it: keep
        // that evaluation's per-sequence losses for the module's interval
        std::string evaluating;
        const analysis::run_options tracked{.progress = [&](const analysis::progress_event& e) { evaluating = e.module; }, .print_progress = true};
        std::map<std::string, analysis::lm_eval> without;
        const analysis::contribution_options copt{.clip_fraction = o.clip_fraction, .base = -base, .run = tracked};
        const analysis::metric_fn keep_without = [&] {
            const double v = metric();
            without[evaluating] = last;
            return v;
        };
        // criticality evaluates each module at the α of its trace, in that order, after its
        // progress event: keep those evaluations for the module's interval. Every grid α is
        // evaluated (an evaluation is cheap here), so that a resample on which the first
        // passing α fails finds the next one instead of counting 1.
        std::map<std::string, std::vector<analysis::lm_eval>> traced;
        const analysis::criticality_options kopt{
            .epsilon = o.epsilon * base, .grid_steps = static_cast<int>(o.grid_steps), .grid_full_scan = true, .base = -base, .run = tracked};
        const analysis::metric_fn keep_traced = [&] {
            const double v = metric();
            traced[evaluating].push_back(last);
            return v;
        };
        analysis::stopwatch phases;
        const std::vector<double> influence = analysis::block_influence(lm, dev_seq, on_analysis_set);
        const double influence_s = phases.lap("block_influence");
        const analysis::contribution_result contrib_blocks = analysis::contribution(blocks, keep_without, copt);
        const analysis::contribution_result contrib_sub = analysis::contribution(sublayers, keep_without, copt);
        // each module's rise in perplexity with its paired-bootstrap interval over the analysis sequences
        io::csv_writer ci_csv({"module", "type", "layer", "rise", "ci_low", "ci_high", "verdict"});
        std::size_t within_noise = 0;
        for (const auto* group : {&blocks, &sublayers})
            for (const analysis::module_ref& m : *group) {
                const metrics::paired_difference d = metrics::paired_bootstrap_perplexity(without.at(m.name).sequence_nll, full.sequence_nll,
                                                                                          full.sequence_tokens, {.resamples = static_cast<int>(o.bootstrap)});
                within_noise += !d.significant();
                ci_csv.row(m.name, m.type, m.layer, d.delta, d.lo, d.hi, std::string(d.lo > 0 ? "worse without" : d.hi < 0 ? "better without" : "within noise"));
            }
        ci_csv.write(o.out + "/contribution_ci.csv");
        std::printf("contribution: %zu of %zu modules' rises in perplexity are within noise (95%% paired bootstrap over %zu sequences)\n", within_noise,
                    blocks.size() + sublayers.size(), full.sequence_nll.size());
        const double contribution_s = phases.lap("contribution");
        const analysis::criticality_result crit_blocks = analysis::criticality(lm, blocks, theta0, thetaf, keep_traced, kopt);
        const analysis::criticality_result crit_sub = analysis::criticality(lm, sublayers, theta0, thetaf, keep_traced, kopt);
        // each criticality score with its bootstrap interval over the analysis sequences
        io::csv_writer crit_ci_csv({"module", "type", "layer", "alpha", "ci_low", "ci_high"});
        for (const auto* r : {&crit_blocks, &crit_sub})
            for (const auto& e : r->modules) {
                const analysis::score_interval ci =
                    analysis::criticality_interval_lm(e, kopt.epsilon, full, traced.at(e.name), {.resamples = static_cast<int>(o.bootstrap)});
                crit_ci_csv.row(e.name, e.type, e.layer, e.alpha, ci.lo, ci.hi);
            }
        crit_ci_csv.write(o.out + "/criticality_ci.csv");
        const double criticality_s = phases.lap("criticality");

        // ---- pruning: the k least important blocks by each score removed together; a tie in a
        // clipped contribution or a grid's α is broken by the unclipped rise (analysis::importance_ranks)
        const int max_k = o.prune_max_k < 0 ? cfg.depth - 1 : static_cast<int>(std::min<std::int64_t>(o.prune_max_k, cfg.depth));
        const std::vector<block_scores> scores{{"block_influence", influence}, {"contribution", contrib_blocks.scores()}, {"criticality", crit_blocks.scores()}};
        const std::vector<std::vector<double>> pruning_order{influence, analysis::importance_ranks(contrib_blocks), analysis::importance_ranks(crit_blocks)};
        io::csv_writer pruning({"score", "k", "blocks_removed", "parameters_removed", "perplexity", "flops_per_token"});
        std::map<std::string, analysis::pruning_result> curves;
        std::vector<double> pruned_flops_per_token;  // FLOPs per token with k blocks removed, k = 0, 1, ...
        for (std::size_t n = 0; n < scores.size(); ++n) {
            const block_scores& s = scores[n];
            flops_of_calls.clear();
            const analysis::pruning_result r = analysis::pruning_curve(lm, blocks, pruning_order[n], metric, max_k, progress);
            for (std::size_t i = 0; i < r.curve.size(); ++i) {
                const auto& p = r.curve[i];
                pruning.row(s.name, p.k, analysis::detail::join(p.modules_removed), p.parameters_removed, -p.metric, flops_of_calls.at(i));
            }
            curves.emplace(s.name, r);
            if (n == 0) pruned_flops_per_token = flops_of_calls;
        }
        const double pruning_s = phases.lap("pruning");

        // ---- iso-FLOP: a model trained with fewer blocks against the pruned model of as many blocks
        io::csv_writer shallow_csv({"layers", "parameters", "flops_per_token", "perplexity", "dev_perplexity", "train_seconds", "pruned_k",
                                    "pruned_by_block_influence", "pruned_by_contribution", "pruned_by_criticality", "pruned_flops_per_token"});
        std::vector<std::vector<std::string>> shallow_rows;
        for (const int d : o.shallow_layers) {
            nn::gpt2_config sc = cfg;
            sc.depth = d;
            nn::GPT2<float, B> shallow(sc, o.seed);
            std::printf("shallow comparison: training %s\n", nn::describe(sc).c_str());
            const train::fit_result sf = train_model(shallow, nullptr, o.out + "/shallow_" + std::to_string(d), false);
            const analysis::lm_eval on_set = analysis::evaluate_lm(shallow, dev_seq, on_analysis_set), on_dev = analysis::evaluate_lm(shallow, dev_seq);
            const int k = cfg.depth - d;
            const auto pruned = [&](const std::string& score) {
                const auto& curve = curves.at(score).curve;
                return static_cast<std::size_t>(k) < curve.size() ? -curve[static_cast<std::size_t>(k)].metric : NAN;
            };
            // (any k blocks removed run the same products: the first curve's count stands for all)
            const double pruned_flops = static_cast<std::size_t>(k) < pruned_flops_per_token.size() ? pruned_flops_per_token[static_cast<std::size_t>(k)] : NAN;
            shallow_csv.row(d, shallow.parameter_count(), on_set.flops_per_token, on_set.perplexity, on_dev.perplexity, sf.seconds, k,
                            pruned("block_influence"), pruned("contribution"), pruned("criticality"), pruned_flops);
            shallow_rows.push_back({std::to_string(d), report::format_fixed(on_set.flops_per_token / 1e6, 3), report::format_fixed(on_set.perplexity, 2), std::to_string(k),
                                    report::format_fixed(pruned("block_influence"), 2), report::format_fixed(pruned("contribution"), 2), report::format_fixed(pruned("criticality"), 2)});
            std::printf("shallow comparison: %d blocks trained: perplexity %.2f at %.2f MFLOP per token; %d blocks pruned from %d: %.2f / %.2f / %.2f "
                        "(by block influence / contribution / criticality)\n", d, on_set.perplexity, on_set.flops_per_token / 1e6, k, cfg.depth,
                        pruned("block_influence"), pruned("contribution"), pruned("criticality"));
        }
        const double shallow_s = phases.lap("shallow");
        if (!o.shallow_layers.empty()) shallow_csv.write(o.out + "/shallow.csv");

        // ---- the tables
        io::csv_writer block_csv({"block", "module", "block_influence", "contribution", "criticality", "perplexity_without", "perplexity_at_alpha_0"});
        for (std::size_t i = 0; i < blocks.size(); ++i) {
            const auto& k = crit_blocks.modules[i];
            block_csv.row(blocks[i].layer, blocks[i].name, influence[i], contrib_blocks.modules[i].score, k.alpha, -contrib_blocks.modules[i].metric_without,
                          k.trace.empty() ? NAN : -k.trace.front().second);
        }
        io::csv_writer contribution_csv({"module", "type", "layer", "perplexity_without", "rise", "score"});
        io::csv_writer criticality_csv({"module", "type", "layer", "alpha", "perplexity_at_alpha"});
        for (const auto* r : {&contrib_blocks, &contrib_sub})
            for (const auto& e : r->modules) contribution_csv.row(e.name, e.type, e.layer, -e.metric_without, e.drop, e.score);
        for (const auto* r : {&crit_blocks, &crit_sub})
            for (const auto& e : r->modules) criticality_csv.row(e.name, e.type, e.layer, e.alpha, -e.metric_at_alpha);
        block_csv.write(o.out + "/block_influence.csv");
        contribution_csv.write(o.out + "/contribution.csv");
        criticality_csv.write(o.out + "/criticality.csv");
        pruning.write(o.out + "/pruning.csv");

        // ---- agreement between the block scores, summary.json and the report
        std::vector<std::vector<std::string>> agreement;
        nlohmann::json rho = nlohmann::json::object();
        for (std::size_t a = 0; a < scores.size(); ++a)
            for (std::size_t b = a + 1; b < scores.size(); ++b) {
                const double r = blocks.size() >= 2 ? analysis::spearman(scores[a].values, scores[b].values) : NAN;
                agreement.push_back({scores[a].name, scores[b].name, std::isnan(r) ? "n/a (a constant score)" : report::format_fixed(r, 3)});
                rho[scores[a].name + "_vs_" + scores[b].name] = rho_json(r);
            }
        const train::metrics_log log = imported || o.steps == 0 ? train::metrics_log{} : train::read_metrics_log(o.out + "/metrics.jsonl");
        nlohmann::json summary{{"command", command_line}, {"git_commit", examples::git_commit}, {"model", nn::describe(cfg)},
                               {"source", imported ? o.hf_checkpoint : "trained, preset " + o.preset}, {"parameters", lm.parameter_count()},
                               {"steps", fit.steps}, {"train_seconds", fit.seconds}, {"train_tokens_per_s", fit.tokens_per_s},
                               {"dev_perplexity", dev.perplexity}, {"dev_tokens", dev.tokens}, {"flops_per_token", dev.flops_per_token},
                               {"analysis_perplexity", base}, {"analysis_sequences", o.eval_sequences}, {"metric_calls", metric.calls()},
                               {"block_score_spearman", rho}, {"threads", max_threads()},
                               {"shallow_layers", o.shallow_layers}, {"contribution_within_noise", within_noise}, {"bootstrap_resamples", o.bootstrap},
                               {"seconds", {{"block_influence", influence_s}, {"contribution", contribution_s}, {"criticality", criticality_s},
                                            {"pruning", pruning_s}, {"shallow", shallow_s}, {"total", run_time.elapsed()}}}};
        io::write_file_atomically(o.out + "/summary.json", summary.dump(2) + "\n");

        report::html_page page("lm_layers: which blocks of a language model matter",
                               "GPT-2-style decoder, " + nn::describe(cfg) + (imported ? " (from " + o.hf_checkpoint + ")" : ""));
        page.section("Setup").key_values({{"source", imported ? "Hugging Face checkpoint " + o.hf_checkpoint : "trained here, preset " + o.preset},
                                          {"data", o.data + " (sequences of " + std::to_string(seq_len) + " tokens)"},
                                          {"parameters", std::to_string(lm.parameter_count())},
                                          {"training", imported ? std::string("none") : std::to_string(fit.steps) + " steps in " + train::format_duration(fit.seconds)},
                                          {"dev perplexity", report::format_fixed(dev.perplexity, 3) + " over " + std::to_string(dev.tokens) + " tokens"},
                                          {"analysis metric", "perplexity on " + std::to_string(o.eval_sequences) + " dev sequences: " + report::format_fixed(base, 3)},
                                          {"contribution clip / criticality epsilon", report::format_fixed(o.clip_fraction, 3) + " x / " + report::format_fixed(o.epsilon, 3) + " x baseline perplexity"},
                                          {"criticality's initial weights", imported ? "a fresh initialisation (the checkpoint's are unknown)" : "this run's initialisation"},
                                          {"command", command_line}});
        if (const auto loss = log.series("loss"); !loss.empty()) {
            report::line_series s{.name = "training loss"};
            for (const auto& [step, v] : loss) s.x.push_back(static_cast<double>(step)), s.y.push_back(v);
            page.figure(report::line_chart({s}, {.title = "Training loss", .x_label = "step", .y_label = "cross-entropy (nats)"}));
        }
        std::vector<std::string> names;
        for (const auto& m : blocks) names.push_back(m.name);
        std::vector<report::bar_series> bars;
        for (const block_scores& s : scores) bars.push_back({.name = s.name, .values = s.values});
        page.section("Blocks").figure(report::bar_chart(names, bars, {.title = "Block scores (higher: more important)", .y_label = "score", .y_min = 0.0}),
                                      "Block influence: 1 − mean cosine between a block's input and output (ShortGPT). Contribution: the rise in perplexity "
                                      "without the block, clipped and normalised. Criticality: the smallest α of (1 − α)θ⁰ + αθᶠ that keeps perplexity "
                                      "within epsilon.");
        page.table({"score", "score", "Spearman"}, agreement);
        std::vector<std::string> sub_names;
        std::vector<double> sub_contrib, sub_crit;
        for (std::size_t i = 0; i < sublayers.size(); ++i) {
            sub_names.push_back(sublayers[i].name);
            sub_contrib.push_back(contrib_sub.modules[i].score);
            sub_crit.push_back(crit_sub.modules[i].alpha);
        }
        page.section("Sub-layers").figure(report::bar_chart(sub_names, {{.name = "contribution", .values = sub_contrib}, {.name = "criticality", .values = sub_crit}},
                                                            {.title = "Sub-layer scores", .y_label = "score", .y_min = 0.0}));
        std::vector<report::line_series> lines;
        for (const block_scores& s : scores) {
            report::line_series l{.name = "by " + s.name};
            for (const auto& p : curves.at(s.name).curve) l.x.push_back(p.k), l.y.push_back(-p.metric);
            lines.push_back(std::move(l));
        }
        page.section("Pruning").figure(report::line_chart(lines, {.title = "Perplexity after removing the k least important blocks", .x_label = "blocks removed",
                                                                  .y_label = "perplexity", .log_y = true, .integer_x = true}));
        if (!shallow_rows.empty())
            page.section("Iso-FLOP: pruned or trained shallower")
                .paragraph("A model trained from scratch with fewer blocks (same recipe, steps and data) against this model with as many blocks "
                           "removed by each score: both run the same products per token.")
                .table({"blocks", "MFLOP per token", "perplexity, trained shallow", "blocks removed", "pruned by block influence",
                        "pruned by contribution", "pruned by criticality"}, shallow_rows);
        page.paragraph("Outputs next to this page: block_influence.csv, contribution.csv, contribution_ci.csv, criticality.csv, criticality_ci.csv, pruning.csv, "
                       "summary.json" +
                       std::string(shallow_rows.empty() ? "" : ", shallow.csv") +
                       std::string(imported ? "." : ", metrics.jsonl, checkpoint.safetensors, model/ (a Hugging Face GPT-2 folder)."));
        page.note(std::string("depthlab examples/lm_layers, git ") + examples::git_commit);
        page.write(o.out + "/report.html");
        std::printf("block influence / contribution / criticality:\n");
        for (std::size_t i = 0; i < blocks.size(); ++i)
            std::printf("  %-10s %.4f  %.3f  %.2f\n", blocks[i].name.c_str(), influence[i], contrib_blocks.modules[i].score, crit_blocks.modules[i].alpha);
        std::printf("wrote %s/{block_influence,contribution,criticality,pruning}.csv, summary.json, report.html in %s\n", o.out.c_str(),
                    train::format_duration(run_time.elapsed()).c_str());
        return 0;
    } catch (const std::exception& e) {  // depthlab::error and the standard library's (bad_alloc, filesystem)
        std::fprintf(stderr, "lm_layers: %s\n", examples::failure_message(e).c_str());
        return 1;
    }
}

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines interleave with stderr in logs
    options o;
    examples::cli args("lm_layers",
                       "Which blocks and sub-layers of a decoder-only language model matter: train a GPT-2-style model on the English corpus\n"
                       "(or load a Hugging Face GPT-2), then block influence, contribution and criticality with perplexity as the metric,\n"
                       "and pruning of blocks in each score's order; writes CSVs, summary.json and report.html.");
    add_options(args, o);
    args.sizes({"preset", "batch", "seq-len", "dim", "ff"});
    args.parse(argc, argv);
    args.save_config(o.out);
    const std::string command_line = examples::command_line(argc, argv);
    examples::use_precision(o.precision, o.device);
    return examples::on_device(o.device, "lm_layers", [&](auto tag) { return run<decltype(tag)>(o, command_line); });
}
