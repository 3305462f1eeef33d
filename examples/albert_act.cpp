// albert_act: pretrains an ACT-ALBERT (one tied layer, per-token halting) with MLM + SOP +
// ponder cost, LAMB and gradient accumulation, then measures how many iterations each kind
// of token uses and whether states reach a fixed point — the study of ../shared/papers.md §A.
//
//   scripts/fetch-data english && scripts/train-tokenizer     # .data/english/{train,dev}.ids
//   build/examples/albert_act --preset tiny --steps 2000 --out runs/act_tiny
//   build/examples/albert_act --preset tiny --steps 4000 --out runs/act_tiny --resume
//   build/examples/albert_act --preset tiny --policy pondernet --beta 0.01 --lambda-p 0.2
//   build/examples/albert_act --preset small --device cuda    # pretrain on a GPU (CUDA build)
//   mpirun -np 2 build/examples/albert_act --batch 16 ...     # data parallel (-DDEPTHLAB_WITH_MPI=ON)
//
// Writes to --out: metrics.jsonl (training and dev records, halting table over training),
// halting.csv, fixed_point.csv, checkpoint.safetensors (parameters, LAMB state, sampler and
// RNG state: --resume continues exactly) and report.html (open it in a browser).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <depthlab/depthlab.hpp>
#include <depthlab/report/act_albert.hpp>

#include "albert_act_options.hpp"
#include "common/device.hpp"
#include "common/distributed.hpp"
#include "common/vocabulary.hpp"

using namespace depthlab;

namespace {

/// A length of the schedule (a warm-up, the whole): "n steps", and the same share of the time
/// budget under --schedule-by-time (train::trainer_options::schedule_by_time).
std::string schedule_length(const options& o, std::int64_t n) {
    std::string s = std::to_string(n) + " steps";
    if (o.schedule_by_time && o.steps > 0)
        s += " or " + report::format_fixed(o.max_minutes * static_cast<double>(n) / static_cast<double>(o.steps), 1) + " minutes";
    return s;
}

}  // namespace

