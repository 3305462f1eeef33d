// component_value: Wang & Tu (COLING 2020), "Rethinking the Value of Transformer Components",
// on any language pair: train an encoder-decoder Transformer (or load one with --checkpoint),
// measure test BLEU, then run the analyses of analysis/component_value.hpp with BLEU on the
// first --eval-sentences test sentences as the metric — contribution (ablation), criticality
// (rewinding by interpolation), pruning curves, rewinding + fine-tuning — and write
// contribution.csv, contribution_ci.csv (each drop with its paired-bootstrap interval),
// criticality.csv, criticality_trace.csv, pruning.csv, pruning_criticality.csv, rewinding.csv,
// metrics.jsonl, summary.json and report.html into --out.
//
// The data folder holds {train,dev,test}.{src,tgt}, spm.model and meta.json (its "src"/"tgt"
// name the pair): scripts/fetch-data translation (Ding, en-de) or scripts/prepare-parallel.
//   component_value --preset tiny --steps 300 --eval-sentences 100 --out runs/cv-smoke
//   component_value --checkpoint runs/cv/checkpoint.safetensors --out runs/cv-again
//   mpirun -np 2 component_value ...   # data parallel (-DDEPTHLAB_WITH_MPI=ON): training on every
//       rank, decoding and the contribution / criticality modules split across ranks; rank 0
//       alone runs pruning and rewinding and writes every output
// The recipe of docs/results/component_value is in its README.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <depthlab/depthlab.hpp>
#include <depthlab/data/tokenizer.hpp>

#include "common/build_info.hpp"
#include "component_value_options.hpp"
#include "common/device.hpp"
#include "common/distributed.hpp"
#include "common/vocabulary.hpp"

using namespace depthlab;

template <class B>
int run(options o, const std::string& command_line, dist::communicator& comm) {
    try {
        const analysis::stopwatch run_time;
        if (comm.is_root()) std::filesystem::create_directories(o.out);
        io::metadata_map loaded;  // --checkpoint: its config and training recipe replace the flags
        if (!o.checkpoint.empty()) {
            loaded = io::safetensors_file(o.checkpoint).metadata();
            o.recipe = io::load_config<train::translation_recipe>(loaded, "train.");
        }
        const train::translation_recipe& recipe = o.recipe;

        // ---- data: the language pair from meta.json unless --src-lang/--tgt-lang say otherwise
        const data::tokenizer tok(o.data + "/spm.model");
        const std::vector<std::string> pieces = tok.pieces();
        // the model's config: a preset sized to the tokenizer, or the checkpoint's
        const nn::seq2seq_config cfg = loaded.empty() ? nn::seq2seq_preset(o.preset, tok.vocab_size(), o.sizes) : io::load_config<nn::seq2seq_config>(loaded, "config.");
        if (!o.checkpoint.empty()) examples::check_vocabulary(loaded, o.checkpoint, pieces, o.data + "/spm.model", cfg.tgt_vocab);
        if (o.resume) examples::check_resume_vocabulary(o.out, pieces, o.data + "/spm.model", cfg.tgt_vocab);
        const auto encode = [&](const std::string& text) { return tok.encode(text); };
        const analysis::stopwatch tokenising;
        const auto corpus = data::load_translation_corpus(o.data, encode, {.src_lang = o.src_lang, .tgt_lang = o.tgt_lang, .second_corpus = o.with_mt ? "mt" : "",
                                                                            .main_repeat = static_cast<std::size_t>(o.main_repeat),
                                                                            .dev_limit = static_cast<std::size_t>(o.dev_sentences)});
        // (references, not a structured binding: clang 14 cannot capture those in lambdas)
        const auto &info = corpus.info, &dev = corpus.dev, &test = corpus.test;
        const data::translation_batcher batcher(corpus.train_pairs, {.max_tokens = recipe.max_tokens, .max_len = o.max_train_len, .window = 0});
        std::printf("data: %s -> %s%s: %zu training pairs (%zu main%s%s, %zu dropped as longer than %lld tokens), %zu dev, %zu test; vocab %lld; "
                    "tokenised in %.1fs\n", info.src.c_str(), info.tgt.c_str(), info.source.empty() ? "" : (" (" + info.source + ")").c_str(),
                    batcher.size(), corpus.train.size(), o.with_mt && o.main_repeat > 1 ? (" x" + std::to_string(o.main_repeat)).c_str() : "",
                    o.with_mt ? (" + " + std::to_string(corpus.second_pairs) + " mt").c_str() : "", batcher.dropped(), static_cast<long long>(o.max_train_len),
                    dev.size(), test.size(), static_cast<long long>(tok.vocab_size()), tokenising.elapsed());
        if (comm.is_root())
            for (const std::string& w : corpus.warnings) std::fprintf(stderr, "component_value: warning: %s\n", w.c_str());

        // ---- model, optimiser, the trainer and what its checkpoints hold
        DEPTHLAB_CHECK(o.max_source_len < cfg.max_len, usage_error, "--max-source-len ", o.max_source_len, " must be below the model's ", cfg.max_len, " positions");
        nn::Seq2SeqTransformer<float, B> model(cfg, recipe.seed);
        nn::Snapshot<float, B> theta0(model);  // θ⁰, right after initialisation: rewinding needs it
        optim::Adam<float, B> adam(model.named_parameters(), train::translation_adam(recipe.lr));
        const optim::inverse_sqrt schedule(recipe.lr, recipe.warmup);
        data::translation_stream stream(batcher, recipe.seed + 1);
        std::printf("model: %s; %lld parameters; device %s, ISA %s, precision %s, %d threads, %s\n", nn::describe(cfg).c_str(),
                    static_cast<long long>(model.parameter_count()), B::name, cpu::to_string(cpu::active_isa()), examples::precision_description(B::name).c_str(),
                    max_threads(), examples::ranks_description(comm).c_str());
        train::Trainer<float, B> trainer(model, adam, {.steps = o.steps, .accumulate = o.accum, .clip = recipe.clip, .log_every = o.log_every, .eval_every = o.dev_every,
                                                       .save_every = o.save_every, .max_train_minutes = o.max_train_minutes, .out = o.out, .resume = o.resume,
                                                       .comm = &comm, .divergence = {.enabled = !o.no_divergence_guard}});
        trainer.skip = [&] { (void)stream.next(); };  // (another rank's batch)
        dist::own_stream_per_rank(model.rng(), comm);  // dropout masks of its own
        const auto track_run = [&](train::checkpointer<float, B>& c) {
            c.track_tensors("theta0", [&] { return theta0.tensors(); }, [&](const auto& t0s) { theta0 = nn::Snapshot<float, B>(model, t0s); });
            c.track("model", model.rng());  // dropout during rewinding continues as in the original run
        };
        auto& ckpt = trainer.checkpoint();
        track_run(ckpt);
        ckpt.track("data", stream);
        io::save_config(ckpt.metadata(), "config.", cfg);
        io::save_config(ckpt.metadata(), "train.", recipe);
        ckpt.metadata()["preset"] = o.preset;
        examples::record_vocabulary(ckpt.metadata(), pieces);
        trainer.schedule = [&](std::int64_t done) { return schedule.lr(done + 1); };
        trainer.log_extra = [&](std::int64_t) { return train::log_values{{"epoch", static_cast<double>(stream.epoch())}}; };

        // ---- translation sets and BLEU (nn::translator reuses encoder outputs)
        const auto set = [&](const char* name, const data::parallel_text& p, std::size_t n, std::int64_t beam) {
            return nn::make_translation_set(name, p, n, encode, {.batch_sentences = static_cast<std::size_t>(std::max<std::int64_t>(1, o.decode_batch / beam)),
                                                                .max_source_tokens = o.max_source_len});
        };
        const auto detokenize = [&](std::span<const std::int64_t> ids) { return tok.decode(ids); };
        nn::translator<float, B> trans(model, detokenize);
        const nn::translation_set dev_set = set("dev", dev, 0, 1);
        trainer.evaluate = [&](std::int64_t, bool) {
            const auto d = train::score(trans, dev_set, {}, &comm);
            std::printf("  dev BLEU %.2f: \"%s\" -> \"%s\" (ref \"%s\")\n", d.bleu, dev.src[0].c_str(), d.hypotheses[0].c_str(), dev.tgt[0].c_str());
            return nlohmann::ordered_json{{"dev_bleu", d.bleu}, {"dev_seconds", d.seconds}};
        };
        train::fit_result fit;
        if (!o.checkpoint.empty()) {
            train::checkpointer<float, B> reader(o.checkpoint);  // parameters, θ⁰ and the dropout stream; no optimiser state
            track_run(reader);
            fit.steps = reader.load(model, nullptr);
            std::printf("loaded %s (step %lld); no training\n", o.checkpoint.c_str(), static_cast<long long>(fit.steps));
        } else {
            fit = trainer.fit([&] { return train::translation_loss(model, stream, recipe.label_smoothing); });
            if (comm.is_root()) std::printf("%s\n", examples::memory_summary().c_str());
        }
        model.eval();

        // ---- baseline BLEU, greedy and beam
        const nn::translation_set test_set = set("test", test, 0, 1), test_beam = set("test-beam", test, 0, o.beam);
        const train::translation_score greedy = train::score(trans, test_set, {}, &comm),
                                    beam = o.beam > 1 ? train::score(trans, test_beam, {.beam = static_cast<int>(o.beam), .alpha = o.alpha}, &comm) : greedy;
        std::string hyp_lines;
        for (const auto& h : beam.hypotheses) hyp_lines += h + "\n";
        if (comm.is_root()) io::write_file_atomically(o.out + "/test_hypotheses.txt", hyp_lines);
        std::printf("test BLEU (%zu sentences, %zu sources cut at %lld tokens): greedy %.2f (%.1fs), beam %lld %.2f (%.1fs); chrF %.2f\n", test_set.size(),
                    test_set.truncated, static_cast<long long>(o.max_source_len), greedy.bleu, greedy.seconds, static_cast<long long>(o.beam), beam.bleu,
                    beam.seconds, beam.chrf);
        for (std::size_t i = 0; i < 3 && i < beam.hypotheses.size(); ++i)
            std::printf("  \"%s\"\n   -> \"%s\"\n  ref \"%s\"\n", test.src[i].c_str(), beam.hypotheses[i].c_str(), test.tgt[i].c_str());
        nlohmann::json summary{{"command", command_line}, {"git_commit", examples::git_commit}, {"model", nn::describe(cfg)}, {"preset", o.preset},
                               {"languages", info.src + "-" + info.tgt}, {"parameters", model.parameter_count()}, {"steps", fit.steps},
                               {"train_seconds", fit.seconds}, {"stopped_by_time", fit.stopped_by_time}, {"threads", max_threads()},
                               {"test_sentences", test_set.size()}, {"test_bleu_greedy", greedy.bleu}, {"test_bleu_beam", beam.bleu}, {"test_chrf", beam.chrf},
                               {"beam", o.beam}, {"length_penalty", "gnmt alpha " + std::to_string(o.alpha)}};
        const auto write_summary = [&] {
            if (comm.is_root()) io::write_file_atomically(o.out + "/summary.json", summary.dump(2) + "\n");
        };
        write_summary();
        if (o.skip_analyses) {
            std::printf("--skip-analyses: done in %s\n", train::format_duration(run_time.elapsed()).c_str());
            return 0;
        }

        // ---- the analyses, with BLEU on the first --eval-sentences test sentences as the metric
        const nn::translation_set analysis_set = set("analysis", test, static_cast<std::size_t>(o.eval_sentences), o.analysis_beam);
        const nn::search_options metric_search{.beam = static_cast<int>(o.analysis_beam), .alpha = o.alpha};
        const auto modules = analysis::default_modules(model);
        // the hypotheses of the last evaluation, of each contribution evaluation (one module
        // switched off: its paired bootstrap against the full model's gives the drop its
        // interval) and of every criticality evaluation, each module's in its trace's order (for
        // the α's interval); the analysis and module an evaluation belongs to are those of the
        // last progress event, which every analysis sends before a module's evaluations
        std::vector<std::string> last_hypotheses;
        std::map<std::string, std::vector<std::string>> hypotheses_without;
        std::map<std::string, std::vector<std::vector<std::string>>> traced_hypotheses;
        std::string stage, evaluating;
        const analysis::progress_fn track = [&](const analysis::progress_event& e) { stage = e.stage, evaluating = e.module; };
        double metric_flops = 0;  // the products every evaluation ran on this process (cached encoder outputs are not run again)
        analysis::timed_metric metric([&] {
            const flop_scope spent;
            train::translation_score s = train::score(trans, analysis_set, metric_search);
            metric_flops += static_cast<double>(spent.flops());
            if (stage == "contribution") hypotheses_without[evaluating] = s.hypotheses;
            if (stage == "criticality") traced_hypotheses[evaluating].push_back(s.hypotheses);
            last_hypotheses = std::move(s.hypotheses);
            return s.bleu;
        });
        const nn::Snapshot<float, B> thetaf(model);
        const double base = metric();
        const std::vector<std::string> base_hypotheses = last_hypotheses;
        std::printf("analysis metric: BLEU of %s decoding on the first %zu test sentences = %.2f (%.2fs per evaluation)\n",
                    o.analysis_beam > 1 ? "beam" : "greedy", analysis_set.size(), base, metric.seconds());
        summary.update({{"analysis_sentences", analysis_set.size()}, {"analysis_beam", o.analysis_beam}, {"analysis_base_bleu", base}});

        const double ft_lr = o.rewind_lr > 0 ? o.rewind_lr : schedule.lr(std::max<std::int64_t>(fit.steps, 1));
        const auto finetune = [&](int k) {  // fresh Adam, the same batches for every k, a short warm-up
            const double loss = train::finetune_translation(model, batcher, recipe, o.rewind_steps, ft_lr);
            std::fprintf(stderr, "rewinding: k=%d fine-tuned %lld steps at lr %.2e, mean loss %.3f\n", k, static_cast<long long>(o.rewind_steps), ft_lr, loss);
        };
        const nn::ablation_kind ablation = nn::parse_ablation_kind(o.ablation, "--ablation");
        // --ablation mean: the modules' mean outputs over --ablation-batches teacher-forced
        // training batches of their own stream (the same batches for sub-layers and heads)
        const auto record_means = [&](const std::vector<analysis::module_ref>& units) {
            if (ablation != nn::ablation_kind::mean) return;
            data::translation_stream reference(batcher, recipe.seed + 2000);
            analysis::record_ablation_means(units, static_cast<std::size_t>(o.ablation_batches), [&](std::size_t) {
                const auto b = reference.next();
                (void)model.decode(model.encode(b.src), b.src, b.tgt_in);
            });
            std::printf("ablation: mean outputs of %zu modules over %lld training batches\n", units.size(), static_cast<long long>(o.ablation_batches));
        };
        record_means(modules);
        summary["ablation"] = o.ablation;
        const analysis::study_result study = analysis::run_component_value_study(
            comm, model, modules, theta0, thetaf, metric, finetune,
            {.contribution = {.clip_fraction = o.clip_fraction, .clip = o.no_clip ? std::optional(std::numeric_limits<double>::infinity()) : std::nullopt,
                              .base = base, .ablation = ablation},
             .criticality = {.epsilon = o.epsilon, .method = o.search == "grid" ? analysis::search_method::grid : analysis::search_method::bisection,
                             .grid_steps = static_cast<int>(o.grid_steps), .tolerance = o.tolerance, .max_evaluations = static_cast<int>(o.max_evaluations)},
             .run = {.progress = track, .print_progress = comm.is_root()},
             .prune_max_k = static_cast<int>(o.prune_max_k),
             .rewind_by_criticality = o.rank_by == "criticality", .rewind_k = o.rewind_steps > 0 ? o.rewind_k : std::vector<int>{}, .out = o.out,
             .metric_name = "BLEU"});
        stage.clear();
        if (!study.complete) return 0;  // pruning, rewinding and the outputs: rank 0
        trans.invalidate();
        // each contribution drop with its paired-bootstrap interval over the analysis sentences,
        // and each criticality α with its bootstrap interval (modules another rank evaluated
        // under --distributed have none: empty fields)
        const metrics::paired_bootstrap_options resampling{.resamples = static_cast<int>(o.bootstrap)};
        int within_noise = 0;
        const auto drop_interval = [&](const analysis::contribution_entry& e) -> std::vector<std::string> {
            const auto it = hypotheses_without.find(e.name);
            if (it == hypotheses_without.end()) return {io::csv_number(base - e.metric_without), "", "", "", ""};
            const auto d = metrics::paired_bootstrap_bleu(base_hypotheses, it->second, analysis_set.references, resampling);
            return {io::csv_number(d.delta), io::csv_number(d.lo), io::csv_number(d.hi), io::csv_number(d.p_value),
                    d.lo > 0 ? "matters" : d.hi < 0 ? "better without" : "within noise"};
        };
        const auto alpha_interval = [&](const analysis::criticality_entry& e, double epsilon) -> std::vector<std::string> {
            const auto it = traced_hypotheses.find(e.name);
            if (it == traced_hypotheses.end() || it->second.size() != e.trace.size()) return {io::csv_number(e.alpha), "", ""};
            const analysis::score_interval k = analysis::criticality_interval_bleu(e, epsilon, base_hypotheses, it->second, analysis_set.references, resampling);
            return {io::csv_number(e.alpha), io::csv_number(k.lo), io::csv_number(k.hi)};
        };
        const auto cells = [](std::initializer_list<std::vector<std::string>> parts) {
            std::vector<std::string> r;
            for (const auto& p : parts) r.insert(r.end(), p.begin(), p.end());
            return r;
        };
        io::csv_writer ci({"module", "type", "layer", "drop", "lo", "hi", "p_value", "verdict"});
        for (const auto& e : study.contribution.modules) {
            const std::vector<std::string> interval = drop_interval(e);
            within_noise += interval.back() == "within noise";
            ci.row(cells({{e.name, e.type, std::to_string(e.layer)}, interval}));
        }
        ci.write(o.out + "/contribution_ci.csv");
        std::printf("contribution intervals (paired bootstrap, %lld resamples, 95%%): %d of %zu drops within noise\n", static_cast<long long>(o.bootstrap),
                    within_noise, study.contribution.modules.size());
        summary.update({{"contribution_within_noise", within_noise}, {"bootstrap_resamples", o.bootstrap}});
        io::csv_writer crit_ci({"module", "type", "layer", "alpha", "lo", "hi"});
        for (const auto& e : study.criticality.modules) crit_ci.row(cells({{e.name, e.type, std::to_string(e.layer)}, alpha_interval(e, study.criticality.epsilon)}));
        crit_ci.write(o.out + "/criticality_ci.csv");
        // scores_agreement.csv: Spearman between every pair of scores, sub-layer and head level
        io::csv_writer agreement({"level", "score_a", "score_b", "spearman"});
        std::optional<report::head_scores> head_report;  // --granularity head: the report's head heat maps
        agreement.row("sublayer", "contribution", "criticality", study.spearman);
        if (o.granularity == "head") {
            // ---- every attention head: contribution (switched off one at a time, as --ablation
            // says), Michel et al.'s gradient importance over --ablation-batches teacher-forced
            // training batches, and pruning heads in the order of each score
            const auto heads = analysis::head_modules<float, B>(model, &theta0, &thetaf);
            record_means(heads.modules);
            const analysis::contribution_result head_c = analysis::contribution(
                heads.modules, metric, {.clip_fraction = o.clip_fraction, .clip = o.no_clip ? std::optional(std::numeric_limits<double>::infinity()) : std::nullopt,
                                        .base = base, .ablation = ablation, .run = {.progress = track, .print_progress = true}});
            stage.clear();
            data::translation_stream reference(batcher, recipe.seed + 3000);
            const std::vector<double> importance = analysis::head_importance<float, B>(
                model, heads,
                [&](std::size_t) {
                    const auto b = reference.next();
                    return cross_entropy(model.decode(model.encode(b.src), b.src, b.tgt_in), b.tgt_out, -100, 0.0f);
                },
                static_cast<std::size_t>(o.ablation_batches));
            const auto write_heads = [&](const std::string& file, const std::vector<double>& score) {
                io::csv_writer csv({"layer", "module", "head", "score"});
                for (std::size_t i = 0; i < heads.modules.size(); ++i) csv.row(heads.modules[i].layer, heads.sublayer[i], heads.head[i], score[i]);
                csv.write(o.out + "/" + file);
            };
            analysis::criticality_options head_k = study.criticality_options;
            head_k.run = {.progress = track, .print_progress = true};
            const analysis::criticality_result head_crit = analysis::criticality(model, heads.modules, theta0, thetaf, metric, head_k);
            stage.clear();
            write_heads("head_contribution.csv", head_c.scores());
            write_heads("head_criticality.csv", head_crit.scores());
            write_heads("head_importance.csv", importance);
            // the heads' drops and α with their intervals, as the sub-layers' (under --distributed
            // rank 0 evaluates every head)
            io::csv_writer head_ci({"layer", "module", "head", "drop", "lo", "hi", "p_value", "verdict", "alpha", "alpha_lo", "alpha_hi"});
            for (std::size_t i = 0; i < heads.modules.size(); ++i)
                head_ci.row(cells({{std::to_string(heads.modules[i].layer), heads.sublayer[i], std::to_string(heads.head[i])}, drop_interval(head_c.modules[i]),
                                   alpha_interval(head_crit.modules[i], head_crit.epsilon)}));
            head_ci.write(o.out + "/head_intervals.csv");
            const int K = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(o.prune_max_k), heads.modules.size()));
            io::csv_writer pruning({"ranking", "k", "heads_removed", "metric"});
            for (const auto& [ranking, score] : {std::pair<std::string, std::vector<double>>{"contribution", analysis::importance_ranks(head_c)},
                                                {"importance", importance}}) {
                const auto curve = analysis::pruning_curve(model, heads.modules, score, metric, K, {.progress = {}, .print_progress = true}, ablation);
                for (const auto& pt : curve.curve) {
                    std::string removed;
                    for (const auto& m : pt.modules_removed) removed += (removed.empty() ? "" : ";") + m;
                    pruning.row(ranking, pt.k, removed, pt.metric);
                }
            }
            pruning.write(o.out + "/head_pruning.csv");
            const double rho = analysis::spearman(head_c.scores(), importance);
            agreement.row("head", "contribution", "gradient importance", rho);
            agreement.row("head", "contribution", "criticality", analysis::spearman(head_c.scores(), head_crit.scores()));
            agreement.row("head", "criticality", "gradient importance", analysis::spearman(head_crit.scores(), importance));
            std::printf("heads: %zu; Spearman contribution vs gradient importance %.3f; wrote head_contribution.csv, head_criticality.csv, "
                        "head_importance.csv, head_pruning.csv, head_intervals.csv\n",
                        heads.modules.size(), rho);
            head_report = report::head_scores{.sublayer = heads.sublayer, .head = heads.head,
                                              .scores = {{"contribution", head_c.scores()}, {"criticality", head_crit.scores()}, {"importance", importance}},
                                              .ablation = ablation};
            summary.update({{"heads", heads.modules.size()}, {"head_spearman", std::isnan(rho) ? nlohmann::json(nullptr) : nlohmann::json(rho)}});
        }
        agreement.write(o.out + "/scores_agreement.csv");
        // ---- iso-FLOP: the cost per target token (a teacher-forced forward over two training
        // batches of their own stream) of the full model, of it pruned by each score, and of a
        // model with fewer decoder layers trained separately with the same recipe
        // (--shallow-checkpoint), each beside its BLEU
        std::vector<data::seq2seq_batch> flop_batches;
        {
            data::translation_stream reference(batcher, recipe.seed + 4000);
            for (int i = 0; i < 2; ++i) flop_batches.push_back(reference.next());
        }
        std::vector<report::iso_flop_row> iso_flop{{.model = "full", .flops_per_token = train::teacher_forced_flops_per_token(model, flop_batches), .metric = base}};
        for (const auto& [ranking, curve] : {std::pair<std::string, const analysis::pruning_result*>{"contribution", &study.pruning_by_contribution},
                                            {"criticality", &study.pruning_by_criticality}})
            for (const auto& pt : curve->curve) {
                if (pt.k == 0) continue;
                analysis::scoped_ablation off;
                for (const auto& name : pt.modules_removed)
                    off.add(*std::find_if(modules.begin(), modules.end(), [&](const analysis::module_ref& m) { return m.name == name; }), ablation);
                iso_flop.push_back({.model = "pruned by " + ranking, .modules_removed = pt.k,
                                    .flops_per_token = train::teacher_forced_flops_per_token(model, flop_batches), .metric = pt.metric});
            }
        std::optional<train::shallow_comparison> shallow;
        if (!o.shallow_checkpoint.empty()) {
            shallow = train::compare_shallow_checkpoint<float, B>(o.shallow_checkpoint, cfg, analysis_set, detokenize, metric_search, recipe.seed, flop_batches);
            iso_flop.push_back({.model = "trained with " + std::to_string(shallow->fewer_decoder_layers) + " fewer decoder layer(s)",
                                .modules_removed = 3 * shallow->fewer_decoder_layers, .flops_per_token = shallow->flops_per_token, .metric = shallow->bleu});
            std::printf("shallow comparison: %s, %lld parameters, %llu steps: BLEU %.2f on the analysis sentences\n", nn::describe(shallow->config).c_str(),
                        static_cast<long long>(shallow->parameters), static_cast<unsigned long long>(shallow->steps), shallow->bleu);
            summary.update({{"shallow_bleu", shallow->bleu}, {"shallow_parameters", shallow->parameters}, {"shallow_steps", shallow->steps},
                            {"shallow_fewer_decoder_layers", shallow->fewer_decoder_layers}, {"shallow_flops_per_token", shallow->flops_per_token}});
        }
        io::csv_writer iso({"model", "modules_removed", "flops_per_token", "bleu"});
        for (const auto& m : iso_flop) iso.row(m.model, m.modules_removed, m.flops_per_token, m.metric);
        iso.write(o.out + "/iso_flop.csv");
        summary["flops_per_token"] = iso_flop.front().flops_per_token;
        std::printf("iso-FLOP: full model %.3f MFLOP per target token; wrote iso_flop.csv (%zu models)\n", iso_flop.front().flops_per_token / 1e6,
                    iso_flop.size());

        // ---- summary.json and report.html
        const auto log = train::read_metrics_log(loaded.empty() ? o.out + "/metrics.jsonl"
                                                                : (std::filesystem::path(o.checkpoint).parent_path() / "metrics.jsonl").string());
        const double train_seconds = loaded.empty() ? fit.seconds : log.last("elapsed_s");
        for (const auto& [name, seconds] : study.phase_seconds) summary[name + "_seconds"] = seconds;
        summary.update({{"criticality_search", o.search}, {"analyses_seconds", study.seconds()}, {"metric_calls", metric.calls()},
                        {"metric_seconds", metric.seconds()}, {"encoder_runs", trans.encoder_runs()}, {"encoder_reuses", trans.encoder_reuses()},
                        {"spearman", std::isnan(study.spearman) ? nlohmann::json(nullptr) : nlohmann::json(study.spearman)}, {"total_seconds", run_time.elapsed()},
                        {"train_tokens_per_s", log.last("tokens_per_s")}, {"train_gflop_per_step", log.last("gflop_per_step")},
                        {"metric_gflop", metric_flops / 1e9}});
        if (const auto d = log.series("dev_bleu"); !d.empty()) summary["final_dev_bleu"] = d.back().second;
        write_summary();

        const report::html_page page = report::translation_study_report(
            {.src = info.src, .tgt = info.tgt, .corpus = info.source, .model = nn::describe(cfg), .encoder_layers = cfg.encoder_layers,
             .decoder_layers = cfg.decoder_layers, .post_ln = !cfg.layer.norm_first, .parameters = model.parameter_count(), .steps = fit.steps,
             .train_seconds = train_seconds, .stopped_by_time = fit.stopped_by_time, .checkpoint = o.checkpoint, .tokens_per_s = log.last("tokens_per_s"),
             .threads = max_threads(), .recipe = recipe, .test_sentences = test_set.size(), .dev_sentences = dev_set.size(),
             .analysis_sentences = analysis_set.size(), .greedy_bleu = greedy.bleu, .beam_bleu = beam.bleu, .chrf = beam.chrf,
             .baseline_seconds = greedy.seconds + (o.beam > 1 ? beam.seconds : 0), .beam = static_cast<int>(o.beam),
             .analysis_beam = static_cast<int>(o.analysis_beam), .alpha = o.alpha, .analysis_bleu = base, .shallow = shallow, .iso_flop = iso_flop, .rank_by = o.rank_by,
             .rewind_steps = o.rewind_steps, .finetune_lr = ft_lr, .metric_calls = metric.calls(), .encoder_runs = trans.encoder_runs(),
             .encoder_reuses = trans.encoder_reuses(), .metric_seconds = metric.seconds(), .total_seconds = run_time.elapsed(),
             .command = command_line, .provenance = std::string("examples/component_value, git ") + examples::git_commit,
             .heads = head_report ? &*head_report : nullptr},
            log, &study);
        page.write(o.out + "/report.html");
        std::printf("wrote %s/{contribution,contribution_ci,criticality,criticality_trace,criticality_ci,pruning,pruning_criticality,rewinding,iso_flop}.csv, summary.json, report.html in %s\n",
                    o.out.c_str(), train::format_duration(run_time.elapsed()).c_str());
        return 0;
    } catch (const std::exception& e) {  // depthlab::error and the standard library's (bad_alloc, filesystem)
        dist::fail(comm, "component_value", std::runtime_error(examples::failure_message(e)));
    }
}

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines interleave with stderr in logs
    options o;
    examples::cli args("component_value",
                       "Wang & Tu (2020) on a translation corpus: train or load an encoder-decoder Transformer, then contribution,\n"
                       "criticality, pruning and rewinding with test BLEU as the metric; writes CSVs and report.html. Presets: tiny =\n"
                       "2+2 layers, d 128, FF 512 (smoke runs); small = 3+3, d 256, FF 1024 (trains on 2 cores); base = the paper's\n"
                       "6+6, d 512, 8 heads, FF 2048. All: dropout 0.1, post-LN, ReLU, joint vocabulary shared and tied to the output.");
    add_options(args, o);
    args.sizes({"preset", "max-tokens", "dim", "ff", "decode-batch", "beam"});
    args.parse(argc, argv);
    dist::communicator& comm = examples::join("component_value", o.distributed);
    if (comm.is_root()) args.save_config(o.out);
    const std::string command_line = examples::command_line(argc, argv);
    examples::use_precision(o.precision, o.device);
    return examples::on_device(o.device, "component_value", [&](auto tag) { return run<decltype(tag)>(o, command_line, comm); });
}