/// The whole job for one halting policy and backend (compile-time choices, picked by
/// --policy and --device).
template <class Policy, class B>
int run(options o, dist::communicator& comm) {
    try {
        // ---- data (train.ids, dev.ids, spm.vocab) and the preset's model, with the flags' overrides
        data::albert_data_config dcfg;
        dcfg.max_len = o.seq_len;
        dcfg.mask_prob = o.mask_prob;
        dcfg.chunk_jitter = o.chunk_jitter;
        if (o.mask_prob > 0.15) dcfg.max_predictions = static_cast<index_t>(std::ceil(o.mask_prob * o.seq_len)) + 1;
        const data::albert_corpus corpus = data::load_albert_corpus(o.data, dcfg);
        const std::vector<std::string> pieces = data::read_spm_vocab(o.data + "/spm.vocab");
        if (o.resume) examples::check_resume_vocabulary(o.out, pieces, o.data + "/spm.vocab", corpus.config.vocab);
        data::albert_sampler sampler(corpus.train, corpus.config, o.seed);
        auto setup = halting::act_albert_preset(o.preset, corpus.config.vocab, o.seq_len);
        nn::albert_config& cfg = setup.model;  // (no structured binding: clang 14 cannot capture those in lambdas)
        halting::act_options& aopt = setup.act;
        double& tau = setup.tau;
        if (o.max_iters > 0) cfg.depth = aopt.max_iterations = static_cast<int>(o.max_iters);
        if (o.tau >= 0) tau = o.tau;
        if (o.hidden > 0) cfg.layer.dim = o.hidden;
        if (o.heads > 0) cfg.layer.heads = static_cast<int>(o.heads);
        if (o.ff > 0) cfg.layer.ff_dim = o.ff;
        cfg.embed = o.embed;
        cfg.sop_dropout = o.sop_dropout;
        aopt.epsilon = o.epsilon;
        aopt.min_iterations = static_cast<int>(o.min_iters);
        aopt.compact = !o.dense;
        aopt.host_reads = static_cast<int>(o.host_reads);
        aopt.lambda_p = o.lambda_p;
        aopt.halting_bias = o.halting_bias;  // NaN: the policy's
        const int n_max = aopt.max_iterations;
        DEPTHLAB_CHECK(aopt.min_iterations <= n_max, usage_error, "--min-iters ", aopt.min_iterations, " exceeds N_max ", n_max,
                       " (--max-iters, or the preset's): every token would run N_max iterations");
        const std::int64_t warmup = o.warmup >= 0 ? o.warmup : o.steps / 10;
        const std::int64_t tau_warmup = o.tau_warmup >= 0 ? o.tau_warmup : (3 * o.steps) / 10;
        const bool ponder_net = std::is_same_v<Policy, halting::pondernet>;
        if (ponder_net) tau = o.beta;  // the ponder term is the KL, weighted by β
        halting::ActAlbert<float, B, Policy> model(cfg, aopt, o.seed);
        const double halting_bias = model.encoder->halting_unit->bias.value().item();
        // LAMB as the paper (ALBERT's optimiser); AdamW to compare at small batches; both take --weight-decay (0.01 as ALBERT)
        std::unique_ptr<optim::Optimizer<float, B>> opt;
        if (o.optimizer == "adamw") opt = std::make_unique<optim::AdamW<float, B>>(model.named_parameters(), optim::AdamWOptions{.lr = o.lr, .weight_decay = o.weight_decay});
        else opt = std::make_unique<optim::Lamb<float, B>>(model.named_parameters(), optim::LambOptions{.lr = o.lr, .weight_decay = o.weight_decay});
        const optim::warmup_linear schedule(o.lr, warmup, o.steps);

        // ---- the training loop (train::Trainer: accumulation, clipping, logs, checkpoints, resume)
        train::Trainer<float, B> trainer(model, *opt, {.steps = o.steps, .accumulate = o.accum, .clip = o.clip, .log_every = o.log_every,
                                                       .eval_every = o.eval_every, .save_every = o.save_every, .max_train_minutes = o.max_minutes,
                                                       .schedule_by_time = o.schedule_by_time, .out = o.out, .resume = o.resume, .comm = &comm,
                                                       .profile_steps = o.profile_steps, .divergence = {.enabled = !o.no_divergence_guard}});
        trainer.skip = [&] { (void)sampler.next(o.batch); };  // (another rank's micro-batch)
        auto& ckpt = trainer.checkpoint();
        ckpt.track("sampler", sampler);
        ckpt.track("model", model.rng());
        io::save_config(ckpt.metadata(), "config.", cfg);
        io::save_config(ckpt.metadata(), "act.", aopt);
        ckpt.metadata()["policy"] = Policy::name;
        ckpt.metadata()["preset"] = o.preset;
        examples::record_vocabulary(ckpt.metadata(), pieces);
        trainer.schedule = [&](std::int64_t done) { return schedule.lr(done); };
        double tau_now = 0;
        bool sop_trains_encoder = true;
        trainer.before_step = [&](std::int64_t done) {
            tau_now = halting::ponder_weight(tau, tau_warmup, done);
            sop_trains_encoder = o.sop_head_only_from <= 0 || done < o.sop_head_only_from;
        };
        trainer.log_extra = [&](std::int64_t) { return train::log_values{{"tau", tau_now}}; };
        halting::collapse_watch collapse;
        trainer.on_log = [&](std::int64_t, const train::log_values& line) {
            const auto mean_n = std::find_if(line.begin(), line.end(), [](const auto& kv) { return kv.first == "mean_N"; });  // (logged below)
            if (const std::string warning = collapse.check(mean_n->second); !warning.empty()) std::printf("%s\n", warning.c_str());
        };
        halting::albert_eval final_ev;
        data::albert_data_config dev_cfg = corpus.config;
        dev_cfg.shuffle_instances = true;
        dev_cfg.chunk_jitter = false;  // the dev set is ALBERT's chunks whatever the training flags, so runs compare
        // the same dev batches at every evaluation (the final one takes 4x as many; the iso-FLOP
        // table below evaluates its other models on those)
        const auto dev_batches = [&] { return data::albert_sampler(corpus.dev, dev_cfg, 4242); };
        const std::int64_t final_batches = o.dev_batches * 4;
        trainer.evaluate = [&](std::int64_t step, bool final) {
            data::albert_sampler dev = dev_batches();
            const auto ev = halting::evaluate_albert(model, dev, final ? final_batches : o.dev_batches, o.batch);
            std::printf("  dev @ %lld: %s\n", static_cast<long long>(step), halting::summary(ev).c_str());
            std::fflush(stdout);  // (a log redirected to a file shows it now, not at the next progress line)
            if (final) final_ev = ev;
            return halting::to_json(ev);
        };
        trainer.restore();

        const bool compact = std::is_same_v<Policy, halting::act> && !o.dense;
        std::printf("albert_act: preset %s, policy %s, %lld parameters, N_max %d, %s %g (warm-up %s)%s, halting bias %g, SOP head dropout %g, %s path; "
                    "device %s, ISA %s, precision %s, %d threads, %s (global batch %lld)\n",
                    o.preset.c_str(), Policy::name, static_cast<long long>(model.parameter_count()), n_max, ponder_net ? "beta" : "tau", tau,
                    schedule_length(o, tau_warmup).c_str(), ponder_net ? (", lambda_p " + report::format_fixed(o.lambda_p, 3)).c_str() : "", halting_bias, o.sop_dropout,
                    compact ? "compact" : "dense", B::name, cpu::to_string(cpu::active_isa()), examples::precision_description(B::name).c_str(), max_threads(),
                    examples::ranks_description(comm).c_str(), static_cast<long long>(o.batch * o.accum * comm.size()));
        std::printf("data: %s, %lld training examples per epoch, vocab %lld, chunk jitter %s\n", o.data.c_str(), static_cast<long long>(sampler.epoch_size()),
                    static_cast<long long>(corpus.config.vocab), o.chunk_jitter ? "on" : "off (ALBERT)");
        std::printf("optimizer: %s, peak lr %g, weight decay %g (norms and biases excluded), clip %g\n", o.optimizer.c_str(), o.lr, o.weight_decay, o.clip);
        // (the trainer hands before_step the schedule's position, so under --schedule-by-time
        // the switch comes at the step or at the clock's share of --steps, whichever is first)
        const std::string sop_gradient = o.sop_head_only_from > 0
                                             ? "into the encoder for the first " + schedule_length(o, o.sop_head_only_from) +
                                                   (o.schedule_by_time ? " (whichever ends first)" : "") + ", into the SOP head only from then"
                                             : "into the encoder throughout (ALBERT)";
        if (o.sop_head_only_from > o.steps)
            std::printf("albert_act: warning: --sop-head-only-from %lld lies past --steps %lld, so SOP trains the encoder throughout\n",
                        static_cast<long long>(o.sop_head_only_from), static_cast<long long>(o.steps));
        const std::string sop_term = o.sop_weight == 1 ? "SOP" : report::format_fixed(o.sop_weight, 2) + " x SOP";
        std::printf("losses: MLM + %s + %s x ponder; SOP's gradient %s\n", sop_term.c_str(), ponder_net ? "beta" : "tau", sop_gradient.c_str());
        std::printf("schedule: warm-up, tau ramp and linear decay over %s\n", (schedule_length(o, o.steps) + (o.schedule_by_time ? ", whichever ends first" : "")).c_str());
        std::fflush(stdout);

        const train::fit_result fit = trainer.fit([&] {
            const auto b = sampler.next(o.batch);
            auto losses = model.losses(b, sop_trains_encoder);
            const auto& enc = losses.encoded;
            std::int64_t tokens = 0;
            for (auto l : b.tokens.lengths) tokens += l;
            return train::micro_batch<float, B>{.loss = add(add(losses.mlm, o.sop_weight == 1 ? losses.sop : scale(losses.sop, static_cast<float>(o.sop_weight))),
                                                            scale(enc.ponder, static_cast<float>(tau_now))),
                                                .logged = {{"mlm", losses.mlm}, {"sop", losses.sop}, {"ponder", enc.ponder}},
                                                .host_logged = {{"mean_N", halting::mean_iterations(enc.record)}},
                                                .tokens = tokens};
        });
        if (!trainer.is_root()) return 0;  // (rank 0 writes the outputs)
        final_ev.stats.write_halting_csv(o.out + "/halting.csv");
        final_ev.stats.write_fixed_point_csv(o.out + "/fixed_point.csv");

        // ---- iso-FLOP: this model against fixed depths, on the final evaluation's dev batches:
        // its own weights at every depth 1..N_max, and a model trained at fixed depth
        // (--fixed-checkpoint); each with its encoder FLOPs per token
        std::vector<halting::depth_comparison> iso_flop{halting::compare_depth(std::string(std::is_same_v<Policy, halting::fixed> ? "fixed depth (" : "adaptive (") +
                                                                                   Policy::name + ")", final_ev)};
        if constexpr (!std::is_same_v<Policy, halting::fixed>) {
            std::vector<int> depths(static_cast<std::size_t>(n_max));
            std::iota(depths.begin(), depths.end(), 1);
            for (const auto& ev : halting::evaluate_at_fixed_depths(model, depths, dev_batches, final_batches, o.batch))
                iso_flop.push_back(halting::compare_depth("same weights, fixed depth", ev));
        }
        if (!o.fixed_checkpoint.empty()) {
            const io::metadata_map meta = io::safetensors_file(o.fixed_checkpoint).metadata();
            const auto fc = io::load_config<nn::albert_config>(meta, "config.");
            const auto fa = io::load_config<halting::act_options>(meta, "act.");
            const auto policy = meta.find("policy");
            DEPTHLAB_CHECK(policy != meta.end() && policy->second == "fixed" && fc.vocab == cfg.vocab && fc.embed == cfg.embed && fc.layer.dim == cfg.layer.dim &&
                               fc.layer.heads == cfg.layer.heads && fc.layer.ff_dim == cfg.layer.ff_dim,
                           usage_error, "--fixed-checkpoint ", o.fixed_checkpoint, ": expected a checkpoint of albert_act --policy fixed with this run's sizes (H ",
                           cfg.layer.dim, ", ", cfg.layer.heads, " heads, FF ", cfg.layer.ff_dim, ", E ", cfg.embed, ", vocab ", cfg.vocab, "), got policy ",
                           policy == meta.end() ? std::string("none") : policy->second, ", H ", fc.layer.dim, ", ", fc.layer.heads, " heads, FF ", fc.layer.ff_dim,
                           ", E ", fc.embed, ", vocab ", fc.vocab);
            halting::ActAlbert<float, B, halting::fixed> trained(fc, fa, o.seed);
            (void)io::load_checkpoint(o.fixed_checkpoint, trained);
            trained.eval();
            data::albert_sampler dev = dev_batches();
            iso_flop.push_back(halting::compare_depth("trained at fixed depth", halting::evaluate_albert(trained, dev, final_batches, o.batch)));
        }
        io::csv_writer iso({"model", "iterations", "flops_per_token", "mlm_acc", "sop_acc", "mlm_loss"});
        for (const auto& r : iso_flop) iso.row(r.model, r.iterations, r.flops_per_token, r.mlm_acc, r.sop_acc, r.mlm_loss);
        iso.write(o.out + "/iso_flop.csv");
        std::printf("iso-FLOP (dev, MFLOP per token / MLM %% / SOP %%):");
        for (const auto& r : iso_flop) std::printf("  %s N %.2f: %.2f / %.1f / %.1f;", r.model.c_str(), r.iterations, r.flops_per_token / 1e6, r.mlm_acc, r.sop_acc);
        std::printf("\n");
        report::act_albert_report({.subtitle = "depthlab reproduction of Simoulin & Crabbé (2021), preset " + o.preset,
                                   .setup = {{"steps", std::to_string(fit.steps)},
                                             {"data (its tokenizer: spm.model)", o.data},
                                             {"model", "H " + std::to_string(cfg.layer.dim) + ", " + std::to_string(cfg.layer.heads) + " heads, FF " +
                                                           std::to_string(cfg.layer.ff_dim) + ", E " + std::to_string(cfg.embed) + ", vocab " + std::to_string(cfg.vocab)},
                                             {"halting policy", o.policy + (ponder_net ? " (beta " + report::format_fixed(o.beta, 4) + ", lambda_p " + report::format_fixed(o.lambda_p, 3) +
                                                                                            "; N = median halting step)" : "")},
                                             {ponder_net ? "N_max / beta / epsilon" : "N_max / tau / epsilon",
                                              std::to_string(n_max) + " / " + report::format_fixed(tau, 6) + " / " + report::format_fixed(o.epsilon, 3)},
                                             {"batch x accumulation x length", std::to_string(o.batch) + " x " + std::to_string(o.accum) + " x " + std::to_string(o.seq_len)},
                                             {"optimizer / peak lr / warm-up / clip / weight decay",
                                              o.optimizer + " / " + report::format_fixed(o.lr, 5) + " / " + schedule_length(o, warmup) + " / " + report::format_fixed(o.clip, 2) + " / " + report::format_fixed(o.weight_decay, 4)},
                                             {"mask rate / halting bias / tau warm-up / min iterations",
                                              report::format_fixed(o.mask_prob, 2) + " / " + report::format_fixed(halting_bias, 2) + " / " + schedule_length(o, tau_warmup) + " / " + std::to_string(o.min_iters)},
                                             {"SOP head dropout / chunk jitter", report::format_fixed(o.sop_dropout, 2) + " / " + (o.chunk_jitter ? "on" : "off")},
                                             {"SOP's gradient / loss weight", sop_gradient + " / " + report::format_fixed(o.sop_weight, 2)},
                                             {"schedule spans", schedule_length(o, o.steps)},
                                             {"training time", train::format_duration(fit.seconds)},
                                             {"GEMM precision / ISA / threads", examples::precision_description(B::name) + " / " +
                                                                                     cpu::to_string(cpu::active_isa()) + " / " + std::to_string(max_threads())},
                                             {"dev MLM / SOP accuracy", report::format_fixed(final_ev.mlm_acc, 1) + "% / " + report::format_fixed(final_ev.sop_acc, 1) + "%"},
                                             {"dev encoder FLOPs per token (products that ran) / fixed depth of equal FLOPs",
                                              report::format_fixed(final_ev.stats.flops_per_token() / 1e6, 3) + " MFLOP / " +
                                                  report::format_fixed(final_ev.stats.flops_per_token() / halting::dense_iteration_flops_per_token(cfg.layer, o.seq_len), 2) +
                                                  " iterations (N_max " + std::to_string(n_max) + ")"}},
                                   .eval = &final_ev, .n_max = n_max, .steps = fit.steps, .log = train::read_metrics_log(trainer.metrics_path()),
                                   .iso_flop = iso_flop,
                                   .outputs = "Outputs next to this page: halting.csv, fixed_point.csv, iso_flop.csv, metrics.jsonl, checkpoint.safetensors.",
                                   .provenance = "depthlab examples/albert_act, preset " + o.preset + ", seed " + std::to_string(o.seed)})
            .write(o.out + "/report.html");
        std::printf("halting table: %s/halting.csv\nfixed point: %s/fixed_point.csv\niso-FLOP table: %s/iso_flop.csv\nreport: %s/report.html\n", o.out.c_str(),
                    o.out.c_str(), o.out.c_str(), o.out.c_str());
        std::printf("%s\n", examples::memory_summary().c_str());
        return 0;
    } catch (const std::exception& e) {  // depthlab::error and the standard library's (bad_alloc, filesystem)
        dist::fail(comm, "albert_act", std::runtime_error(examples::failure_message(e)));
    }
}

int main(int argc, char** argv) {
    options o;
    examples::cli args("albert_act", "Pretrain an ACT-ALBERT on the English corpora and measure per-token depth.");
    add_options(args, o);
    args.sizes({"preset", "batch", "seq-len", "hidden", "ff", "embed", "max-iters"});
    args.parse(argc, argv);
    if (o.schedule_by_time && !(o.max_minutes > 0)) {
        std::fprintf(stderr, "albert_act: --schedule-by-time needs --max-minutes > 0 (the budget the schedule follows)\n");
        return 2;
    }
    dist::communicator& comm = examples::join("albert_act", o.distributed);
    if (comm.is_root()) args.save_config(o.out);

    examples::use_precision(o.precision, o.device);
    return examples::on_device(o.device, "albert_act", [&](auto tag) {
        using B = decltype(tag);
        if (o.policy == "pondernet") return run<halting::pondernet, B>(o, comm);
        if (o.policy == "act_graves") return run<halting::act_graves, B>(o, comm);
        if (o.policy == "act_ut") return run<halting::act_ut, B>(o, comm);
        if (o.policy == "fixed") return run<halting::fixed, B>(o, comm);
        return run<halting::act, B>(o, comm);
    });
}
